package envelope

import (
	"errors"
	"time"
)

// timeLayoutLen is the length of every encoded timestamp:
// 2026-11-29T23:18:58.123456Z.
const timeLayoutLen = len("2006-01-02T15:04:05.000000Z")

// FormatTime encodes t the one way every timestamp goes on the wire: UTC, six
// fraction digits (microseconds, truncated), and "Z", as in
// 2026-11-29T23:18:58.123456Z. The result is stable under ParseTime: a time
// read back from it formats to the same string.
//
// Years outside 0000–9999 have no RFC 3339 spelling; ToWire refuses such
// times, and FormatTime clamps nothing, so its output for them is not a
// valid timestamp.
func FormatTime(t time.Time) string {
	var buf [timeLayoutLen]byte
	return string(appendTime(buf[:0], t))
}

// appendTime is FormatTime without the allocation, for the encoders.
func appendTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	hour, minute, sec := t.Clock()
	micro := t.Nanosecond() / 1000
	b = appendDigits(b, year, 4)
	b = append(b, '-')
	b = appendDigits(b, int(month), 2)
	b = append(b, '-')
	b = appendDigits(b, day, 2)
	b = append(b, 'T')
	b = appendDigits(b, hour, 2)
	b = append(b, ':')
	b = appendDigits(b, minute, 2)
	b = append(b, ':')
	b = appendDigits(b, sec, 2)
	b = append(b, '.')
	b = appendDigits(b, micro, 6)
	return append(b, 'Z')
}

// appendDigits writes the low width decimal digits of v, zero-padded.
func appendDigits(b []byte, v, width int) []byte {
	if v < 0 {
		// Only a year before 0000 gets here; FormatTime documents it.
		b = append(b, '-')
		v = -v
	}
	var d [10]byte
	for i := width - 1; i >= 0; i-- {
		d[i] = byte('0' + v%10)
		v /= 10
	}
	return append(b, d[:width]...)
}

// timeInRange reports whether t (in UTC) has a four-digit year, so it has an
// RFC 3339 spelling.
func timeInRange(t time.Time) bool {
	y := t.UTC().Year()
	return y >= 0 && y <= 9999
}

// Errors ParseTime returns; FromWire wraps them in ErrMalformedFrame. They
// never quote the input, which may be anything a producer put on the wire.
var (
	errTimeSyntax = errors.New("envelope: time is not RFC 3339 (YYYY-MM-DDTHH:MM:SS[.frac]<offset>)")
	errTimeNaive  = errors.New("envelope: time has no UTC offset (naive times are refused, never assumed UTC)")
	errTimeRange  = errors.New("envelope: time field out of range")
)

// ParseTime decodes an RFC 3339 timestamp with an offset and returns it in
// UTC. It accepts "Z" (or "z") and numeric offsets such as +00:00, -00:00 and
// +02:00, a "T" (or "t") separator, and a fraction of any length (digits past
// the ninth are dropped). A value without an offset is an error: it is never
// assumed to be UTC. So is a value whose UTC instant falls outside the years
// 0000–9999, since it could not be written back.
//
// FromWire additionally truncates decoded times to microseconds, the wire's
// precision; ParseTime keeps nanoseconds.
func ParseTime(s string) (time.Time, error) {
	// Fixed part: YYYY-MM-DDTHH:MM:SS is 19 bytes.
	if len(s) < 19 {
		return time.Time{}, errTimeSyntax
	}
	if !isDate(s) || (s[10] != 'T' && s[10] != 't') || s[13] != ':' || s[16] != ':' {
		return time.Time{}, errTimeSyntax
	}
	year, ok1 := atoiFixed(s[0:4])
	month, ok2 := atoiFixed(s[5:7])
	day, ok3 := atoiFixed(s[8:10])
	hour, ok4 := atoiFixed(s[11:13])
	minute, ok5 := atoiFixed(s[14:16])
	sec, ok6 := atoiFixed(s[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) {
		return time.Time{}, errTimeSyntax
	}
	rest := s[19:]
	nsec := 0
	if len(rest) > 0 && rest[0] == '.' {
		i := 1
		scale := 100_000_000
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			nsec += int(rest[i]-'0') * scale
			scale /= 10
			i++
		}
		if i == 1 {
			return time.Time{}, errTimeSyntax // "." with no digits
		}
		rest = rest[i:]
	}
	var offset int
	switch {
	case len(rest) == 0:
		return time.Time{}, errTimeNaive
	case rest == "Z" || rest == "z":
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		oh, okh := atoiFixed(rest[1:3])
		om, okm := atoiFixed(rest[4:6])
		if !okh || !okm {
			return time.Time{}, errTimeSyntax
		}
		if oh > 23 || om > 59 {
			return time.Time{}, errTimeRange
		}
		offset = oh*3600 + om*60
		if rest[0] == '-' {
			offset = -offset
		}
	default:
		return time.Time{}, errTimeSyntax
	}
	// time.Date normalizes overflow (Feb 30 → Mar 2); a real calendar value
	// survives unchanged, anything else is out of range.
	if month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, errTimeRange
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC)
	if t.Day() != day {
		return time.Time{}, errTimeRange
	}
	t = t.Add(-time.Duration(offset) * time.Second)
	if !timeInRange(t) {
		return time.Time{}, errTimeRange
	}
	return t, nil
}

// isDate checks the shape YYYY-MM-DD of s[:10] (digits and dashes only).
func isDate(s string) bool {
	return s[4] == '-' && s[7] == '-'
}

// atoiFixed parses an all-digit string; ok is false on any other byte.
func atoiFixed(s string) (n int, ok bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
