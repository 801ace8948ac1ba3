package fetch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/fetch/robots"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/internal/testenv/fetchenv"
	"github.com/replicator-go/replicator/policy"
)

// fakeClock is the tests' time: it moves only when a wait is slept or the
// test advances it.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.Advance(d)
	return ctx.Err()
}

// clockPacer is a policy.Local on the fake clock that records when each
// request to a host left, by that clock.
type clockPacer struct {
	clock *fakeClock
	local *policy.Local
	mu    sync.Mutex
	sent  []time.Time
}

func (p *clockPacer) Reserve(ctx context.Context, host string, maxWait time.Duration) (policy.Reservation, error) {
	return p.local.ReserveAt(p.clock.Now(), host, maxWait)
}

func (p *clockPacer) Refused(ctx context.Context, host string, retryAfter time.Duration) (time.Duration, error) {
	return p.local.RefusedAt(p.clock.Now(), host, retryAfter)
}

func (p *clockPacer) Sent(ctx context.Context, host string) error {
	now := p.clock.Now()
	p.mu.Lock()
	p.sent = append(p.sent, now)
	p.mu.Unlock()
	return p.local.SentAt(now, host)
}

func (p *clockPacer) departures() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Time(nil), p.sent...)
}

// robotsSite serves body at /robots.txt and "page" everywhere else.
func robotsSite(body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprint(w, body)
			return
		}
		fmt.Fprint(w, "page")
	})
}

// paths lists the paths an origin was asked for, in order.
func paths(o *testenv.Origin) []string {
	var out []string
	for _, s := range o.Requests() {
		out = append(out, s.Host+s.Path)
	}
	return out
}

// robotsHarness is a fetchenv harness whose Fetcher obeys robots.txt, on
// the fake clock, with no spacing unless interval is set.
func robotsHarness(t *testing.T, h http.Handler, clock *fakeClock, opts robots.Options, pacer policy.Pacer) *fetchenv.Harness {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = fetchenv.Quiet
	}
	cache := robots.New(opts)
	if pacer == nil {
		pacer = fetchenv.NoPacer{}
	}
	hs := fetchenv.New(t, h, fetchenv.Options{Fetch: fetch.Options{Robots: cache, Pacer: pacer}})
	fetch.SetNow(hs.Fetcher, clock.Now)
	fetch.SetSleep(hs.Fetcher, clock.Sleep)
	return hs
}

func get(t *testing.T, h *fetchenv.Harness, host, path string) (*fetch.Document, error) {
	t.Helper()
	return h.Fetcher.Get(fetchenv.Ctx(t), h.URL(host, path), fetch.GetOptions{Backoff: fetch.None})
}

// TestRobotsDisallowedNeverRequested: a disallowed URL fails with
// ErrRobotsDisallowed, permanent robots_disallowed, and is never asked for;
// an allowed one is fetched; robots.txt is asked for once for both.
func TestRobotsDisallowedNeverRequested(t *testing.T) {
	clock := newFakeClock()
	h := robotsHarness(t, robotsSite("User-agent: *\nDisallow: /private\n"), clock, robots.Options{}, nil)

	_, err := get(t, h, "origin.test", "/private/x")
	if !errors.Is(err, fetch.ErrRobotsDisallowed) {
		t.Fatalf("error = %v, want ErrRobotsDisallowed", err)
	}
	if c := fetch.Classify(err); c.Cause != fetch.CauseRobotsDisallowed || c.Retry {
		t.Errorf("Classify = %+v, want permanent, robots disallowed", c)
	}
	doc, err := get(t, h, "origin.test", "/public")
	if err != nil {
		t.Fatal(err)
	}
	if got := fetchenv.ReadDoc(t, doc); got != "page" {
		t.Errorf("body = %q", got)
	}
	want := []string{"origin.test/robots.txt", "origin.test/public"}
	if got := paths(h.Origin); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("origin saw %v, want %v", got, want)
	}
	// The content.fetch handler ends it terminal with the reason.
	out := h.Handle(t, fetchenv.Command(h.URL("origin.test", "/private/y")))
	if out.Fate != capability.Close || out.Reason != string(envelope.ReasonRobotsDisallowed) {
		t.Errorf("outcome = %v/%q (%v), want permanent robots_disallowed", out.Name(), out.Reason, out.Err)
	}
	if n := h.Origin.Count(); n != 2 {
		t.Errorf("origin saw %d requests, want 2", n)
	}
}

