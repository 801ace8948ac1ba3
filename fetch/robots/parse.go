package robots

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MaxBytes is how much of a robots.txt is read and parsed: RFC 9309 asks
// for at least 500 KiB, and the rest of a larger file is ignored.
const MaxBytes = 500 << 10

// Rules is a parsed robots.txt. The zero value (and a nil *Rules) allows
// everything.
type Rules struct {
	groups []group
	// named maps each product token (lower-cased) to the groups naming it,
	// global lists the "*" groups: built once by Parse, so that whichever
	// agent asks, its groups cost one map lookup and the file is never
	// read again.
	named  map[string][]*group
	global []*group
}

// group is one or more user-agent lines and the rules after them.
type group struct {
	global bool     // a "*" line
	agents []string // product tokens, lower-cased
	rules  []rule
	delays []delay
}

// delay is a Crawl-delay line with the user-agent lines of its group that
// came before it: it is theirs. Crawl-delay does not end a group, so in
// "User-agent: *, Crawl-delay: 10, User-agent: a, Crawl-delay: 5" the 5
// is a's alone.
type delay struct {
	d      time.Duration
	agents int  // how many of the group's agents it follows
	global bool // whether it follows the group's "*" line
}

// rule is an allow or disallow line, its pattern already normalised.
type rule struct {
	allow   bool
	pattern string
}

// Parse reads a robots.txt body. Every line is tried; what does not parse
// is skipped, and rules before the first user-agent line belong to no
// group and are ignored. Parse reads all of body: a caller bounds it
// (MaxBytes).
func Parse(body []byte) *Rules {
	body = skipBOM(body)
	r := &Rules{}
	var cur *group
	lastWasRule := false
	for len(body) > 0 {
		var line []byte
		if i := bytes.IndexAny(body, "\r\n"); i >= 0 {
			crlf := body[i] == '\r' && i+1 < len(body) && body[i+1] == '\n'
			line, body = body[:i], body[i+1:]
			if crlf {
				body = body[1:]
			}
		} else {
			line, body = body, nil
		}
		key, value, ok := keyValue(line)
		if !ok {
			continue
		}
		switch key {
		case "user-agent":
			if cur == nil || lastWasRule {
				r.groups = append(r.groups, group{})
				cur = &r.groups[len(r.groups)-1]
			}
			lastWasRule = false
			if value != "" && value[0] == '*' && (len(value) == 1 || isSpace(value[1])) {
				cur.global = true
			} else if tok := ProductToken(value); tok != "" {
				cur.agents = append(cur.agents, strings.ToLower(tok))
			}
		case "allow", "disallow":
			if cur == nil {
				continue
			}
			lastWasRule = true
			if value == "" {
				// An empty pattern matches nothing worth a rule: "disallow:"
				// is the classic way of allowing everything.
				continue
			}
			cur.rules = append(cur.rules, rule{allow: key == "allow", pattern: normalize(value, true)})
		case "crawl-delay":
			if cur == nil {
				continue
			}
			// Not a group separator: a user-agent line after it still
			// joins the same group.
			if d, ok := parseDelay(value); ok {
				cur.delays = append(cur.delays, delay{d: d, agents: len(cur.agents), global: cur.global})
			}
		}
	}
	r.index()
	return r
}

// index fills r.named and r.global from r.groups, which no longer grows.
func (r *Rules) index() {
	r.named = make(map[string][]*group)
	for i := range r.groups {
		g := &r.groups[i]
		if g.global {
			r.global = append(r.global, g)
		}
		for j, tok := range g.agents {
			// A group naming a token twice is still chosen once.
			if !slices.Contains(g.agents[:j], tok) {
				r.named[tok] = append(r.named[tok], g)
			}
		}
	}
}

// skipBOM drops a UTF-8 byte order mark, or the first bytes of one, at the
// start of body.
func skipBOM(body []byte) []byte {
	bom := "\xEF\xBB\xBF"
	n := 0
	for n < len(bom) && n < len(body) && body[n] == bom[n] {
		n++
	}
	return body[n:]
}

// keys maps each accepted spelling of a key, lower-cased, to the key.
var keys = map[string]string{
	"user-agent": "user-agent", "useragent": "user-agent", "user agent": "user-agent",
	"allow":    "allow",
	"disallow": "disallow", "dissallow": "disallow", "dissalow": "disallow",
	"disalow": "disallow", "diasllow": "disallow", "disallaw": "disallow",
	"crawl-delay": "crawl-delay", "crawldelay": "crawl-delay",
}

// keyValue splits a line into a known key and its value, comment and
// surrounding white space removed. A line with no colon is read when it
// is exactly two words.
func keyValue(line []byte) (key, value string, ok bool) {
	if i := bytes.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	s := strings.TrimFunc(string(line), isSpaceRune)
	if s == "" {
		return "", "", false
	}
	k, v, found := strings.Cut(s, ":")
	if !found {
		i := strings.IndexFunc(s, isSpaceRune)
		if i < 0 {
			return "", "", false
		}
		k, v = s[:i], strings.TrimFunc(s[i:], isSpaceRune)
		if strings.IndexFunc(v, isSpaceRune) >= 0 {
			return "", "", false
		}
	}
	key, ok = keys[strings.ToLower(strings.TrimFunc(k, isSpaceRune))]
	return key, strings.TrimFunc(v, isSpaceRune), ok
}

func isSpace(c byte) bool     { return c == ' ' || c == '\t' || c == '\v' || c == '\f' }
func isSpaceRune(c rune) bool { return c < 0x80 && isSpace(byte(c)) }
func isTokenByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c == '-'
}
func isUnreserved(c byte) bool { return isTokenByte(c) || '0' <= c && c <= '9' || c == '.' || c == '~' }
func isHex(c byte) bool        { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// parseDelay reads a Crawl-delay value: non-negative seconds, fractions
// allowed. Anything else is ignored.
func parseDelay(v string) (time.Duration, bool) {
	s, err := strconv.ParseFloat(v, 64)
	if err != nil || s < 0 || s != s {
		return 0, false
	}
	// Far above any cap, and inside what a Duration holds.
	return time.Duration(min(s, 1e9) * float64(time.Second)), true
}

// ProductToken is the product token of a User-Agent: its leading run of
// letters, '_' and '-' (RFC 9309 2.2.1). "replicator/1.0 (+https://…)"
// gives "replicator".
func ProductToken(userAgent string) string {
	userAgent = strings.TrimLeft(userAgent, " \t")
	i := 0
	for i < len(userAgent) && isTokenByte(userAgent[i]) {
		i++
	}
	return userAgent[:i]
}
