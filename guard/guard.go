package guard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
)

// ErrRefused is wrapped by every destination refusal (a *RefusedError); the
// fetcher maps it to the destination_refused reason. It survives the
// wrapping net and net/http add around a dial error.
var ErrRefused = errors.New("guard: destination refused")

// ErrResolve is wrapped when a host name cannot be resolved. It is not a
// refusal: DNS trouble is a transient network error for the fetcher, while
// ErrRefused is permanent. Tell them apart with errors.Is.
var ErrResolve = errors.New("guard: cannot resolve host")

// RefusedError says which destination was refused and why.
// It unwraps to ErrRefused.
type RefusedError struct {
	// Host is the host as it was asked for: a name, an IP literal in the
	// spelling given, or the ip:port being dialed. It may be "".
	Host string
	// Addr is the address judged (invalid for refusals that are not about
	// an address, such as an empty host or a non-IP network).
	Addr netip.Addr
	// Range names the deny entry and its RFC, e.g.
	// "127.0.0.0/8 loopback (RFC 1122)"; for an address embedding an IPv4
	// it also names the embedding.
	Range string
}

// Error names the refused address and the deny entry it falls in.
func (e *RefusedError) Error() string {
	msg := ErrRefused.Error() + ": "
	switch {
	case e.Addr.IsValid() && e.Host != "" && e.Host != e.Addr.String():
		msg += fmt.Sprintf("%q (%s)", e.Host, e.Addr)
	case e.Addr.IsValid():
		msg += e.Addr.String()
	default:
		msg += fmt.Sprintf("%q", e.Host)
	}
	return msg + " is in " + e.Range
}

// Unwrap returns ErrRefused.
func (e *RefusedError) Unwrap() error { return ErrRefused }

// Resolver looks host names up. *net.Resolver satisfies it; a fixed table
// (tests, the worker's REPLICATOR_RESOLVE) can stand in for DNS.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options configure a Guard. The zero value is the strictest guard, using
// net.DefaultResolver.
type Options struct {
	// Allow lists prefixes that pass even inside a deny range (operators'
	// private origins, tests). It is the only thing that loosens the guard.
	// IPv4-mapped IPv6 prefixes (::ffff:a.b.c.d/n, n ≥ 96) also allow the
	// plain IPv4 prefix.
	Allow []netip.Prefix
	// Deny lists prefixes refused on top of the guard's own rules, even
	// inside Allow (an operator's deny list). IPv4-mapped and other
	// embedded IPv4 addresses are judged by their IPv4 too.
	Deny []netip.Prefix
	// Resolver resolves host names; nil means net.DefaultResolver.
	Resolver Resolver
}

// Guard decides whether a destination may be contacted (docs/security.md, Destinations). A Guard is
// immutable and safe for concurrent use. The zero Guard allows nothing extra
// and resolves with net.DefaultResolver.
type Guard struct {
	allow    []netip.Prefix
	deny     []netip.Prefix
	resolver Resolver
}

// New returns a Guard for opts. opts.Allow is copied.
func New(opts Options) *Guard {
	g := &Guard{resolver: opts.Resolver}
	for _, p := range opts.Allow {
		if !p.IsValid() {
			continue
		}
		p = p.Masked()
		g.allow = append(g.allow, p)
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			g.allow = append(g.allow, netip.PrefixFrom(a.Unmap(), p.Bits()-96).Masked())
		}
	}
	for _, p := range opts.Deny {
		if p.IsValid() {
			g.deny = append(g.deny, p.Masked())
		}
	}
	return g
}

