package fetch_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/fetch/robots"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/internal/hosts"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/internal/testenv/fetchenv"
	"github.com/replicator-go/replicator/policy"
)

// onlyOrigin is a guard that allows 127.0.0.1 alone (the origins), not
// the rest of loopback, resolving fetchenv.Hosts.
func onlyOrigin() *guard.Guard {
	return guard.New(guard.Options{
		Allow:    []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		Resolver: hosts.Resolver{Table: fetchenv.Hosts},
	})
}

func noSpacing() policy.Pacer {
	return policy.NewLocal(policy.LocalOptions{DefaultInterval: policy.None})
}

// TestClientRefusesRedirectToPrivate: an http.Client on the Transport
// follows a redirect only where the guard allows; a redirect to a refused
// address fails with guard.ErrRefused and nothing reaches it.
func TestClientRefusesRedirectToPrivate(t *testing.T) {
	tw := testenv.StartTripwire(t, "127.0.0.2:0")
	o := testenv.StartOrigin(t, testenv.Redirect(http.StatusFound, "http://127.0.0.2:"+tw.Port()+"/secret"))
	c := fetch.NewClient(fetch.Options{Guard: onlyOrigin(), Pacer: noSpacing(), Logger: fetchenv.Quiet})
	resp, err := c.Get(o.URLFor("origin.test", "/"))
	if err == nil {
		resp.Body.Close()
		t.Fatal("the redirect to 127.0.0.2 was followed")
	}
	if !errors.Is(err, guard.ErrRefused) || fetch.Classify(err).Cause != fetch.CauseRefused {
		t.Fatalf("err = %v, want a guard refusal", err)
	}
	if n := tw.Hits(); n != 0 {
		t.Fatalf("%d connections reached the refused address", n)
	}
	if o.Count() != 1 {
		t.Fatalf("origin saw %d requests, want 1", o.Count())
	}
}

// TestTransportSpacesEveryHop: each request the client sends, redirect
// hops included, waits for its host's window; another host is not held up.
func TestTransportSpacesEveryHop(t *testing.T) {
	const interval = 80 * time.Millisecond
	mux := http.NewServeMux()
	mux.Handle("/hop/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := strings.TrimPrefix(r.URL.Path, "/hop/")
		if len(n) < 3 {
			http.Redirect(w, r, "/hop/"+n+"x", http.StatusFound)
			return
		}
		io.WriteString(w, "done")
	}))
	o := testenv.StartOrigin(t, mux)
	c := fetch.NewClient(fetch.Options{
		Guard:  onlyOrigin(),
		Pacer:  policy.NewLocal(policy.LocalOptions{DefaultInterval: interval}),
		Logger: fetchenv.Quiet,
	})
	for _, host := range []string{"a.test", "b.test"} {
		resp, err := c.Get(o.URLFor(host, "/hop/"))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	last := map[string]time.Time{}
	for _, s := range o.Requests() {
		if at, ok := last[s.Host]; ok && s.At.Sub(at) < interval-5*time.Millisecond {
			t.Errorf("%s %s came %v after the previous request to its host, want ≥ %v", s.Host, s.Path, s.At.Sub(at), interval)
		}
		last[s.Host] = s.At
	}
	if n := len(o.Requests()); n != 8 {
		t.Fatalf("origin saw %d requests, want 8", n)
	}
}

