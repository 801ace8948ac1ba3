package gcs

import (
	"context"
	"testing"
	"time"

	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/sinktest"
)

// Run: go test -run=^$ -bench=64MiB -benchtime=3x -count=3 ./sink/...
//
// The fake server runs in a child process here: it holds each upload in
// its own heap while receiving it, which must not be counted against the
// sink. peak-heap-MiB must stay well under 16 per store: the upload is
// streamed from the spool file with no chunk buffer.

func BenchmarkPut64MiB(b *testing.B) { benchPut(b, 1) }

// BenchmarkPut64MiBx16 is the memory bar's shape: sixteen 64 MiB stores
// at once.
func BenchmarkPut64MiBx16(b *testing.B) { benchPut(b, 16) }

func benchPut(b *testing.B, parallel int) {
	g := testenv.StartGCSProcess(b, bucket)
	// The emulator takes a minute over sixteen 64 MiB uploads at once;
	// the timeout guards against a stalled service, not a slow one.
	s := newSink(b, g.Client, Options{TempDir: b.TempDir(), Timeout: 10 * time.Minute})
	sinktest.BenchmarkPut(b, s, 64<<20, parallel, func(bl sink.Blob) {
		g.Client.Bucket(bucket).Object(s.Object(bl.Fingerprint)).Delete(context.Background())
	})
}
