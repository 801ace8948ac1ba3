package fetch_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/internal/testenv"
)

// TestCredentialsStayOnTheCommandOrigin follows a redirect to each kind of
// hop and checks which request headers arrived there.
func TestCredentialsStayOnTheCommandOrigin(t *testing.T) {
	ok := testenv.Status(200, nil, "ok")
	other := testenv.StartOrigin(t, ok)     // same host name, another port
	secure := testenv.StartTLSOrigin(t, ok) // https, another port
	mux := http.NewServeMux()
	mux.Handle("/final", ok)
	h := newHarness(t, mux, harnessOptions{fetch: fetch.Options{TLSConfig: trust(secure)}})
	mux.Handle("/same-origin", testenv.Redirect(http.StatusFound, "/final"))
	mux.Handle("/same-origin-absolute", testenv.Redirect(http.StatusFound, "HTTP://ORIGIN.test:"+h.origin.Port()+"/final"))
	mux.Handle("/other-host", testenv.Redirect(http.StatusFound, h.url("a.test", "/final")))
	mux.Handle("/other-port", testenv.Redirect(http.StatusFound, other.URLFor("origin.test", "/final")))
	mux.Handle("/other-scheme", testenv.Redirect(http.StatusFound, secure.URLFor("example.com", "/final")))

	tests := []struct {
		name      string
		path      string
		last      *testenv.Origin
		wantCreds bool
	}{
		{name: "same origin", path: "/same-origin", last: h.origin, wantCreds: true},
		{name: "same origin spelled differently", path: "/same-origin-absolute", last: h.origin, wantCreds: true},
		{name: "host change", path: "/other-host", last: h.origin},
		{name: "port change", path: "/other-port", last: other},
		{name: "scheme change", path: "/other-scheme", last: secure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := command(h.url("origin.test", tt.path))
			cmd.Headers = map[string]string{"Authorization": "Bearer s3cret", "Cookie": "session=1", "X-Trace": "t-1"}
			if out := h.handle(t, cmd); out.Kind != fetch.Stored {
				t.Fatalf("kind = %v (%v)", out.Kind, out.Err)
			}
			first := h.origin.Requests()
			if got := first[len(first)-2].Header; tt.last == h.origin && got.Get("Authorization") != "Bearer s3cret" {
				t.Errorf("first hop lost its credentials")
			}
			seen := tt.last.Requests()
			got := seen[len(seen)-1]
			if got.Path != "/final" {
				t.Fatalf("last request at %s was %s, want /final", tt.last.URL, got.Path)
			}
			hasCreds := got.Header.Get("Authorization") != "" || got.Header.Get("Cookie") != ""
			if hasCreds != tt.wantCreds {
				t.Errorf("credentials on the final hop = %v, want %v (Authorization %q, Cookie %q)",
					hasCreds, tt.wantCreds, got.Header.Get("Authorization"), got.Header.Get("Cookie"))
			}
			if got.Header.Get("X-Trace") != "t-1" {
				t.Errorf("X-Trace did not reach the final hop")
			}
		})
	}
}

// TestEachHopIsPacedAgainstItsOwnHost sends two commands for hosts A and B
// that both redirect to C: the two requests to C must be a full interval
// apart even though A and B are each due at once.
func TestEachHopIsPacedAgainstItsOwnHost(t *testing.T) {
	const interval = 300 * time.Millisecond
	mux := http.NewServeMux()
	h := newHarness(t, mux, harnessOptions{interval: interval})
	mux.HandleFunc("/start", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, h.url("c.test", "/end"), http.StatusFound)
	})
	mux.Handle("/end", testenv.Status(200, nil, "ok"))

	var wg sync.WaitGroup
	for _, host := range []string{"a.test", "b.test"} {
		wg.Go(func() {
			if out := h.handle(t, command(h.url(host, "/start"))); out.Kind != fetch.Stored {
				t.Errorf("%s: kind = %v (%v)", host, out.Kind, out.Err)
			}
		})
	}
	wg.Wait()
	var atC []time.Time
	for _, s := range h.origin.Requests() {
		if s.Host == "c.test" {
			atC = append(atC, s.At)
		}
	}
	if len(atC) != 2 {
		t.Fatalf("c.test saw %d requests, want 2", len(atC))
	}
	if gap := atC[1].Sub(atC[0]); gap < interval-5*time.Millisecond {
		t.Errorf("gap at c.test = %v, want at least %v", gap, interval)
	}
}

// TestParkedWhenTheWindowIsLongerThanMaxWait checks that a fetch gives up
// a long pacing wait without sending anything.
func TestParkedWhenTheWindowIsLongerThanMaxWait(t *testing.T) {
	h := newHarness(t, testenv.Status(200, nil, "ok"), harnessOptions{interval: time.Hour, fetch: fetch.Options{MaxWait: 50 * time.Millisecond}})
	if out := h.handle(t, command(h.url("origin.test", "/"))); out.Kind != fetch.Stored {
		t.Fatalf("first: kind = %v (%v)", out.Kind, out.Err)
	}
	out := h.handle(t, command(h.url("origin.test", "/")))
	if out.Kind != fetch.Transient || out.Park == nil {
		t.Fatalf("second: kind = %v park = %v (%v), want transient with Park", out.Kind, out.Park, out.Err)
	}
	if out.Park.Host != "origin.test" || out.Park.Wait < 59*time.Minute {
		t.Errorf("park = %+v, want origin.test due in about an hour", out.Park)
	}
	if n := h.origin.Count(); n != 1 {
		t.Errorf("origin saw %d requests, want 1", n)
	}
}

// TestStopCutsPacingShort checks that closing Stop ends a pacing wait at
// once, with nothing sent.
func TestStopCutsPacingShort(t *testing.T) {
	stop := make(chan struct{})
	h := newHarness(t, testenv.Status(200, nil, "ok"), harnessOptions{interval: time.Hour, fetch: fetch.Options{Stop: stop}})
	h.handle(t, command(h.url("origin.test", "/")))
	time.AfterFunc(50*time.Millisecond, func() { close(stop) })
	out := h.handle(t, command(h.url("origin.test", "/")))
	if out.Kind != fetch.Transient {
		t.Fatalf("kind = %v (%v), want transient", out.Kind, out.Err)
	}
	if n := h.origin.Count(); n != 1 {
		t.Errorf("origin saw %d requests, want 1", n)
	}
}

func trust(o *testenv.Origin) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(o.Certificate())
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}
