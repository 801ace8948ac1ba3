package guard_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/internal/hosts"
	"github.com/replicator-go/replicator/internal/ssrfcases"
)

// testResolver answers the names the vectors use; anything else is not
// found, so no test reaches real DNS.
func testResolver() hosts.Resolver { return ssrfcases.Resolver() }

// prefixes parses a space-separated list of CIDR prefixes.
func prefixes(s string) []netip.Prefix {
	var out []netip.Prefix
	for _, f := range strings.Fields(s) {
		out = append(out, netip.MustParsePrefix(f))
	}
	return out
}

type verdict int

const (
	pass verdict = iota
	refused
	unresolved
	invalid // the host has no ASCII form
)

func (v verdict) String() string { return [...]string{"pass", "refused", "unresolved", "invalid"}[v] }

func verdictOf(t *testing.T, err error) verdict {
	t.Helper()
	switch {
	case err == nil:
		return pass
	case errors.Is(err, guard.ErrRefused) && !errors.Is(err, guard.ErrResolve):
		var re *guard.RefusedError
		if !errors.As(err, &re) || re.Range == "" {
			t.Errorf("refusal %v is not a *RefusedError naming a range", err)
		}
		return refused
	case errors.Is(err, guard.ErrResolve) && !errors.Is(err, guard.ErrRefused):
		return unresolved
	case errors.Is(err, guard.ErrInvalidHost) && !errors.Is(err, guard.ErrRefused) && !errors.Is(err, guard.ErrResolve):
		return invalid
	default:
		t.Fatalf("unexpected error %v", err)
		return -1
	}
}

func TestSSRFVectors(t *testing.T) {
	type vector struct {
		name      string
		url       string
		allow     string
		want      verdict
		wantRange string // checked when set
	}
	var tests []vector
	for _, v := range ssrfcases.Vectors() {
		tests = append(tests, vector{name: v.Name, url: v.URL, allow: v.Allow, want: verdict(v.Want), wantRange: v.WantRange})
	}
	resolver := testResolver()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := guard.New(guard.Options{Allow: prefixes(tt.allow), Resolver: resolver})
			u, err := url.Parse(tt.url)
			if err != nil {
				t.Fatalf("url.Parse(%q): %v", tt.url, err)
			}
			err = g.CheckURL(context.Background(), u)
			if got := verdictOf(t, err); got != tt.want {
				t.Fatalf("CheckURL(%s) = %v (%v), want %v", tt.url, got, err, tt.want)
			}
			if tt.wantRange != "" {
				var re *guard.RefusedError
				errors.As(err, &re)
				if diff := cmp.Diff(tt.wantRange, re.Range); diff != "" {
					t.Errorf("Range mismatch (-want +got):\n%s", diff)
				}
			}
		})
	}
	if len(tests) < 40 {
		t.Errorf("only %d vectors", len(tests))
	}
}

