// Package hosts answers host-name lookups from a fixed table, like curl's
// --resolve: the worker's REPLICATOR_RESOLVE (docs/settings.md) and the
// names tests give their origins. The guard still judges every address a
// table answers. Standard library and guard only.
package hosts

import (
	"context"
	"net"
	"net/netip"
	"strings"

	"github.com/replicator-go/replicator/guard"
)

// Resolver answers lookups from Table and implements guard.Resolver. A
// Resolver must not be modified once in use; reading it is safe for
// concurrent use.
type Resolver struct {
	// Table maps a lower-cased host name, without trailing dot, to its
	// addresses in answer order. A key "*.suffix" answers for every name
	// under suffix (not suffix itself) that has no entry of its own; the
	// longest such suffix wins.
	Table map[string][]netip.Addr
	// Fallback answers names Table does not know; nil means such names fail
	// with a not-found *net.DNSError, so a test never reaches real DNS.
	Fallback guard.Resolver
}

// LookupNetIP implements guard.Resolver. Names are matched
// case-insensitively and without a trailing dot. network "ip4" and "ip6"
// keep only that family's answers; "ip" (or anything else) keeps all.
func (r Resolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	addrs, ok := r.lookup(Name(host))
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

// lookup finds name's entry: its own, else the wildcard of its nearest
// parent domain.
func (r Resolver) lookup(name string) ([]netip.Addr, bool) {
	if addrs, ok := r.Table[name]; ok {
		return addrs, true
	}
	for rest := name; ; {
		_, parent, found := strings.Cut(rest, ".")
		if !found || parent == "" {
			return nil, false
		}
		if addrs, ok := r.Table["*."+parent]; ok {
			return addrs, true
		}
		rest = parent
	}
}

// Name is host as a Table key: lower-cased, without a trailing dot.
func Name(host string) string {
	return strings.TrimSuffix(strings.ToLower(host), ".")
}
