package fetch_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/internal/testenv/fetchenv"
	"github.com/replicator-go/replicator/policy"
)

// errNotAllowed is what the tests' hooks refuse with, inside a
// *hostNotAllowed, so both errors.Is and errors.As can be checked.
var errNotAllowed = errors.New("host not allowed by the caller")

type hostNotAllowed struct{ host string }

func (e *hostNotAllowed) Error() string { return "caller refuses " + e.host }
func (e *hostNotAllowed) Unwrap() error { return errNotAllowed }

// hopLog records every call of the hooks it makes, in order, across all
// of them.
type hopLog struct {
	mu    sync.Mutex
	calls []string
}

// hook returns a CheckURL that logs "label URL" and refuses when refuse
// (given the hook's own call count, from 1) says so.
func (l *hopLog) hook(label string, refuse func(n int, u *url.URL) bool) func(context.Context, *url.URL) error {
	n := 0
	return func(ctx context.Context, u *url.URL) error {
		l.mu.Lock()
		n++
		l.calls = append(l.calls, label+" "+u.String())
		call := n
		l.mu.Unlock()
		if refuse != nil && refuse(call, u) {
			return &hostNotAllowed{host: u.Hostname()}
		}
		return nil
	}
}

func (l *hopLog) got() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls...)
}

// countingPacer is fetchenv.NoPacer counting its reservations: one per
// request that was admitted to pacing.
type countingPacer struct {
	fetchenv.NoPacer
	reserved atomic.Int32
}

func (p *countingPacer) Reserve(ctx context.Context, host string, maxWait time.Duration) (policy.Reservation, error) {
	p.reserved.Add(1)
	return p.NoPacer.Reserve(ctx, host, maxWait)
}

// dialCounter is a loopback listener that counts the connections made to
// it and answers none of them.
func dialCounter(t *testing.T) (addr string, dials *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	dials = new(atomic.Int32)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			c.Close()
		}
	}()
	return l.Addr().String(), dials
}

func hostIs(host string) func(int, *url.URL) bool {
	return func(_ int, u *url.URL) bool { return u.Hostname() == host }
}

