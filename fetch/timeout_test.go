package fetch_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/internal/testenv/fetchenv"
	"github.com/replicator-go/replicator/sink/memory"
)

// TestTimeoutBoundsEachOperation checks docs/taxonomy.md, Timeouts: timeout_seconds bounds
// each operation on its own. The origin takes handshake to answer the TLS
// handshake and headers to send its response's headers; a fetch whose
// every step fits the timeout succeeds even when they add up to more, and
// one step over it times out.
func TestTimeoutBoundsEachOperation(t *testing.T) {
	tests := []struct {
		name               string
		handshake, headers time.Duration
		timeout            float64
		want               string
	}{
		// Each step leaves 600 ms of the timeout for a loaded machine.
		{name: "each step under the timeout, together over it", handshake: 900 * time.Millisecond, headers: 900 * time.Millisecond, timeout: 1.5, want: contentfetch.Stored},
		{name: "handshake over the timeout", handshake: 1200 * time.Millisecond, timeout: 0.5, want: fetchenv.Transient},
		{name: "headers over the timeout", headers: 1200 * time.Millisecond, timeout: 0.5, want: fetchenv.Transient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			origin := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-time.After(tt.headers):
				case <-r.Context().Done():
				}
				io.WriteString(w, "ok")
			}))
			origin.Listener = slowHandshakeListener{Listener: origin.Listener, delay: tt.handshake}
			origin.StartTLS()
			t.Cleanup(origin.Close)
			pool := x509.NewCertPool()
			pool.AddCert(origin.Certificate())
			f := fetch.New(fetch.Options{Guard: fetchenv.Guard(), TLSConfig: &tls.Config{RootCAs: pool}, Logger: fetchenv.Quiet})
			t.Cleanup(f.Close)
			h := contentfetch.NewHandler(contentfetch.HandlerOptions{Fetcher: f, Sink: memory.New(memory.Options{TTL: time.Hour}), Logger: fetchenv.Quiet})
			_, port, _ := net.SplitHostPort(origin.Listener.Addr().String())
			cmd := fetchenv.Command("https://example.com:" + port + "/")
			cmd.TimeoutSeconds = &tt.timeout

			out := h.Fetch(t.Context(), cmd, nil)
			if out.Name() != tt.want {
				t.Fatalf("outcome = %v (%v), want %v", out.Name(), out.Err, tt.want)
			}
			if tt.want == fetchenv.Transient && !errors.Is(out.Err, fetch.ErrTimeout) {
				t.Errorf("error = %v, want ErrTimeout", out.Err)
			}
		})
	}
}

// slowHandshakeListener delays each accepted connection's first read, so
// the client's TLS handshake takes about delay.
type slowHandshakeListener struct {
	net.Listener
	delay time.Duration
}

func (l slowHandshakeListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &slowFirstRead{Conn: c, delay: l.delay}, nil
}

type slowFirstRead struct {
	net.Conn
	once  sync.Once
	delay time.Duration
}

func (c *slowFirstRead) Read(p []byte) (int, error) {
	c.once.Do(func() { time.Sleep(c.delay) })
	return c.Conn.Read(p)
}
