package hosts_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/internal/hosts"
)

func TestResolver(t *testing.T) {
	r := hosts.Resolver{Table: map[string][]netip.Addr{
		"dual.test":       {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")},
		"v4.test":         {netip.MustParseAddr("::ffff:10.0.0.1")},
		"*.wild.test":     {netip.MustParseAddr("127.0.0.2")},
		"*.sub.wild.test": {netip.MustParseAddr("127.0.0.3")},
		"own.wild.test":   {netip.MustParseAddr("127.0.0.4")},
	}}
	fallback := hosts.Resolver{Table: map[string][]netip.Addr{"other.test": {netip.MustParseAddr("192.0.2.1")}}}
	withFallback := r
	withFallback.Fallback = fallback
	ctx := context.Background()
	tests := []struct {
		name     string
		resolver hosts.Resolver
		network  string
		host     string
		want     []netip.Addr
		notFound bool
	}{
		{name: "all families", resolver: r, network: "ip", host: "dual.test", want: []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")}},
		{name: "ip4 only", resolver: r, network: "ip4", host: "dual.test", want: []netip.Addr{netip.MustParseAddr("127.0.0.1")}},
		{name: "ip6 only", resolver: r, network: "ip6", host: "dual.test", want: []netip.Addr{netip.MustParseAddr("::1")}},
		{name: "mapped counts as ip4", resolver: r, network: "ip4", host: "v4.test", want: []netip.Addr{netip.MustParseAddr("::ffff:10.0.0.1")}},
		{name: "case and trailing dot", resolver: r, network: "ip", host: "DUAL.Test.", want: []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")}},
		{name: "wildcard", resolver: r, network: "ip", host: "a.wild.test", want: []netip.Addr{netip.MustParseAddr("127.0.0.2")}},
		{name: "wildcard, deeper name", resolver: r, network: "ip", host: "x.y.Wild.Test.", want: []netip.Addr{netip.MustParseAddr("127.0.0.2")}},
		{name: "longest wildcard wins", resolver: r, network: "ip", host: "a.sub.wild.test", want: []netip.Addr{netip.MustParseAddr("127.0.0.3")}},
		{name: "own entry beats wildcard", resolver: r, network: "ip", host: "own.wild.test", want: []netip.Addr{netip.MustParseAddr("127.0.0.4")}},
		{name: "wildcard not for its suffix", resolver: r, network: "ip", host: "wild.test", notFound: true},
		{name: "unknown without fallback", resolver: r, network: "ip", host: "other.test", notFound: true},
		{name: "family filtered to nothing", resolver: r, network: "ip6", host: "v4.test", notFound: true},
		{name: "unknown with fallback", resolver: withFallback, network: "ip", host: "other.test", want: []netip.Addr{netip.MustParseAddr("192.0.2.1")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.resolver.LookupNetIP(ctx, tt.network, tt.host)
			if tt.notFound {
				var dnsErr *net.DNSError
				if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
					t.Fatalf("LookupNetIP error = %v, want a not-found *net.DNSError", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("LookupNetIP: %v", err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("LookupNetIP mismatch (-want +got):\n%s", diff)
			}
		})
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.LookupNetIP(cancelled, "ip", "dual.test"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled LookupNetIP = %v, want context.Canceled", err)
	}
	var _ guard.Resolver = hosts.Resolver{}
}
