package contentfetch_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/internal/testenv/fetchenv"
	"github.com/replicator-go/replicator/policy"
	"github.com/replicator-go/replicator/sink/local"
)

// BenchmarkHandle measures end-to-end handling against a loopback origin:
// sanitize, guard, pace (no spacing), GET, hash, store on local disk, build
// the fact. Each iteration serves different bytes so every store is a new
// blob.
func BenchmarkHandle(b *testing.B) {
	for _, size := range []int{1 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("body=%dKiB", size>>10), func(b *testing.B) {
			body := bytes.Repeat([]byte("x"), size)
			var n atomic.Uint64
			origin := testenv.StartOrigin(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Write(fmt.Appendf(nil, "%016x", n.Add(1)))
				w.Write(body[16:])
			}))
			handler := benchHandler(b)
			cmd := fetchenv.Command(origin.URLFor("origin.test", "/"))
			ctx := context.Background()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if out := handler.Fetch(ctx, cmd, nil); out.Label != contentfetch.Stored {
					b.Fatalf("kind = %v (%v)", out.Name(), out.Err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
	}
}

// BenchmarkHandle64MiBPeakHeap handles one 64 MiB body per iteration and
// reports how far the live heap rose above its level before the fetch: the
// body must stream, never sit in memory.
func BenchmarkHandle64MiBPeakHeap(b *testing.B) {
	const size = 64 << 20
	origin := testenv.StartOrigin(b, testenv.Body(size, true))
	handler := benchHandler(b)
	cmd := fetchenv.Command(origin.URLFor("origin.test", "/"))
	var peak uint64
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base := ms.HeapInuse
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var top uint64
		wg.Go(func() {
			var ms runtime.MemStats
			for {
				runtime.ReadMemStats(&ms)
				top = max(top, ms.HeapInuse)
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Millisecond):
				}
			}
		})
		out := handler.Fetch(context.Background(), cmd, nil)
		close(stop)
		wg.Wait()
		if out.Label != contentfetch.Stored || out.Fact.(*envelope.BlobAvailable).SizeBytes != size {
			b.Fatalf("kind = %v (%v)", out.Name(), out.Err)
		}
		if top > base {
			peak = max(peak, top-base)
		}
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
}

func benchHandler(b *testing.B) *contentfetch.Handler {
	blobs, err := local.New(local.Options{Dir: b.TempDir(), Logger: fetchenv.Quiet})
	if err != nil {
		b.Fatal(err)
	}
	f := fetch.New(fetch.Options{Guard: fetchenv.Guard(), Pacer: policy.NewLocal(policy.LocalOptions{DefaultInterval: policy.None}), Logger: fetchenv.Quiet})
	b.Cleanup(f.Close)
	return contentfetch.NewHandler(contentfetch.HandlerOptions{Fetcher: f, Sink: blobs, Logger: fetchenv.Quiet})
}