// TestRobotsRedirectHopsJudged: a redirect to a disallowed path is
// refused before it is followed.
func TestRobotsRedirectHopsJudged(t *testing.T) {
	clock := newFakeClock()
	site := http.NewServeMux()
	site.Handle("/robots.txt", testenv.Status(200, nil, "User-agent: *\nDisallow: /secret\n"))
	site.Handle("/go", testenv.Redirect(http.StatusFound, "/secret/page"))
	site.Handle("/", testenv.Status(200, nil, "page"))
	h := robotsHarness(t, site, clock, robots.Options{}, nil)
	_, err := get(t, h, "origin.test", "/go")
	if !errors.Is(err, fetch.ErrRobotsDisallowed) {
		t.Fatalf("error = %v, want ErrRobotsDisallowed", err)
	}
	want := []string{"origin.test/robots.txt", "origin.test/go"}
	if got := paths(h.Origin); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("origin saw %v, want %v", got, want)
	}
}

// TestRobotsStatus: a 4xx (not 429) allows everything; 429 and 5xx refuse
// everything, transiently, until the back-off has passed and the origin
// answers again.
func TestRobotsStatus(t *testing.T) {
	for _, tt := range []struct {
		status  int
		allowed bool
	}{
		{http.StatusNotFound, true},
		{http.StatusForbidden, true},
		{http.StatusGone, true},
		{http.StatusTooManyRequests, false},
		{http.StatusServiceUnavailable, false},
		{http.StatusInternalServerError, false},
	} {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			clock := newFakeClock()
			var status atomic.Int32
			status.Store(int32(tt.status))
			site := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/robots.txt" {
					if s := int(status.Load()); s != 200 {
						w.WriteHeader(s)
						return
					}
					fmt.Fprint(w, "User-agent: *\nDisallow: /no\n")
					return
				}
				fmt.Fprint(w, "page")
			})
			h := robotsHarness(t, site, clock, robots.Options{}, nil)
			_, err := get(t, h, "origin.test", "/page")
			if tt.allowed {
				if err != nil {
					t.Fatalf("error = %v, want the page", err)
				}
				return
			}
			if !errors.Is(err, fetch.ErrRobotsUnreachable) {
				t.Fatalf("error = %v, want ErrRobotsUnreachable", err)
			}
			if c := fetch.Classify(err); c.Permanent() {
				t.Errorf("Classify = %+v, want transient", c)
			}
			out := h.Handle(t, fetchenv.Command(h.URL("origin.test", "/page")))
			if out.Fate != capability.Retry {
				t.Errorf("handler outcome = %v (%v), want transient", out.Name(), out.Err)
			}
			// The origin recovers; within the back-off nothing is asked.
			status.Store(200)
			clock.Advance(robots.MinBackoff - time.Second)
			if _, err := get(t, h, "origin.test", "/page"); !errors.Is(err, fetch.ErrRobotsUnreachable) {
				t.Fatalf("within the back-off: error = %v, want ErrRobotsUnreachable", err)
			}
			if want := []string{"origin.test/robots.txt"}; fmt.Sprint(paths(h.Origin)) != fmt.Sprint(want) {
				t.Fatalf("origin saw %v, want %v", paths(h.Origin), want)
			}
			clock.Advance(time.Second)
			if _, err := get(t, h, "origin.test", "/page"); err != nil {
				t.Fatalf("after the back-off: %v", err)
			}
			if _, err := get(t, h, "origin.test", "/no"); !errors.Is(err, fetch.ErrRobotsDisallowed) {
				t.Errorf("after the back-off, /no: error = %v, want ErrRobotsDisallowed", err)
			}
			want := []string{"origin.test/robots.txt", "origin.test/robots.txt", "origin.test/page"}
			if got := paths(h.Origin); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("origin saw %v, want %v", got, want)
			}
		})
	}
}

