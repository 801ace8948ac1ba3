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
)

// testResolver answers the names the vectors use; anything else is not
// found, so no test reaches real DNS.
func testResolver() hosts.Resolver {
	return hosts.Resolver{Table: map[string][]netip.Addr{
		"public.test":            {netip.MustParseAddr("93.184.215.14")},
		"v6public.test":          {netip.MustParseAddr("2606:4700::1111")},
		"mixed.test":             {netip.MustParseAddr("93.184.215.14"), netip.MustParseAddr("10.0.0.5")},
		"localhost":              {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")},
		"metadata.test":          {netip.MustParseAddr("169.254.169.254")},
		"mapped.test":            {netip.MustParseAddr("::ffff:127.0.0.1")},
		"mappedpublic.test":      {netip.MustParseAddr("::ffff:93.184.215.14")},
		"nip.test":               {netip.MustParseAddr("169.254.169.254")},
		"xn--bcher-kva.test":     {netip.MustParseAddr("10.0.0.7")},      // bücher.test
		"xn--ffentlich-z7a.test": {netip.MustParseAddr("93.184.215.14")}, // öffentlich.test
	}}
}

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
	tests := []struct {
		name      string
		url       string
		allow     string
		want      verdict
		wantRange string // checked when set
	}{
		// IPv4 spellings of loopback.
		{name: "dotted loopback", url: "http://127.0.0.1/", want: refused, wantRange: "127.0.0.0/8 loopback (RFC 1122)"},
		{name: "decimal", url: "http://2130706433/", want: refused, wantRange: "127.0.0.0/8 loopback (RFC 1122)"},
		{name: "hex", url: "http://0x7f000001/", want: refused},
		{name: "upper-case hex", url: "http://0X7F000001/", want: refused},
		{name: "hex first part", url: "http://0x7f.0.0.1/", want: refused},
		{name: "hex every part", url: "http://0x7f.0x0.0x0.0x1/", want: refused},
		{name: "octal first part", url: "http://0177.0.0.1/", want: refused},
		{name: "padded octal", url: "http://00000177.0.0.1/", want: refused},
		{name: "octal whole", url: "http://017700000001/", want: refused},
		{name: "short two parts", url: "http://127.1/", want: refused},
		{name: "short three parts", url: "http://127.0.1/", want: refused},
		{name: "short hex", url: "http://0x7f.1/", want: refused},
		{name: "trailing dot", url: "http://127.0.0.1./", want: refused},
		{name: "fullwidth digits", url: "http://１２７。０。０。１/", want: refused},
		// Unicode spellings IDNA maps to ASCII digits, as net/http does before dialing.
		{name: "mathematical bold digits", url: "http://𝟏𝟐𝟕.𝟎.𝟎.𝟏/", want: refused, wantRange: "127.0.0.0/8 loopback (RFC 1122)"},
		{name: "circled digits", url: "http://①②⑦.0.0.1/", want: refused, wantRange: "127.0.0.0/8 loopback (RFC 1122)"},
		{name: "fullwidth short hex", url: "http://０Ｘ７Ｆ．１/", want: refused},
		{name: "fullwidth decimal metadata", url: "http://２８５２０３９１６６/", want: refused, wantRange: "169.254.0.0/16 link-local (RFC 3927)"},
		{name: "roman numeral host is a name", url: "http://Ⅻ.test/", want: unresolved},
		{name: "with port", url: "http://127.0.0.1:8080/", want: refused},
		{name: "with userinfo", url: "http://user:pw@127.0.0.1/", want: refused},
		// This network and the unspecified addresses.
		{name: "zero", url: "http://0/", want: refused, wantRange: "0.0.0.0/8 this network (RFC 791)"},
		{name: "0.0.0.0", url: "http://0.0.0.0/", want: refused},
		{name: "[::]", url: "http://[::]/", want: refused, wantRange: "::/128 unspecified (RFC 4291)"},
		{name: "[::1]", url: "http://[::1]/", want: refused, wantRange: "::1/128 loopback (RFC 4291)"},
		{name: "[::1] long form", url: "http://[0:0:0:0:0:0:0:1]/", want: refused},
		// IPv4 carried in IPv6.
		{name: "mapped dotted", url: "http://[::ffff:127.0.0.1]/", want: refused,
			wantRange: "127.0.0.0/8 loopback (RFC 1122), carried by IPv4-mapped ::ffff:0:0/96 (RFC 4291)"},
		{name: "mapped hex", url: "http://[::ffff:7f00:1]/", want: refused},
		{name: "mapped long form", url: "http://[0:0:0:0:0:ffff:127.0.0.1]/", want: refused},
		{name: "IPv4-compatible", url: "http://[::127.0.0.1]/", want: refused, wantRange: "::/96 IPv4-compatible, deprecated (RFC 4291)"},
		{name: "NAT64 metadata", url: "http://[64:ff9b::a9fe:a9fe]/", want: refused,
			wantRange: "169.254.0.0/16 link-local (RFC 3927), carried by NAT64 64:ff9b::/96 (RFC 6052)"},
		{name: "NAT64 dotted", url: "http://[64:ff9b::169.254.169.254]/", want: refused},
		{name: "NAT64 local-use loopback", url: "http://[64:ff9b:1::7f00:1]/", want: refused},
		{name: "6to4 metadata", url: "http://[2002:a9fe:a9fe::]/", want: refused,
			wantRange: "169.254.0.0/16 link-local (RFC 3927), carried by 6to4 2002::/16 (RFC 3056)"},
		{name: "Teredo with client 127.0.0.1", url: "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/", want: refused,
			wantRange: "127.0.0.0/8 loopback (RFC 1122), carried by Teredo 2001::/32 (RFC 4380)"},
		// Special-purpose IPv4.
		{name: "6to4 relay anycast", url: "http://192.88.99.1/", want: refused, wantRange: "192.88.99.0/24 deprecated 6to4 relay anycast (RFC 7526)"},
		{name: "metadata", url: "http://169.254.169.254/", want: refused},
		{name: "metadata hex", url: "http://0xa9fea9fe/", want: refused},
		{name: "metadata decimal", url: "http://2852039166/", want: refused},
		{name: "shared address space", url: "http://100.64.0.1/", want: refused, wantRange: "100.64.0.0/10 shared address space (RFC 6598)"},
		{name: "private 10", url: "http://10.0.0.1/", want: refused},
		{name: "private 172.16", url: "http://172.16.0.1/", want: refused},
		{name: "private 172.31 top", url: "http://172.31.255.255/", want: refused},
		{name: "private 192.168", url: "http://192.168.1.1/", want: refused},
		{name: "IETF protocol assignments", url: "http://192.0.0.9/", want: refused},
		{name: "benchmarking", url: "http://198.19.255.255/", want: refused},
		{name: "multicast", url: "http://224.0.0.1/", want: refused},
		{name: "limited broadcast", url: "http://255.255.255.255/", want: refused, wantRange: "255.255.255.255/32 limited broadcast (RFC 919)"},
		{name: "reserved class E", url: "http://240.0.0.1/", want: refused},
		// Special-purpose IPv6.
		{name: "site-local", url: "http://[fec0::1]/", want: refused, wantRange: "fec0::/10 site-local, deprecated (RFC 3879)"},
		{name: "unique local", url: "http://[fd00::1]/", want: refused, wantRange: "fc00::/7 unique local (RFC 4193)"},
		{name: "link-local with URL zone", url: "http://[fe80::1%25eth0]/", want: refused, wantRange: "fe80::/10 link-local (RFC 4291)"},
		{name: "multicast v6", url: "http://[ff02::1]/", want: refused},
		{name: "discard-only", url: "http://[100::1]/", want: refused},
		{name: "documentation v6", url: "http://[2001:db8::1]/", want: refused},
		{name: "documentation 3fff", url: "http://[3fff::1]/", want: refused},
		{name: "benchmarking v6", url: "http://[2001:2::1]/", want: refused, wantRange: "2001::/23 IETF protocol assignments (RFC 2928)"},
		{name: "AS112 v6", url: "http://[2620:4f:8000::1]/", want: refused},
		{name: "outside 2000::/3", url: "http://[4000::1]/", want: refused, wantRange: "4000::/2 outside global unicast 2000::/3 (RFC 4291)"},
		// Names.
		{name: "localhost", url: "http://localhost/", want: refused},
		{name: "localhost upper with dot", url: "http://LOCALHOST./", want: refused},
		{name: "fullwidth localhost", url: "http://ｌｏｃａｌｈｏｓｔ/", want: refused, wantRange: "127.0.0.0/8 loopback (RFC 1122)"},
		{name: "IDN resolved by its ASCII name", url: "http://bücher.test/", want: refused, wantRange: "10.0.0.0/8 private (RFC 1918)"},
		{name: "IDN upper case with dot", url: "http://BÜCHER.test./", want: refused},
		{name: "IDN percent-encoded", url: "http://b%C3%BCcher.test/", want: refused},
		{name: "IDN allowed", url: "http://bücher.test/", allow: "10.0.0.0/8", want: pass},
		{name: "IDN with a hyphen at a label end", url: "http://bücher-.test/", want: invalid},
		{name: "IDN with a disallowed ASCII rune", url: "http://a_b.bücher.test/", want: invalid},
		{name: "IDN mapping to nothing", url: "http://%C2%AD/", want: invalid},
		{name: "name to metadata", url: "http://metadata.test/", want: refused},
		{name: "one public one private", url: "http://mixed.test/", want: refused, wantRange: "10.0.0.0/8 private (RFC 1918)"},
		{name: "resolver answers mapped loopback", url: "http://mapped.test/", want: refused},
		{name: "unknown name is not a refusal", url: "http://nx.test/", want: unresolved},
		// Public destinations pass.
		{name: "8.8.8.8", url: "http://8.8.8.8/", want: pass},
		{name: "1.1.1.1", url: "https://1.1.1.1/", want: pass},
		{name: "8.8.8.8 decimal", url: "http://134744072/", want: pass},
		{name: "public v6", url: "http://[2606:4700::1111]/", want: pass},
		{name: "Teredo with public client", url: "http://[2001:0:4136:e378:8000:63bf:f7f7:f7f7]/", want: pass},
		{name: "6to4 with public IPv4", url: "http://[2002:808:808::1]/", want: pass},
		{name: "NAT64 with public IPv4", url: "http://[64:ff9b::8.8.8.8]/", want: pass},
		{name: "NAT64 local-use with public IPv4", url: "http://[64:ff9b:1::808:808]/", want: pass},
		{name: "mapped public", url: "http://[::ffff:8.8.8.8]/", want: pass},
		{name: "just past 172.16/12", url: "http://172.32.0.1/", want: pass},
		{name: "just past 100.64/10", url: "http://100.128.0.1/", want: pass},
		{name: "public name", url: "http://public.test/", want: pass},
		{name: "public v6 name with port", url: "http://v6public.test:8443/", want: pass},
		{name: "public IDN", url: "http://Öffentlich.test/", want: pass},
		{name: "resolver answers mapped public", url: "http://mappedpublic.test/", want: pass},
		// Operators' allow list.
		{name: "allow-listed private", url: "http://10.1.2.3/", allow: "10.0.0.0/8", want: pass},
		{name: "allow-listed single address", url: "http://10.1.2.3/", allow: "10.1.2.3/32", want: pass},
		{name: "neighbour of an allowed address", url: "http://10.1.2.4/", allow: "10.1.2.3/32", want: refused},
		{name: "allowed loopback through mapping", url: "http://[::ffff:127.0.0.1]/", allow: "127.0.0.0/8", want: pass},
		{name: "allowed loopback through 6to4", url: "http://[2002:7f00:1::]/", allow: "127.0.0.0/8", want: pass},
		{name: "allowing v4 loopback leaves ::1", url: "http://[::1]/", allow: "127.0.0.0/8", want: refused},
		{name: "allowed link-local with zone", url: "http://[fe80::1%25eth0]/", allow: "fe80::/10", want: pass},
		{name: "mapped allow prefix allows IPv4", url: "http://10.9.9.9/", allow: "::ffff:10.0.0.0/104", want: pass},
		{name: "allowed name", url: "http://localhost/", allow: "127.0.0.1/32 ::1/128", want: pass},
		{name: "name half allowed", url: "http://mixed.test/", allow: "192.0.2.0/24", want: refused},
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
