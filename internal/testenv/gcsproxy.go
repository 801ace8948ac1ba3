package testenv

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"cloud.google.com/go/storage"
)

// GCSProxy stands between a storage client and a fake GCS server, over a
// real loopback socket, so a test can answer a request with what the fake
// never sends: a 403, a 503, a dropped connection. It passes everything
// else on and remembers what it saw.
//
// A GCSProxy is safe for concurrent use.
type GCSProxy struct {
	// URL is the proxy's base URL, "http://127.0.0.1:PORT"; point
	// STORAGE_EMULATOR_HOST (without the scheme) or GCSClient at it.
	URL string
	// Client talks to the fake through the proxy, without credentials.
	Client *storage.Client

	srv  *httptest.Server
	mu   sync.Mutex
	hook func(w http.ResponseWriter, r *http.Request) bool
	seen []string
}

// Close stops the proxy before the test ends: nothing listens on its port
// any more, so a request through it fails to dial.
func (p *GCSProxy) Close() { p.srv.Close() }

// Proxy starts a GCSProxy in front of g for the test.
func (g *GCS) Proxy(t testing.TB) *GCSProxy {
	t.Helper()
	target, err := url.Parse(g.URL)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	p := &GCSProxy{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.seen = append(p.seen, r.Method+" "+r.URL.Path+"?"+r.URL.Query().Get("uploadType"))
		hook := p.hook
		p.mu.Unlock()
		if hook != nil && hook(w, r) {
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.srv, p.URL = srv, srv.URL
	c, err := GCSClient(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	p.Client = c
	return p
}

// Hook answers requests itself while h returns true for them (h writes the
// response); the rest go to the fake. Nil passes everything on. Setting a
// hook forgets what was seen.
func (p *GCSProxy) Hook(h func(w http.ResponseWriter, r *http.Request) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hook, p.seen = h, nil
}

// Answer answers each request with the status status returns for it, as
// GCS's JSON error, or passes it on when that is 0.
func (p *GCSProxy) Answer(status func(r *http.Request) int) {
	p.Hook(func(w http.ResponseWriter, r *http.Request) bool {
		code := status(r)
		if code == 0 {
			return false
		}
		WriteGCSError(w, r, code)
		return true
	})
}

// RefuseUploads answers every upload with code (0 passes them on again).
func (p *GCSProxy) RefuseUploads(code int) {
	p.Answer(func(r *http.Request) int {
		if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/upload/") {
			return code
		}
		return 0
	})
}

// Count is how many requests seen since the hook was set start with
// prefix ("METHOD path?uploadType").
func (p *GCSProxy) Count(prefix string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, s := range p.seen {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// WriteGCSError answers r with code and a body shaped as GCS's JSON error.
func WriteGCSError(w http.ResponseWriter, r *http.Request, code int) {
	io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"error":{"code":%d,"message":"answered by the test proxy"}}`, code)
}
