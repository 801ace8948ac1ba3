package main

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseCIDRs(t *testing.T) {
	tests := []struct {
		in      string
		want    []netip.Prefix
		wantErr string
	}{
		{in: "", want: nil},
		{in: "  ", want: nil},
		{in: "10.0.0.0/8", want: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}},
		{in: "10.1.2.3/8, 127.0.0.1 ::1\tfd00::/8", want: []netip.Prefix{
			netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.1/32"),
			netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("fd00::/8")}},
		{in: "10.0.0.0/8,,192.168.0.0/16", want: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.0.0/16")}},
		{in: "10.0.0.0/8,bogus", wantErr: `allow-list entry "bogus" is not an IP address or CIDR prefix`},
		{in: "10.0.0.0/33", wantErr: `allow-list entry "10.0.0.0/33" is not a CIDR prefix`},
		{in: "fe80::1%eth0", wantErr: `allow-list entry "fe80::1%eth0" is not an IP address or CIDR prefix`},
		{in: "0x7f.1", wantErr: `allow-list entry "0x7f.1" is not an IP address or CIDR prefix`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseCIDRs(tt.in)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("parseCIDRs(%q) error = %v, want %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseCIDRs(%q): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Errorf("parseCIDRs mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseResolve(t *testing.T) {
	tests := []struct {
		in      string
		want    map[string][]netip.Addr
		wantErr string
	}{
		{in: "", want: map[string][]netip.Addr{}},
		{in: "Origin.Test.=127.0.0.1", want: map[string][]netip.Addr{"origin.test": {netip.MustParseAddr("127.0.0.1")}}},
		{in: "a.test=127.0.0.1,b.test=[::1], a.test=10.0.0.1", want: map[string][]netip.Addr{
			"a.test": {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("10.0.0.1")},
			"b.test": {netip.MustParseAddr("::1")},
		}},
		{in: "a.test", wantErr: `resolve entry "a.test": want host=ip`},
		{in: "=127.0.0.1", wantErr: `resolve entry "=127.0.0.1": want host=ip`},
		{in: "a.test=nope", wantErr: `resolve entry "a.test=nope": "nope" is not an IP address`},
		{in: "*.Bench.Test=127.0.0.1", want: map[string][]netip.Addr{"*.bench.test": {netip.MustParseAddr("127.0.0.1")}}},
		{in: "*=127.0.0.1", wantErr: `resolve entry "*=127.0.0.1": a wildcard is a leading "*." before a domain`},
		{in: "*.=127.0.0.1", wantErr: `resolve entry "*.=127.0.0.1": a wildcard is a leading "*." before a domain`},
		{in: "a.*.test=127.0.0.1", wantErr: `resolve entry "a.*.test=127.0.0.1": a wildcard is a leading "*." before a domain`},
		{in: "*.*.test=127.0.0.1", wantErr: `resolve entry "*.*.test=127.0.0.1": a wildcard is a leading "*." before a domain`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseResolve(tt.in)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("parseResolve(%q) error = %v, want %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseResolve(%q): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got.Table, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
				t.Errorf("parseResolve mismatch (-want +got):\n%s", diff)
			}
			if got.Fallback != nil {
				t.Errorf("parseResolve(%q) has a Fallback", tt.in)
			}
		})
	}
}

// namesAnItem reports whether msg, after prefix, quotes one of the items.
func namesAnItem(msg, prefix string, items []string) bool {
	for _, item := range items {
		if strings.HasPrefix(msg, prefix+fmt.Sprintf("%q", item)) {
			return true
		}
	}
	return false
}

// FuzzParseCIDRs: any list either fails naming one of its items, or gives
// one masked, zone-free prefix per item that reads back the same.
func FuzzParseCIDRs(f *testing.F) {
	for _, seed := range []string{
		"", "127.0.0.0/8", "10.1.2.3/8, 127.0.0.1 ::1\tfd00::/8", "::ffff:10.0.0.0/104",
		"fe80::1%eth0", "fe80::/10%eth0", "10.0.0.0/33", "0x7f.1", ",,\u00a0", "1.2.3.4/", "/8",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		items := splitList(s)
		got, err := parseCIDRs(s)
		if err != nil {
			if !namesAnItem(err.Error(), "allow-list entry ", items) {
				t.Fatalf("error %q names no item of %q", err, items)
			}
			return
		}
		if len(got) != len(items) {
			t.Fatalf("%d prefixes from %d items %q", len(got), len(items), items)
		}
		text := make([]string, len(got))
		for i, p := range got {
			if !p.IsValid() || p != p.Masked() || p.Addr().Zone() != "" {
				t.Fatalf("item %q gave %v: not a valid, masked, zone-free prefix", items[i], p)
			}
			text[i] = p.String()
		}
		again, err := parseCIDRs(strings.Join(text, ","))
		if err != nil || !slices.Equal(again, got) {
			t.Fatalf("%v reads back as %v, %v", got, again, err)
		}
	})
}

// FuzzParseResolve: any list either fails naming one of its items, or gives
// a table holding one address per item that answers every host as written.
func FuzzParseResolve(f *testing.F) {
	for _, seed := range []string{
		"", "origin.test=127.0.0.1", "Origin.Test.=127.0.0.1", "a.test=127.0.0.1,b.test=[::1], a.test=10.0.0.1",
		"a.test", "=127.0.0.1", "a.test=nope", "a=b=1.2.3.4", "a..=1.2.3.4", "v6.test=[fe80::1%eth0]", "A\u0130=::1",
		"0=::0%]", "z=[::1%]]",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		items := splitList(s)
		r, err := parseResolve(s)
		if err != nil {
			if !namesAnItem(err.Error(), "resolve entry ", items) {
				t.Fatalf("error %q names no item of %q", err, items)
			}
			return
		}
		n := 0
		for _, addrs := range r.Table {
			n += len(addrs)
		}
		if n != len(items) {
			t.Fatalf("%d addresses from %d items %q", n, len(items), items)
		}
		for _, item := range items {
			host, ip, _ := strings.Cut(item, "=")
			want, err := netip.ParseAddr(ip)
			if err != nil {
				want, err = netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(ip, "["), "]"))
			}
			if err != nil {
				t.Fatalf("item %q was taken, but %q is not an address", item, ip)
			}
			got, err := r.LookupNetIP(context.Background(), "ip", host)
			if err != nil || !slices.Contains(got, want) {
				t.Fatalf("%q answers %v, %v; want %v among them", host, got, err, want)
			}
		}
	})
}
