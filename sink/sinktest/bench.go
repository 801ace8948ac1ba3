package sinktest

import (
	"context"
	"io"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/replicator-go/replicator/sink"
)

// Stream returns a reader of n pseudo-random bytes derived from seed,
// generated as they are read: a benchmark can store a large body without
// holding it in memory.
func Stream(seed uint64, n int64) *StreamReader {
	return &StreamReader{rng: rand.New(rand.NewPCG(seed, ^seed)), left: n}
}

// StreamReader is the reader returned by Stream.
type StreamReader struct {
	rng  *rand.Rand
	left int64
}

// Read implements io.Reader.
func (s *StreamReader) Read(p []byte) (int, error) {
	if s.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > s.left {
		p = p[:s.left]
	}
	i := 0
	for ; i+8 <= len(p); i += 8 {
		v := s.rng.Uint64()
		p[i], p[i+1], p[i+2], p[i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
		p[i+4], p[i+5], p[i+6], p[i+7] = byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56)
	}
	for ; i < len(p); i++ {
		p[i] = byte(s.rng.Uint32())
	}
	s.left -= int64(len(p))
	return len(p), nil
}

// heapSampler records the peak of live heap bytes (objects allocated and
// not yet freed) between start and stop, read every 200µs through
// runtime/metrics, which does not stop the world.
type heapSampler struct {
	stopc chan struct{}
	done  chan uint64
}

const heapMetric = "/memory/classes/heap/objects:bytes"

func heapNow() uint64 {
	s := []metrics.Sample{{Name: heapMetric}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func startHeapSampler() *heapSampler {
	h := &heapSampler{stopc: make(chan struct{}), done: make(chan uint64)}
	go func() {
		peak := heapNow()
		t := time.NewTicker(200 * time.Microsecond)
		defer t.Stop()
		for {
			select {
			case <-h.stopc:
				if v := heapNow(); v > peak {
					peak = v
				}
				h.done <- peak
				return
			case <-t.C:
				if v := heapNow(); v > peak {
					peak = v
				}
			}
		}
	}()
	return h
}

func (h *heapSampler) stop() uint64 {
	close(h.stopc)
	return <-h.done
}

// BenchmarkPut stores b.N distinct streams of size bytes into s, parallel
// at a time, and reports throughput (MB/s, through b.SetBytes) and
// "peak-heap-MiB": the largest growth of the live heap over its level just
// before a round of stores, across all rounds. after, if not nil, is called
// with each stored blob outside the timer (to delete it, say).
func BenchmarkPut(b *testing.B, s sink.Sink, size int64, parallel int, after func(sink.Blob)) {
	b.Helper()
	if parallel < 1 {
		parallel = 1
	}
	b.SetBytes(size * int64(parallel))
	b.ReportAllocs()
	var peakGrowth uint64
	seed := uint64(time.Now().UnixNano())
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		base := heapNow()
		sampler := startHeapSampler()
		b.StartTimer()

		blobs := make([]sink.Blob, parallel)
		var wg sync.WaitGroup
		for i := range parallel {
			seed++
			r := Stream(seed, size)
			wg.Go(func() {
				var err error
				blobs[i], err = s.Put(context.Background(), r, sink.PutOptions{})
				if err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()

		b.StopTimer()
		if peak := sampler.stop(); peak > base && peak-base > peakGrowth {
			peakGrowth = peak - base
		}
		if after != nil {
			for _, blob := range blobs {
				after(blob)
			}
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(peakGrowth)/(1<<20), "peak-heap-MiB")
}
