package envelope

import "unicode/utf8"

// MaxDetailLength bounds a failure fact's detail, in bytes.
const MaxDetailLength = 1024

// BoundDetail cuts s to at most MaxDetailLength bytes, on a rune boundary,
// marking the cut with "…", so a detail is always valid UTF-8 of bounded
// length.
func BoundDetail(s string) string {
	if len(s) <= MaxDetailLength {
		return s
	}
	cut := MaxDetailLength - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
