package guard_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/http/httpguts"

	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/internal/hosts"
)

// detailPattern is the only text an OptionsError may add after what its
// Rule and Header produce: a count or a byte total, never a value.
var detailPattern = regexp.MustCompile(`^( \(\d+ (given|bytes)\))?$`)

func FuzzSanitizeHeaders(f *testing.F) {
	// Seed corpus: name1, value1, name2, value2, filler headers to add.
	f.Add("Accept", "text/html", "User-Agent", "watcher/1.0", uint8(0)) // ordinary, folded
	f.Add("accept", " text/html ", "x-a", "\t\r\nv\r\n", uint8(0))      // trimmed values
	f.Add("User-Agent", "a", "user-agent", "b", uint8(0))               // case collision
	f.Add("Accept", "x", "accept", "x", uint8(0))                       // collision, equal values
	f.Add("X-Test", "one\r\nX-Injected: two", "a", "b", uint8(0))       // request splitting
	f.Add("X-Test", "caf\xe9", "a", "b", uint8(0))                      // obs-text
	f.Add("X-Test", "a\tb", "a", "b", uint8(0))                         // interior HTAB
	f.Add("Host", "elsewhere", "a", "b", uint8(0))                      // derived header
	f.Add("Proxy-Authorization", "Basic x", "a", "b", uint8(0))         // proxy-*
	f.Add("user agent", "x", "user:agent", "y", uint8(0))               // not tokens
	f.Add("", "x", "\u212aey", "y", uint8(0))                           // empty name, KELVIN SIGN
	f.Add("a", "b", "c", "d", uint8(30))                                // 32 headers
	f.Add("a", "b", "c", "d", uint8(31))                                // 33 headers
	f.Add("x-big", strings.Repeat("v", 8183), "", "", uint8(0))         // exactly 8192 bytes
	f.Add("x-big", strings.Repeat("v", 8184), "", "", uint8(0))         // 8193 bytes
	f.Add("x-a", "\u00a0v\u3000", "x-b", "\x1fv\x1c", uint8(0))         // Python-style white space
	f.Fuzz(func(t *testing.T, n1, v1, n2, v2 string, fill uint8) {
		in := map[string]string{n1: v1, n2: v2}
		for i := range int(fill % 40) {
			in["x-fill-"+strconv.Itoa(i)] = "v"
		}
		out, err := guard.SanitizeHeaders(in)
		if err != nil {
			var oe *guard.OptionsError
			if !errors.As(err, &oe) || !errors.Is(err, guard.ErrInvalidOptions) || out != nil {
				t.Fatalf("refusal %v (%T) with output %v", err, err, out)
			}
			if _, ok := in[oe.Header]; oe.Header != "" && !ok {
				t.Fatalf("refusal names %q, which was not given", oe.Header)
			}
			base := (&guard.OptionsError{Rule: oe.Rule, Header: oe.Header}).Error()
			msg := err.Error()
			if !strings.HasPrefix(msg, base) || !detailPattern.MatchString(msg[len(base):]) {
				t.Fatalf("message %q adds more than a count to %q", msg, base)
			}
			return
		}
		if len(out) != len(in) {
			t.Fatalf("accepted %d headers as %d", len(in), len(out))
		}
		total := 0
		for name, value := range in {
			key := strings.ToLower(name)
			got, ok := out[key]
			if !ok {
				t.Fatalf("accepted name %q is missing from the output as %q", name, key)
			}
			if !strings.Contains(value, got) {
				t.Fatalf("value for %q changed beyond trimming: %q -> %q", name, value, got)
			}
			total += len(key) + len(got) + 4
		}
		if total > guard.MaxHeaderBytes || len(out) > guard.MaxHeaders {
			t.Fatalf("accepted %d headers of %d bytes", len(out), total)
		}
		for name, value := range out {
			if name != strings.ToLower(name) || !httpguts.ValidHeaderFieldName(name) {
				t.Fatalf("accepted name %q is not a lower-case token", name)
			}
			if name == "host" || name == "connection" || strings.HasPrefix(name, "proxy-") {
				t.Fatalf("accepted refused name %q", name)
			}
			if value != strings.TrimSpace(value) {
				t.Fatalf("accepted value %q keeps surrounding space", value)
			}
			for i := 0; i < len(value); i++ {
				if value[i] < 0x20 || value[i] > 0x7e {
					t.Fatalf("accepted value %q has byte %#02x", value, value[i])
				}
			}
		}
		again, err := guard.SanitizeHeaders(out)
		if err != nil {
			t.Fatalf("sanitized headers refused on a second pass: %v", err)
		}
		if diff := cmp.Diff(out, again); diff != "" {
			t.Fatalf("sanitizing is not idempotent (-first +second):\n%s", diff)
		}
	})
}

