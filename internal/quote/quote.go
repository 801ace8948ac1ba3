// Package quote quotes untrusted text for error messages and fact details,
// bounded in length however hostile the text is.
package quote

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Bounded returns s quoted as strconv.Quote quotes it, with at most limit
// bytes between the quotes. Longer text is cut at a character boundary and
// "..." follows the closing quote; cut reports that it was.
//
// The bound is on the quoted form, not on s: a byte of invalid UTF-8 or a
// control character takes four or more bytes once escaped, so bounding the
// input would let hostile text grow a message several times over.
func Bounded(s string, limit int) (quoted string, cut bool) {
	if len(s) <= limit {
		if q := strconv.Quote(s); len(q)-2 <= limit {
			return q, false
		}
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); {
		_, w := utf8.DecodeRuneInString(s[i:])
		piece := strconv.Quote(s[i : i+w])
		piece = piece[1 : len(piece)-1]
		if b.Len()-1+len(piece) > limit {
			b.WriteString(`"...`)
			return b.String(), true
		}
		b.WriteString(piece)
		i += w
	}
	b.WriteByte('"')
	return b.String(), false
}
