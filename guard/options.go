package guard

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"golang.org/x/net/http/httpguts"

	"github.com/replicator-go/replicator/internal/quote"
)

// Limits on a command's request options (docs/security.md, Request options). They are constants rather
// than settings: they bound an unauthenticated capability, and a knob would
// only ever be turned to loosen it.
const (
	// MaxHeaders is the most headers one command may carry.
	MaxHeaders = 32
	// MaxHeaderBytes bounds the headers' size on the wire, counted as
	// len(name) + len(value) + 4 per header (": " and CRLF). 8 KiB is the
	// common origin-side limit; past it the origin answers an opaque 400.
	MaxHeaderBytes = 8192
	// DefaultTimeout is the per-operation timeout when a command gives none.
	DefaultTimeout = 30 * time.Second
	// DefaultMaxTimeout is the largest timeout a command may ask for when the
	// operator set no other ceiling (REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS).
	DefaultMaxTimeout = 120 * time.Second
)

// ErrInvalidOptions is wrapped by every refusal of a command's request
// options; the fetcher maps it to the invalid_request_options reason.
var ErrInvalidOptions = errors.New("guard: invalid request options")

// Rules an OptionsError can name. They are stable values a caller may branch
// on or record; the error text is for people.
const (
	RuleTooManyHeaders  = "too-many-headers"  // more than MaxHeaders
	RuleHeadersTooLarge = "headers-too-large" // more than MaxHeaderBytes
	RuleInvalidName     = "invalid-name"      // not an RFC 9110 token
	RuleRefusedName     = "refused-name"      // hop-by-hop, host, content-length, proxy-*
	RuleCaseCollision   = "case-collision"    // two names equal after lower-casing
	RuleInvalidValue    = "invalid-value"     // a byte outside \x20-\x7e after trimming
	RuleInvalidTimeout  = "invalid-timeout"   // ≤ 0, NaN or ±Inf
	RuleTimeoutTooLong  = "timeout-too-long"  // over the ceiling
)

// OptionsError is a refused request option. It unwraps to ErrInvalidOptions.
//
// Its message names the rule and the header as the issuer spelled it, and
// never contains a header value: values can carry credentials, and the
// message reaches logs and a broadcast fact.
type OptionsError struct {
	// Rule is one of the Rule* constants.
	Rule string
	// Header is the offending name as the issuer spelled it, so it can be
	// found in the issuer's own code; "" for the count, size and timeout
	// rules, which are not about one header.
	Header string

	detail string // numbers for the count, size and timeout rules; never a header value
}

// ruleText says what each rule means, for Error.
var ruleText = map[string]string{
	RuleTooManyHeaders:  "more than " + strconv.Itoa(MaxHeaders) + " headers",
	RuleHeadersTooLarge: "headers exceed " + strconv.Itoa(MaxHeaderBytes) + " bytes",
	RuleInvalidName:     "name is not an RFC 9110 token",
	RuleRefusedName:     "not a header the fetcher sends on an issuer's behalf (hop-by-hop, derived, or proxy-*)",
	RuleCaseCollision:   "given more than once, differing only in case",
	RuleInvalidValue:    "value has a byte outside printable US-ASCII (\\x20-\\x7e)",
	RuleInvalidTimeout:  "timeout_seconds is not a positive finite duration",
	RuleTimeoutTooLong:  "timeout_seconds is over the ceiling",
}

// maxNameInMessage bounds how much of a name an error quotes, so a hostile
// command cannot make the message (and the fact carrying it) arbitrarily long.
const maxNameInMessage = 64

// Error names the header (its name bounded) and the rule it breaks, never
// the header's value.
func (e *OptionsError) Error() string {
	var b strings.Builder
	b.WriteString(ErrInvalidOptions.Error())
	b.WriteString(": ")
	if e.Header != "" || e.Rule == RuleInvalidName {
		b.WriteString("header ")
		b.WriteString(quoteName(e.Header))
		b.WriteString(": ")
	}
	if text, ok := ruleText[e.Rule]; ok {
		b.WriteString(text)
	} else {
		b.WriteString(e.Rule)
	}
	if e.detail != "" {
		b.WriteString(" (")
		b.WriteString(e.detail)
		b.WriteString(")")
	}
	return b.String()
}