// TestCheckURL runs the per-hop hooks, Get's and the fetcher's, against a
// redirect chain origin.test/start → a.test/second → a.test/third and a
// flaky origin: which hops each hook sees, which requests arrive, that a
// refused hop takes no pacing slot and no connection, and that a refusal
// is never retried and keeps the hook's error.
func TestCheckURL(t *testing.T) {
	listener, dials := dialCounter(t)
	_, listenerPort, _ := net.SplitHostPort(listener)

	type row struct {
		name       string
		path       string
		fetcherRef func(int, *url.URL) bool // nil: the fetcher has a hook refusing nothing
		getRef     func(int, *url.URL) bool // nil: Get's hook refuses nothing
		noFetcher  bool                     // the fetcher has no hook at all
		wantCalls  []string                 // hook calls, "fetcher URL" or "get URL", with {o} for the origin's port
		wantPaths  []string                 // requests the origin saw
		wantWaits  int                      // waits between attempts
		wantRefuse string                   // the refused host; "" means success
	}
	tests := []row{
		{
			name: "every hop allowed", path: "/start",
			wantCalls: []string{
				"fetcher http://origin.test:{o}/start", "get http://origin.test:{o}/start",
				"fetcher http://a.test:{o}/second", "get http://a.test:{o}/second",
				"fetcher http://a.test:{o}/third", "get http://a.test:{o}/third",
			},
			wantPaths: []string{"/start", "/second", "/third"},
		},
		{
			name: "Get's hook refuses the second hop", path: "/start", noFetcher: true,
			getRef:     hostIs("a.test"),
			wantCalls:  []string{"get http://origin.test:{o}/start", "get http://a.test:{o}/second"},
			wantPaths:  []string{"/start"},
			wantRefuse: "a.test",
		},
		{
			name: "the fetcher's hook refuses the second hop", path: "/start",
			fetcherRef: hostIs("a.test"),
			wantCalls:  []string{"fetcher http://origin.test:{o}/start", "get http://origin.test:{o}/start", "fetcher http://a.test:{o}/second"},
			wantPaths:  []string{"/start"},
			wantRefuse: "a.test",
		},
		{
			name: "both must pass: Get's refuses the third hop", path: "/start",
			getRef: func(_ int, u *url.URL) bool { return u.Path == "/third" },
			wantCalls: []string{
				"fetcher http://origin.test:{o}/start", "get http://origin.test:{o}/start",
				"fetcher http://a.test:{o}/second", "get http://a.test:{o}/second",
				"fetcher http://a.test:{o}/third", "get http://a.test:{o}/third",
			},
			wantPaths:  []string{"/start", "/second"},
			wantRefuse: "a.test",
		},
		{
			name: "refused on the retried attempt", path: "/flaky",
			getRef:     func(n int, _ *url.URL) bool { return n == 2 },
			wantCalls:  []string{"fetcher http://origin.test:{o}/flaky", "get http://origin.test:{o}/flaky", "fetcher http://origin.test:{o}/flaky", "get http://origin.test:{o}/flaky"},
			wantPaths:  []string{"/flaky"},
			wantWaits:  1,
			wantRefuse: "origin.test",
		},
		{
			name: "a refused hop is never dialed", path: "/to-listener", noFetcher: true,
			getRef:     hostIs("b.test"),
			wantCalls:  []string{"get http://origin.test:{o}/to-listener", "get http://b.test:" + listenerPort + "/"},
			wantPaths:  []string{"/to-listener"},
			wantRefuse: "b.test",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log hopLog
			pacer := &countingPacer{}
			opts := fetch.Options{Pacer: pacer, MaxInFlight: 4}
			if !tt.noFetcher {
				opts.CheckURL = log.hook("fetcher", tt.fetcherRef)
			}
			mux := http.NewServeMux()
			h := fetchenv.New(t, mux, fetchenv.Options{Fetch: opts})
			mux.Handle("/start", testenv.Redirect(http.StatusFound, h.URL("a.test", "/second")))
			mux.Handle("/second", testenv.Redirect(http.StatusFound, "/third"))
			mux.Handle("/third", testenv.Status(200, nil, "<feed/>"))
			mux.Handle("/flaky", libSequence(testenv.Status(http.StatusServiceUnavailable, nil, ""), testenv.Status(200, nil, "ok")))
			mux.Handle("/to-listener", testenv.Redirect(http.StatusFound, "http://b.test:"+listenerPort+"/"))
			var sleeps libSleeps
			fetch.SetSleep(h.Fetcher, sleeps.sleep)

			doc, err := h.Fetcher.Get(fetchenv.Ctx(t), h.URL("origin.test", tt.path), fetch.GetOptions{Retries: 3, CheckURL: log.hook("get", tt.getRef)})

			if tt.wantRefuse == "" {
				if err != nil || doc == nil {
					t.Fatalf("Get = %v, %v; want a document", doc, err)
				}
			} else {
				var refusal *hostNotAllowed
				switch {
				case doc != nil:
					t.Fatalf("Get returned a document: %+v", doc)
				case !errors.Is(err, fetch.ErrURLRefused) || !errors.Is(err, errNotAllowed):
					t.Fatalf("err = %v, want fetch.ErrURLRefused and the hook's error", err)
				case !errors.As(err, &refusal) || refusal.host != tt.wantRefuse:
					t.Fatalf("err = %v, want a *hostNotAllowed for %s", err, tt.wantRefuse)
				}
				if fetch.Retryable(err) {
					t.Errorf("a refusal is retryable")
				}
				if c := fetch.Classify(err); c.Cause != fetch.CauseRefused {
					t.Errorf("Classify = %+v, want permanent, refused", c)
				}
			}
			want := make([]string, len(tt.wantCalls))
			for i, c := range tt.wantCalls {
				want[i] = strings.ReplaceAll(c, "{o}", h.Origin.Port())
			}
			if diff := cmp.Diff(want, log.got()); diff != "" {
				t.Errorf("hook calls (-want +got):\n%s", diff)
			}
			var paths []string
			for _, s := range h.Origin.Requests() {
				paths = append(paths, s.Path)
			}
			if diff := cmp.Diff(tt.wantPaths, paths); diff != "" {
				t.Errorf("requests at the origin (-want +got):\n%s", diff)
			}
			// Only requests that were sent were paced or held a slot.
			sent := int32(len(h.Origin.Requests()))
			if got := pacer.reserved.Load(); got != sent {
				t.Errorf("pacing reservations = %d, want %d (one per request sent)", got, sent)
			}
			if got := len(sleeps.got()); got != tt.wantWaits {
				t.Errorf("Get waited %d times, want %d", got, tt.wantWaits)
			}
		})
	}
	if n := dials.Load(); n != 0 {
		t.Errorf("the refused listener was dialed %d times", n)
	}

	t.Run("a hook cut short by the attempt's deadline refuses nothing", func(t *testing.T) {
		h := fetchenv.New(t, testenv.Status(200, nil, "ok"), fetchenv.Options{Fetch: fetch.Options{Pacer: fetchenv.NoPacer{}}})
		var sleeps libSleeps
		fetch.SetSleep(h.Fetcher, sleeps.sleep)
		var calls atomic.Int32
		slow := func(ctx context.Context, u *url.URL) error {
			calls.Add(1)
			<-ctx.Done()
			return ctx.Err()
		}
		_, err := h.Fetcher.Get(fetchenv.Ctx(t), h.URL("origin.test", "/"), fetch.GetOptions{Retries: 1, Timeout: 100 * time.Millisecond, CheckURL: slow})
		if !errors.Is(err, fetch.ErrDeadline) || errors.Is(err, fetch.ErrURLRefused) {
			t.Fatalf("err = %v, want fetch.ErrDeadline and no refusal", err)
		}
		if !strings.Contains(err.Error(), fetch.ErrDeadline.Error()+" (100ms)") {
			t.Errorf("err = %v, want it to name the bound in force", err)
		}
		if calls.Load() != 2 || len(sleeps.got()) != 1 || h.Origin.Count() != 0 {
			t.Errorf("hook calls %d, waits %d, requests %d; want 2, 1, 0", calls.Load(), len(sleeps.got()), h.Origin.Count())
		}
	})

	t.Run("the hook cannot change the hop", func(t *testing.T) {
		h := fetchenv.New(t, testenv.Status(200, nil, "ok"), fetchenv.Options{Fetch: fetch.Options{Pacer: fetchenv.NoPacer{}}})
		rewrite := func(ctx context.Context, u *url.URL) error {
			u.Host, u.Path = "elsewhere.test", "/changed"
			return nil
		}
		doc, err := h.Fetcher.Get(fetchenv.Ctx(t), h.URL("origin.test", "/asked"), fetch.GetOptions{CheckURL: rewrite})
		if err != nil {
			t.Fatal(err)
		}
		if doc.URL != h.URL("origin.test", "/asked") || h.Origin.Requests()[0].Path != "/asked" {
			t.Errorf("fetched %s (%s), want the URL asked for", doc.URL, h.Origin.Requests()[0].Path)
		}
	})
}

