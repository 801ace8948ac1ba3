package main

import (
	"strings"
	"testing"
)

// FuzzParseBlocked: REPLICATOR_BLOCKED_DESTINATIONS never panics the
// parser, and what it accepts is at least one network with no host bits.
func FuzzParseBlocked(f *testing.F) {
	for _, s := range []string{"10.0.0.0/8", "127.0.0.0/8, ::1", ",", "10.0.0.1/8", "fe80::/10,ff00::/8", "1.2.3.4", "::ffff:1.2.3.4/128", " , 0.0.0.0/0 ,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got, err := parseBlocked(v)
		if err != nil {
			return
		}
		if len(got) == 0 {
			t.Fatalf("parseBlocked(%q) accepted no range", v)
		}
		for _, p := range got {
			if !p.IsValid() || p != p.Masked() {
				t.Fatalf("parseBlocked(%q) gave %v", v, p)
			}
		}
		if left := openedByBlocked(got); strings.Contains(v, "0.0.0.0/0") && strings.Contains(v, "::/0") && len(left) != 0 {
			t.Fatalf("every address blocked, yet %v left out", left)
		}
	})
}