// Unwrap returns ErrInvalidOptions.
func (e *OptionsError) Unwrap() error { return ErrInvalidOptions }

func quoteName(name string) string {
	q, cut := quote.Bounded(name, maxNameInMessage)
	if cut {
		q += " (" + strconv.Itoa(len(name)) + " bytes)"
	}
	return q
}

// refusedNames are never sent on an issuer's behalf. The hop-by-hop set
// (RFC 9110 §7.6.1) describes one connection, which the transport owns;
// host and content-length are derived, and overriding host would address one
// origin while contacting another.
var refusedNames = map[string]bool{
	"connection":        true,
	"keep-alive":        true,
	"proxy-connection":  true,
	"te":                true,
	"trailer":           true,
	"transfer-encoding": true,
	"upgrade":           true,
	"host":              true,
	"content-length":    true,
}

// refusedPrefix refuses every Proxy-* header: they configure the hop, and a
// list of them would date.
const refusedPrefix = "proxy-"

// SanitizeHeaders checks a command's headers against docs/security.md, Request options, and returns them
// as they go on the wire: names lower-cased, values with surrounding
// whitespace removed. Nothing else is adjusted: a header that breaks a rule
// refuses the whole set with an *OptionsError. A nil map returns nil (the
// defaults apply); an empty map returns an empty map.
//
// Rules, in the order they are judged:
//
//  1. more than MaxHeaders headers;
//  2. then each header in sorted order of its name as spelled (so the error
//     is the same on every run): a name that is not an RFC 9110 token once
//     ASCII letters are lower-cased (non-ASCII, spaces, ':', surrounding
//     whitespace and the empty name all fail); a refused name; a name equal
//     to an earlier one after lower-casing, even with an equal value; a value
//     that, trimmed, has a byte outside \x20-\x7e (CR, LF, NUL, interior HTAB,
//     obs-text);
//  3. then the total size, len(name)+len(value)+4 per header, over
//     MaxHeaderBytes. The value is counted after trimming: it is what goes
//     on the wire.
//
// Trimming removes Unicode white space (SP, HTAB, LF, VT, FF, CR, U+0085,
// U+00A0, …) and \x1c-\x1f, so every command the Python worker accepts is
// accepted here (docs/security.md, Request options). Only ASCII letters are
// lower-cased, so a name like "\u212aey" (KELVIN SIGN) is refused rather
// than folded into "key".
//
// SanitizeHeaders is a pure function, safe for concurrent use.
func SanitizeHeaders(h map[string]string) (map[string]string, error) {
	if h == nil {
		return nil, nil
	}
	if len(h) > MaxHeaders {
		return nil, &OptionsError{Rule: RuleTooManyHeaders, detail: strconv.Itoa(len(h)) + " given"}
	}
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	slices.Sort(names)

	out := make(map[string]string, len(h))
	total := 0
	for _, name := range names {
		key, ok := lowerToken(name)
		if !ok {
			return nil, &OptionsError{Rule: RuleInvalidName, Header: name}
		}
		if refusedNames[key] || strings.HasPrefix(key, refusedPrefix) {
			return nil, &OptionsError{Rule: RuleRefusedName, Header: name}
		}
		if _, dup := out[key]; dup {
			return nil, &OptionsError{Rule: RuleCaseCollision, Header: name}
		}
		value := trimValue(h[name])
		if !printable(value) {
			return nil, &OptionsError{Rule: RuleInvalidValue, Header: name}
		}
		// Bytes, not characters: exact because both the name and the value
		// are ASCII by now.
		total += len(key) + len(value) + 4
		out[key] = value
	}
	if total > MaxHeaderBytes {
		return nil, &OptionsError{Rule: RuleHeadersTooLarge, detail: strconv.Itoa(total) + " bytes"}
	}
	return out, nil
}

// ScreenHeaders applies SanitizeHeaders' rules for an issuer at mint time:
// a command whose headers fail here would be refused by the worker with
// invalid_request_options, so an issuer should not publish it. It returns
// the same *OptionsError SanitizeHeaders would.
func ScreenHeaders(h map[string]string) error {
	_, err := SanitizeHeaders(h)
	return err
}