// TestRobotsConnectionRefused: an origin that refuses connections has an
// unreachable robots.txt: everything refused until the back-off passes and
// the origin is back.
func TestRobotsConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	clock := newFakeClock()
	h := robotsHarness(t, robotsSite(""), clock, robots.Options{}, nil)
	u := "http://origin.test:" + addr[strings.LastIndex(addr, ":")+1:] + "/page"
	_, err = h.Fetcher.Get(fetchenv.Ctx(t), u, fetch.GetOptions{Retries: fetch.None})
	if !errors.Is(err, fetch.ErrRobotsUnreachable) {
		t.Fatalf("error = %v, want ErrRobotsUnreachable", err)
	}
	// The origin comes up on that port.
	l, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("port %s taken meanwhile: %v", addr, err)
	}
	back := testenv.StartOriginOn(t, l, robotsSite("User-agent: *\nAllow: /\n"))
	if _, err := h.Fetcher.Get(fetchenv.Ctx(t), u, fetch.GetOptions{Retries: fetch.None}); !errors.Is(err, fetch.ErrRobotsUnreachable) {
		t.Fatalf("within the back-off: error = %v, want ErrRobotsUnreachable", err)
	}
	clock.Advance(robots.MinBackoff)
	if _, err := h.Fetcher.Get(fetchenv.Ctx(t), u, fetch.GetOptions{Retries: fetch.None}); err != nil {
		t.Fatalf("after the back-off: %v", err)
	}
	if got, want := fmt.Sprint(paths(back)), "[origin.test/robots.txt origin.test/page]"; got != want {
		t.Errorf("origin saw %v, want %v", got, want)
	}
}

// TestRobotsRedirectFollowed: robots.txt that redirects (to another host
// too) is followed, and its rules govern the first origin.
func TestRobotsRedirectFollowed(t *testing.T) {
	clock := newFakeClock()
	var h *fetchenv.Harness
	site := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.Host, "a.test") && r.URL.Path == "/robots.txt":
			http.Redirect(w, r, "/moved-robots.txt", http.StatusMovedPermanently)
		case strings.HasPrefix(r.Host, "a.test") && r.URL.Path == "/moved-robots.txt":
			http.Redirect(w, r, h.URL("b.test", "/shared-robots.txt"), http.StatusFound)
		case r.URL.Path == "/shared-robots.txt":
			fmt.Fprint(w, "User-agent: *\nDisallow: /x\n")
		default:
			fmt.Fprint(w, "page")
		}
	})
	h = robotsHarness(t, site, clock, robots.Options{}, nil)
	if _, err := get(t, h, "a.test", "/x"); !errors.Is(err, fetch.ErrRobotsDisallowed) {
		t.Fatalf("error = %v, want ErrRobotsDisallowed", err)
	}
	if _, err := get(t, h, "a.test", "/y"); err != nil {
		t.Fatal(err)
	}
	want := "[a.test/robots.txt a.test/moved-robots.txt b.test/shared-robots.txt a.test/y]"
	if got := fmt.Sprint(paths(h.Origin)); got != want {
		t.Errorf("origin saw %v, want %v", got, want)
	}
}

// TestRobotsTooManyRedirects: a chain over five redirects is no robots.txt:
// everything allowed, six requests for it at most.
func TestRobotsTooManyRedirects(t *testing.T) {
	clock := newFakeClock()
	var n atomic.Int32
	site := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/robots") {
			http.Redirect(w, r, fmt.Sprintf("/robots%d.txt", n.Add(1)), http.StatusFound)
			return
		}
		fmt.Fprint(w, "page")
	})
	h := robotsHarness(t, site, clock, robots.Options{}, nil)
	if _, err := get(t, h, "origin.test", "/page"); err != nil {
		t.Fatal(err)
	}
	if got := h.Origin.Count(); got != 1+robots.MaxRedirects+1 {
		t.Errorf("origin saw %d requests (%v), want %d", got, paths(h.Origin), 1+robots.MaxRedirects+1)
	}
}

