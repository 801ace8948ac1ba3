package fetch

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/http/httpproxy"

	"github.com/replicator-go/replicator/guard"
)

// ErrProxy means the egress proxy could not be used: its address is not
// in Proxy.Allow, it cannot be reached, or it refused to open a tunnel.
// Nothing reached the origin. The underlying error is wrapped too.
var ErrProxy = errors.New("fetch: egress proxy failed")

// Proxy sends requests through HTTP egress proxies (docs/security.md,
// Egress proxies). The destination guard still judges every target: before
// anything is sent, its name is resolved and every address judged. An
// https target is reached through a CONNECT tunnel opened to the judged
// address, never to a name the proxy would resolve again; TLS is verified
// against the name. An http target is judged the same way, then forwarded
// to the proxy by name, as a proxy forwards plain HTTP.
type Proxy struct {
	// For returns the proxy for a target URL, nil for a direct connection.
	// A proxy URL must be http://host[:port], with optional userinfo sent
	// as Proxy-Authorization.
	For func(target *url.URL) (*url.URL, error)
	// Allow lists the prefixes every address of a proxy must lie in. It
	// is the only way a proxy is allowed, public or private: an empty Allow
	// refuses every proxy. It does not loosen the guard for targets.
	Allow []netip.Prefix
	// Resolver resolves a proxy's host name; nil means net.DefaultResolver.
	Resolver guard.Resolver
}

// EnvironmentProxy returns a Proxy chosen by HTTP_PROXY, HTTPS_PROXY and
// NO_PROXY (or their lower-case forms), read now, as net/http reads them:
// requests to localhost and loopback literals go direct. Every proxy named
// must lie in allow. It returns nil when neither HTTP_PROXY nor
// HTTPS_PROXY is set.
func EnvironmentProxy(allow []netip.Prefix) *Proxy {
	cfg := httpproxy.FromEnvironment()
	if cfg.HTTPProxy == "" && cfg.HTTPSProxy == "" {
		return nil
	}
	return &Proxy{For: cfg.ProxyFunc(), Allow: allow}
}

// proxyRoute is how a Fetcher's transport reaches targets through a Proxy.
type proxyRoute struct {
	p     *Proxy
	guard *guard.Guard
	// transport is the one these hooks serve; its TLS configuration is read
	// once it has been completed for HTTP/2.
	transport *http.Transport
	// named holds the proxies forward chose, by proxyAddr, so the dial
	// knows an address as a proxy's.
	named sync.Map
}

// forward is http.Transport.Proxy: it picks the proxy for an http target,
// judging the target first. An https target returns nil here: dialTLS
// opens its tunnel itself, to the judged address.
func (r *proxyRoute) forward(req *http.Request) (*url.URL, error) {
	if req.URL.Scheme != "http" {
		return nil, nil
	}
	proxy, err := r.choose(req.URL)
	if proxy == nil || err != nil {
		return nil, err
	}
	if _, err := r.guard.CheckHost(req.Context(), req.URL.Hostname()); err != nil {
		return nil, err
	}
	r.named.Store(proxyAddr(proxy), proxy)
	return proxy, nil
}

// choose asks Proxy.For about target and checks the answer's form.
func (r *proxyRoute) choose(target *url.URL) (*url.URL, error) {
	proxy, err := r.p.For(target)
	if proxy == nil || err != nil {
		if err != nil {
			err = fmt.Errorf("%w: choosing the proxy: %w", ErrProxy, err)
		}
		return nil, err
	}
	if proxy.Scheme != "http" || proxy.Hostname() == "" {
		return nil, fmt.Errorf("%w: proxy %s is not http://host[:port]", ErrProxy, shown(proxy))
	}
	return proxy, nil
}

// isProxy reports whether address (host:port, as the transport dials it)
// is a proxy forward named: the transport dials it to forward a request.
func (r *proxyRoute) isProxy(address string) (*url.URL, bool) {
	p, ok := r.named.Load(strings.ToLower(address))
	if !ok {
		return nil, false
	}
	return p.(*url.URL), true
}

// proxyAddr is the address the transport dials for proxy.
func proxyAddr(proxy *url.URL) string {
	return strings.ToLower(net.JoinHostPort(proxy.Hostname(), proxyPort(proxy)))
}

