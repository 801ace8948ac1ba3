package fetch_test

import (
	"errors"
	"net/http"
	"sort"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/fetch/feed"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/internal/testenv/fetchenv"
)

// hopSeen is one request as a credentials test judges it.
type hopSeen struct {
	Host, Path string
	Creds      bool // Authorization and Cookie both arrived
	NoCreds    bool // neither arrived
	Trace      bool // the non-credential caller header arrived
}

// TestCredentialsStopAtTheFirstHopOffOrigin runs every redirect chain
// through each way a redirect is followed (Get, feed.Get's page fetch, the
// Handler) and checks what each hop received: credentials only while every
// hop so far is on the requested URL's origin, even when the chain comes
// back to it; every other caller header everywhere; and a retried attempt
// starting a fresh chain.
func TestCredentialsStopAtTheFirstHopOffOrigin(t *testing.T) {
	type setup struct {
		h             *fetchenv.Harness
		other, secure *testenv.Origin
		mux           *http.ServeMux
	}
	with := func(creds bool, host, path string) hopSeen {
		return hopSeen{Host: host, Path: path, Creds: creds, NoCreds: !creds, Trace: true}
	}
	scenarios := []struct {
		name     string
		start    func(s setup) string
		retries  bool // the chain's end answers 503 once, then 200
		wantHops []hopSeen
	}{
		{
			name:  "A to B back to A",
			start: func(s setup) string { return s.h.URL("origin.test", "/leave") },
			wantHops: []hopSeen{
				with(true, "origin.test", "/leave"),
				with(false, "a.test", "/come-back"),
				with(false, "origin.test", "/final"),
			},
		},
		{
			name:  "A to A to A",
			start: func(s setup) string { return s.h.URL("origin.test", "/stay") },
			wantHops: []hopSeen{
				with(true, "origin.test", "/stay"),
				with(true, "origin.test", "/stay-again"),
				with(true, "origin.test", "/final"),
			},
		},
		{
			name:  "another host",
			start: func(s setup) string { return s.h.URL("origin.test", "/to-host") },
			wantHops: []hopSeen{
				with(true, "origin.test", "/to-host"),
				with(false, "a.test", "/final"),
			},
		},
		{
			name:  "same host, another port",
			start: func(s setup) string { return s.h.URL("origin.test", "/to-port") },
			wantHops: []hopSeen{
				with(true, "origin.test", "/to-port"),
				with(false, "origin.test", "/final"),
			},
		},
		{
			name:  "same host, http to https",
			start: func(s setup) string { return s.h.URL("example.com", "/to-https") },
			wantHops: []hopSeen{
				with(true, "example.com", "/to-https"),
				with(false, "example.com", "/final"),
			},
		},
		{
			name:    "a retry after a 503 starts a fresh chain",
			start:   func(s setup) string { return s.h.URL("origin.test", "/leave-flaky") },
			retries: true,
			wantHops: []hopSeen{
				with(true, "origin.test", "/leave-flaky"),
				with(false, "a.test", "/come-back-flaky"),
				with(false, "origin.test", "/flaky"),
				with(true, "origin.test", "/leave-flaky"),
				with(false, "a.test", "/come-back-flaky"),
				with(false, "origin.test", "/flaky"),
			},
		},
	}
	ways := []struct {
		name  string
		fetch func(t *testing.T, s setup, url string, headers map[string]string, retry bool)
	}{
		{name: "Get", fetch: func(t *testing.T, s setup, url string, headers map[string]string, retry bool) {
			opts := fetch.GetOptions{Headers: headers, Retries: fetch.None, Backoff: fetch.None}
			if retry {
				opts.Retries = 1
			}
			if _, err := s.h.Fetcher.Get(fetchenv.Ctx(t), url, opts); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "feed.Get", fetch: func(t *testing.T, s setup, url string, headers map[string]string, retry bool) {
			opts := fetch.GetOptions{Headers: headers, Retries: fetch.None, Backoff: fetch.None}
			if retry {
				opts.Retries = 1
			}
			if _, err := feed.Get(fetchenv.Ctx(t), s.h.Fetcher, url, opts, feed.Options{}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "Handler", fetch: func(t *testing.T, s setup, url string, headers map[string]string, retry bool) {
			cmd := fetchenv.Command(url)
			cmd.Headers = headers
			if retry {
				// The worker retries through the stream: a second delivery
				// is a second Handle.
				if out := s.h.Handle(t, cmd); out.Fate != capability.Retry {
					t.Fatalf("first delivery: kind = %v (%v), want transient", out.Name(), out.Err)
				}
			}
			if out := s.h.Handle(t, cmd); out.Label != contentfetch.Stored {
				t.Fatalf("kind = %v (%v), want stored", out.Name(), out.Err)
			}
		}},
	}
	spellings := []map[string]string{
		{"Authorization": "Bearer s3cret", "Cookie": "session=1", "X-Trace": "t-1"},
		{"aUTHORIZATION": "Bearer s3cret", "COOKIE": "session=1", "x-TRACE": "t-1"},
	}
	for _, way := range ways {
		for _, sc := range scenarios {
			for i, headers := range spellings {
				t.Run(way.name+"/"+sc.name+"/spelling "+string(rune('1'+i)), func(t *testing.T) {
					feed := fetchenv.Served("application/atom+xml", fetchenv.AtomFeed)
					s := setup{mux: http.NewServeMux()}
					s.other = testenv.StartOrigin(t, feed)
					s.secure = testenv.StartTLSOrigin(t, feed)
					s.h = fetchenv.New(t, s.mux, fetchenv.Options{Fetch: fetch.Options{Pacer: fetchenv.NoPacer{}, TLSConfig: trust(s.secure)}})
					var flaked atomic.Bool
					s.mux.Handle("/final", feed)
					s.mux.Handle("/leave", testenv.Redirect(http.StatusFound, s.h.URL("a.test", "/come-back")))
					s.mux.Handle("/come-back", testenv.Redirect(http.StatusFound, s.h.URL("origin.test", "/final")))
					s.mux.Handle("/stay", testenv.Redirect(http.StatusFound, "/stay-again"))
					s.mux.Handle("/stay-again", testenv.Redirect(http.StatusFound, "HTTP://ORIGIN.test:"+s.h.Origin.Port()+"/final"))
					s.mux.Handle("/to-host", testenv.Redirect(http.StatusFound, s.h.URL("a.test", "/final")))
					s.mux.Handle("/to-port", testenv.Redirect(http.StatusFound, s.other.URLFor("origin.test", "/final")))
					s.mux.Handle("/to-https", testenv.Redirect(http.StatusFound, s.secure.URLFor("example.com", "/final")))
					s.mux.Handle("/leave-flaky", testenv.Redirect(http.StatusFound, s.h.URL("a.test", "/come-back-flaky")))
					s.mux.Handle("/come-back-flaky", testenv.Redirect(http.StatusFound, s.h.URL("origin.test", "/flaky")))
					s.mux.HandleFunc("/flaky", func(w http.ResponseWriter, r *http.Request) {
						if flaked.CompareAndSwap(false, true) {
							w.WriteHeader(http.StatusServiceUnavailable)
							return
						}
						feed.ServeHTTP(w, r)
					})

					way.fetch(t, s, sc.start(s), headers, sc.retries)

					var seen []testenv.Seen
					for _, o := range []*testenv.Origin{s.h.Origin, s.other, s.secure} {
						seen = append(seen, o.Requests()...)
					}
					sort.SliceStable(seen, func(i, j int) bool { return seen[i].At.Before(seen[j].At) })
					got := make([]hopSeen, len(seen))
					for i, r := range seen {
						auth, cookie := r.Header.Get("Authorization") != "", r.Header.Get("Cookie") != ""
						got[i] = hopSeen{Host: r.Host, Path: r.Path, Creds: auth && cookie, NoCreds: !auth && !cookie, Trace: r.Header.Get("X-Trace") == "t-1"}
					}
					if diff := cmp.Diff(sc.wantHops, got); diff != "" {
						t.Errorf("requests (-want +got):\n%s", diff)
					}
				})
			}
		}
	}
}

// TestSameOrigin checks what one origin is: scheme, host and port,
// case-insensitive, a missing port being the scheme's default.
func TestSameOrigin(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"http://a.test/x", "http://a.test/y?q#f", true},
		{"http://a.test/", "http://a.test:80/", true},
		{"https://a.test/", "https://a.test:443/", true},
		{"HTTP://A.Test/", "http://a.test/", true},
		{"http://u:p@a.test/", "http://a.test/", true},
		{"http://[::1]:80/", "http://[::1]/", true},
		{"http://a.test/", "https://a.test/", false},
		{"http://a.test/", "http://a.test:8080/", false},
		{"http://a.test:443/", "https://a.test/", false},
		{"http://a.test/", "http://b.test/", false},
		{"http://a.test/", "http://sub.a.test/", false},
	}
	for _, tt := range tests {
		a, b := fetchenv.MustURL(t, tt.a), fetchenv.MustURL(t, tt.b)
		if got := fetch.SameOrigin(a, b); got != tt.want {
			t.Errorf("SameOrigin(%s, %s) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got := fetch.SameOrigin(b, a); got != tt.want {
			t.Errorf("SameOrigin(%s, %s) = %v, want %v", tt.b, tt.a, got, tt.want)
		}
	}
}

// TestWithoutCredentials checks every spelling of every credential is
// dropped, every other header kept, and the caller's map left alone.
func TestWithoutCredentials(t *testing.T) {
	in := map[string]string{
		"Authorization": "Bearer s3cret", "COOKIE": "session=1", "proxy-Authorization": "Basic eA==",
		"X-Trace": "t-1", "accept": "application/atom+xml", "authorization-hint": "kept",
	}
	want := map[string]string{"X-Trace": "t-1", "accept": "application/atom+xml", "authorization-hint": "kept"}
	if diff := cmp.Diff(want, fetch.WithoutCredentials(in)); diff != "" {
		t.Errorf("WithoutCredentials (-want +got):\n%s", diff)
	}
	if len(in) != 6 {
		t.Errorf("the caller's headers changed: %v", in)
	}
	if got := fetch.WithoutCredentials(nil); got == nil || len(got) != 0 {
		t.Errorf("WithoutCredentials(nil) = %#v, want an empty map", got)
	}
}

// TestFetchable checks which URLs a Fetcher takes.
func TestFetchable(t *testing.T) {
	for raw, ok := range map[string]bool{
		"http://a.test/": true, "HTTPS://a.test:8443/x?q": true, "http://u:p@a.test/": true,
		"ftp://a.test/": false, "/relative": false, "http:///nohost": false, "http:opaque": false,
		"mailto:x@a.test": false, "javascript:alert(1)": false,
	} {
		err := fetch.Fetchable(fetchenv.MustURL(t, raw))
		if (err == nil) != ok || (err != nil && !errors.Is(err, fetch.ErrNotFetchable)) {
			t.Errorf("Fetchable(%q) = %v, want ok %v or ErrNotFetchable", raw, err, ok)
		}
	}
}