// TestRobotsReadToTheLimit: of a 2 MiB robots.txt only the first 500 KiB
// are read: a rule past them does not apply, and the origin is never made
// to send the rest (it waits for the client to go away before sending it).
func TestRobotsReadToTheLimit(t *testing.T) {
	const total = 2 << 20
	head := "User-agent: *\nDisallow: /early\n"
	pad := func(n int) string { return strings.Repeat("#"+strings.Repeat("x", 98)+"\n", n/100) }
	first := head + pad(600<<10)
	rest := "Disallow: /late\n" + pad(total-len(first)-16)
	var sentRest atomic.Bool
	site := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/robots.txt" {
			fmt.Fprint(w, "page")
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(first)+len(rest)))
		w.Write([]byte(first))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			return
		case <-time.After(20 * time.Second):
		}
		sentRest.Store(true)
		w.Write([]byte(rest))
	})
	clock := newFakeClock()
	h := robotsHarness(t, site, clock, robots.Options{}, nil)
	if _, err := get(t, h, "origin.test", "/early"); !errors.Is(err, fetch.ErrRobotsDisallowed) {
		t.Fatalf("/early: error = %v, want ErrRobotsDisallowed", err)
	}
	if _, err := get(t, h, "origin.test", "/late"); err != nil {
		t.Fatalf("/late, past the limit: %v", err)
	}
	if sentRest.Load() {
		t.Error("the origin had to send the whole file")
	}
}

// TestRobotsCrawlDelay: Crawl-delay: 2 spaces the host's requests by 2 s
// (by the pacer's clock), robots.txt's own request included; 3600 is
// capped at Options.MaxCrawlDelay, with a log line; without one, the
// robots.txt request and the page are spaced by the host's interval.
func TestRobotsCrawlDelay(t *testing.T) {
	for _, tt := range []struct {
		name   string
		delay  string
		max    time.Duration
		want   time.Duration
		capped bool
	}{
		{name: "2 s", delay: "Crawl-delay: 2\n", want: 2 * time.Second},
		{name: "3600 s capped at 60 s", delay: "Crawl-delay: 3600\n", want: robots.DefaultMaxCrawlDelay, capped: true},
		{name: "3600 s capped at 5 s", delay: "Crawl-delay: 3600\n", max: 5 * time.Second, want: 5 * time.Second, capped: true},
		{name: "0.5 s under the 1 s interval", delay: "Crawl-delay: 0.5\n", want: time.Second},
		{name: "none: the interval", want: time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			cache := robots.New(robots.Options{MaxCrawlDelay: tt.max, Logger: log})
			pacer := &clockPacer{clock: clock, local: policy.NewLocal(policy.LocalOptions{
				DefaultInterval: time.Second, Floors: cache.Floors(nil, time.Second),
			})}
			h := fetchenv.New(t, robotsSite("User-agent: *\n"+tt.delay+"Disallow: /no\n"), fetchenv.Options{Fetch: fetch.Options{Robots: cache, Pacer: pacer}})
			fetch.SetNow(h.Fetcher, clock.Now)
			fetch.SetSleep(h.Fetcher, clock.Sleep)
			for _, p := range []string{"/a", "/b"} {
				if _, err := get(t, h, "origin.test", p); err != nil {
					t.Fatal(err)
				}
			}
			if got := paths(h.Origin); fmt.Sprint(got) != "[origin.test/robots.txt origin.test/a origin.test/b]" {
				t.Fatalf("origin saw %v", got)
			}
			sent := pacer.departures()
			if len(sent) != 3 {
				t.Fatalf("%d departures recorded, want 3", len(sent))
			}
			for i := 1; i < len(sent); i++ {
				gap := sent[i].Sub(sent[i-1])
				if gap < tt.want || gap > tt.want+100*time.Millisecond {
					t.Errorf("request %d left %v after the one before, want %v", i, gap, tt.want)
				}
			}
			if got := strings.Contains(logs.String(), "Crawl-delay capped"); got != tt.capped {
				t.Errorf("capping logged = %v, want %v:\n%s", got, tt.capped, logs.String())
			}
		})
	}
}

