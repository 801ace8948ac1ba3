package guard

import (
	"net/netip"
	"strings"
)

// ParseIPLiteral reports whether host is an IP address in any spelling a URL
// parser or a resolver accepts, and which address it means. Erring towards
// "yes" is safe: a literal is judged as the address it means, while a string
// wrongly taken for a name would reach a resolver that may read it as an
// address after all (glibc's inet_aton does).
//
// IPv4, following inet_aton and the WHATWG URL host parser: one to four
// dot-separated parts, each decimal, hexadecimal (0x or 0X, digits optional)
// or octal (a leading 0); the last part fills the remaining bytes, so
// "127.1", "127.0.1", "2130706433", "0x7f000001", "0x7f.0.0.1", "0177.0.0.1"
// and "017700000001" all mean 127.0.0.1. One trailing dot is allowed.
//
// A host that is not all ASCII is first converted as ASCIIHost does (the
// IDNA mapping net/http applies before dialing), so fullwidth, mathematical
// and circled digits, fullwidth letters and ideographic full stops read as
// the ASCII they map to: "１２７。０。０。１", "𝟏𝟐𝟕.𝟎.𝟎.𝟏" and "①②⑦.0.0.1"
// mean 127.0.0.1. A host that does not convert is not a literal.
//
// IPv6, bracketed or bare, in any form net/netip accepts (including a dotted
// IPv4 tail), with an optional zone: "fe80::1%eth0" and its URL-escaped form
// "fe80::1%25eth0" both return fe80::1 with zone "eth0". The guard strips
// zones before judging; the zone is kept for dialing. A "%" suffix after an
// IPv4 spelling is ignored the same way.
func ParseIPLiteral(host string) (netip.Addr, bool) {
	host, err := ASCIIHost(host)
	if err != nil {
		return netip.Addr{}, false
	}
	if len(host) >= 2 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1]
	}
	addrPart, zone, hasZone := strings.Cut(host, "%")
	if hasZone && len(zone) > 2 && strings.HasPrefix(zone, "25") {
		zone = zone[2:] // the URL escape of "%" (RFC 6874)
	}
	if strings.Contains(addrPart, ":") {
		a, err := netip.ParseAddr(addrPart)
		if err != nil || !a.Is6() {
			return netip.Addr{}, false
		}
		if zone != "" {
			a = a.WithZone(zone)
		}
		return a, true
	}
	return parseIPv4(addrPart)
}

// parseIPv4 reads the inet_aton / WHATWG spellings of an IPv4 address.
func parseIPv4(s string) (netip.Addr, bool) {
	if len(s) > 1 && s[len(s)-1] == '.' {
		s = s[:len(s)-1]
	}
	if s == "" {
		return netip.Addr{}, false
	}
	var parts [4]uint64
	n := 0
	for {
		part, rest, more := strings.Cut(s, ".")
		if n == len(parts) {
			return netip.Addr{}, false
		}
		v, ok := parseIPv4Number(part)
		if !ok {
			return netip.Addr{}, false
		}
		parts[n] = v
		n++
		if !more {
			break
		}
		s = rest
	}
	var v uint64
	for i := 0; i < n-1; i++ {
		if parts[i] > 0xff {
			return netip.Addr{}, false
		}
		v = v<<8 | parts[i]
	}
	lastBits := uint(8 * (5 - n))
	if parts[n-1] >= 1<<lastBits {
		return netip.Addr{}, false
	}
	v = v<<lastBits | parts[n-1]
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// parseIPv4Number reads one part: decimal, 0x-hex (no digits means 0, as in
// inet_aton and WHATWG), or 0-octal. Values past 2^32 are refused.
func parseIPv4Number(p string) (uint64, bool) {
	if p == "" {
		return 0, false
	}
	base := uint64(10)
	switch {
	case len(p) >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'):
		base, p = 16, p[2:]
	case len(p) >= 2 && p[0] == '0':
		base, p = 8, p[1:]
	}
	var v uint64
	for i := 0; i < len(p); i++ {
		c := p[i]
		var d uint64
		switch {
		case '0' <= c && c <= '9':
			d = uint64(c - '0')
		case 'a' <= c && c <= 'f':
			d = uint64(c-'a') + 10
		case 'A' <= c && c <= 'F':
			d = uint64(c-'A') + 10
		default:
			return 0, false
		}
		if d >= base {
			return 0, false
		}
		v = v*base + d
		if v > 1<<32 {
			return 0, false
		}
	}
	return v, true
}
