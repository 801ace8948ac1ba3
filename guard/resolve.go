package guard

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"unicode"
)

// StaticResolver answers lookups from a fixed table, like curl's --resolve:
// for tests and REPLICATOR_RESOLVE. The guard still judges every address it
// answers. A StaticResolver must not be modified once in use; reading it is
// safe for concurrent use.
type StaticResolver struct {
	// Hosts maps a lower-cased host name, without trailing dot, to its
	// addresses in answer order.
	Hosts map[string][]netip.Addr
	// Fallback answers names Hosts does not know; nil means such names fail
	// with a not-found *net.DNSError, so a test never reaches real DNS.
	Fallback Resolver
}

// LookupNetIP implements Resolver. Names are matched case-insensitively and
// without a trailing dot. network "ip4" and "ip6" keep only that family's
// answers; "ip" (or anything else) keeps all.
func (r StaticResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	addrs, ok := r.Hosts[name]
	if !ok {
		if r.Fallback != nil {
			return r.Fallback.LookupNetIP(ctx, network, host)
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		switch {
		case network == "ip4" && !a.Unmap().Is4():
		case network == "ip6" && (!a.Is6() || a.Is4In6()):
		default:
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return out, nil
}

// splitList splits on commas and white space, dropping empty items.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
}

// ParseResolve parses REPLICATOR_RESOLVE: comma- (or space-) separated
// host=ip pairs. A host given more than once answers with each address, in
// the order given; host names are lower-cased and lose a trailing dot; an
// IPv6 address may be bracketed. An empty string gives an empty resolver.
// The error names the first bad item. The result has no Fallback; set one to
// pass unknown names to another resolver.
func ParseResolve(s string) (StaticResolver, error) {
	r := StaticResolver{Hosts: map[string][]netip.Addr{}}
	for _, item := range splitList(s) {
		host, ip, ok := strings.Cut(item, "=")
		host = strings.TrimSuffix(strings.ToLower(host), ".")
		if !ok || host == "" {
			return StaticResolver{}, fmt.Errorf("guard: resolve entry %q: want host=ip", item)
		}
		if len(ip) >= 2 && ip[0] == '[' && ip[len(ip)-1] == ']' {
			ip = ip[1 : len(ip)-1]
		}
		a, err := netip.ParseAddr(ip)
		if err != nil {
			return StaticResolver{}, fmt.Errorf("guard: resolve entry %q: %q is not an IP address", item, ip)
		}
		r.Hosts[host] = append(r.Hosts[host], a)
	}
	return r, nil
}

// ParseCIDRs parses an allow list (REPLICATOR_ALLOW_CIDRS): prefixes
// separated by commas or white space. A bare address means that one address
// (/32 or /128); prefixes are masked ("10.1.2.3/8" means 10.0.0.0/8). Zones
// are refused. An empty string gives nil. The error names the first bad item.
func ParseCIDRs(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, item := range splitList(s) {
		var p netip.Prefix
		if strings.Contains(item, "/") {
			var err error
			p, err = netip.ParsePrefix(item)
			if err != nil {
				return nil, fmt.Errorf("guard: allow-list entry %q is not a CIDR prefix", item)
			}
		} else {
			a, err := netip.ParseAddr(item)
			if err != nil || a.Zone() != "" {
				return nil, fmt.Errorf("guard: allow-list entry %q is not an IP address or CIDR prefix", item)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