// TestTransportObeysRobotsForTheRequestAgent: with Options.Robots a
// disallowed URL fails with ErrRobotsDisallowed, unsent, judged for the
// User-Agent the request carries.
func TestTransportObeysRobotsForTheRequestAgent(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/robots.txt", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "User-agent: othercrawler\nDisallow: /private\n\nUser-agent: *\nDisallow: /\n")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "page") })
	o := testenv.StartOrigin(t, mux)
	c := fetch.NewClient(fetch.Options{Guard: onlyOrigin(), Pacer: noSpacing(), Logger: fetchenv.Quiet, Robots: robots.New(robots.Options{})})
	get := func(path, agent string) error {
		req, _ := http.NewRequest(http.MethodGet, o.URLFor("origin.test", path), nil)
		if agent != "" {
			req.Header.Set("User-Agent", agent)
		}
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get("/public", "othercrawler/2.0"); err != nil {
		t.Fatalf("othercrawler on /public: %v", err)
	}
	if err := get("/private", "othercrawler/2.0"); !errors.Is(err, fetch.ErrRobotsDisallowed) || fetch.Classify(err).Cause != fetch.CauseRobotsDisallowed {
		t.Fatalf("othercrawler on /private: err = %v, want ErrRobotsDisallowed", err)
	}
	if err := get("/public", ""); !errors.Is(err, fetch.ErrRobotsDisallowed) {
		t.Fatalf("the default agent on /public: err = %v, want ErrRobotsDisallowed", err)
	}
	for _, s := range o.Requests() {
		if s.Path == "/private" || (s.Path == "/public" && !strings.HasPrefix(s.Header.Get("User-Agent"), "othercrawler")) {
			t.Errorf("a disallowed request reached the origin: %s by %q", s.Path, s.Header.Get("User-Agent"))
		}
	}
}

// TestTransportBoundsTheDecodedBody: a body is decoded when the Transport
// asked for gzip, and bounded after decoding; over the bound a read fails
// with ErrTooLarge, and a declared length over it fails the request.
func TestTransportBoundsTheDecodedBody(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("/gzip", testenv.Gzipped(bytes.Repeat([]byte("a"), 4096)))
	mux.Handle("/declared", testenv.Body(8192, true))
	mux.Handle("/small", testenv.Body(100, true))
	o := testenv.StartOrigin(t, mux)
	c := fetch.NewClient(fetch.Options{Guard: onlyOrigin(), Pacer: noSpacing(), Logger: fetchenv.Quiet, MaxBodyBytes: 1000})

	resp, err := c.Get(o.URLFor("origin.test", "/gzip"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get("Content-Encoding") != "" || !resp.Uncompressed {
		t.Errorf("gzip body not decoded: Content-Encoding %q", resp.Header.Get("Content-Encoding"))
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !errors.Is(err, fetch.ErrTooLarge) || len(body) != 1000 {
		t.Fatalf("read %d bytes, err = %v; want 1000 and ErrTooLarge", len(body), err)
	}

	if _, err := c.Get(o.URLFor("origin.test", "/declared")); !errors.Is(err, fetch.ErrTooLarge) {
		t.Fatalf("declared 8192 bytes: err = %v, want ErrTooLarge", err)
	}

	resp, err = c.Get(o.URLFor("origin.test", "/small"))
	if err != nil {
		t.Fatal(err)
	}
	body, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || len(body) != 100 {
		t.Fatalf("read %d bytes, err = %v; want 100", len(body), err)
	}
}

// TestClientDropsCredentialsOffOrigin: Authorization and Cookie go to the
// first origin only, and not back to it once the chain has left it.
func TestClientDropsCredentialsOffOrigin(t *testing.T) {
	var o *testenv.Origin
	o = testenv.StartOrigin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Host == "a.test:"+o.Port() && r.URL.Path == "/":
			http.Redirect(w, r, "/same", http.StatusFound)
		case r.Host == "a.test:"+o.Port() && r.URL.Path == "/same":
			http.Redirect(w, r, o.URLFor("b.test", "/other"), http.StatusFound)
		case r.Host == "b.test:"+o.Port():
			http.Redirect(w, r, o.URLFor("a.test", "/back"), http.StatusFound)
		default:
			io.WriteString(w, "end")
		}
	}))
	c := fetch.NewClient(fetch.Options{Guard: onlyOrigin(), Pacer: noSpacing(), Logger: fetchenv.Quiet})
	req, _ := http.NewRequest(http.MethodGet, o.URLFor("a.test", "/"), nil)
	req.Header.Set("Authorization", "Bearer secret")
	req.Header.Set("Cookie", "session=1")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := map[string]bool{"/": true, "/same": true, "/other": false, "/back": false}
	for _, s := range o.Requests() {
		if got := s.Header.Get("Authorization") != "" || s.Header.Get("Cookie") != ""; got != want[s.Path] {
			t.Errorf("%s%s: credentials sent = %v, want %v", s.Host, s.Path, got, want[s.Path])
		}
	}
}

// TestTransportReportsRefusals: a 503 with Retry-After raises the host's
// interval, so the next request waits for it.
func TestTransportReportsRefusals(t *testing.T) {
	var n atomic.Int32
	o := testenv.StartOrigin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	}))
	pacer := policy.NewLocal(policy.LocalOptions{DefaultInterval: policy.None})
	c := fetch.NewClient(fetch.Options{Guard: onlyOrigin(), Pacer: pacer, Logger: fetchenv.Quiet})
	resp, err := c.Get(o.URLFor("origin.test", "/"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want the 503 itself", resp.StatusCode)
	}
	r, err := pacer.Reserve(context.Background(), "origin.test", 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.OK || r.Wait < 6*time.Second {
		t.Fatalf("after a 503 with Retry-After 7: reservation %+v, want a wait of about 7 s", r)
	}
}
