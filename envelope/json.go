package envelope

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// This file holds a small JSON reader and writer. encoding/json would do most
// of it, but not all: payloads must be written byte for byte the way pydantic
// v2's model_dump_json writes them (no HTML escaping, Python-style floats),
// member names must match exactly (encoding/json folds case), and Python's
// bare NaN/Infinity tokens must be accepted in exactly one place.

// maxDepth bounds nesting in values the codec skips (unknown fields), so a
// hostile payload cannot exhaust the stack.
const maxDepth = 512

// errSyntax is the detail for every JSON syntax problem; the offset is added
// where it is known.
var errSyntax = errors.New("invalid JSON")

func syntaxAt(off int) error { return fmt.Errorf("%w at byte %d", errSyntax, off) }

// objectReader walks the members of one JSON object. Its zero value is not
// usable; start with openObject.
type objectReader struct {
	data string
	pos  int
	n    int // members read so far
}

// openObject positions a reader after the '{' of the object starting at (or
// after whitespace at) data[pos:].
func openObject(data string, pos int) (objectReader, error) {
	pos = skipSpace(data, pos)
	if pos >= len(data) || data[pos] != '{' {
		return objectReader{}, syntaxAt(pos)
	}
	return objectReader{data: data, pos: pos + 1}, nil
}

// next reads the next member's name and leaves the reader at its value. ok is
// false once the closing '}' has been consumed. The name is returned raw
// (without quotes); escaped reports whether it holds escapes, in which case
// the caller must unquote it before comparing.
func (r *objectReader) next() (name string, escaped, ok bool, err error) {
	d := r.data
	r.pos = skipSpace(d, r.pos)
	if r.pos >= len(d) {
		return "", false, false, syntaxAt(r.pos)
	}
	if r.n == 0 {
		if d[r.pos] == '}' {
			r.pos++
			return "", false, false, nil
		}
	} else {
		switch d[r.pos] {
		case '}':
			r.pos++
			return "", false, false, nil
		case ',':
			r.pos = skipSpace(d, r.pos+1)
		default:
			return "", false, false, syntaxAt(r.pos)
		}
	}
	if r.pos >= len(d) || d[r.pos] != '"' {
		return "", false, false, syntaxAt(r.pos)
	}
	start := r.pos
	end, esc, err := scanString(d, start)
	if err != nil {
		return "", false, false, err
	}
	r.pos = skipSpace(d, end)
	if r.pos >= len(d) || d[r.pos] != ':' {
		return "", false, false, syntaxAt(r.pos)
	}
	r.pos++
	r.n++
	return d[start+1 : end-1], esc, true, nil
}

// value reads the current member's value and returns its raw bytes (no
// surrounding whitespace). With allowNonFinite, Python's NaN, Infinity and
// -Infinity tokens are accepted as the whole value.
func (r *objectReader) value(allowNonFinite bool) (string, error) {
	start := skipSpace(r.data, r.pos)
	if allowNonFinite {
		if tok := nonFiniteToken(r.data[start:]); tok != "" {
			r.pos = start + len(tok)
			return r.data[start:r.pos], nil
		}
	}
	end, err := skipValue(r.data, start, 1)
	if err != nil {
		return "", err
	}
	r.pos = end
	return r.data[start:end], nil
}

// nonFiniteToken returns the Python float token data starts with, or "".
func nonFiniteToken(data string) string {
	for _, tok := range [...]string{"NaN", "Infinity", "-Infinity"} {
		if len(data) >= len(tok) && data[:len(tok)] == tok {
			return tok
		}
	}
	return ""
}

// finish checks that nothing but whitespace follows the object.
func (r *objectReader) finish() error {
	r.pos = skipSpace(r.data, r.pos)
	if r.pos != len(r.data) {
		return syntaxAt(r.pos)
	}
	return nil
}

func skipSpace(d string, pos int) int {
	for pos < len(d) {
		switch d[pos] {
		case ' ', '\t', '\n', '\r':
			pos++
		default:
			return pos
		}
	}
	return pos
}