// TestRobotsOffByDefault: without Options.Robots no robots.txt is asked
// for, even for a path it would refuse.
func TestRobotsOffByDefault(t *testing.T) {
	h := fetchenv.New(t, robotsSite("User-agent: *\nDisallow: /\n"), fetchenv.Options{})
	if _, err := h.Fetcher.Get(fetchenv.Ctx(t), h.URL("origin.test", "/page"), fetch.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(paths(h.Origin)); got != "[origin.test/page]" {
		t.Errorf("origin saw %v", got)
	}
}

// TestRobotsStats: the cache counts its fetches by result and its
// refusals.
func TestRobotsStats(t *testing.T) {
	clock := newFakeClock()
	cache := robots.New(robots.Options{Logger: fetchenv.Quiet})
	site := http.NewServeMux()
	site.Handle("a.test/robots.txt", testenv.Status(200, nil, "User-agent: *\nDisallow: /no\n"))
	site.Handle("b.test/robots.txt", testenv.Status(404, nil, ""))
	site.Handle("c.test/robots.txt", testenv.Status(503, nil, ""))
	site.Handle("/", testenv.Status(200, nil, "page"))
	h := fetchenv.New(t, site, fetchenv.Options{Fetch: fetch.Options{Robots: cache, Pacer: fetchenv.NoPacer{}}})
	fetch.SetNow(h.Fetcher, clock.Now)
	for _, u := range []string{"a.test/no", "a.test/yes", "b.test/no", "c.test/no", "c.test/yes"} {
		host, path, _ := strings.Cut(u, "/")
		h.Fetcher.Fetch(fetchenv.Ctx(t), fetch.Request{URL: h.URL(host, "/"+path)}, h.Sink)
	}
	want := robots.Stats{Parsed: 1, Unavailable: 1, Unreachable: 1, Disallowed: 1, Withheld: 2}
	if got := cache.Stats(); got != want {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
}

// TestRobotsCacheLifetime: a robots.txt is asked for again once its
// lifetime ends: 24 h without caching headers, its max-age when shorter,
// a minute at least; the cache forgets the least recently used origin
// past its bound.
func TestRobotsCacheLifetime(t *testing.T) {
	for _, tt := range []struct {
		name   string
		header map[string]string
		life   time.Duration
	}{
		{name: "no caching headers", life: robots.MaxTTL},
		{name: "max-age=120", header: map[string]string{"Cache-Control": "public, max-age=120"}, life: 2 * time.Minute},
		{name: "max-age over a day", header: map[string]string{"Cache-Control": "max-age=999999"}, life: robots.MaxTTL},
		{name: "no-store", header: map[string]string{"Cache-Control": "no-store"}, life: robots.MinTTL},
		{name: "Expires in an hour", header: map[string]string{"Expires": "Tue, 01 Dec 2026 01:00:00 GMT"}, life: time.Hour},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			site := http.NewServeMux()
			site.Handle("/robots.txt", testenv.Status(200, tt.header, "User-agent: *\nDisallow: /no\n"))
			site.Handle("/", testenv.Status(200, nil, "page"))
			h := robotsHarness(t, site, clock, robots.Options{}, nil)
			count := func() int {
				n := 0
				for _, p := range paths(h.Origin) {
					if strings.HasSuffix(p, "/robots.txt") {
						n++
					}
				}
				return n
			}
			get(t, h, "origin.test", "/page")
			clock.Advance(tt.life - time.Second)
			get(t, h, "origin.test", "/page")
			if n := count(); n != 1 {
				t.Fatalf("robots.txt asked for %d times within its lifetime, want 1", n)
			}
			clock.Advance(time.Second)
			get(t, h, "origin.test", "/page")
			if n := count(); n != 2 {
				t.Fatalf("robots.txt asked for %d times once its lifetime ended, want 2", n)
			}
		})
	}
	t.Run("bounded", func(t *testing.T) {
		clock := newFakeClock()
		h := robotsHarness(t, robotsSite("User-agent: *\nAllow: /\n"), clock, robots.Options{MaxOrigins: 2}, nil)
		for _, host := range []string{"a.test", "b.test", "a.test", "c.test", "a.test", "b.test"} {
			if _, err := get(t, h, host, "/page"); err != nil {
				t.Fatal(err)
			}
		}
		var asked []string
		for _, p := range paths(h.Origin) {
			if strings.HasSuffix(p, "/robots.txt") {
				asked = append(asked, strings.TrimSuffix(p, "/robots.txt"))
			}
		}
		// c.test pushed out b.test, the least recently used; a.test stayed.
		if want := "[a.test b.test c.test b.test]"; fmt.Sprint(asked) != want {
			t.Errorf("robots.txt asked of %v, want %v", asked, want)
		}
	})
}
