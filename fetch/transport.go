package fetch

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"time"

	"github.com/replicator-go/replicator/guard"
)

// maxIdleConns is how many idle connections a Fetcher keeps for reuse,
// over all hosts, each for up to 90 s, when Options.MaxOpenFiles does not
// bound it; one host keeps at most as many as Options.MaxInFlight lets be
// in flight. With its requests in flight they bound the sockets it holds
// open.
const maxIdleConns = 4096

// OpenFiles is how a Fetcher built with o shares the descriptors it holds
// besides a connection per request in flight: at most storing bodies
// streaming to the sink at once (0: as many as are in flight), and at most
// idle connections kept for reuse.
//
// Under MaxOpenFiles (with MaxInFlight) what is left once each request has
// its connection goes half to bodies streaming to the sink, at least one
// and at most one per request, the rest to idle connections, at most the
// pool a Fetcher keeps without it. A MaxOpenFiles of MaxInFlight or less
// cannot be met: one body still streams at a time, with no idle
// connection.
func (o Options) OpenFiles() (storing, idle int) {
	if o.MaxInFlight <= 0 || o.MaxOpenFiles <= 0 {
		return 0, maxIdleConns
	}
	left := o.MaxOpenFiles - o.MaxInFlight
	storing = min(max(left/2, 1), o.MaxInFlight)
	idle = min(max(left-storing, 0), maxIdleConns)
	return storing, idle
}

// newTransport builds the one connection pool of a Fetcher, and so of a
// Transport, which is built on one. Every connection to a target is dialed
// through the guard, so the address actually dialed is judged (closing DNS
// rebinding). Environment proxies are used only through a Proxy: a proxy
// dials on our behalf, so the target is judged before the proxy is asked
// and a tunnel goes to the judged address (proxyRoute). Connections are
// wrapped to report when a request's bytes have left (departureConn).
// Timeouts are per fetch and per operation (the watchdog), not per
// transport. Compression is the fetcher's own (see hopHeader and decoder):
// net/http would decode only the gzip it asked for itself.
//
// It keeps up to idle idle connections; with none, connections are closed
// after their response (net/http reads a MaxIdleConns of 0 as no bound).
// perHost bounds those of one host: as many as the pacer lets be in
// flight to it, so that no request the pacer let through reconnects
// because its connection had no room to wait idle.
func newTransport(g *guard.Guard, tlsConfig *tls.Config, idle, perHost int, proxy *Proxy) *http.Transport {
	if tlsConfig == nil {
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	} else {
		tlsConfig = tlsConfig.Clone()
	}
	direct := func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := g.DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		return &departureConn{Conn: c}, nil
	}
	t := &http.Transport{
		DialContext:            direct,
		TLSClientConfig:        tlsConfig,
		DisableCompression:     true,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           idle,
		DisableKeepAlives:      idle == 0,
		MaxIdleConnsPerHost:    max(min(perHost, idle), 1),
		IdleConnTimeout:        90 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 1 << 20,
	}
	if proxy != nil && proxy.For != nil {
		r := &proxyRoute{p: proxy, guard: g, transport: t}
		t.Proxy = r.forward
		t.DialContext = func(ctx context.Context, network, address string) (net.Conn, error) {
			if p, ok := r.isProxy(address); ok {
				c, err := r.dialProxy(ctx, p)
				if err != nil {
					return nil, err
				}
				return &departureConn{Conn: c}, nil
			}
			return direct(ctx, network, address)
		}
		t.DialTLSContext = func(ctx context.Context, network, address string) (net.Conn, error) {
			return r.dialTLS(ctx, network, address, direct)
		}
		// net/http offers HTTP/2 through its own TLS dial only.
		if len(tlsConfig.NextProtos) == 0 {
			tlsConfig.NextProtos = []string{"h2", "http/1.1"}
		}
	}
	return t
}