// scanString validates the string starting at d[pos] == '"' and returns the
// offset just past its closing quote and whether it contains escapes.
// UTF-8 validity is checked once for the whole payload, not here.
func scanString(d string, pos int) (end int, escaped bool, err error) {
	i := pos + 1
	for i < len(d) {
		c := d[i]
		switch {
		case c == '"':
			return i + 1, escaped, nil
		case c == '\\':
			escaped = true
			if i+1 >= len(d) {
				return 0, false, syntaxAt(i)
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(d) {
					return 0, false, syntaxAt(i)
				}
				for j := i + 2; j < i+6; j++ {
					if unhex(d[j]) < 0 {
						return 0, false, syntaxAt(i)
					}
				}
				i += 6
			default:
				return 0, false, syntaxAt(i)
			}
		case c < 0x20:
			return 0, false, syntaxAt(i)
		default:
			i++
		}
	}
	return 0, false, syntaxAt(i)
}

// skipValue validates the value starting at d[pos] and returns the offset just
// past it.
func skipValue(d string, pos, depth int) (int, error) {
	if pos >= len(d) {
		return 0, syntaxAt(pos)
	}
	switch c := d[pos]; {
	case c == '"':
		end, _, err := scanString(d, pos)
		return end, err
	case c == '{':
		if depth > maxDepth {
			return 0, fmt.Errorf("%w: nested deeper than %d", errSyntax, maxDepth)
		}
		r := objectReader{data: d, pos: pos + 1}
		for {
			_, _, ok, err := r.next()
			if err != nil {
				return 0, err
			}
			if !ok {
				return r.pos, nil
			}
			start := skipSpace(d, r.pos)
			end, err := skipValue(d, start, depth+1)
			if err != nil {
				return 0, err
			}
			r.pos = end
		}
	case c == '[':
		if depth > maxDepth {
			return 0, fmt.Errorf("%w: nested deeper than %d", errSyntax, maxDepth)
		}
		i := skipSpace(d, pos+1)
		if i < len(d) && d[i] == ']' {
			return i + 1, nil
		}
		for {
			end, err := skipValue(d, skipSpace(d, i), depth+1)
			if err != nil {
				return 0, err
			}
			i = skipSpace(d, end)
			if i >= len(d) {
				return 0, syntaxAt(i)
			}
			switch d[i] {
			case ',':
				i++
			case ']':
				return i + 1, nil
			default:
				return 0, syntaxAt(i)
			}
		}
	case c == 't':
		return skipLiteral(d, pos, "true")
	case c == 'f':
		return skipLiteral(d, pos, "false")
	case c == 'n':
		return skipLiteral(d, pos, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return scanNumber(d, pos)
	default:
		return 0, syntaxAt(pos)
	}
}

func skipLiteral(d string, pos int, lit string) (int, error) {
	if len(d)-pos < len(lit) || d[pos:pos+len(lit)] != lit {
		return 0, syntaxAt(pos)
	}
	return pos + len(lit), nil
}

// scanNumber validates -?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)? at d[pos].
func scanNumber(d string, pos int) (int, error) {
	i := pos
	if d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		i = skipDigits(d, i)
	default:
		return 0, syntaxAt(i)
	}
	if i < len(d) && d[i] == '.' {
		j := skipDigits(d, i+1)
		if j == i+1 {
			return 0, syntaxAt(j)
		}
		i = j
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		j := skipDigits(d, i)
		if j == i {
			return 0, syntaxAt(j)
		}
		i = j
	}
	return i, nil
}

func skipDigits(d string, i int) int {
	for i < len(d) && d[i] >= '0' && d[i] <= '9' {
		i++
	}
	return i
}

func unhex(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c - 'a' + 10)
	case c >= 'A' && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

// kindOf names the JSON type of a validated raw value, for error details.
func kindOf(raw string) string {
	switch raw[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	case 'N', 'I':
		return "non-finite number"
	case '-':
		if len(raw) > 1 && raw[1] == 'I' {
			return "non-finite number"
		}
	}
	return "number"
}

func isNull(raw string) bool { return raw == "null" }

