package guard

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"
)

// Control is a net.Dialer Control hook: it judges the exact address a socket
// is about to connect to, after any resolution, so a name that re-resolves
// between the URL check and the dial (DNS rebinding), a redirect hop, or a
// transport that resolves on its own cannot reach a denied address.
//
// Check order:
//
//  1. network must be tcp, tcp4, tcp6, udp, udp4 or udp6 (anything else,
//     such as unix, is refused);
//  2. address must be a numeric ip:port (the dialer always passes one);
//  3. the IP is judged by CheckAddr: zone stripped, Allow, embedded IPv4,
//     deny table.
//
// The raw connection is not touched. Refusals are *RefusedError values;
// net wraps them in a *net.OpError and errors.Is(err, ErrRefused) still holds.
func (g *Guard) Control(network, address string, _ syscall.RawConn) error {
	switch network {
	case "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6":
	default:
		return &RefusedError{Host: address, Range: "network " + strconv.Quote(network) + " (only tcp and udp are dialed)"}
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &RefusedError{Host: address, Range: "an address that is not a numeric ip:port"}
	}
	return g.checkAddr(address, ap.Addr())
}

// DialContext dials address ("host:port") for an http.Transport or any other
// client, refusing denied destinations:
//
//  1. the host is judged by CheckHost: an IP literal in any spelling means
//     that address; a name is resolved through the guard's Resolver and
//     every answer must pass;
//  2. the addresses are dialed in order until one connects, each through a
//     net.Dialer whose Control is g.Control, so the socket's real
//     destination is judged once more at connect time.
//
// network is tcp, tcp4 or tcp6; tcp4 and tcp6 skip answers of the other
// family. The only timeout is ctx's deadline (the caller sets deadlines);
// with several addresses each attempt gets an equal share of what remains,
// at least 2 s, so one black-holed address cannot spend it all.
//
// A refusal satisfies errors.Is(err, ErrRefused), also after net/http wraps
// it; a resolver failure wraps ErrResolve; a done ctx returns ctx.Err().
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, &net.OpError{Op: "dial", Net: network, Err: &RefusedError{
			Host: address, Range: "network " + strconv.Quote(network) + " (only tcp is dialed)"}}
	}
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	port, err := parsePort(ctx, network, portText)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	addrs, err := g.CheckHost(ctx, host)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			return nil, ctxErr
		}
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	return g.dialAddrs(ctx, network, addrs, port)
}

func parsePort(ctx context.Context, network, s string) (uint16, error) {
	if p, err := strconv.ParseUint(s, 10, 16); err == nil {
		return uint16(p), nil
	}
	// A service name ("https"): looked up locally, never a DNS query.
	p, err := net.DefaultResolver.LookupPort(ctx, network, s)
	if err != nil {
		return 0, err
	}
	return uint16(p), nil
}

// minAttempt is the least time one of several addresses gets to connect.
const minAttempt = 2 * time.Second

// dialAddrs connects to the first of addrs that answers, judging each again
// in Control. It is the half of DialContext that tests drive directly to
// prove the Control hook refuses on its own.
func (g *Guard) dialAddrs(ctx context.Context, network string, addrs []netip.Addr, port uint16) (net.Conn, error) {
	var candidates []netip.Addr
	for _, a := range addrs {
		if (network == "tcp4" && !a.Is4()) || (network == "tcp6" && !a.Is6()) {
			continue
		}
		candidates = append(candidates, a)
	}
	if len(candidates) == 0 {
		return nil, &net.OpError{Op: "dial", Net: network, Err: &net.AddrError{Err: "no suitable address", Addr: ""}}
	}
	d := net.Dialer{Control: g.Control}
	var first error
	for i, a := range candidates {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		attempt, cancel := ctx, context.CancelFunc(func() {})
		if deadline, ok := ctx.Deadline(); ok && len(candidates)-i > 1 {
			share := time.Until(deadline) / time.Duration(len(candidates)-i)
			share = max(share, minAttempt)
			attempt, cancel = context.WithTimeout(ctx, share)
		}
		conn, err := d.DialContext(attempt, network, netip.AddrPortFrom(a, port).String())
		cancel()
		if err == nil {
			return conn, nil
		}
		if first == nil {
			first = err
		}
		// A refusal is about this guard, not the network: no later address
		// makes the destination acceptable, and trying them would only hide it.
		if errors.Is(err, ErrRefused) {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, first
}
