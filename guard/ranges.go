package guard

import (
	"encoding/binary"
	"net/netip"
)

// denyRange is one entry of the deny table. label is what RefusedError.Range
// carries: the prefix, what it is, and the RFC that reserves it.
type denyRange struct {
	prefix netip.Prefix
	label  string
}

func mustRange(cidr, what string) denyRange {
	p := netip.MustParsePrefix(cidr)
	return denyRange{prefix: p, label: p.String() + " " + what}
}

// denyV4 is every IPv4 range docs/security.md, Destinations, refuses: the IANA IPv4 Special-Purpose
// Address Registry entries that are not globally reachable, plus a few that
// are but never host an origin. First match names the refusal, so a more
// specific entry comes before the range that contains it.
var denyV4 = []denyRange{
	mustRange("0.0.0.0/8", "this network (RFC 791)"),                        // RFC 791 §3.2; RFC 1122 §3.2.1.3
	mustRange("10.0.0.0/8", "private (RFC 1918)"),                           // RFC 1918
	mustRange("100.64.0.0/10", "shared address space (RFC 6598)"),           // RFC 6598, carrier-grade NAT
	mustRange("127.0.0.0/8", "loopback (RFC 1122)"),                         // RFC 1122 §3.2.1.3
	mustRange("169.254.0.0/16", "link-local (RFC 3927)"),                    // RFC 3927, cloud metadata lives here
	mustRange("172.16.0.0/12", "private (RFC 1918)"),                        // RFC 1918
	mustRange("192.0.0.0/24", "IETF protocol assignments (RFC 6890)"),       // RFC 6890 §2.1
	mustRange("192.0.2.0/24", "documentation TEST-NET-1 (RFC 5737)"),        // RFC 5737
	mustRange("192.31.196.0/24", "AS112-v4 (RFC 7535)"),                     // RFC 7535
	mustRange("192.52.193.0/24", "AMT (RFC 7450)"),                          // RFC 7450
	mustRange("192.88.99.0/24", "deprecated 6to4 relay anycast (RFC 7526)"), // RFC 7526 (was RFC 3068)
	mustRange("192.168.0.0/16", "private (RFC 1918)"),                       // RFC 1918
	mustRange("192.175.48.0/24", "AS112 direct delegation (RFC 7534)"),      // RFC 7534
	mustRange("198.18.0.0/15", "benchmarking (RFC 2544)"),                   // RFC 2544
	mustRange("198.51.100.0/24", "documentation TEST-NET-2 (RFC 5737)"),     // RFC 5737
	mustRange("203.0.113.0/24", "documentation TEST-NET-3 (RFC 5737)"),      // RFC 5737
	mustRange("224.0.0.0/4", "multicast (RFC 5771)"),                        // RFC 5771
	mustRange("255.255.255.255/32", "limited broadcast (RFC 919)"),          // RFC 919; RFC 8190
	mustRange("240.0.0.0/4", "reserved (RFC 1112)"),                         // RFC 1112 §4
}

// denyV6 is every IPv6 range docs/security.md, Destinations, refuses: everything outside global
// unicast 2000::/3 and, inside it, the special-purpose blocks that are not
// globally reachable. The named blocks outside 2000::/3 come before the three
// catch-alls only so a refusal names what the address is.
var denyV6 = []denyRange{
	mustRange("::/128", "unspecified (RFC 4291)"),                             // RFC 4291 §2.5.2
	mustRange("::1/128", "loopback (RFC 4291)"),                               // RFC 4291 §2.5.3
	mustRange("::/96", "IPv4-compatible, deprecated (RFC 4291)"),              // RFC 4291 §2.5.5.1
	mustRange("64:ff9b:1::/48", "local-use IPv4/IPv6 translation (RFC 8215)"), // RFC 8215
	mustRange("100::/64", "discard-only (RFC 6666)"),                          // RFC 6666
	mustRange("100:0:0:1::/64", "dummy prefix (RFC 9780)"),                    // RFC 9780
	mustRange("5f00::/16", "SRv6 SIDs (RFC 9602)"),                            // RFC 9602
	mustRange("fc00::/7", "unique local (RFC 4193)"),                          // RFC 4193; RFC 8190
	mustRange("fe80::/10", "link-local (RFC 4291)"),                           // RFC 4291 §2.5.6
	mustRange("fec0::/10", "site-local, deprecated (RFC 3879)"),               // RFC 3879
	mustRange("ff00::/8", "multicast (RFC 4291)"),                             // RFC 4291 §2.7
	mustRange("::/3", "outside global unicast 2000::/3 (RFC 4291)"),           // RFC 4291 §2.4, 0000::-1fff::
	mustRange("4000::/2", "outside global unicast 2000::/3 (RFC 4291)"),       // RFC 4291 §2.4, 4000::-7fff::
	mustRange("8000::/1", "outside global unicast 2000::/3 (RFC 4291)"),       // RFC 4291 §2.4, 8000::-ffff::
	mustRange("2001::/23", "IETF protocol assignments (RFC 2928)"),            // RFC 2928; RFC 6890 §2.2
	mustRange("2001:db8::/32", "documentation (RFC 3849)"),                    // RFC 3849
	mustRange("2620:4f:8000::/48", "AS112 direct delegation (RFC 7534)"),      // RFC 7534
	mustRange("3fff::/20", "documentation (RFC 9637)"),                        // RFC 9637
}

