package local

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"sync/atomic"
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

// BenchmarkPutSmall measures the store of many small new blobs, 16 at a
// time: the worker's shape under a high command rate, where the cost is
// the file-system calls, not the bytes. Set BLOB_BENCH_DIR to measure on
// another file system (the default is the test's temp dir).
// Run: go test -run=^$ -bench=PutSmall -count=5 ./sink/local
func BenchmarkPutSmall(b *testing.B) {
	opts := Options{}
	if d := os.Getenv("BLOB_BENCH_DIR"); d != "" {
		dir, err := os.MkdirTemp(d, "bench")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
		opts.Dir = filepath.Join(dir, "blobs")
	}
	s := newSink(b, opts)
	var seq atomic.Int64
	b.SetParallelism(8) // 16 goroutines on 2 cores
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		body := make([]byte, 1024)
		for pb.Next() {
			binary.LittleEndian.PutUint64(body, uint64(seq.Add(1)))
			if _, err := s.Put(context.Background(), bytes.NewReader(body), sink.PutOptions{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