// denyListed reports the Deny prefix holding a, if any.
func (g *Guard) denyListed(a netip.Addr) (netip.Prefix, bool) {
	for _, p := range g.deny {
		if p.Contains(a) {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

func (g *Guard) lookup() Resolver {
	if g.resolver == nil {
		return net.DefaultResolver
	}
	return g.resolver
}

func (g *Guard) allowed(a netip.Addr) bool {
	for _, p := range g.allow {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// CheckAddr judges one address and returns nil or a *RefusedError.
//
// Order: the zone is stripped; an address inside Options.Deny (or whose
// embedded IPv4 is) is refused; an address inside Options.Allow passes; an
// IPv6 address embedding an IPv4 (IPv4-mapped, NAT64, 6to4, Teredo) is
// judged by that IPv4 alone — allowed if Allow contains it, refused if the
// IPv4 deny table does, passed otherwise; any other address is refused if
// the deny table of its family contains it. The zero Addr is refused.
func (g *Guard) CheckAddr(a netip.Addr) error {
	return g.checkAddr("", a)
}

func (g *Guard) checkAddr(host string, a netip.Addr) error {
	if !a.IsValid() {
		return &RefusedError{Host: host, Range: "no valid address"}
	}
	a = a.WithZone("")
	if p, bad := g.denyListed(a); bad {
		return &RefusedError{Host: host, Addr: a, Range: "operator deny list " + p.String()}
	}
	if v4, _, ok := embeddedIPv4(a); ok {
		if p, bad := g.denyListed(v4); bad {
			return &RefusedError{Host: host, Addr: a, Range: "operator deny list " + p.String()}
		}
	}
	if g.allowed(a) {
		return nil
	}
	if v4, via, ok := embeddedIPv4(a); ok {
		if g.allowed(v4) {
			return nil
		}
		if label, bad := denied(v4); bad {
			return &RefusedError{Host: host, Addr: a, Range: label + ", carried by " + via}
		}
		return nil
	}
	if label, bad := denied(a); bad {
		return &RefusedError{Host: host, Addr: a, Range: label}
	}
	return nil
}

// CheckHost judges a URL host (no port, brackets optional). The host is
// first converted to the ASCII name net/http dials (ASCIIHost), so what is
// judged is what will be dialed. An IP literal in any spelling
// ParseIPLiteral accepts is judged as the address it means. A name is
// resolved through the Resolver and every address is judged: one denied
// address refuses the host. On success it returns the addresses to dial
// (IPv4-mapped answers unmapped, zones kept).
//
// Errors: a *RefusedError (errors.Is ErrRefused) for a refusal, including an
// empty host; an error wrapping ErrInvalidHost for a host with no ASCII
// form; an error wrapping ErrResolve and the resolver's error when the
// lookup fails or answers nothing; ctx.Err() when ctx is done.
func (g *Guard) CheckHost(ctx context.Context, host string) ([]netip.Addr, error) {
	if host == "" {
		return nil, &RefusedError{Range: "empty host"}
	}
	name, err := ASCIIHost(host)
	if err != nil {
		return nil, err
	}
	if a, ok := ParseIPLiteral(name); ok {
		if err := g.checkAddr(host, a); err != nil {
			return nil, err
		}
		return []netip.Addr{unmap(a)}, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	addrs, err := g.lookup().LookupNetIP(ctx, "ip", name)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, fmt.Errorf("%w %s: %w", ErrResolve, shownHost(host, name), err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%w %s: no addresses", ErrResolve, shownHost(host, name))
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if err := g.checkAddr(host, a); err != nil {
			return nil, err
		}
		a = unmap(a)
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out, nil
}

// shownHost names a host in an error: as asked for, plus the name looked
// up when conversion changed it.
func shownHost(host, name string) string {
	if host == name {
		return fmt.Sprintf("%q", host)
	}
	return fmt.Sprintf("%q (%s)", host, name)
}

// unmap turns an IPv4-mapped answer (net.Resolver returns IPv4 that way) back
// into IPv4, keeping any zone off an IPv4 address.
func unmap(a netip.Addr) netip.Addr {
	if a.Is4In6() {
		return a.Unmap()
	}
	return a
}

// CheckURL runs CheckHost on u.Hostname(). It judges only the destination;
// scheme and syntax are the caller's rules. A nil u is refused.
func (g *Guard) CheckURL(ctx context.Context, u *url.URL) error {
	if u == nil {
		return &RefusedError{Range: "no URL"}
	}
	_, err := g.CheckHost(ctx, u.Hostname())
	return err
}
