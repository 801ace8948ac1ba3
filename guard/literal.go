package guard

import (
	"net/netip"
	"strings"
	"unicode/utf8"
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
// and "017700000001" all mean 127.0.0.1. One trailing dot is allowed, and
// fullwidth digits, letters and dots are read as their ASCII forms (IDNA
// maps them so).
//
// IPv6, bracketed or bare, in any form net/netip accepts (including a dotted
// IPv4 tail), with an optional zone: "fe80::1%eth0" and its URL-escaped form
// "fe80::1%25eth0" both return fe80::1 with zone "eth0". The guard strips
// zones before judging; the zone is kept for dialing. A "%" suffix after an
// IPv4 spelling is ignored the same way.
func ParseIPLiteral(host string) (netip.Addr, bool) {
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
	return parseIPv4(foldFullwidth(addrPart))
}

// foldFullwidth maps fullwidth ASCII (U+FF01-U+FF5E) and the ideographic full
// stops to ASCII, as IDNA mapping does before a URL host is parsed.
func foldFullwidth(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case 0xff01 <= r && r <= 0xff5e:
			b.WriteRune(r - 0xfee0)
		case r == 0x3002 || r == 0xff61: // IDEOGRAPHIC / HALFWIDTH IDEOGRAPHIC FULL STOP
			b.WriteByte('.')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
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