// unquoteBytes decodes the contents of a validated JSON string (without its
// quotes). A lone surrogate escape becomes U+FFFD, as in encoding/json.
func unquote(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			b = append(b, c)
			i++
			continue
		}
		switch s[i+1] {
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r := hex4(s[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
					if pair := utf16.DecodeRune(r, hex4(s[i+2:])); pair != utf8.RuneError {
						b = utf8.AppendRune(b, pair)
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			b = utf8.AppendRune(b, r)
			continue
		default: // '"', '\\', '/'
			b = append(b, s[i+1])
		}
		i += 2
	}
	return string(b)
}

func hex4(s string) rune {
	return unhex(s[0])<<12 | unhex(s[1])<<8 | unhex(s[2])<<4 | unhex(s[3])
}

// Typed readers. Each takes a validated raw value and reports a wrong JSON
// type as an error naming the type found, never the value.

func wrongType(want string, raw string) error {
	return fmt.Errorf("want %s, got %s", want, kindOf(raw))
}

// readString returns a substring of raw when there is nothing to unescape,
// so most fields cost no allocation.
func readString(raw string) (string, error) {
	if raw[0] != '"' {
		return "", wrongType("a string", raw)
	}
	inner := raw[1 : len(raw)-1]
	if strings.IndexByte(inner, '\\') >= 0 {
		return unquote(inner), nil
	}
	return inner, nil
}

// errIntRange is readInt's error for an integer that does not fit.
var errIntRange = errors.New("integer out of range")

// readInt reads a decimal integer (a JSON integer, or a frame field). One
// that does not fit in bits returns errIntRange together with the nearest
// bound, so a caller for which "too large" is still an answer (the schema
// version) can use it.
func readInt(raw string, bits int) (int64, error) {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if (c < '0' || c > '9') && !(i == 0 && c == '-') {
			return 0, wrongType("an integer", raw)
		}
	}
	n, err := strconv.ParseInt(raw, 10, bits)
	if errors.Is(err, strconv.ErrRange) {
		return n, errIntRange
	}
	if err != nil { // "" or "-": only a frame field can be either
		return 0, errors.New("not a decimal integer")
	}
	return n, nil
}

// readFloat reads a JSON number. With allowNonFinite, Python's NaN/±Infinity
// tokens and numbers too large for a float64 decode to NaN/±Inf (as Python's
// float() would have them); otherwise both are errors.
func readFloat(raw string, allowNonFinite bool) (float64, error) {
	if allowNonFinite {
		switch raw {
		case "NaN":
			return math.NaN(), nil
		case "Infinity":
			return math.Inf(1), nil
		case "-Infinity":
			return math.Inf(-1), nil
		}
	}
	if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return 0, wrongType("a number", raw)
	}
	f, err := strconv.ParseFloat(raw, 64)
	if err != nil && !(allowNonFinite && math.IsInf(f, 0)) {
		return 0, fmt.Errorf("number out of range")
	}
	return f, nil
}

func readBool(raw string) (bool, error) {
	switch raw {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, wrongType("a boolean", raw)
}

// readHeaders reads an object of string values. Duplicate names keep the
// last value, as Python's json does. Errors name the header, never its value.
func readHeaders(raw string) (map[string]string, error) {
	if raw[0] != '{' {
		return nil, wrongType("an object", raw)
	}
	r, err := openObject(raw, 0)
	if err != nil {
		return nil, err
	}
	h := make(map[string]string)
	for {
		name, escaped, ok, err := r.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			return h, nil
		}
		key := name
		if escaped {
			key = unquote(name)
		}
		v, err := r.value(false)
		if err != nil {
			return nil, err
		}
		s, err := readString(v)
		if err != nil {
			return nil, fmt.Errorf("header %q: %w", key, err)
		}
		h[key] = s
	}
}

// readObject reads an object of arbitrary JSON values (object_options).
// encoding/json does the work: the value is already validated, and its
// UseNumber keeps every number as written. Duplicate names keep the last
// value, as Python's json does.
func readObject(raw string) (map[string]any, error) {
	if raw[0] != '{' {
		return nil, wrongType("an object", raw)
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, errSyntax
	}
	return m, nil
}

// Writers, matching pydantic v2 (serde_json) output.