func TestCheckHostAddresses(t *testing.T) {
	resolver := testResolver()
	resolver.Table["dup.test"] = []netip.Addr{
		netip.MustParseAddr("93.184.215.14"), netip.MustParseAddr("::ffff:93.184.215.14"),
		netip.MustParseAddr("2606:4700::1111"),
	}
	g := guard.New(guard.Options{Allow: prefixes("127.0.0.0/8 ::1/128 fe80::/10"), Resolver: resolver})
	tests := []struct {
		host string
		want []netip.Addr
	}{
		{host: "localhost", want: []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")}},
		{host: "mapped.test", want: []netip.Addr{netip.MustParseAddr("127.0.0.1")}},
		{host: "dup.test", want: []netip.Addr{netip.MustParseAddr("93.184.215.14"), netip.MustParseAddr("2606:4700::1111")}},
		{host: "0x7f.1", want: []netip.Addr{netip.MustParseAddr("127.0.0.1")}},
		{host: "::ffff:127.0.0.1", want: []netip.Addr{netip.MustParseAddr("127.0.0.1")}},
		{host: "[fe80::1%25eth0]", want: []netip.Addr{netip.MustParseAddr("fe80::1%eth0")}},
		{host: "fe80::1%eth0", want: []netip.Addr{netip.MustParseAddr("fe80::1%eth0")}},
		{host: "ｌｏｃａｌｈｏｓｔ", want: []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")}},
		{host: "①②⑦.0.0.1", want: []netip.Addr{netip.MustParseAddr("127.0.0.1")}},
		{host: "öffentlich.test", want: []netip.Addr{netip.MustParseAddr("93.184.215.14")}},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			got, err := g.CheckHost(context.Background(), tt.host)
			if err != nil {
				t.Fatalf("CheckHost: %v", err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("CheckHost mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

type errResolver struct {
	addrs []netip.Addr
	err   error
}

func (r errResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return r.addrs, r.err
}

func TestCheckHostErrors(t *testing.T) {
	dnsErr := &net.DNSError{Err: "server misbehaving", Name: "origin.test", IsTemporary: true}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name     string
		resolver guard.Resolver
		ctx      context.Context
		host     string
		wantIs   []error
		wantNot  []error
	}{
		{name: "resolver failure", resolver: errResolver{err: dnsErr}, ctx: context.Background(), host: "origin.test",
			wantIs: []error{guard.ErrResolve, dnsErr}, wantNot: []error{guard.ErrRefused}},
		{name: "empty answer", resolver: errResolver{}, ctx: context.Background(), host: "origin.test",
			wantIs: []error{guard.ErrResolve}, wantNot: []error{guard.ErrRefused}},
		{name: "cancelled", resolver: testResolver(), ctx: cancelled, host: "public.test",
			wantIs: []error{context.Canceled}, wantNot: []error{guard.ErrRefused, guard.ErrResolve}},
		{name: "empty host", resolver: testResolver(), ctx: context.Background(), host: "",
			wantIs: []error{guard.ErrRefused}, wantNot: []error{guard.ErrResolve}},
		{name: "host with no ASCII form", resolver: testResolver(), ctx: context.Background(), host: "bücher-.test",
			wantIs: []error{guard.ErrInvalidHost}, wantNot: []error{guard.ErrRefused, guard.ErrResolve}},
		{name: "host mapping to nothing", resolver: testResolver(), ctx: context.Background(), host: "\u00ad",
			wantIs: []error{guard.ErrInvalidHost}, wantNot: []error{guard.ErrRefused, guard.ErrResolve}},
		{name: "non-ASCII literal with a zone", resolver: testResolver(), ctx: context.Background(), host: "１２７.０.０.１%eth0",
			wantIs: []error{guard.ErrInvalidHost}, wantNot: []error{guard.ErrRefused, guard.ErrResolve}},
		{name: "IDN not found", resolver: testResolver(), ctx: context.Background(), host: "nicht-gefunden-ü.test",
			wantIs: []error{guard.ErrResolve}, wantNot: []error{guard.ErrRefused, guard.ErrInvalidHost}},
		{name: "answer with an invalid address", resolver: errResolver{addrs: []netip.Addr{{}}}, ctx: context.Background(), host: "origin.test",
			wantIs: []error{guard.ErrRefused}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := guard.New(guard.Options{Resolver: tt.resolver})
			addrs, err := g.CheckHost(tt.ctx, tt.host)
			if addrs != nil {
				t.Errorf("CheckHost returned addresses %v with an error", addrs)
			}
			for _, target := range tt.wantIs {
				if !errors.Is(err, target) {
					t.Errorf("CheckHost error %v is not %v", err, target)
				}
			}
			for _, target := range tt.wantNot {
				if errors.Is(err, target) {
					t.Errorf("CheckHost error %v is %v", err, target)
				}
			}
		})
	}
}

func TestCheckURLNil(t *testing.T) {
	if err := guard.New(guard.Options{}).CheckURL(context.Background(), nil); !errors.Is(err, guard.ErrRefused) {
		t.Errorf("CheckURL(nil) = %v, want a refusal", err)
	}
}

func TestZeroGuardIsStrict(t *testing.T) {
	var g guard.Guard
	if err := g.CheckAddr(netip.MustParseAddr("127.0.0.1")); !errors.Is(err, guard.ErrRefused) {
		t.Errorf("zero Guard CheckAddr(127.0.0.1) = %v, want a refusal", err)
	}
	if err := g.CheckAddr(netip.MustParseAddr("8.8.8.8")); err != nil {
		t.Errorf("zero Guard CheckAddr(8.8.8.8) = %v", err)
	}
	if err := g.CheckAddr(netip.Addr{}); !errors.Is(err, guard.ErrRefused) {
		t.Errorf("zero Guard CheckAddr(invalid) = %v, want a refusal", err)
	}
}

func TestNewCopiesAllow(t *testing.T) {
	allow := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	g := guard.New(guard.Options{Allow: allow})
	allow[0] = netip.MustParsePrefix("192.168.0.0/16")
	if err := g.CheckAddr(netip.MustParseAddr("10.0.0.1")); err != nil {
		t.Errorf("after the caller changed its slice, CheckAddr(10.0.0.1) = %v", err)
	}
	if err := g.CheckAddr(netip.MustParseAddr("192.168.0.1")); err == nil {
		t.Error("after the caller changed its slice, 192.168.0.1 passes")
	}
}

func TestRefusedErrorMessage(t *testing.T) {
	tests := []struct {
		name string
		err  *guard.RefusedError
		want string
	}{
		{name: "name and address", err: &guard.RefusedError{Host: "metadata.test", Addr: netip.MustParseAddr("169.254.169.254"), Range: "169.254.0.0/16 link-local (RFC 3927)"},
			want: `guard: destination refused: "metadata.test" (169.254.169.254) is in 169.254.0.0/16 link-local (RFC 3927)`},
		{name: "address only", err: &guard.RefusedError{Addr: netip.MustParseAddr("10.0.0.1"), Range: "10.0.0.0/8 private (RFC 1918)"},
			want: `guard: destination refused: 10.0.0.1 is in 10.0.0.0/8 private (RFC 1918)`},
		{name: "no address", err: &guard.RefusedError{Range: "empty host"},
			want: `guard: destination refused: "" is in empty host`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.err.Error()); diff != "" {
				t.Errorf("Error mismatch (-want +got):\n%s", diff)
			}
			if !errors.Is(tt.err, guard.ErrRefused) {
				t.Error("RefusedError does not unwrap to ErrRefused")
			}
		})
	}
}

func TestParseIPLiteral(t *testing.T) {
	tests := []struct {
		host string
		want string // "" when not a literal
	}{
		{host: "127.0.0.1", want: "127.0.0.1"},
		{host: "2130706433", want: "127.0.0.1"},
		{host: "0x7f000001", want: "127.0.0.1"},
		{host: "0x7F.0.0.1", want: "127.0.0.1"},
		{host: "0177.0.0.1", want: "127.0.0.1"},
		{host: "017700000001", want: "127.0.0.1"},
		{host: "127.1", want: "127.0.0.1"},
		{host: "127.0.1", want: "127.0.0.1"},
		{host: "10.0x10203", want: "10.1.2.3"},
		{host: "0", want: "0.0.0.0"},
		{host: "0x", want: "0.0.0.0"},
		{host: "0x.0x.0x.0x", want: "0.0.0.0"},
		{host: "4294967295", want: "255.255.255.255"},
		{host: "0xffffffff", want: "255.255.255.255"},
		{host: "037777777777", want: "255.255.255.255"},
		{host: "1.2.3.4.", want: "1.2.3.4"},
		{host: "１．２．３．４", want: "1.2.3.4"},
		{host: "１２７。０。０。１", want: "127.0.0.1"},
		{host: "𝟏𝟐𝟕.𝟎.𝟎.𝟏", want: "127.0.0.1"},
		{host: "①②⑦.0.0.1", want: "127.0.0.1"},
		{host: "０Ｘ７Ｆ.１", want: "127.0.0.1"},
		{host: "𝟐𝟏𝟑𝟎𝟕𝟎𝟔𝟒𝟑𝟑", want: "127.0.0.1"},
		{host: "1.2.3.4%eth0", want: "1.2.3.4"},
		{host: "[::1]", want: "::1"},
		{host: "::1", want: "::1"},
		{host: "[::ffff:127.0.0.1]", want: "::ffff:127.0.0.1"},
		{host: "fe80::1%eth0", want: "fe80::1%eth0"},
		{host: "fe80::1%25eth0", want: "fe80::1%eth0"},
		{host: "[fe80::1%25eth0]", want: "fe80::1%eth0"},
		{host: "fe80::1%", want: "fe80::1"},
		{host: "FE80::ABCD", want: "fe80::abcd"},
		// Not literals: names, or spellings no parser accepts.
		{host: ""},
		{host: "."},
		{host: "example.com"},
		{host: "1.2.3.4.5"},
		{host: "256.1.1.1"},
		{host: "1.256.1.1"},
		{host: "1.2.65536"},
		{host: "4294967296"},
		{host: "0x100000000"},
		{host: "99999999999999999999999"},
		{host: "08.0.0.1"},
		{host: "1..2"},
		{host: "0xg"},
		{host: "1.2.3.4.."},
		{host: "-1"},
		{host: "+1"},
		{host: "1.2.3.a"},
		{host: "deadbeef"},
		{host: "::g"},
		{host: "[::1"},
		{host: "1:2:3:4:5:6:7:8:9"},
		{host: "١٢٧.0.0.1"},      // ARABIC-INDIC digits are not mapped to ASCII
		{host: "⑴.0.0.1"},        // PARENTHESIZED DIGIT ONE maps to "(1)"
		{host: "１２７.０.０.１%eth0"}, // does not convert: net/http dials it as a name
		{host: "fe80：：1"},        // FULLWIDTH COLON does not convert
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			got, ok := guard.ParseIPLiteral(tt.host)
			if tt.want == "" {
				if ok {
					t.Errorf("ParseIPLiteral(%q) = %v, want not a literal", tt.host, got)
				}
				return
			}
			if !ok || got != netip.MustParseAddr(tt.want) {
				t.Errorf("ParseIPLiteral(%q) = %v, %v; want %s", tt.host, got, ok, tt.want)
			}
		})
	}
}

// TestDenyList: an operator's deny list refuses public addresses and wins
// over Allow, in every spelling of the address.
func TestDenyList(t *testing.T) {
	g := guard.New(guard.Options{
		Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		Deny:  []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("10.9.0.0/16")},
	})
	for _, a := range []string{"203.0.113.7", "::ffff:203.0.113.7", "10.9.1.1"} {
		if err := g.CheckAddr(netip.MustParseAddr(a)); !errors.Is(err, guard.ErrRefused) || !strings.Contains(err.Error(), "operator deny list") {
			t.Errorf("CheckAddr(%s) = %v, want refused by the deny list", a, err)
		}
	}
	for _, a := range []string{"93.184.216.34", "10.1.1.1"} {
		if err := g.CheckAddr(netip.MustParseAddr(a)); err != nil {
			t.Errorf("CheckAddr(%s) = %v, want allowed", a, err)
		}
	}
}
