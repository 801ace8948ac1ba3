package policy

import (
	"math"
	"net/http"
	"strings"
	"time"
)

// ParseRetryAfter reads a Retry-After header value (RFC 9110 §10.2.3) as a
// delay from now. It accepts delay-seconds (1*DIGIT, nothing else: no sign,
// fraction, exponent, underscore or inner space) and the three HTTP-date
// forms http.ParseTime knows (IMF-fixdate, RFC 850, asctime). Surrounding
// whitespace is ignored.
//
// It returns (0, false) for an empty, malformed or past value: the caller
// then passes 0 to Refused, which falls back to doubling. A delay too large
// for a time.Duration saturates; Refused clamps it anyway.
func ParseRetryAfter(value string, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(value)
	if v == "" {
		return 0, false
	}
	if d, ok := parseDelaySeconds(v); ok {
		return d, true
	}
	when, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := when.Sub(now)
	if d <= 0 {
		return 0, false
	}
	return d, true
}

// parseDelaySeconds is 1*DIGIT by hand: strconv also accepts a sign and
// underscores ("1_0" would read as ten, a wrong number rather than a refusal).
func parseDelaySeconds(v string) (time.Duration, bool) {
	const maxSeconds = int64(math.MaxInt64 / int64(time.Second))
	var secs int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if secs <= maxSeconds {
			secs = secs*10 + int64(c-'0')
		}
	}
	if secs > maxSeconds {
		return time.Duration(math.MaxInt64), true
	}
	return time.Duration(secs) * time.Second, true
}