// TestHandleRefusedByCheckURL checks that the fetcher's hook applies to
// commands: a refused hop, first or a redirect target, is Permanent
// destination_refused with the contract's fact, and nothing reaches it.
func TestHandleRefusedByCheckURL(t *testing.T) {
	mux := http.NewServeMux()
	refuse := func(ctx context.Context, u *url.URL) error {
		if u.Hostname() == "a.test" {
			return &hostNotAllowed{host: u.Hostname()}
		}
		return nil
	}
	h := fetchenv.New(t, mux, fetchenv.Options{Fetch: fetch.Options{CheckURL: refuse}})
	mux.Handle("/to-a", testenv.Redirect(http.StatusFound, h.URL("a.test", "/final")))
	mux.Handle("/final", testenv.Status(200, nil, "never"))
	tests := []struct {
		name      string
		url       string
		wantPaths []string
	}{
		{name: "the command's URL", url: h.URL("a.test", "/final")},
		{name: "a redirect target", url: h.URL("origin.test", "/to-a"), wantPaths: []string{"/to-a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(h.Origin.Requests())
			cmd := fetchenv.Command(tt.url)
			out := h.Handle(t, cmd)
			if out.Fate != capability.Close || out.Reason != string(envelope.ReasonDestinationRefused) {
				t.Fatalf("outcome = %v/%q (%v), want permanent/destination_refused", out.Name(), out.Reason, out.Err)
			}
			if !errors.Is(out.Err, fetch.ErrURLRefused) || !errors.Is(out.Err, errNotAllowed) {
				t.Errorf("err = %v, want fetch.ErrURLRefused and the hook's error", out.Err)
			}
			want := &envelope.FetchFailed{SchemaVersion: 1, CommandID: "01JCMD", URL: cmd.URL, InfoSourceID: "source-7",
				Reason: envelope.ReasonDestinationRefused, Terminal: true}
			if diff := cmp.Diff(want, out.Fact, fetchenv.IgnoreFactTimes); diff != "" {
				t.Errorf("fact (-want +got):\n%s", diff)
			}
			var paths []string
			for _, s := range h.Origin.Requests()[before:] {
				paths = append(paths, s.Path)
			}
			if diff := cmp.Diff(tt.wantPaths, paths); diff != "" {
				t.Errorf("requests at the origin (-want +got):\n%s", diff)
			}
		})
	}
}
