package fetch

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"time"

	"github.com/replicator-go/replicator/guard"
)

// MaxIdleConns is how many idle connections a Fetcher keeps for reuse,
// over all hosts (at most 4 per host, each for up to 90 s). With its
// requests in flight they bound the sockets it holds open.
const MaxIdleConns = 4096

// FitOpenFiles splits the descriptors left by maxOpenFiles once each of
// maxInFlight requests has its connection (Options.MaxOpenFiles): half to
// bodies streaming to the sink at once, at least one and at most one per
// request, the rest to idle connections, at most MaxIdleConns. A limit
// of maxInFlight or less cannot be met: one body still streams at a
// time, with no idle connection.
func FitOpenFiles(maxOpenFiles, maxInFlight int) (storing, idle int) {
	left := maxOpenFiles - maxInFlight
	storing = min(max(left/2, 1), maxInFlight)
	idle = min(max(left-storing, 0), MaxIdleConns)
	return storing, idle
}

// newTransport builds the one connection pool a Fetcher uses. Every
// connection is dialed through the guard, so the address actually dialed is
// judged (closing DNS rebinding). Environment proxies are never used: a
// proxy would dial on our behalf, out of the guard's sight. Connections
// are wrapped to report when a request's bytes have left (departureConn). Timeouts are
// per fetch and per operation (the watchdog), not per transport. Compression is the
// fetcher's own (see hopHeader and decoder): net/http would decode only
// the gzip it asked for itself. It keeps up to idle idle connections; with
// none, connections are closed after their response (net/http reads a
// MaxIdleConns of 0 as no bound).
func newTransport(g *guard.Guard, tlsConfig *tls.Config, idle int) *http.Transport {
	if tlsConfig == nil {
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	} else {
		tlsConfig = tlsConfig.Clone()
	}
	return &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
			c, err := g.DialContext(ctx, network, address)
			if err != nil {
				return nil, err
			}
			return &departureConn{Conn: c}, nil
		},
		TLSClientConfig:        tlsConfig,
		DisableCompression:     true,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           idle,
		DisableKeepAlives:      idle == 0,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        90 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 1 << 20,
	}
}
