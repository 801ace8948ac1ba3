package guard

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func prefixes(table []denyRange) []string {
	var out []string
	for _, r := range table {
		out = append(out, r.prefix.String())
	}
	return out
}

// The deny table, pinned against the list of docs/security.md, Destinations, so a dropped or widened entry
// is a visible diff.
func TestDenyTableMatchesSpec(t *testing.T) {
	wantV4 := []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
		"172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.31.196.0/24", "192.52.193.0/24",
		"192.88.99.0/24", "192.168.0.0/16", "192.175.48.0/24", "198.18.0.0/15", "198.51.100.0/24",
		"203.0.113.0/24", "224.0.0.0/4", "255.255.255.255/32", "240.0.0.0/4",
	}
	if diff := cmp.Diff(wantV4, prefixes(denyV4)); diff != "" {
		t.Errorf("IPv4 deny table (-want +got):\n%s", diff)
	}
	wantV6 := []string{
		// Named blocks outside 2000::/3 (all inside the catch-alls below).
		"::/128", "::1/128", "::/96", "64:ff9b:1::/48", "100::/64", "100:0:0:1::/64", "5f00::/16",
		"fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
		// Everything outside 2000::/3.
		"::/3", "4000::/2", "8000::/1",
		// Inside 2000::/3; 3fff::/20 (RFC 9637) is an addition docs/security.md's "at least" asks for.
		"2001::/23", "2001:db8::/32", "2620:4f:8000::/48", "3fff::/20",
	}
	if diff := cmp.Diff(wantV6, prefixes(denyV6)); diff != "" {
		t.Errorf("IPv6 deny table (-want +got):\n%s", diff)
	}
	for _, r := range append(append([]denyRange{}, denyV4...), denyV6...) {
		if !strings.HasPrefix(r.label, r.prefix.String()+" ") || !strings.Contains(r.label, "(RFC ") {
			t.Errorf("label %q does not name its prefix and RFC", r.label)
		}
		if r.prefix != r.prefix.Masked() {
			t.Errorf("prefix %v is not masked", r.prefix)
		}
	}
}

// The three catch-alls together are exactly the complement of 2000::/3.
func TestOutsideGlobalUnicast(t *testing.T) {
	global := netip.MustParsePrefix("2000::/3")
	for _, s := range []string{"::", "1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "4000::", "7fff::", "8000::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"} {
		a := netip.MustParseAddr(s)
		if _, bad := denied(a); !bad || global.Contains(a) {
			t.Errorf("%v: denied %v, in 2000::/3 %v", a, bad, global.Contains(a))
		}
	}
	for _, s := range []string{"2000::", "2606:4700::1111", "3ffe:ffff::1"} {
		if label, bad := denied(netip.MustParseAddr(s)); bad {
			t.Errorf("%s: denied by %s", s, label)
		}
	}
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	bits := p.Bits()
	for i := range b {
		for j := 0; j < 8; j++ {
			if i*8+j >= bits {
				b[i] |= 0x80 >> j
			}
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// Every deny entry's first and last address is refused by the strictest
// guard, and the neighbours just outside the IPv4 ranges pass when public.
func TestDenyTableEdges(t *testing.T) {
	g := New(Options{})
	for _, r := range append(append([]denyRange{}, denyV4...), denyV6...) {
		for _, a := range []netip.Addr{r.prefix.Addr(), lastAddr(r.prefix)} {
			t.Run(a.String(), func(t *testing.T) {
				err := g.CheckAddr(a)
				var re *RefusedError
				if !errors.As(err, &re) {
					t.Fatalf("CheckAddr(%v) = %v, want a refusal (entry %s)", a, err, r.label)
				}
			})
		}
	}
	for _, s := range []string{"9.255.255.255", "11.0.0.0", "100.63.255.255", "100.128.0.0", "126.255.255.255",
		"128.0.0.0", "169.253.255.255", "169.255.0.0", "172.15.255.255", "172.32.0.0", "192.0.1.0",
		"192.0.3.0", "192.88.98.255", "192.88.100.0", "192.167.255.255", "192.169.0.0", "198.17.255.255",
		"198.20.0.0", "203.0.112.255", "203.0.114.0", "223.255.255.255"} {
		if err := g.CheckAddr(netip.MustParseAddr(s)); err != nil {
			t.Errorf("CheckAddr(%s) = %v, want pass", s, err)
		}
	}
}

func TestEmbeddedIPv4(t *testing.T) {
	tests := []struct {
		addr, want string
	}{
		{addr: "::ffff:1.2.3.4", want: "1.2.3.4"},
		{addr: "64:ff9b::102:304", want: "1.2.3.4"},
		{addr: "64:ff9b:1:ffff::102:304", want: "1.2.3.4"},
		{addr: "2002:102:304:ffff::1", want: "1.2.3.4"},
		{addr: "2001:0:4136:e378:8000:63bf:fefd:fcfb", want: "1.2.3.4"},
		{addr: "2001:1::1", want: ""}, // inside 2001::/23 but not Teredo
		{addr: "2606:4700::1111", want: ""},
		{addr: "::1.2.3.4", want: ""}, // IPv4-compatible is judged as IPv6
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			got, _, ok := embeddedIPv4(netip.MustParseAddr(tt.addr))
			if tt.want == "" {
				if ok {
					t.Errorf("embeddedIPv4(%s) = %v, want none", tt.addr, got)
				}
				return
			}
			if !ok || got != netip.MustParseAddr(tt.want) {
				t.Errorf("embeddedIPv4(%s) = %v, %v; want %s", tt.addr, got, ok, tt.want)
			}
		})
	}
	if _, _, ok := embeddedIPv4(netip.MustParseAddr("1.2.3.4")); ok {
		t.Error("an IPv4 address reports an embedded IPv4")
	}
}

// dialAddrs is what DialContext hands the checked addresses to; given a
// denied one directly, the Control hook alone must refuse it before the
// connection is made.
func TestDialAddrsControlRefuses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	loop := []netip.Addr{netip.MustParseAddr("127.0.0.1")}

	conn, err := New(Options{}).dialAddrs(context.Background(), "tcp", loop, port)
	if conn != nil {
		conn.Close()
	}
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("dialAddrs to loopback = %v, want a refusal from Control", err)
	}
	select {
	case <-accepted:
		t.Fatal("the listener accepted a connection the guard refused")
	default:
	}

	allowed := New(Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	conn, err = allowed.dialAddrs(context.Background(), "tcp", loop, port)
	if err != nil {
		t.Fatalf("dialAddrs with 127.0.0.0/8 allowed: %v", err)
	}
	conn.Close()
	<-accepted
}
