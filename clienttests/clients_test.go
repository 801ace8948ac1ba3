package clienttests

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/hashicorp/go-retryablehttp"

	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/fetch/robots"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/internal/hosts"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/policy"
)

// interval is the spacing every host gets.
const interval = 60 * time.Millisecond

// site is a small site on site.test: pages linking to each other, a
// directory robots.txt disallows, a link that redirects to the tripwire,
// and /flaky, which answers 503 twice before it answers.
func site(tw *testenv.Tripwire) http.Handler {
	var flaky atomic.Int32
	mux := http.NewServeMux()
	page := func(links ...string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<html><body>")
			for _, l := range links {
				fmt.Fprintf(w, `<a href="%s">%s</a>`, l, l)
			}
			io.WriteString(w, "</body></html>")
		}
	}
	mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "User-agent: *\nDisallow: /private/\n")
	})
	mux.Handle("/{$}", page("/a", "/b", "/private/secret", "/away"))
	mux.Handle("/a", page("/", "/b", "/c"))
	mux.Handle("/b", page("/a", "/c"))
	mux.Handle("/c", page("/"))
	mux.Handle("/private/secret", page())
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+tw.Addr().String()+"/metadata", http.StatusFound)
	})
	mux.HandleFunc("/flaky", func(w http.ResponseWriter, r *http.Request) {
		if flaky.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "steady now")
	})
	return mux
}

// transport is one guarded, paced Transport: 127.0.0.1 alone is allowed,
// site.test resolves to it, every host is spaced by interval.
func transport() *fetch.Transport {
	return fetch.NewTransport(fetch.Options{
		Guard: guard.New(guard.Options{
			Allow:    []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
			Resolver: hosts.Resolver{Table: map[string][]netip.Addr{"site.test": {netip.MustParseAddr("127.0.0.1")}}},
		}),
		// Escalation held low so that the 503s of /flaky slow the host
		// down for a moment, not for seconds.
		Pacer:  policy.NewLocal(policy.LocalOptions{DefaultInterval: interval, MaxEscalation: 4 * interval}),
		Robots: robots.New(robots.Options{}),
		Logger: slog.New(slog.DiscardHandler),
	})
}

// checkSpacing fails when two requests reached the origin closer than
// interval (a little slack for the clocks of the two ends).
func checkSpacing(t *testing.T, o *testenv.Origin) {
	t.Helper()
	seen := o.Requests()
	sort.Slice(seen, func(i, j int) bool { return seen[i].At.Before(seen[j].At) })
	for i := 1; i < len(seen); i++ {
		if gap := seen[i].At.Sub(seen[i-1].At); gap < interval-5*time.Millisecond {
			t.Errorf("%s came %v after %s, want ≥ %v", seen[i].Path, gap, seen[i-1].Path, interval)
		}
	}
}

// TestCollyAndRetryableShareTheGuardAndThePace: a colly crawl and a
// go-retryablehttp client retrying a flaky endpoint run at once on one
// Transport. The crawl follows links but not into the directory robots.txt
// disallows, nor through a redirect to a refused address, which nothing
// reaches; the retries succeed; and every request to the host, robots.txt
// and retries included, is spaced by the host's interval.
func TestCollyAndRetryableShareTheGuardAndThePace(t *testing.T) {
	tw := testenv.StartTripwire(t, "127.0.0.2:0")
	o := testenv.StartOrigin(t, site(tw))
	rt := transport()
	defer rt.CloseIdleConnections()
	base := o.URLFor("site.test", "")

	var mu sync.Mutex
	visited := map[string]bool{}
	failed := map[string]error{}
	c := colly.NewCollector(colly.Async(true))
	c.WithTransport(rt)
	c.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: 4})
	c.OnHTML("a[href]", func(e *colly.HTMLElement) { e.Request.Visit(e.Attr("href")) })
	c.OnResponse(func(r *colly.Response) {
		mu.Lock()
		visited[r.Request.URL.Path] = true
		mu.Unlock()
	})
	c.OnError(func(r *colly.Response, err error) {
		mu.Lock()
		failed[r.Request.URL.Path] = err
		mu.Unlock()
	})

	rc := retryablehttp.NewClient()
	rc.HTTPClient = &http.Client{Transport: rt}
	rc.RetryWaitMin, rc.RetryWaitMax, rc.RetryMax = time.Millisecond, 5*time.Millisecond, 4
	rc.Logger = nil

	var wg sync.WaitGroup
	var flakyBody string
	var flakyErr error
	wg.Go(func() {
		resp, err := rc.Get(base + "/flaky")
		if err != nil {
			flakyErr = err
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		flakyBody, flakyErr = string(b), err
	})
	if err := c.Visit(base + "/"); err != nil {
		t.Fatal(err)
	}
	c.Wait()
	wg.Wait()

	if flakyErr != nil || flakyBody != "steady now" {
		t.Errorf("retryablehttp on /flaky: %q, %v", flakyBody, flakyErr)
	}
	for _, p := range []string{"/", "/a", "/b", "/c"} {
		if !visited[p] {
			t.Errorf("colly did not visit %s (visited %v, failed %v)", p, visited, failed)
		}
	}
	if err := failed["/private/secret"]; !errors.Is(err, fetch.ErrRobotsDisallowed) {
		t.Errorf("/private/secret: err = %v, want ErrRobotsDisallowed", err)
	}
	if err := failed["/away"]; !errors.Is(err, guard.ErrRefused) {
		t.Errorf("/away: err = %v, want a guard refusal", err)
	}
	if n := tw.Hits(); n != 0 {
		t.Errorf("%d connections reached the refused address", n)
	}
	count := map[string]int{}
	for _, s := range o.Requests() {
		count[s.Path]++
	}
	if count["/flaky"] != 3 || count["/private/secret"] != 0 || count["/robots.txt"] != 1 {
		t.Errorf("the origin saw %v", count)
	}
	checkSpacing(t, o)
}

// TestRetryableRefusedRedirect: go-retryablehttp's retries of a redirect
// to a refused address are refused each time, and nothing reaches it.
func TestRetryableRefusedRedirect(t *testing.T) {
	tw := testenv.StartTripwire(t, "127.0.0.2:0")
	o := testenv.StartOrigin(t, site(tw))
	rt := transport()
	defer rt.CloseIdleConnections()
	rc := retryablehttp.NewClient()
	rc.HTTPClient = &http.Client{Transport: rt}
	rc.RetryWaitMin, rc.RetryWaitMax, rc.RetryMax = time.Millisecond, 5*time.Millisecond, 2
	rc.Logger = nil
	_, err := rc.Get(o.URLFor("site.test", "/away"))
	if err == nil || !strings.Contains(err.Error(), "destination refused") {
		t.Fatalf("err = %v, want the guard's refusal", err)
	}
	if n := tw.Hits(); n != 0 {
		t.Errorf("%d connections reached the refused address", n)
	}
	checkSpacing(t, o)
}
