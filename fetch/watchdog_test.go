package fetch_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/fetch/robots"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/internal/hosts"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/internal/testenv/fetchenv"
	"github.com/replicator-go/replicator/sink"
)

// slowSink stores through a reader that waits pause before every read but
// the first and reads at most chunk bytes at a time: a slow consumer.
type slowSink struct {
	sink.Sink
	pause time.Duration
	chunk int
}

func (s slowSink) Put(ctx context.Context, r io.Reader, opts sink.PutOptions) (sink.Blob, error) {
	return s.Sink.Put(ctx, &slowReader{r: r, pause: s.pause, chunk: s.chunk}, opts)
}

type slowReader struct {
	r     io.Reader
	pause time.Duration
	chunk int
	reads int
}

func (s *slowReader) Read(p []byte) (int, error) {
	if s.reads > 0 {
		time.Sleep(s.pause)
	}
	s.reads++
	return s.r.Read(p[:min(len(p), s.chunk)])
}

// TestTimeoutLeavesOutTheConsumer checks docs/taxonomy.md, Timeouts: the
// timeout bounds each read on its own, and the time between reads — a
// slow consumer — never counts. Each body here takes several times the
// timeout in all.
func TestTimeoutLeavesOutTheConsumer(t *testing.T) {
	const timeout = 300 * time.Millisecond
	mux := http.NewServeMux()
	mux.Handle("/body", testenv.Body(64<<10, true))
	mux.Handle("/trickle", testenv.Trickle([]byte("x"), timeout/3, 8))
	h := fetchenv.New(t, mux, fetchenv.Options{})
	tests := []struct {
		name string
		path string
		dst  sink.Sink
		size int64
	}{
		{name: "the sink pauses between reads", path: "/body", dst: slowSink{Sink: h.Sink, pause: timeout + timeout/3, chunk: 16 << 10}, size: 64 << 10},
		{name: "the origin trickles, each read quick", path: "/trickle", dst: h.Sink, size: 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := h.Fetcher.Fetch(fetchenv.Ctx(t), fetch.Request{URL: h.URL("origin.test", tt.path), Timeout: timeout}, tt.dst)
			if err != nil {
				t.Fatal(err)
			}
			if res.Blob.Size != tt.size {
				t.Errorf("stored %d bytes, want %d", res.Blob.Size, tt.size)
			}
		})
	}
}

// deadlineResolver records the deadline of every lookup's context.
type deadlineResolver struct {
	hosts.Resolver
	mu   sync.Mutex
	seen []string
}

func (r *deadlineResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	dl, ok := ctx.Deadline()
	r.mu.Lock()
	r.seen = append(r.seen, fmt.Sprint(dl.Round(0), ok))
	r.mu.Unlock()
	return r.Resolver.LookupNetIP(ctx, network, host)
}

// TestFetchReportsItsDeadline: the fetch's deadline (MaxFetchTime from its
// start, or the caller's when earlier) is what the hooks and the guard's
// check of each hop see as their context's deadline.
func TestFetchReportsItsDeadline(t *testing.T) {
	resolver := &deadlineResolver{Resolver: hosts.Resolver{Table: fetchenv.Hosts}}
	g := guard.New(guard.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Resolver: resolver})
	h := fetchenv.New(t, fetchenv.Served("text/plain", "ok"), fetchenv.Options{Fetch: fetch.Options{Guard: g}})
	const maxFetch = 5 * time.Second
	for _, callerFirst := range []bool{false, true} {
		ctx := fetchenv.Ctx(t)
		if callerFirst {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, maxFetch/2)
			defer cancel()
		}
		var hook time.Time
		check := func(ctx context.Context, u *url.URL) error {
			dl, ok := ctx.Deadline()
			if !ok {
				return errors.New("no deadline")
			}
			hook = dl
			return nil
		}
		resolver.mu.Lock()
		resolver.seen = nil
		resolver.mu.Unlock()
		before := time.Now()
		if _, err := h.Fetcher.Fetch(ctx, fetch.Request{URL: h.URL("origin.test", "/"), MaxFetchTime: maxFetch, CheckURL: check}, h.Sink); err != nil {
			t.Fatalf("caller's deadline first %v: %v", callerFirst, err)
		}
		after := time.Now()
		if callerFirst {
			if want, _ := ctx.Deadline(); !hook.Equal(want) {
				t.Errorf("the hook saw the deadline %v, want the caller's %v", hook, want)
			}
		} else if hook.Before(before.Add(maxFetch)) || hook.After(after.Add(maxFetch)) {
			t.Errorf("the hook saw the deadline %v, want %v after the fetch began (%v)", hook, maxFetch, before)
		}
		resolver.mu.Lock()
		seen := resolver.seen
		resolver.mu.Unlock()
		if want := fmt.Sprint(hook.Round(0), true); len(seen) == 0 || seen[0] != want {
			t.Errorf("the guard's lookups saw the deadlines %v, the first want %v", seen, want)
		}
	}
}

// TestRobotsTimeoutEndsOnlyRobots: an operation of a robots.txt request
// that times out ends that request, which counts as robots.txt being
// unreachable, not the fetch, and the page is not asked for.
func TestRobotsTimeoutEndsOnlyRobots(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("/robots.txt", testenv.Hang())
	mux.Handle("/page", fetchenv.Served("text/plain", "page"))
	cache := robots.New(robots.Options{Logger: fetchenv.Quiet})
	h := fetchenv.New(t, mux, fetchenv.Options{Fetch: fetch.Options{Robots: cache, Pacer: fetchenv.NoPacer{}}})
	_, err := h.Fetcher.Fetch(fetchenv.Ctx(t), fetch.Request{URL: h.URL("origin.test", "/page"), Timeout: 200 * time.Millisecond}, h.Sink)
	if !errors.Is(err, fetch.ErrRobotsUnreachable) {
		t.Fatalf("err = %v, want ErrRobotsUnreachable", err)
	}
	if got := fmt.Sprint(paths(h.Origin)); got != "[origin.test/robots.txt]" {
		t.Errorf("origin saw %v, want robots.txt only", got)
	}
}
