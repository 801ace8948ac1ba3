package fetch_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/internal/hosts"
	"github.com/replicator-go/replicator/internal/testenv/fetchenv"
	"github.com/replicator-go/replicator/policy"
)

// BenchmarkGet sets Fetcher.Get (guard, no spacing, no retries, a fresh
// memory sink per Get) and an http.Client on Transport beside net/http over a transport that dials through
// the same guard, both hashing the body with sha256, against a loopback
// origin: the cost of what Get adds per request. The origin runs in the
// benchmark's process, so ns/op and the profiles include its share.
//
//	go test -run '^$' -bench BenchmarkGet -benchmem ./fetch/
func BenchmarkGet(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		body := bytes.Repeat([]byte("x"), size)
		origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.Write(body)
		}))
		b.Cleanup(origin.Close)
		_, port, _ := net.SplitHostPort(origin.Listener.Addr().String())
		urls := make([]string, benchHosts)
		for i := range urls {
			urls[i] = fmt.Sprintf("http://h%d.test:%s/doc", i, port)
		}
		for _, inFlight := range []int{1, 16} {
			name := fmt.Sprintf("body=%dKiB/inflight=%d", size>>10, inFlight)
			b.Run(name+"/client=nethttp", func(b *testing.B) {
				c := guardedClient()
				b.Cleanup(c.CloseIdleConnections)
				benchRequests(b, size, inFlight, func(ctx context.Context, i int) error { return netHTTPGet(ctx, c, urls[i%benchHosts]) })
			})
			b.Run(name+"/client=transport", func(b *testing.B) {
				c := fetch.NewClient(fetch.Options{
					Guard:  benchGuard(),
					Pacer:  policy.NewLocal(policy.LocalOptions{DefaultInterval: policy.None}),
					Logger: fetchenv.Quiet,
				})
				b.Cleanup(c.CloseIdleConnections)
				benchRequests(b, size, inFlight, func(ctx context.Context, i int) error { return netHTTPGet(ctx, c, urls[i%benchHosts]) })
			})
			b.Run(name+"/client=get", func(b *testing.B) {
				f := fetch.New(fetch.Options{
					Guard:  benchGuard(),
					Pacer:  policy.NewLocal(policy.LocalOptions{DefaultInterval: policy.None}),
					Logger: fetchenv.Quiet,
				})
				b.Cleanup(f.Close)
				opts := fetch.GetOptions{Retries: fetch.None}
				benchRequests(b, size, inFlight, func(ctx context.Context, i int) error {
					d, err := f.Get(ctx, urls[i%benchHosts], opts)
					if err == nil && d.Blob.Size != int64(size) {
						err = fmt.Errorf("stored %d bytes, want %d", d.Blob.Size, size)
					}
					return err
				})
			})
		}
	}
}

// benchHosts is how many host names the requests go to in turn, so that
// 16 in flight never need more connections to one host than the pool
// keeps idle (MaxIdleConnsPerHost): a benchmark of the clients, not of
// dialing.
const benchHosts = 16

// benchGuard allows loopback and resolves h0.test … h15.test to it.
func benchGuard() *guard.Guard {
	table := map[string][]netip.Addr{}
	for i := range benchHosts {
		table[fmt.Sprintf("h%d.test", i)] = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	}
	return guard.New(guard.Options{
		Allow:    []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Resolver: hosts.Resolver{Table: table},
	})
}

// benchRequests runs b.N requests, inFlight at a time, the i-th by
// get(ctx, i), after a round that warms the connection pool.
func benchRequests(b *testing.B, size, inFlight int, get func(ctx context.Context, i int) error) {
	ctx := context.Background()
	for i := range benchHosts {
		if err := get(ctx, i); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	for range inFlight {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				if err := get(ctx, int(i)); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// guardedClient is net/http with the pool shape of a Fetcher's transport,
// dialing through the tests' guard.
func guardedClient() *http.Client {
	g := benchGuard()
	return &http.Client{
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         g.DialContext,
			MaxIdleConns:        4096,
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     90 * time.Second,
		},
		Timeout: 30 * time.Second,
	}
}

// copyBufs spare netHTTPGet the 32 KiB io.Copy would allocate per request.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// netHTTPGet GETs url and hashes the body through a pooled buffer, as a
// careful net/http caller would.
func netHTTPGet(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	h := sha256.New()
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	if _, err := io.CopyBuffer(h, resp.Body, *buf); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	h.Sum(nil)
	return nil
}