// spellings returns ways a URL or resolver may write the IPv4 address v.
func spellings(v uint32) []string {
	b := [4]uint32{v >> 24, v >> 16 & 0xff, v >> 8 & 0xff, v & 0xff}
	return []string{
		fmt.Sprintf("%d.%d.%d.%d", b[0], b[1], b[2], b[3]),
		fmt.Sprintf("%d.%d.%d.%d.", b[0], b[1], b[2], b[3]),
		strconv.FormatUint(uint64(v), 10),
		fmt.Sprintf("0x%x", v),
		fmt.Sprintf("0X%08X", v),
		fmt.Sprintf("0%o", v),
		fmt.Sprintf("0x%x.0x%x.0x%x.0x%x", b[0], b[1], b[2], b[3]),
		fmt.Sprintf("0%o.0%o.0%o.0%o", b[0], b[1], b[2], b[3]),
		fmt.Sprintf("%d.%d.%d", b[0], b[1], v&0xffff),
		fmt.Sprintf("%d.%d", b[0], v&0xffffff),
		fmt.Sprintf("0x%x.%d", b[0], v&0xffffff),
		// Unicode digits IDNA maps to ASCII, as net/http does before dialing.
		mapDigits(fmt.Sprintf("%d.%d.%d.%d", b[0], b[1], b[2], b[3]), '０', '。'), // fullwidth
		mapDigits(strconv.FormatUint(uint64(v), 10), '𝟎', '.'),                  // mathematical bold
		mapDigits(fmt.Sprintf("%d.%d", b[0], v&0xffffff), '𝟶', '｡'),             // monospace, halfwidth stop
	}
}

// mapDigits rewrites the ASCII digits of s from zero on and its dots as dot.
func mapDigits(s string, zero, dot rune) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case '0' <= r && r <= '9':
			b.WriteRune(zero + r - '0')
		case r == '.':
			b.WriteRune(dot)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// embeddings returns IPv6 addresses carrying the IPv4 address v; extra fills