// appendValue writes one arbitrary JSON value: nil, string, bool,
// json.Number (as written, once checked to be a JSON number), Go integers,
// finite floats, []any and map[string]any (members sorted by name). depth
// bounds nesting, as on the way in.
func appendValue(b []byte, v any, depth int) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendString(b, x), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case json.Number:
		if !isJSONNumber(string(x)) {
			return nil, fmt.Errorf("%q is not a JSON number", boundDigits(string(x)))
		}
		return append(b, x...), nil
	case float64:
		return appendFiniteFloat(b, x)
	case float32:
		return appendFiniteFloat(b, float64(x))
	case int:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int8:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int16:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int32:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case uint:
		return strconv.AppendUint(b, uint64(x), 10), nil
	case uint8:
		return strconv.AppendUint(b, uint64(x), 10), nil
	case uint16:
		return strconv.AppendUint(b, uint64(x), 10), nil
	case uint32:
		return strconv.AppendUint(b, uint64(x), 10), nil
	case uint64:
		return strconv.AppendUint(b, x, 10), nil
	case map[string]any:
		if depth > maxDepth {
			return nil, fmt.Errorf("nested deeper than %d", maxDepth)
		}
		names := make([]string, 0, len(x))
		for k := range x {
			names = append(names, k)
		}
		slices.Sort(names)
		b = append(b, '{')
		for i, k := range names {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			var err error
			if b, err = appendValue(b, x[k], depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case []any:
		if depth > maxDepth {
			return nil, fmt.Errorf("nested deeper than %d", maxDepth)
		}
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendValue(b, e, depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	}
	return nil, fmt.Errorf("a %T value cannot be written", v)
}

func isJSONNumber(s string) bool {
	if s == "" {
		return false
	}
	end, err := scanNumber(s, 0)
	return err == nil && end == len(s)
}

func appendFiniteFloat(b []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, errors.New("not a finite number")
	}
	return appendFloat(b, f), nil
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string the way serde_json does: only '"',
// '\\' and control characters are escaped (\b \f \n \r \t, others as
// lower-case \u00XX); everything else, non-ASCII included, is written as is.
// Invalid UTF-8 (which a Python str cannot hold) is written as U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, s[start:i]...)
				b = append(b, "\uFFFD"...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendFloat writes a finite f the way serde_json (ryu) does, which is what
// pydantic v2 writes: the shortest round-tripping digits, "30.0" rather than
// "30", plain notation for magnitudes in [1e-5, 1e16), otherwise "1e-7",
// "1.5e16". The caller rejects NaN and ±Inf.
func appendFloat(b []byte, f float64) []byte {
	if f == 0 {
		if math.Signbit(f) {
			return append(b, "-0.0"...)
		}
		return append(b, "0.0"...)
	}
	if f < 0 {
		b = append(b, '-')
		f = -f
	}
	// 'e' with precision -1 gives the shortest digits: d[.ddd]e±XX.
	var scratch [32]byte
	e := strconv.AppendFloat(scratch[:0], f, 'e', -1, 64)
	var digits [20]byte
	n := 0
	i := 0
	for ; e[i] != 'e'; i++ {
		if e[i] != '.' {
			digits[n] = e[i]
			n++
		}
	}
	exp, _ := strconv.Atoi(string(e[i+1:]))
	d := digits[:n]
	kk := exp + 1 // 10^(kk-1) <= f < 10^kk
	k := kk - n   // f = digits × 10^k
	switch {
	case k >= 0 && kk <= 16: // 1234e7 -> 12340000000.0
		b = append(b, d...)
		for j := 0; j < k; j++ {
			b = append(b, '0')
		}
		return append(b, '.', '0')
	case kk > 0 && kk <= 16: // 1234e-2 -> 12.34
		b = append(b, d[:kk]...)
		b = append(b, '.')
		return append(b, d[kk:]...)
	case kk > -5 && kk <= 0: // 1234e-6 -> 0.001234
		b = append(b, '0', '.')
		for j := 0; j < -kk; j++ {
			b = append(b, '0')
		}
		return append(b, d...)
	case n == 1: // 1e30
		b = append(b, d[0], 'e')
		return strconv.AppendInt(b, int64(kk-1), 10)
	default: // 1234e30 -> 1.234e33
		b = append(b, d[0], '.')
		b = append(b, d[1:]...)
		b = append(b, 'e')
		return strconv.AppendInt(b, int64(kk-1), 10)
	}
}
