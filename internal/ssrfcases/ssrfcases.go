// Package ssrfcases holds the destination guard's SSRF vectors, so that
// every path to a socket (the guard alone, the fetcher, its http.Client,
// an egress proxy) is held to the same cases.
package ssrfcases

import (
	"net/netip"

	"github.com/replicator-go/replicator/internal/hosts"
)

// Verdict is what the guard must say of a vector.
type Verdict int

// Verdicts.
const (
	Pass       Verdict = iota
	Refused            // a *guard.RefusedError
	Unresolved         // guard.ErrResolve
	Invalid            // the host has no ASCII form (guard.ErrInvalidHost)
)

// Vector is one destination and the guard's verdict on it.
type Vector struct {
	Name string
	URL  string
	// Allow is the guard's allow list, space-separated prefixes.
	Allow     string
	Want      Verdict
	WantRange string // checked when set
}

// Resolver answers the names the vectors use; anything else is not
// found, so no test reaches real DNS.
func Resolver() hosts.Resolver {
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

// Vectors returns the guard's SSRF vectors.
func Vectors() []Vector {
	return []Vector{
		// IPv4 spellings of loopback.
		{Name: "dotted loopback", URL: "http://127.0.0.1/", Want: Refused, WantRange: "127.0.0.0/8 loopback (RFC 1122)"},
		{Name: "decimal", URL: "http://2130706433/", Want: Refused, WantRange: "127.0.0.0/8 loopback (RFC 1122)"},
		{Name: "hex", URL: "http://0x7f000001/", Want: Refused},
		{Name: "upper-case hex", URL: "http://0X7F000001/", Want: Refused},
		{Name: "hex first part", URL: "http://0x7f.0.0.1/", Want: Refused},
		{Name: "hex every part", URL: "http://0x7f.0x0.0x0.0x1/", Want: Refused},
		{Name: "octal first part", URL: "http://0177.0.0.1/", Want: Refused},
		{Name: "padded octal", URL: "http://00000177.0.0.1/", Want: Refused},
		{Name: "octal whole", URL: "http://017700000001/", Want: Refused},
		{Name: "short two parts", URL: "http://127.1/", Want: Refused},
		{Name: "short three parts", URL: "http://127.0.1/", Want: Refused},
		{Name: "short hex", URL: "http://0x7f.1/", Want: Refused},
		{Name: "trailing dot", URL: "http://127.0.0.1./", Want: Refused},
		{Name: "fullwidth digits", URL: "http://１２７。０。０。１/", Want: Refused},
		// Unicode spellings IDNA maps to ASCII digits, as net/http does before dialing.
		{Name: "mathematical bold digits", URL: "http://𝟏𝟐𝟕.𝟎.𝟎.𝟏/", Want: Refused, WantRange: "127.0.0.0/8 loopback (RFC 1122)"},
		{Name: "circled digits", URL: "http://①②⑦.0.0.1/", Want: Refused, WantRange: "127.0.0.0/8 loopback (RFC 1122)"},
		{Name: "fullwidth short hex", URL: "http://０Ｘ７Ｆ．１/", Want: Refused},
		{Name: "fullwidth decimal metadata", URL: "http://２８５２０３９１６６/", Want: Refused, WantRange: "169.254.0.0/16 link-local (RFC 3927)"},
		{Name: "roman numeral host is a name", URL: "http://Ⅻ.test/", Want: Unresolved},
		{Name: "with port", URL: "http://127.0.0.1:8080/", Want: Refused},
		{Name: "with userinfo", URL: "http://user:pw@127.0.0.1/", Want: Refused},
		// This network and the unspecified addresses.
		{Name: "zero", URL: "http://0/", Want: Refused, WantRange: "0.0.0.0/8 this network (RFC 791)"},
		{Name: "0.0.0.0", URL: "http://0.0.0.0/", Want: Refused},
		{Name: "[::]", URL: "http://[::]/", Want: Refused, WantRange: "::/128 unspecified (RFC 4291)"},
		{Name: "[::1]", URL: "http://[::1]/", Want: Refused, WantRange: "::1/128 loopback (RFC 4291)"},
		{Name: "[::1] long form", URL: "http://[0:0:0:0:0:0:0:1]/", Want: Refused},
		// IPv4 carried in IPv6.
		{Name: "mapped dotted", URL: "http://[::ffff:127.0.0.1]/", Want: Refused,
			WantRange: "127.0.0.0/8 loopback (RFC 1122), carried by IPv4-mapped ::ffff:0:0/96 (RFC 4291)"},
		{Name: "mapped hex", URL: "http://[::ffff:7f00:1]/", Want: Refused},
		{Name: "mapped long form", URL: "http://[0:0:0:0:0:ffff:127.0.0.1]/", Want: Refused},
		{Name: "IPv4-compatible", URL: "http://[::127.0.0.1]/", Want: Refused, WantRange: "::/96 IPv4-compatible, deprecated (RFC 4291)"},
		{Name: "NAT64 metadata", URL: "http://[64:ff9b::a9fe:a9fe]/", Want: Refused,
			WantRange: "169.254.0.0/16 link-local (RFC 3927), carried by NAT64 64:ff9b::/96 (RFC 6052)"},
		{Name: "NAT64 dotted", URL: "http://[64:ff9b::169.254.169.254]/", Want: Refused},
		{Name: "NAT64 local-use loopback", URL: "http://[64:ff9b:1::7f00:1]/", Want: Refused},
		{Name: "6to4 metadata", URL: "http://[2002:a9fe:a9fe::]/", Want: Refused,
			WantRange: "169.254.0.0/16 link-local (RFC 3927), carried by 6to4 2002::/16 (RFC 3056)"},
		{Name: "Teredo with client 127.0.0.1", URL: "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/", Want: Refused,
			WantRange: "127.0.0.0/8 loopback (RFC 1122), carried by Teredo 2001::/32 (RFC 4380)"},
		// Special-purpose IPv4.
		{Name: "6to4 relay anycast", URL: "http://192.88.99.1/", Want: Refused, WantRange: "192.88.99.0/24 deprecated 6to4 relay anycast (RFC 7526)"},
		{Name: "metadata", URL: "http://169.254.169.254/", Want: Refused},
		{Name: "metadata hex", URL: "http://0xa9fea9fe/", Want: Refused},
		{Name: "metadata decimal", URL: "http://2852039166/", Want: Refused},
		{Name: "shared address space", URL: "http://100.64.0.1/", Want: Refused, WantRange: "100.64.0.0/10 shared address space (RFC 6598)"},
		{Name: "private 10", URL: "http://10.0.0.1/", Want: Refused},
		{Name: "private 172.16", URL: "http://172.16.0.1/", Want: Refused},
		{Name: "private 172.31 top", URL: "http://172.31.255.255/", Want: Refused},
		{Name: "private 192.168", URL: "http://192.168.1.1/", Want: Refused},
		{Name: "IETF protocol assignments", URL: "http://192.0.0.9/", Want: Refused},
		{Name: "benchmarking", URL: "http://198.19.255.255/", Want: Refused},
		{Name: "multicast", URL: "http://224.0.0.1/", Want: Refused},
		{Name: "limited broadcast", URL: "http://255.255.255.255/", Want: Refused, WantRange: "255.255.255.255/32 limited broadcast (RFC 919)"},
		{Name: "reserved class E", URL: "http://240.0.0.1/", Want: Refused},
		// Special-purpose IPv6.
		{Name: "site-local", URL: "http://[fec0::1]/", Want: Refused, WantRange: "fec0::/10 site-local, deprecated (RFC 3879)"},
		{Name: "unique local", URL: "http://[fd00::1]/", Want: Refused, WantRange: "fc00::/7 unique local (RFC 4193)"},
		{Name: "link-local with URL zone", URL: "http://[fe80::1%25eth0]/", Want: Refused, WantRange: "fe80::/10 link-local (RFC 4291)"},
		{Name: "multicast v6", URL: "http://[ff02::1]/", Want: Refused},
		{Name: "discard-only", URL: "http://[100::1]/", Want: Refused},
		{Name: "documentation v6", URL: "http://[2001:db8::1]/", Want: Refused},
		{Name: "documentation 3fff", URL: "http://[3fff::1]/", Want: Refused},
		{Name: "benchmarking v6", URL: "http://[2001:2::1]/", Want: Refused, WantRange: "2001::/23 IETF protocol assignments (RFC 2928)"},
		{Name: "AS112 v6", URL: "http://[2620:4f:8000::1]/", Want: Refused},
		{Name: "outside 2000::/3", URL: "http://[4000::1]/", Want: Refused, WantRange: "4000::/2 outside global unicast 2000::/3 (RFC 4291)"},
		// Names.
		{Name: "localhost", URL: "http://localhost/", Want: Refused},
		{Name: "localhost upper with dot", URL: "http://LOCALHOST./", Want: Refused},
		{Name: "fullwidth localhost", URL: "http://ｌｏｃａｌｈｏｓｔ/", Want: Refused, WantRange: "127.0.0.0/8 loopback (RFC 1122)"},
		{Name: "IDN resolved by its ASCII name", URL: "http://bücher.test/", Want: Refused, WantRange: "10.0.0.0/8 private (RFC 1918)"},
		{Name: "IDN upper case with dot", URL: "http://BÜCHER.test./", Want: Refused},
		{Name: "IDN percent-encoded", URL: "http://b%C3%BCcher.test/", Want: Refused},
		{Name: "IDN allowed", URL: "http://bücher.test/", Allow: "10.0.0.0/8", Want: Pass},
		{Name: "IDN with a hyphen at a label end", URL: "http://bücher-.test/", Want: Invalid},
		{Name: "IDN with a disallowed ASCII rune", URL: "http://a_b.bücher.test/", Want: Invalid},
		{Name: "IDN mapping to nothing", URL: "http://%C2%AD/", Want: Invalid},
		{Name: "name to metadata", URL: "http://metadata.test/", Want: Refused},
		{Name: "one public one private", URL: "http://mixed.test/", Want: Refused, WantRange: "10.0.0.0/8 private (RFC 1918)"},
		{Name: "resolver answers mapped loopback", URL: "http://mapped.test/", Want: Refused},
		{Name: "unknown name is not a refusal", URL: "http://nx.test/", Want: Unresolved},
		// Public destinations pass.
		{Name: "8.8.8.8", URL: "http://8.8.8.8/", Want: Pass},
		{Name: "1.1.1.1", URL: "https://1.1.1.1/", Want: Pass},
		{Name: "8.8.8.8 decimal", URL: "http://134744072/", Want: Pass},
		{Name: "public v6", URL: "http://[2606:4700::1111]/", Want: Pass},
		{Name: "Teredo with public client", URL: "http://[2001:0:4136:e378:8000:63bf:f7f7:f7f7]/", Want: Pass},
		{Name: "6to4 with public IPv4", URL: "http://[2002:808:808::1]/", Want: Pass},
		{Name: "NAT64 with public IPv4", URL: "http://[64:ff9b::8.8.8.8]/", Want: Pass},
		{Name: "NAT64 local-use with public IPv4", URL: "http://[64:ff9b:1::808:808]/", Want: Pass},
		{Name: "mapped public", URL: "http://[::ffff:8.8.8.8]/", Want: Pass},
		{Name: "just past 172.16/12", URL: "http://172.32.0.1/", Want: Pass},
		{Name: "just past 100.64/10", URL: "http://100.128.0.1/", Want: Pass},
		{Name: "public name", URL: "http://public.test/", Want: Pass},
		{Name: "public v6 name with port", URL: "http://v6public.test:8443/", Want: Pass},
		{Name: "public IDN", URL: "http://Öffentlich.test/", Want: Pass},
		{Name: "resolver answers mapped public", URL: "http://mappedpublic.test/", Want: Pass},
		// Operators' allow list.
		{Name: "allow-listed private", URL: "http://10.1.2.3/", Allow: "10.0.0.0/8", Want: Pass},
		{Name: "allow-listed single address", URL: "http://10.1.2.3/", Allow: "10.1.2.3/32", Want: Pass},
		{Name: "neighbour of an allowed address", URL: "http://10.1.2.4/", Allow: "10.1.2.3/32", Want: Refused},
		{Name: "allowed loopback through mapping", URL: "http://[::ffff:127.0.0.1]/", Allow: "127.0.0.0/8", Want: Pass},
		{Name: "allowed loopback through 6to4", URL: "http://[2002:7f00:1::]/", Allow: "127.0.0.0/8", Want: Pass},
		{Name: "allowing v4 loopback leaves ::1", URL: "http://[::1]/", Allow: "127.0.0.0/8", Want: Refused},
		{Name: "allowed link-local with zone", URL: "http://[fe80::1%25eth0]/", Allow: "fe80::/10", Want: Pass},
		{Name: "mapped allow prefix allows IPv4", URL: "http://10.9.9.9/", Allow: "::ffff:10.0.0.0/104", Want: Pass},
		{Name: "allowed name", URL: "http://localhost/", Allow: "127.0.0.1/32 ::1/128", Want: Pass},
		{Name: "name half allowed", URL: "http://mixed.test/", Allow: "192.0.2.0/24", Want: Refused},
	}
}