// SendableValidator reports whether a stored validator (an etag or
// last_modified taken from an earlier fact) can be replayed as a request
// header value (If-None-Match, If-Modified-Since) without the command being
// refused. It applies the value rule of SanitizeHeaders and also rejects a
// value that is blank once trimmed: an empty validator is sendable but
// validates nothing, so an issuer should drop it too.
//
// An issuer that gets false should mint the command without the validator
// (one unconditional fetch) rather than mint one that is refused forever.
// The count and size limits are properties of the whole header set; check
// them with ScreenHeaders.
func SendableValidator(value string) bool {
	v := trimValue(value)
	return v != "" && printable(v)
}

// lowerToken lower-cases ASCII letters and reports whether the result is an
// RFC 9110 token. Non-ASCII bytes are never tokens, so no Unicode folding
// can turn a foreign name into a valid one.
func lowerToken(name string) (string, bool) {
	if !httpguts.ValidHeaderFieldName(name) {
		return "", false
	}
	for i := 0; i < len(name); i++ {
		if 'A' <= name[i] && name[i] <= 'Z' {
			b := []byte(name)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b), true
		}
	}
	return name, true
}

// trimValue removes surrounding white space the way Python's str.strip does
// (the reference's rule): unicode.IsSpace plus the four separators
// \x1c-\x1f that Python also counts as white space.
func trimValue(v string) string {
	return strings.TrimFunc(v, isPySpace)
}

func isPySpace(r rune) bool {
	return unicode.IsSpace(r) || (0x1c <= r && r <= 0x1f)
}

// printable reports whether every byte of v is in \x20-\x7e. Narrower than
// RFC 9110 on purpose: no HTAB, no obs-text; CR and LF would split the request.
func printable(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return true
}

// SanitizeTimeout checks a command's timeout_seconds against docs/security.md, Request options. A nil
// timeout returns 0, meaning "use DefaultTimeout". Zero, negative, NaN and
// infinite values are refused with RuleInvalidTimeout; a value over maxTimeout
// with RuleTimeoutTooLong. A maxTimeout ≤ 0 means DefaultMaxTimeout.
//
// The result is rounded up to a whole nanosecond, so a tiny positive timeout
// stays positive rather than collapsing into 0 (which would mean the default).
func SanitizeTimeout(seconds *float64, maxTimeout time.Duration) (time.Duration, error) {
	if seconds == nil {
		return 0, nil
	}
	if maxTimeout <= 0 {
		maxTimeout = DefaultMaxTimeout
	}
	s := *seconds
	if math.IsNaN(s) || math.IsInf(s, 0) || s <= 0 {
		return 0, &OptionsError{Rule: RuleInvalidTimeout, detail: "timeout_seconds=" + formatSeconds(s)}
	}
	if s > maxTimeout.Seconds() {
		return 0, &OptionsError{Rule: RuleTimeoutTooLong,
			detail: "timeout_seconds=" + formatSeconds(s) + ", ceiling " + formatSeconds(maxTimeout.Seconds())}
	}
	return time.Duration(math.Ceil(s * float64(time.Second))), nil
}

func formatSeconds(s float64) string {
	return strconv.FormatFloat(s, 'g', -1, 64)
}

// RequestOptions are a command's request options once sanitized.
// The zero value means "nothing asked": default headers and DefaultTimeout.
type RequestOptions struct {
	// Headers are lower-cased names and trimmed values; nil when the command
	// carried none (the defaults apply unchanged).
	Headers map[string]string
	// Timeout bounds each operation of the fetch; 0 means DefaultTimeout.
	Timeout time.Duration
}

// EffectiveTimeout is Timeout, or DefaultTimeout when Timeout is 0.
func (o RequestOptions) EffectiveTimeout() time.Duration {
	if o.Timeout <= 0 {
		return DefaultTimeout
	}
	return o.Timeout
}

// SanitizeOptions runs SanitizeHeaders then SanitizeTimeout (maxTimeout ≤ 0
// means DefaultMaxTimeout) and returns the first refusal, an *OptionsError
// wrapping ErrInvalidOptions.
func SanitizeOptions(headers map[string]string, timeoutSeconds *float64, maxTimeout time.Duration) (RequestOptions, error) {
	h, err := SanitizeHeaders(headers)
	if err != nil {
		return RequestOptions{}, err
	}
	t, err := SanitizeTimeout(timeoutSeconds, maxTimeout)
	if err != nil {
		return RequestOptions{}, err
	}
	return RequestOptions{Headers: h, Timeout: t}, nil
}
