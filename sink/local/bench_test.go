package local

import (
	"os"
	"testing"

	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/sinktest"
)

// Run: go test -run=^$ -bench=64MiB -benchtime=3x -count=3 ./sink/...
// peak-heap-MiB must stay well under 16 per store: Put holds one copy
// buffer whatever the body's size.

func BenchmarkPut64MiB(b *testing.B) { benchPut(b, 1) }

// BenchmarkPut64MiBx16 is the memory bar's shape: sixteen 64 MiB stores
// at once.
func BenchmarkPut64MiBx16(b *testing.B) { benchPut(b, 16) }

func benchPut(b *testing.B, parallel int) {
	s := newSink(b, Options{})
	sinktest.BenchmarkPut(b, s, 64<<20, parallel, func(bl sink.Blob) {
		os.Remove(s.Path(bl.Fingerprint))
	})
}
