package guard_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/internal/hosts"
)

// origin is a real HTTP server on 127.0.0.1 that counts the requests that
// reached it.
type origin struct {
	*httptest.Server
	mu   sync.Mutex
	hits int
}

func newOrigin(t *testing.T) *origin {
	t.Helper()
	o := &origin{}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.hits++
		o.mu.Unlock()
		io.WriteString(w, "hello")
	}))
	t.Cleanup(o.Close)
	return o
}

func (o *origin) Hits() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.hits
}

func (o *origin) port() string { return strconv.Itoa(o.Listener.Addr().(*net.TCPAddr).Port) }

// client is what a fetcher builds: an http.Transport dialing through the guard.
func client(g *guard.Guard) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: g.DialContext, DisableKeepAlives: true}}
}

func get(t *testing.T, c *http.Client, rawURL string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(body) != "hello" {
		return fmt.Errorf("status %d body %q", resp.StatusCode, body)
	}
	return nil
}

func TestHTTPClientThroughDialContext(t *testing.T) {
	o := newOrigin(t)
	resolver := hosts.Resolver{Table: map[string][]netip.Addr{"origin.test": {netip.MustParseAddr("127.0.0.1")}}}
	loopback := prefixes("127.0.0.0/8")
	strict := guard.New(guard.Options{Resolver: resolver})
	allowing := guard.New(guard.Options{Resolver: resolver, Allow: loopback})
	tests := []struct {
		name string
		g    *guard.Guard
		url  string
		want verdict
	}{
		{name: "literal refused", g: strict, url: "http://127.0.0.1:" + o.port() + "/", want: refused},
		{name: "decimal literal refused", g: strict, url: "http://2130706433:" + o.port() + "/", want: refused},
		{name: "name refused", g: strict, url: "http://origin.test:" + o.port() + "/", want: refused},
		{name: "unknown name unresolved", g: strict, url: "http://gone.test:" + o.port() + "/", want: unresolved},
		{name: "literal allowed", g: allowing, url: "http://127.0.0.1:" + o.port() + "/", want: pass},
		{name: "short hex literal allowed", g: allowing, url: "http://0x7f.1:" + o.port() + "/", want: pass},
		{name: "name allowed", g: allowing, url: "http://origin.test:" + o.port() + "/", want: pass},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := o.Hits()
			err := get(t, client(tt.g), tt.url)
			if got := verdictOf(t, err); got != tt.want {
				t.Fatalf("GET %s = %v (%v), want %v", tt.url, got, err, tt.want)
			}
			var ue *url.Error
			if err != nil && !errors.As(err, &ue) {
				t.Errorf("error %T was not wrapped by net/http; the test proves nothing", err)
			}
			wantHits := before
			if tt.want == pass {
				wantHits++
			}
			if o.Hits() != wantHits {
				t.Errorf("origin saw %d requests, want %d", o.Hits(), wantHits)
			}
		})
	}
}

// flipResolver answers with answers[i] on the i-th lookup (the last one
// thereafter): a DNS rebinding attacker.
type flipResolver struct {
	mu      sync.Mutex
	n       int
	answers [][]netip.Addr
}

func (r *flipResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.answers[min(r.n, len(r.answers)-1)]
	r.n++
	return a, nil
}

func TestRebindingRefusedAtDial(t *testing.T) {
	o := newOrigin(t)
	r := &flipResolver{answers: [][]netip.Addr{
		{netip.MustParseAddr("93.184.215.14")},
		{netip.MustParseAddr("127.0.0.1")},
	}}
	g := guard.New(guard.Options{Resolver: r})
	u, _ := url.Parse("http://rebind.test:" + o.port() + "/")
	if err := g.CheckURL(context.Background(), u); err != nil {
		t.Fatalf("CheckURL on the public first answer: %v", err)
	}
	err := get(t, client(g), u.String())
	if !errors.Is(err, guard.ErrRefused) {
		t.Fatalf("GET after rebinding = %v, want a refusal", err)
	}
	if o.Hits() != 0 {
		t.Errorf("the origin on loopback saw %d requests", o.Hits())
	}
}

