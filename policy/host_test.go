package policy

import (
	"strings"
	"testing"

	"github.com/replicator-go/replicator/guard"
)

func TestHostKey(t *testing.T) {
	tests := []struct {
		host string
		want string
	}{
		// Names: lower-cased, no trailing dot, ASCII as net/http dials it.
		{host: "example.test", want: "example.test"},
		{host: "Example.TEST.", want: "example.test"},
		{host: "example.test..", want: "example.test"},
		{host: "_srv.a_b.test", want: "_srv.a_b.test"},
		{host: "bücher.test", want: "xn--bcher-kva.test"},
		{host: "BÜCHER.test.", want: "xn--bcher-kva.test"},
		{host: "xn--BCHER-kva.test", want: "xn--bcher-kva.test"},
		{host: "ｌｏｃａｌｈｏｓｔ", want: "localhost"},
		{host: "ß.test", want: "xn--zca.test"},
		// Names with no ASCII form: lower-cased, otherwise as they are.
		{host: "BÜCHER-.Test", want: "bücher-.test"},
		{host: "A_B.Bücher.test.", want: "a_b.bücher.test"},
		// IP literals: the address they mean.
		{host: "127.0.0.1", want: "127.0.0.1"},
		{host: "2130706433", want: "127.0.0.1"},
		{host: "127.1", want: "127.0.0.1"},
		{host: "0x7f.1", want: "127.0.0.1"},
		{host: "0X7F000001", want: "127.0.0.1"},
		{host: "0177.0.0.1", want: "127.0.0.1"},
		{host: "127.0.0.1.", want: "127.0.0.1"},
		{host: "１２７。０。０。１", want: "127.0.0.1"},
		{host: "𝟏𝟐𝟕.𝟎.𝟎.𝟏", want: "127.0.0.1"},
		{host: "::ffff:127.0.0.1", want: "127.0.0.1"},
		{host: "[::ffff:7f00:1]", want: "127.0.0.1"},
		{host: "::1", want: "::1"},
		{host: "0:0:0:0:0:0:0:1", want: "::1"},
		{host: "2001:DB8::0001", want: "2001:db8::1"},
		{host: "fe80::1%25ETH0", want: "fe80::1"},
		{host: "[fe80::1%eth0.]", want: "fe80::1"},
		{host: "1.2.3.4%eth0", want: "1.2.3.4"},
		// Neither: not addresses, so names.
		{host: "256.1.1.1", want: "256.1.1.1"},
		{host: "1.2.3.4.5", want: "1.2.3.4.5"},
		{host: "", want: ""},
		{host: ".", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			got := HostKey(tt.host)
			if got != tt.want {
				t.Fatalf("HostKey(%q) = %q; want %q", tt.host, got, tt.want)
			}
			if again := HostKey(got); again != got {
				t.Errorf("HostKey(%q) = %q; a key must be its own key", got, again)
			}
		})
	}
}

func FuzzHostKey(f *testing.F) {
	// Seed corpus: names, IDNs, literals in many spellings, and hosts with
	// no ASCII form.
	f.Add("Example.TEST.")      // case and trailing dot
	f.Add("bücher.test")        // IDN
	f.Add("ｌｏｃａｌｈｏｓｔ")          // fullwidth name
	f.Add("0x7f.1")             // short hex literal
	f.Add("１２７。０。０。１")          // fullwidth literal
	f.Add("[::ffff:127.0.0.1]") // mapped
	f.Add("fe80::1%25eth0")     // zone
	f.Add("127.1..")            // a name that trims to a literal
	f.Add("bücher-.test")       // no ASCII form
	f.Add("İ.test")             // lower-cases to two runes
	f.Add("[::aaaa%000.]")      // a zone ending in a dot
	f.Add("Ӏ")                  // no ASCII form until lower-cased
	f.Fuzz(func(t *testing.T, host string) {
		key := HostKey(host)
		if again := HostKey(key); again != key {
			t.Fatalf("HostKey(%q) = %q, but HostKey(%q) = %q", host, key, key, again)
		}
		if key != strings.ToLower(key) || strings.HasSuffix(key, ".") {
			t.Fatalf("HostKey(%q) = %q is not lower-case without a trailing dot", host, key)
		}
		if a, ok := guard.ParseIPLiteral(host); ok {
			// Every spelling the guard reads as a literal shares the key of
			// the address it means.
			a = a.WithZone("").Unmap()
			if key != a.String() {
				t.Fatalf("HostKey(%q) = %q; the literal means %v", host, key, a)
			}
			if b, ok := guard.ParseIPLiteral(key); !ok || b.Unmap() != a {
				t.Fatalf("HostKey(%q) = %q, which does not parse back to %v", host, key, a)
			}
		}
		if name, err := guard.ASCIIHost(host); err == nil {
			// The key is that of the name net/http dials.
			if got := HostKey(name); got != key {
				t.Fatalf("HostKey(%q) = %q but HostKey of its ASCII name %q = %q", host, key, name, got)
			}
		}
	})
}
