package fetch_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/internal/testenv/fetchenv"
)

// TestEachHopIsPacedAgainstItsOwnHost sends two commands for hosts A and B
// that both redirect to C: the two requests to C must be a full interval
// apart even though A and B are each due at once.
func TestEachHopIsPacedAgainstItsOwnHost(t *testing.T) {
	const interval = 300 * time.Millisecond
	mux := http.NewServeMux()
	h := fetchenv.New(t, mux, fetchenv.Options{Interval: interval})
	mux.HandleFunc("/start", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, h.URL("c.test", "/end"), http.StatusFound)
	})
	mux.Handle("/end", testenv.Status(200, nil, "ok"))

	var wg sync.WaitGroup
	for _, host := range []string{"a.test", "b.test"} {
		wg.Go(func() {
			if out := h.Handle(t, fetchenv.Command(h.URL(host, "/start"))); out.Label != contentfetch.Stored {
				t.Errorf("%s: kind = %v (%v)", host, out.Name(), out.Err)
			}
		})
	}
	wg.Wait()
	var atC []time.Time
	for _, s := range h.Origin.Requests() {
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
	h := fetchenv.New(t, testenv.Status(200, nil, "ok"), fetchenv.Options{Interval: time.Hour, MaxWait: 50 * time.Millisecond})
	if out := h.Handle(t, fetchenv.Command(h.URL("origin.test", "/"))); out.Label != contentfetch.Stored {
		t.Fatalf("first: kind = %v (%v)", out.Name(), out.Err)
	}
	out := h.Handle(t, fetchenv.Command(h.URL("origin.test", "/")))
	if out.Fate != capability.Park || out.Park == nil {
		t.Fatalf("second: kind = %v park = %v (%v), want parked with Park", out.Name(), out.Park, out.Err)
	}
	if out.Park.Host != "origin.test" || out.Park.Wait < 59*time.Minute {
		t.Errorf("park = %+v, want origin.test due in about an hour", out.Park)
	}
	if out.Reason != "politeness" || out.Wait != out.Park.Wait || out.Key != "origin.test" {
		t.Errorf("reason %q, wait %v, key %q; want politeness, %v, origin.test", out.Reason, out.Wait, out.Key, out.Park.Wait)
	}
	if n := h.Origin.Count(); n != 1 {
		t.Errorf("origin saw %d requests, want 1", n)
	}
}

// TestStopCutsPacingShort checks that closing Stop ends a pacing wait at
// once, with nothing sent.
func TestStopCutsPacingShort(t *testing.T) {
	stop := make(chan struct{})
	h := fetchenv.New(t, testenv.Status(200, nil, "ok"), fetchenv.Options{Interval: time.Hour, Stop: stop})
	h.Handle(t, fetchenv.Command(h.URL("origin.test", "/")))
	time.AfterFunc(50*time.Millisecond, func() { close(stop) })
	out := h.Handle(t, fetchenv.Command(h.URL("origin.test", "/")))
	if out.Fate != capability.Retry {
		t.Fatalf("kind = %v (%v), want transient", out.Name(), out.Err)
	}
	if n := h.Origin.Count(); n != 1 {
		t.Errorf("origin saw %d requests, want 1", n)
	}
}

func trust(o *testenv.Origin) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(o.Certificate())
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}
