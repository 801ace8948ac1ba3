package robots

import (
	"slices"
	"strings"
	"time"
)

const upperHex = "0123456789ABCDEF"

// normalize brings a pattern (pattern true) or a URL's path and query to
// the form RFC 9309 2.2.2 compares: octets outside printable ASCII (and
// the characters a URL may not carry unencoded) percent-encoded, %xx of an
// unreserved character decoded, other %xx upper-cased. In a URL a literal
// "*" or "$" becomes %2A or %24, so that a pattern can name one only by
// encoding it, its bare form being special (2.2.3).
func normalize(s string, pattern bool) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			d := unhex(s[i+1])<<4 | unhex(s[i+2])
			if isUnreserved(d) {
				b.WriteByte(d)
			} else {
				b.WriteByte('%')
				b.WriteByte(upperHex[d>>4])
				b.WriteByte(upperHex[d&15])
			}
			i += 2
		case !pattern && (c == '*' || c == '$'), mustEncode(c):
			b.WriteByte('%')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&15])
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// mustEncode reports whether c never appears bare in a URL sent on the
// wire: controls, space, '%' not starting an escape, octets outside ASCII
// and the characters RFC 3986 neither reserves nor leaves unreserved.
func mustEncode(c byte) bool {
	return c <= ' ' || c >= 0x7F || strings.IndexByte("%\"<>\\^`{|}", c) >= 0
}

// matches reports whether pattern, anchored at the start of path, matches
// it: '*' matches any run of octets, a final '$' the end of path. It keeps
// the set of path offsets the pattern so far can end at, so the worst case
// is len(path)×len(pattern), never exponential.
func matches(path, pattern string) bool {
	pos := make([]int, 1, len(path)+1)
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		if c == '$' && i == len(pattern)-1 {
			return pos[len(pos)-1] == len(path)
		}
		if c == '*' {
			first := pos[0]
			pos = pos[:0]
			for p := first; p <= len(path); p++ {
				pos = append(pos, p)
			}
			continue
		}
		next := pos[:0]
		for _, p := range pos {
			if p < len(path) && path[p] == c {
				next = append(next, p+1)
			}
		}
		pos = next
		if len(pos) == 0 {
			return false
		}
	}
	return true
}

// Allowed reports whether agent (a User-Agent, of which only the product
// token counts) may fetch path, the path and query of a URL as sent
// (url.URL.RequestURI). The longest matching pattern wins and allow wins a
// tie; no match, or no group for agent, allows.
func (r *Rules) Allowed(agent, path string) bool {
	return r.allowed(token(agent), path)
}

// allowed is Allowed for tok, a product token already lower-cased.
func (r *Rules) allowed(tok, path string) bool {
	if path == "" || path[0] != '/' {
		path = "/" + path
	}
	if p, _, _ := strings.Cut(path, "?"); p == "/robots.txt" {
		return true
	}
	if r == nil {
		return true
	}
	path = normalize(path, false)
	best, allowed := -1, true
	groups, _ := r.chosen(tok)
	for _, g := range groups {
		for _, ru := range g.rules {
			n := len(ru.pattern)
			if n < best || (n == best && !ru.allow) || !matches(path, ru.pattern) {
				continue
			}
			best, allowed = n, ru.allow
		}
	}
	return allowed
}

// CrawlDelay returns the Crawl-delay of the groups chosen for agent (the
// largest, if several apply), and whether there is one.
func (r *Rules) CrawlDelay(agent string) (time.Duration, bool) {
	return r.crawlDelay(token(agent))
}

// crawlDelay is CrawlDelay for tok, a product token already lower-cased.
func (r *Rules) crawlDelay(tok string) (time.Duration, bool) {
	if r == nil {
		return 0, false
	}
	groups, named := r.chosen(tok)
	var d time.Duration
	found := false
	for _, g := range groups {
		for _, cd := range g.delays {
			if named && !slices.Contains(g.agents[:cd.agents], tok) || !named && !cd.global {
				continue
			}
			d, found = max(d, cd.d), true
		}
	}
	return d, found
}

// chosen returns the groups whose rules apply to tok, a lower-cased
// product token: every group naming it (named true), else every "*" group.
func (r *Rules) chosen(tok string) (_ []*group, named bool) {
	if groups := r.named[tok]; tok != "" && len(groups) > 0 {
		return groups, true
	}
	return r.global, false
}

// groupKey names the groups chosen for tok: tok itself when a group names
// it, "" when the "*" groups (or none) apply. Agents with one key are
// answered alike, so at most one more key than the file names tokens.
func (r *Rules) groupKey(tok string) string {
	if r == nil {
		return ""
	}
	if _, named := r.chosen(tok); named {
		return tok
	}
	return ""
}

// token is agent's product token, lower-cased: what a group is chosen by
// (RFC 9309 2.2.1 compares it without case).
func token(agent string) string { return strings.ToLower(ProductToken(agent)) }