// A transport that resolves on its own (here: always to the loopback
// origin) while the URL check saw a public answer is still stopped by the
// Control hook on the socket; allowing loopback lets the same dial through.
func TestControlRefusesWhatTheURLCheckDidNotSee(t *testing.T) {
	o := newOrigin(t)
	resolver := hosts.Resolver{Table: map[string][]netip.Addr{"origin.test": {netip.MustParseAddr("93.184.215.14")}}}
	loopback := prefixes("127.0.0.0/8")
	tests := []struct {
		name  string
		allow []netip.Prefix
		want  verdict
	}{
		{name: "nothing loopback allowed", want: refused},
		{name: "loopback allowed", allow: loopback, want: pass},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := guard.New(guard.Options{Resolver: resolver, Allow: tt.allow})
			u, _ := url.Parse("http://origin.test:" + o.port() + "/")
			if err := g.CheckURL(context.Background(), u); err != nil {
				t.Fatalf("CheckURL: %v", err)
			}

			// The bare dialer.
			d := net.Dialer{Control: g.Control}
			conn, err := d.DialContext(context.Background(), "tcp", o.Listener.Addr().String())
			if conn != nil {
				conn.Close()
			}
			if got := verdictOf(t, err); got != tt.want {
				t.Fatalf("dial %s = %v (%v), want %v", o.Listener.Addr(), got, err, tt.want)
			}

			// The same through net/http, with a transport whose own
			// "resolution" sends every name to the loopback origin.
			before := o.Hits()
			c := &http.Client{Transport: &http.Transport{
				DisableKeepAlives: true,
				DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
					return d.DialContext(ctx, network, o.Listener.Addr().String())
				},
			}}
			err = get(t, c, u.String())
			if got := verdictOf(t, err); got != tt.want {
				t.Fatalf("GET = %v (%v), want %v", got, err, tt.want)
			}
			if tt.want == refused && o.Hits() != before {
				t.Error("the origin saw a request the guard refused")
			}
		})
	}
}

func TestControlRefusesOtherNetworks(t *testing.T) {
	g := guard.New(guard.Options{Allow: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}})
	tests := []struct {
		network, address string
		want             verdict
	}{
		{network: "tcp4", address: "8.8.8.8:443", want: pass},
		{network: "udp6", address: "[2606:4700::1111]:443", want: pass},
		{network: "unix", address: "/run/docker.sock", want: refused},
		{network: "ip4:icmp", address: "8.8.8.8", want: refused},
		{network: "tcp", address: "example.com:80", want: refused},
		{network: "tcp6", address: "[::1]:80", want: refused},
		{network: "tcp6", address: "[fe80::1%eth0]:80", want: refused},
	}
	for _, tt := range tests {
		t.Run(tt.network+" "+tt.address, func(t *testing.T) {
			if got := verdictOf(t, g.Control(tt.network, tt.address, nil)); got != tt.want {
				t.Errorf("Control(%s, %s) = %v, want %v", tt.network, tt.address, got, tt.want)
			}
		})
	}
}

func TestDialContext(t *testing.T) {
	o := newOrigin(t)
	// 127.0.0.2 has nothing listening on the origin's port, so the first
	// answer is refused by the kernel and the second connects.
	resolver := hosts.Resolver{Table: map[string][]netip.Addr{
		"multi.test":  {netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.1")},
		"v6only.test": {netip.MustParseAddr("::1")},
	}}
	loopback := prefixes("127.0.0.0/8 ::1/128")
	g := guard.New(guard.Options{Resolver: resolver, Allow: loopback})

	t.Run("falls through to the next address", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := g.DialContext(ctx, "tcp", net.JoinHostPort("multi.test", o.port()))
		if err != nil {
			t.Fatalf("DialContext: %v", err)
		}
		defer conn.Close()
		if got := conn.RemoteAddr().String(); got != "127.0.0.1:"+o.port() {
			t.Errorf("connected to %s", got)
		}
	})
	t.Run("service name port", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := g.DialContext(ctx, "tcp", "127.0.0.1:no-such-service")
		if err == nil || errors.Is(err, guard.ErrRefused) {
			t.Errorf("DialContext with an unknown service = %v, want a plain dial error", err)
		}
	})
	t.Run("tcp4 skips IPv6 answers", func(t *testing.T) {
		_, err := g.DialContext(context.Background(), "tcp4", net.JoinHostPort("v6only.test", o.port()))
		var ae *net.AddrError
		if !errors.As(err, &ae) {
			t.Errorf("DialContext tcp4 to an IPv6-only name = %v, want an address error", err)
		}
	})
	t.Run("udp refused", func(t *testing.T) {
		_, err := g.DialContext(context.Background(), "udp", "127.0.0.1:53")
		if !errors.Is(err, guard.ErrRefused) {
			t.Errorf("DialContext udp = %v, want a refusal", err)
		}
	})
	t.Run("missing port", func(t *testing.T) {
		_, err := g.DialContext(context.Background(), "tcp", "127.0.0.1")
		if err == nil || errors.Is(err, guard.ErrRefused) {
			t.Errorf("DialContext without a port = %v, want a plain error", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := g.DialContext(ctx, "tcp", net.JoinHostPort("multi.test", o.port()))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("DialContext with a cancelled ctx = %v, want context.Canceled", err)
		}
	})
}