// the bits the embedding does not use.
func embeddings(v uint32, extra uint32) []netip.Addr {
	var tail [4]byte
	binary.BigEndian.PutUint32(tail[:], v)
	var inverted [4]byte
	binary.BigEndian.PutUint32(inverted[:], ^v)
	var ex [4]byte
	binary.BigEndian.PutUint32(ex[:], extra)
	mk := func(prefix []byte, mid []byte, end [4]byte) netip.Addr {
		var a [16]byte
		copy(a[:], prefix)
		copy(a[len(prefix):12], mid)
		copy(a[12:], end[:])
		return netip.AddrFrom16(a)
	}
	sixToFour := [16]byte{0x20, 0x02, tail[0], tail[1], tail[2], tail[3], ex[0], ex[1], ex[2], ex[3], 0, 0, 0, 0, 0, 1}
	return []netip.Addr{
		mk([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, nil, tail),       // IPv4-mapped
		mk([]byte{0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0}, nil, tail),    // NAT64
		mk([]byte{0, 0x64, 0xff, 0x9b, 0, 1}, append(ex[:], ex[:2]...), tail), // NAT64 local-use
		netip.AddrFrom16(sixToFour),                                           // 6to4
		mk([]byte{0x20, 0x01, 0, 0}, append(ex[:], ex[:]...), inverted),       // Teredo
	}
}

func FuzzDestination(f *testing.F) {
	// Seed corpus: a host as it may appear in a URL, an IPv4 address as a
	// number, and filler bits for the embeddings.
	f.Add("127.0.0.1", uint32(0x7f000001), uint32(0))                     // loopback
	f.Add("2130706433", uint32(0xa9fea9fe), uint32(0x4136e378))           // decimal; metadata
	f.Add("0x7f.1", uint32(0x08080808), uint32(0x800063bf))               // short hex; public
	f.Add("0177.0.0.1", uint32(0x0a000001), uint32(0xffffffff))           // octal; private
	f.Add("[::ffff:7f00:1]", uint32(0xc0586301), uint32(1))               // mapped; 6to4 relay
	f.Add("[fe80::1%25eth0]", uint32(0x64400001), uint32(2))              // zone; shared space
	f.Add("[2001:0:4136:e378:8000:63bf:80ff:fffe]", uint32(0), uint32(3)) // Teredo; this network
	f.Add("[64:ff9b:1::7f00:1]", uint32(0xffffffff), uint32(4))           // local NAT64; broadcast
	f.Add("１２７.０.０.１", uint32(0xe0000001), uint32(5))                     // fullwidth; multicast
	f.Add("𝟏𝟐𝟕.𝟎.𝟎.𝟏", uint32(0xc0a80001), uint32(8))                     // mathematical bold; private
	f.Add("①②⑦.0.0.1", uint32(0xc6336401), uint32(9))                     // circled; documentation
	f.Add("ｌｏｃａｌｈｏｓｔ", uint32(0x5db8d70e), uint32(10))                    // fullwidth name; public
	f.Add("bücher.test", uint32(0x0a000007), uint32(11))                  // IDN to private; private
	f.Add("bücher-.test", uint32(0x64400001), uint32(12))                 // no ASCII form
	f.Add("１２７.０.０.１%eth0", uint32(0x7f000001), uint32(13))               // no ASCII form (zone)
	f.Add("example.test", uint32(0x01010101), uint32(6))                  // a name; public
	f.Add("4294967296", uint32(0xac100001), uint32(7))                    // too big; private
	resolver := hosts.Resolver{Table: map[string][]netip.Addr{
		"localhost":          {netip.MustParseAddr("127.0.0.1")},
		"xn--bcher-kva.test": {netip.MustParseAddr("10.0.0.7")},
		"public.test":        {netip.MustParseAddr("93.184.215.14")},
	}}
	guards := []*guard.Guard{
		guard.New(guard.Options{Resolver: resolver}),
		guard.New(guard.Options{Resolver: resolver, Allow: []netip.Prefix{
			netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}}),
	}
	f.Fuzz(func(t *testing.T, host string, v uint32, extra uint32) {
		ctx := context.Background()
		for _, g := range guards {
			// Any host: judged as the ASCII name net/http dials for it; a
			// literal is judged as the address it means.
			a, ok := guard.ParseIPLiteral(host)
			name, convErr := guard.ASCIIHost(host)
			_, hostErr := g.CheckHost(ctx, host)
			switch {
			case convErr != nil:
				if ok || !errors.Is(convErr, guard.ErrInvalidHost) {
					t.Fatalf("ASCIIHost(%q) = %v, yet ParseIPLiteral ok=%v", host, convErr, ok)
				}
				if host != "" && (!errors.Is(hostErr, guard.ErrInvalidHost) || errors.Is(hostErr, guard.ErrRefused) || errors.Is(hostErr, guard.ErrResolve)) {
					t.Fatalf("CheckHost(%q) on a host with no ASCII form = %v", host, hostErr)
				}
			case name != host:
				// Conversion is what net/http does: done once, judged once.
				if again, err := guard.ASCIIHost(name); err != nil || again != name {
					t.Fatalf("ASCIIHost(%q) = %q, then %q, %v", host, name, again, err)
				}
				if b, bok := guard.ParseIPLiteral(name); bok != ok || b != a {
					t.Fatalf("ParseIPLiteral(%q) = %v, %v but of its ASCII name %q = %v, %v", host, a, ok, name, b, bok)
				}
				_, nameErr := g.CheckHost(ctx, name)
				if (hostErr == nil) != (nameErr == nil) || errors.Is(hostErr, guard.ErrRefused) != errors.Is(nameErr, guard.ErrRefused) {
					t.Fatalf("CheckHost(%q) = %v but CheckHost(%q) = %v", host, hostErr, name, nameErr)
				}
			}
			switch answers, known := resolver.Table[hosts.Name(name)]; {
			case convErr != nil:
			case ok:
				want := g.CheckAddr(a) == nil
				if got := hostErr == nil; got != want {
					t.Fatalf("CheckHost(%q) pass=%v, CheckAddr(%v) pass=%v", host, got, a, want)
				}
				if noZone := g.CheckAddr(a.WithZone("")) == nil; noZone != want {
					t.Fatalf("zone changes the verdict on %v", a)
				}
			case known && name != "":
				want := true
				for _, ans := range answers {
					want = want && g.CheckAddr(ans) == nil
				}
				if got := hostErr == nil; got != want {
					t.Fatalf("CheckHost(%q) pass=%v (%v), but its answers %v pass=%v", host, got, hostErr, answers, want)
				}
			case hostErr == nil || (!errors.Is(hostErr, guard.ErrResolve) && !errors.Is(hostErr, guard.ErrRefused)):
				t.Fatalf("CheckHost(%q) on a name with no answers = %v", host, hostErr)
			}

			// One IPv4 address: every spelling and embedding agrees.
			addr := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
			want := g.CheckAddr(addr) == nil
			for _, s := range spellings(v) {
				got, ok := guard.ParseIPLiteral(s)
				if !ok || got != addr {
					t.Fatalf("ParseIPLiteral(%q) = %v, %v; want %v", s, got, ok, addr)
				}
				if _, err := g.CheckHost(ctx, s); (err == nil) != want {
					t.Fatalf("CheckHost(%q) = %v, but %v passes=%v", s, err, addr, want)
				}
			}
			for _, e := range embeddings(v, extra) {
				if got := g.CheckAddr(e) == nil; got != want {
					t.Fatalf("CheckAddr(%v) pass=%v, but the IPv4 %v it carries pass=%v", e, got, addr, want)
				}
				if got := g.Control("tcp6", netip.AddrPortFrom(e, 443).String(), nil) == nil; got != want {
					t.Fatalf("Control(%v) pass=%v, want %v", e, got, want)
				}
			}
		}
	})
}