// embedding is an IPv6 block whose addresses carry an IPv4 address; extract
// returns it. Such an address reaches (or claims to reach) that IPv4 host, so
// it is judged by it.
type embedding struct {
	prefix  netip.Prefix
	label   string
	extract func(a [16]byte) netip.Addr
}

func last32(a [16]byte) netip.Addr { return netip.AddrFrom4([4]byte(a[12:16])) }

// embeddings are judged before the IPv6 deny table (docs/security.md, Addresses that carry an IPv4): an embedded
// IPv4 that is denied refuses the address, a public one lets it pass.
var embeddings = []embedding{
	{
		prefix:  netip.MustParsePrefix("::ffff:0:0/96"),
		label:   "IPv4-mapped ::ffff:0:0/96 (RFC 4291)", // RFC 4291 §2.5.5.2
		extract: last32,
	},
	{
		prefix:  netip.MustParsePrefix("64:ff9b::/96"),
		label:   "NAT64 64:ff9b::/96 (RFC 6052)", // RFC 6052 §2.1
		extract: last32,
	},
	{
		// RFC 8215 lets an operator place the IPv4 at any RFC 6052 offset
		// under its own longer prefix; nothing on the wire says which. The
		// /96 layout (last 32 bits) is what NAT64 deployments use, so that
		// is what is judged; every other layout stays denied by the
		// 64:ff9b:1::/48 table entry unless its last 32 bits are public.
		prefix:  netip.MustParsePrefix("64:ff9b:1::/48"),
		label:   "NAT64 local-use 64:ff9b:1::/48 (RFC 8215)", // RFC 8215
		extract: last32,
	},
	{
		prefix:  netip.MustParsePrefix("2002::/16"),
		label:   "6to4 2002::/16 (RFC 3056)", // RFC 3056 §2, IPv4 in bits 16-47
		extract: func(a [16]byte) netip.Addr { return netip.AddrFrom4([4]byte(a[2:6])) },
	},
	{
		prefix: netip.MustParsePrefix("2001::/32"),
		label:  "Teredo 2001::/32 (RFC 4380)", // RFC 4380 §4, client IPv4 inverted in the last 32 bits
		extract: func(a [16]byte) netip.Addr {
			v := binary.BigEndian.Uint32(a[12:16]) ^ 0xffffffff
			var b [4]byte
			binary.BigEndian.PutUint32(b[:], v)
			return netip.AddrFrom4(b)
		},
	},
}

// embeddedIPv4 returns the IPv4 address a carries and the label of the
// embedding, if a is an IPv6 address of one of the embedding blocks.
func embeddedIPv4(a netip.Addr) (netip.Addr, string, bool) {
	if !a.Is6() {
		return netip.Addr{}, "", false
	}
	for _, e := range embeddings {
		if e.prefix.Contains(a) {
			return e.extract(a.As16()), e.label, true
		}
	}
	return netip.Addr{}, "", false
}

// denied returns the deny-table entry containing a (IPv4 or IPv6, without
// zone), judged by the table of a's own family only.
func denied(a netip.Addr) (string, bool) {
	table := denyV6
	if a.Is4() {
		table = denyV4
	}
	for _, r := range table {
		if r.prefix.Contains(a) {
			return r.label, true
		}
	}
	return "", false
}
