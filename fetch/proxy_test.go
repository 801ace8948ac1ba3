package fetch_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/internal/hosts"
	"github.com/replicator-go/replicator/internal/ssrfcases"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/internal/testenv/fetchenv"
	"github.com/replicator-go/replicator/sink/memory"
)

// proxyWorld is a real tinyproxy on 127.0.0.1, origins on 127.0.0.3 (the
// one address the guard allows), and a tripwire on 127.0.0.1 that no
// request may reach: the guard refuses all loopback but the origins'.
type proxyWorld struct {
	proxy    *testenv.Tinyproxy
	plain    *testenv.Origin
	secure   *httptest.Server
	tripwire *testenv.Tripwire
	table    map[string][]netip.Addr
	roots    *x509.CertPool
}

func newProxyWorld(t *testing.T) *proxyWorld {
	t.Helper()
	w := &proxyWorld{proxy: testenv.StartTinyproxy(t)}
	l, err := net.Listen("tcp", "127.0.0.3:0")
	if err != nil {
		t.Fatal(err)
	}
	w.plain = testenv.StartOriginOn(t, l, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.WriteString(rw, "plain")
	}))
	w.secure = httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.WriteString(rw, "secure")
	}))
	w.secure.Listener.Close()
	if w.secure.Listener, err = net.Listen("tcp", "127.0.0.3:0"); err != nil {
		t.Fatal(err)
	}
	w.secure.StartTLS()
	t.Cleanup(w.secure.Close)
	w.roots = x509.NewCertPool()
	w.roots.AddCert(w.secure.Certificate())
	w.tripwire = testenv.StartTripwire(t, "127.0.0.1:0")
	w.table = maps.Clone(ssrfcases.Resolver().Table)
	// example.com is the name on httptest's certificate.
	w.table["example.com"] = []netip.Addr{netip.MustParseAddr("127.0.0.3")}
	return w
}