func proxyPort(p *url.URL) string {
	if port := p.Port(); port != "" {
		return port
	}
	return "80"
}

// dialProxy connects to proxy, every address of which must lie in
// Proxy.Allow; the socket's address is judged again at connect time.
func (r *proxyRoute) dialProxy(ctx context.Context, proxy *url.URL) (net.Conn, error) {
	host := proxy.Hostname()
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a.Unmap()}
	} else {
		var resolver guard.Resolver = net.DefaultResolver
		if r.p.Resolver != nil {
			resolver = r.p.Resolver
		}
		found, err := resolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, fmt.Errorf("%w: resolving %s: %w", ErrProxy, host, err)
		}
		for _, a := range found {
			addrs = append(addrs, a.Unmap())
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%w: %s has no address", ErrProxy, host)
	}
	for _, a := range addrs {
		if !r.allowed(a) {
			return nil, fmt.Errorf("%w: proxy %s at %s is not in the proxies allowed", ErrProxy, host, a)
		}
	}
	d := net.Dialer{Control: func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil || !r.allowed(ap.Addr().Unmap()) {
			return fmt.Errorf("%w: proxy address %s is not in the proxies allowed", ErrProxy, address)
		}
		return nil
	}}
	var first error
	for _, a := range addrs {
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(a.String(), proxyPort(proxy)))
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return nil, fmt.Errorf("%w: %w", ErrProxy, first)
}

func (r *proxyRoute) allowed(a netip.Addr) bool {
	a = a.WithZone("")
	for _, p := range r.p.Allow {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// dialTLS is http.Transport.DialTLSContext once a Proxy is set: an https
// target For routes through a proxy is reached through a tunnel to the
// address the guard judged, the others directly through the guard. The
// connection is returned before its handshake, which the transport runs
// (and traces) itself.
func (r *proxyRoute) dialTLS(ctx context.Context, network, address string, direct func(context.Context, string, string) (net.Conn, error)) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	proxy, err := r.choose(&url.URL{Scheme: "https", Host: address})
	if err != nil {
		return nil, err
	}
	var conn net.Conn
	if proxy == nil {
		conn, err = direct(ctx, network, address)
	} else {
		conn, err = r.tunnel(ctx, proxy, host, port)
	}
	if err != nil {
		return nil, err
	}
	cfg := r.transport.TLSClientConfig.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	return tls.Client(conn, cfg), nil
}

// tunnel judges host, then asks proxy for a tunnel to each judged address
// in turn until one opens. Nothing is sent to the proxy for a host the
// guard refuses.
func (r *proxyRoute) tunnel(ctx context.Context, proxy *url.URL, host, port string) (net.Conn, error) {
	addrs, err := r.guard.CheckHost(ctx, host)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: err}
	}
	var first error
	for _, a := range addrs {
		conn, err := r.connect(ctx, proxy, a.WithZone(""), port)
		if err == nil {
			return &departureConn{Conn: conn}, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return nil, first
}

// connect opens one CONNECT tunnel through proxy to a:port.
func (r *proxyRoute) connect(ctx context.Context, proxy *url.URL, a netip.Addr, port string) (net.Conn, error) {
	if err := r.guard.CheckAddr(a); err != nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: err}
	}
	conn, err := r.dialProxy(ctx, proxy)
	if err != nil {
		return nil, err
	}
	target := net.JoinHostPort(a.String(), port)
	req := &http.Request{
		Method: http.MethodConnect,
		URL:    &url.URL{Opaque: target},
		Host:   target,
		Header: http.Header{},
	}
	if u := proxy.User; u != nil {
		pw, _ := u.Password()
		req.Header.Set("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+pw)))
	}
	// The exchange ends with ctx: the socket's deadline is moved to now.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	var resp *http.Response
	if err = req.Write(conn); err == nil {
		// A proxy sends nothing after its answer until the client speaks,
		// so the reader holds no byte of the tunnel.
		resp, err = http.ReadResponse(bufio.NewReader(conn), req)
	}
	if err != nil {
		conn.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: CONNECT %s: %w", ErrProxy, target, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		conn.Close()
		return nil, fmt.Errorf("%w: CONNECT %s answered %s", ErrProxy, target, resp.Status)
	}
	return conn, nil
}
