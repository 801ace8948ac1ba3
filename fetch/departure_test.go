package fetch_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/internal/testenv/fetchenv"
	"github.com/replicator-go/replicator/policy"
	"github.com/replicator-go/replicator/sink/memory"
)

// signalPacer passes every departure it is told of to a channel.
type signalPacer struct {
	policy.Pacer
	sent chan string
}

func (p *signalPacer) Sent(ctx context.Context, host string) error {
	p.sent <- host
	return p.Pacer.Sent(ctx, host)
}

// TestDepartureIsReportedWhileTheOriginHoldsTheRequest has the origin wait
// for the pacer to hear of the request's departure before it answers. A
// departure reported only when the request is over would never arrive.
func TestDepartureIsReportedWhileTheOriginHoldsTheRequest(t *testing.T) {
	for _, tc := range []struct {
		name       string
		tls, h2    bool
		wantMajor  int
		wantScheme string
	}{
		{name: "http/1.1", wantMajor: 1, wantScheme: "http"},
		{name: "http/1.1 over tls", tls: true, wantMajor: 1, wantScheme: "https"},
		{name: "http/2", tls: true, h2: true, wantMajor: 2, wantScheme: "https"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			interval := time.Second
			pacer := &signalPacer{Pacer: policy.NewLocal(policy.LocalOptions{DefaultInterval: interval}), sent: make(chan string, 4)}
			gotMajor := make(chan int, 1)
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotMajor <- r.ProtoMajor
				select {
				case <-pacer.sent:
					w.Write([]byte("ok"))
				case <-time.After(10 * time.Second):
					http.Error(w, "no departure reported while the request was held", http.StatusInternalServerError)
				}
			}))
			var tlsConfig *tls.Config
			if tc.tls {
				srv.EnableHTTP2 = tc.h2
				srv.StartTLS()
				pool := x509.NewCertPool()
				pool.AddCert(srv.Certificate())
				tlsConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
			} else {
				srv.Start()
			}
			t.Cleanup(srv.Close)
			f := fetch.New(fetch.Options{Guard: fetchenv.Guard(), Pacer: pacer, TLSConfig: tlsConfig, Logger: fetchenv.Quiet})
			t.Cleanup(f.Close)

			port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
			res, err := f.Fetch(t.Context(), fetch.Request{URL: tc.wantScheme + "://example.com:" + port + "/"}, memory.New(memory.Options{TTL: time.Hour}))
			if err != nil {
				t.Fatalf("Fetch: %v", err)
			}
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status %d: the departure was not reported before the response", res.StatusCode)
			}
			if got := <-gotMajor; got != tc.wantMajor {
				t.Fatalf("the request went as HTTP/%d, want HTTP/%d", got, tc.wantMajor)
			}
		})
	}
}
