package main

import (
	"fmt"
	"net/netip"
	"strings"
	"unicode"

	"github.com/replicator-go/replicator/internal/hosts"
)

// splitList splits on commas and white space, dropping empty items.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
}

// parseResolve parses REPLICATOR_RESOLVE (and fetch --resolve): comma- (or
// space-) separated host=ip pairs. A host given more than once answers with
// each address, in the order given; host names are lower-cased and lose a
// trailing dot; an IPv6 address may be bracketed. A host "*.suffix" answers
// for every name under suffix (a bench's thousands of hosts in one entry);
// "*" anywhere else is refused. An empty string gives an
// empty table. The error names the first bad item. The result has no
// Fallback; set one to pass unknown names to another resolver.
func parseResolve(s string) (hosts.Resolver, error) {
	r := hosts.Resolver{Table: map[string][]netip.Addr{}}
	for _, item := range splitList(s) {
		host, ip, ok := strings.Cut(item, "=")
		host = hosts.Name(host)
		if !ok || host == "" {
			return hosts.Resolver{}, fmt.Errorf("resolve entry %q: want host=ip", item)
		}
		if strings.Contains(strings.TrimPrefix(host, "*."), "*") || host == "*." {
			return hosts.Resolver{}, fmt.Errorf("resolve entry %q: a wildcard is a leading \"*.\" before a domain", item)
		}
		if len(ip) >= 2 && ip[0] == '[' && ip[len(ip)-1] == ']' {
			ip = ip[1 : len(ip)-1]
		}
		a, err := netip.ParseAddr(ip)
		if err != nil {
			return hosts.Resolver{}, fmt.Errorf("resolve entry %q: %q is not an IP address", item, ip)
		}
		r.Table[host] = append(r.Table[host], a)
	}
	return r, nil
}

// parseCIDRs parses an allow list (REPLICATOR_ALLOW_CIDRS, fetch
// --allow-cidr): prefixes separated by commas or white space. A bare address
// means that one address (/32 or /128); prefixes are masked ("10.1.2.3/8"
// means 10.0.0.0/8). Zones are refused. An empty string gives nil. The
// error names the first bad item.
func parseCIDRs(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, item := range splitList(s) {
		var p netip.Prefix
		if strings.Contains(item, "/") {
			var err error
			p, err = netip.ParsePrefix(item)
			if err != nil {
				return nil, fmt.Errorf("allow-list entry %q is not a CIDR prefix", item)
			}
		} else {
			a, err := netip.ParseAddr(item)
			if err != nil || a.Zone() != "" {
				return nil, fmt.Errorf("allow-list entry %q is not an IP address or CIDR prefix", item)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