func (w *proxyWorld) guard(r guard.Resolver) *guard.Guard {
	if r == nil {
		r = hosts.Resolver{Table: w.table}
	}
	return guard.New(guard.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.3/32")}, Resolver: r})
}

// always sends every request through the world's proxy, loopback ones
// included (EnvironmentProxy, like net/http, sends those direct).
func (w *proxyWorld) always() *fetch.Proxy {
	return &fetch.Proxy{
		For:   func(*url.URL) (*url.URL, error) { return w.proxy.URL, nil },
		Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
	}
}

func (w *proxyWorld) options(p *fetch.Proxy, r guard.Resolver) fetch.Options {
	return fetch.Options{
		Guard:     w.guard(r),
		Pacer:     noSpacing(),
		Logger:    fetchenv.Quiet,
		Proxy:     p,
		TLSConfig: &tls.Config{RootCAs: w.roots},
	}
}

func (w *proxyWorld) securePort() string {
	_, port, _ := net.SplitHostPort(w.secure.Listener.Addr().String())
	return port
}

func clientGet(t *testing.T, c *http.Client, rawURL string) (string, error) {
	t.Helper()
	resp, err := c.Get(rawURL)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestProxyTunnelsToTheJudgedAddress: an https request through the proxy
// is a CONNECT to the address the guard judged, never to the name, and
// TLS is still verified against the name; a plain-HTTP one is forwarded.
// The Fetcher takes the same route.
func TestProxyTunnelsToTheJudgedAddress(t *testing.T) {
	w := newProxyWorld(t)
	c := fetch.NewClient(w.options(w.always(), nil))
	target := "https://example.com:" + w.securePort() + "/"
	if body, err := clientGet(t, c, target); err != nil || body != "secure" {
		t.Fatalf("GET %s = %q, %v", target, body, err)
	}
	plain := "http://127.0.0.3:" + w.plain.Port() + "/page"
	if body, err := clientGet(t, c, plain); err != nil || body != "plain" {
		t.Fatalf("GET %s = %q, %v", plain, body, err)
	}
	f := fetch.New(w.options(w.always(), nil))
	defer f.Close()
	if _, err := f.Fetch(context.Background(), fetch.Request{URL: target}, memory.New(memory.Options{})); err != nil {
		t.Fatalf("Fetch through the proxy: %v", err)
	}
	want := []string{
		"CONNECT 127.0.0.3:" + w.securePort() + " HTTP/1.1",
		"GET " + plain + " HTTP/1.1",
		"CONNECT 127.0.0.3:" + w.securePort() + " HTTP/1.1",
	}
	if got := w.proxy.Requests(); !slices.Equal(got, want) {
		t.Fatalf("the proxy saw %q, want %q", got, want)
	}
	if w.plain.Count() != 1 {
		t.Fatalf("the plain origin saw %d requests, want 1", w.plain.Count())
	}
}

// TestProxyFromEnvironment: HTTPS_PROXY chooses the proxy for an https
// target named by a name, and the tunnel goes to its judged address.
func TestProxyFromEnvironment(t *testing.T) {
	w := newProxyWorld(t)
	t.Setenv("HTTPS_PROXY", w.proxy.URL.String())
	t.Setenv("HTTP_PROXY", "")
	t.Setenv("NO_PROXY", "")
	p := fetch.EnvironmentProxy([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")})
	if p == nil {
		t.Fatal("EnvironmentProxy returned nil with HTTPS_PROXY set")
	}
	c := fetch.NewClient(w.options(p, nil))
	if body, err := clientGet(t, c, "https://example.com:"+w.securePort()+"/"); err != nil || body != "secure" {
		t.Fatalf("GET = %q, %v", body, err)
	}
	if got := w.proxy.Requests(); len(got) != 1 || got[0] != "CONNECT 127.0.0.3:"+w.securePort()+" HTTP/1.1" {
		t.Fatalf("the proxy saw %q", got)
	}
}

// TestProxyMustBeAllowed: a proxy outside Proxy.Allow is never connected
// to, even on loopback.
func TestProxyMustBeAllowed(t *testing.T) {
	w := newProxyWorld(t)
	p := w.always()
	p.Allow = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	c := fetch.NewClient(w.options(p, nil))
	for _, target := range []string{"https://example.com:" + w.securePort() + "/", "http://127.0.0.3:" + w.plain.Port() + "/"} {
		if _, err := clientGet(t, c, target); !errors.Is(err, fetch.ErrProxy) {
			t.Errorf("GET %s through a proxy not allowed: err = %v, want ErrProxy", target, err)
		}
	}
	if n := w.proxy.Connections(); n != 0 {
		t.Fatalf("the proxy saw %d connections", n)
	}
}

// TestProxySSRFVectors: every destination the guard's own vectors refuse
// is refused through the proxy too, for http and https, before the proxy
// is asked: it logs no request and the tripwire (127.0.0.1, on the port
// each vector is sent to) sees no connection.
func TestProxySSRFVectors(t *testing.T) {
	w := newProxyWorld(t)
	c := fetch.NewClient(w.options(w.always(), nil))
	_, port, _ := net.SplitHostPort(w.tripwire.Addr().String())
	n := 0
	for _, v := range ssrfcases.Vectors() {
		if v.Allow != "" || v.Want == ssrfcases.Pass {
			continue
		}
		for _, scheme := range []string{"http", "https"} {
			u, err := url.Parse(v.URL)
			if err != nil {
				t.Fatal(err)
			}
			u.Scheme, u.Host = scheme, net.JoinHostPort(u.Hostname(), port)
			_, err = clientGet(t, c, u.String())
			var ok bool
			switch v.Want {
			case ssrfcases.Refused:
				ok = errors.Is(err, guard.ErrRefused)
			case ssrfcases.Unresolved:
				ok = errors.Is(err, guard.ErrResolve)
			case ssrfcases.Invalid:
				ok = err != nil && !errors.Is(err, guard.ErrRefused)
			}
			if !ok {
				t.Errorf("%s (%s): err = %v", v.Name, u, err)
			}
			n++
		}
	}
	if n < 100 {
		t.Errorf("only %d vectors ran", n)
	}
	if got := w.proxy.Requests(); len(got) != 0 {
		t.Errorf("the proxy was asked for %q", got)
	}
	if hits := w.tripwire.Hits(); hits != 0 {
		t.Errorf("%d connections reached the tripwire", hits)
	}
}

// rebinding answers a name with the origin's address on its first lookup
// and with the tripwire's after: a name that changes between the check
// and the proxy's turn.
type rebinding struct {
	lookups atomic.Int32
	table   hosts.Resolver
}

func (r *rebinding) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if host == "rebind.test" {
		if r.lookups.Add(1) == 1 {
			return []netip.Addr{netip.MustParseAddr("127.0.0.3")}, nil
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	return r.table.LookupNetIP(ctx, network, host)
}

// TestProxyJudgesAtItsTurn: the target is judged again when the proxy is
// about to be asked, so a name rebound after the first check is refused
// and no tunnel or forwarded request is sent for it.
func TestProxyJudgesAtItsTurn(t *testing.T) {
	for _, scheme := range []string{"https", "http"} {
		t.Run(scheme, func(t *testing.T) {
			w := newProxyWorld(t)
			_, port, _ := net.SplitHostPort(w.tripwire.Addr().String())
			r := &rebinding{table: hosts.Resolver{Table: w.table}}
			c := fetch.NewClient(w.options(w.always(), r))
			_, err := clientGet(t, c, scheme+"://rebind.test:"+port+"/")
			if !errors.Is(err, guard.ErrRefused) {
				t.Fatalf("err = %v, want a refusal", err)
			}
			if r.lookups.Load() < 2 {
				t.Fatalf("the name was looked up %d times", r.lookups.Load())
			}
			if got := w.proxy.Requests(); len(got) != 0 {
				t.Errorf("the proxy was asked for %q", got)
			}
			if hits := w.tripwire.Hits(); hits != 0 {
				t.Errorf("%d connections reached the tripwire", hits)
			}
			if !strings.Contains(err.Error(), "rebind.test") {
				t.Errorf("the error does not name the host: %v", err)
			}
		})
	}
}
