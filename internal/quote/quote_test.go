package quote

import (
	"strconv"
	"strings"
	"testing"
)

func TestBounded(t *testing.T) {
	tests := []struct {
		s, want string
		cut     bool
	}{
		{"", `""`, false},
		{"abcdefgh", `"abcdefgh"`, false},
		{"abcdefghi", `"abcdefgh"...`, true},
		{"café", `"café"`, false},
		{"abcdefgé", `"abcdefg"...`, true},      // é is two bytes: cut before it, never inside
		{"\xf6\xf6\xf6", `"\xf6\xf6"...`, true}, // each invalid byte is four once escaped
		{"a\nb", `"a\nb"`, false},
		{`"q"`, `"\"q\""`, false},
	}
	for _, tt := range tests {
		got, cut := Bounded(tt.s, 8)
		if got != tt.want || cut != tt.cut {
			t.Errorf("Bounded(%q, 8) = %s, %v; want %s, %v", tt.s, got, cut, tt.want, tt.cut)
		}
	}
}

func FuzzBounded(f *testing.F) {
	f.Add("ordinary text", 8)
	f.Add(strings.Repeat("\xf6", 200), 120)
	f.Add("nul\x00ctl\x1f", 4)
	f.Add("日本語のテキスト", 5)
	f.Fuzz(func(t *testing.T, s string, limit int) {
		if limit < 0 || limit > 1<<12 {
			return
		}
		got, cut := Bounded(s, limit)
		body := strings.TrimSuffix(got, "...")
		if cut != (body != got) {
			t.Fatalf("cut=%v but result %s", cut, got)
		}
		if len(body)-2 > limit {
			t.Fatalf("Bounded(%q, %d) = %s: %d bytes between the quotes", s, limit, got, len(body)-2)
		}
		text, err := strconv.Unquote(body)
		if err != nil {
			t.Fatalf("Bounded(%q, %d) = %s: not a quoted string: %v", s, limit, got, err)
		}
		if !strings.HasPrefix(s, text) || (!cut && text != s) {
			t.Fatalf("Bounded(%q, %d) = %s: not s or a prefix of it", s, limit, got)
		}
	})
}
