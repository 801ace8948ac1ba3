package guard_test

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/replicator-go/replicator/guard"
)

// secret is the value refusal tests use, so a message that leaked it would
// be caught.
const secret = "s3cr3t-t0ken-VALUE"

func manyHeaders(n int) map[string]string {
	h := make(map[string]string, n)
	for i := range n {
		h["x-h"+strconv.Itoa(i)] = "v"
	}
	return h
}

// sized returns one header whose wire size, len(name)+len(value)+4, is n.
func sized(name string, n int) map[string]string {
	return map[string]string{name: strings.Repeat("v", n-len(name)-4)}
}

func TestSanitizeHeadersRefusals(t *testing.T) {
	tests := []struct {
		name       string
		headers    map[string]string
		wantRule   string
		wantHeader string
	}{
		// Hop-by-hop (RFC 9110 §7.6.1), in the issuer's spelling.
		{name: "connection", headers: map[string]string{"Connection": secret}, wantRule: guard.RuleRefusedName, wantHeader: "Connection"},
		{name: "keep-alive", headers: map[string]string{"keep-alive": secret}, wantRule: guard.RuleRefusedName, wantHeader: "keep-alive"},
		{name: "proxy-connection", headers: map[string]string{"Proxy-Connection": secret}, wantRule: guard.RuleRefusedName, wantHeader: "Proxy-Connection"},
		{name: "te", headers: map[string]string{"TE": secret}, wantRule: guard.RuleRefusedName, wantHeader: "TE"},
		{name: "trailer", headers: map[string]string{"Trailer": secret}, wantRule: guard.RuleRefusedName, wantHeader: "Trailer"},
		{name: "transfer-encoding", headers: map[string]string{"Transfer-Encoding": secret}, wantRule: guard.RuleRefusedName, wantHeader: "Transfer-Encoding"},
		{name: "upgrade", headers: map[string]string{"UPGRADE": secret}, wantRule: guard.RuleRefusedName, wantHeader: "UPGRADE"},
		// Derived by the transport.
		{name: "host", headers: map[string]string{"Host": secret}, wantRule: guard.RuleRefusedName, wantHeader: "Host"},
		{name: "content-length", headers: map[string]string{"Content-Length": secret}, wantRule: guard.RuleRefusedName, wantHeader: "Content-Length"},
		// The proxy-* family.
		{name: "proxy-authorization", headers: map[string]string{"Proxy-Authorization": secret}, wantRule: guard.RuleRefusedName, wantHeader: "Proxy-Authorization"},
		{name: "proxy-anything", headers: map[string]string{"proxy-whatever": secret}, wantRule: guard.RuleRefusedName, wantHeader: "proxy-whatever"},
		{name: "bare proxy- prefix", headers: map[string]string{"Proxy-": secret}, wantRule: guard.RuleRefusedName, wantHeader: "Proxy-"},
		// Not a token.
		{name: "space inside", headers: map[string]string{"user agent": secret}, wantRule: guard.RuleInvalidName, wantHeader: "user agent"},
		{name: "colon", headers: map[string]string{"user:agent": secret}, wantRule: guard.RuleInvalidName, wantHeader: "user:agent"},
		{name: "LF inside", headers: map[string]string{"user\nagent": secret}, wantRule: guard.RuleInvalidName, wantHeader: "user\nagent"},
		{name: "empty", headers: map[string]string{"": secret}, wantRule: guard.RuleInvalidName, wantHeader: ""},
		{name: "non-ASCII", headers: map[string]string{"acc€pt": secret}, wantRule: guard.RuleInvalidName, wantHeader: "acc€pt"},
		{name: "kelvin sign would fold to k", headers: map[string]string{"\u212aey": secret}, wantRule: guard.RuleInvalidName, wantHeader: "\u212aey"},
		{name: "surrounding spaces", headers: map[string]string{"  accept  ": secret}, wantRule: guard.RuleInvalidName, wantHeader: "  accept  "},
		{name: "trailing LF", headers: map[string]string{"accept\n": secret}, wantRule: guard.RuleInvalidName, wantHeader: "accept\n"},
		{name: "trailing CR", headers: map[string]string{"accept\r": secret}, wantRule: guard.RuleInvalidName, wantHeader: "accept\r"},
		{name: "NUL", headers: map[string]string{"x\x00y": secret}, wantRule: guard.RuleInvalidName, wantHeader: "x\x00y"},
		{name: "separator", headers: map[string]string{"x(y)": secret}, wantRule: guard.RuleInvalidName, wantHeader: "x(y)"},
		// Case collisions, judged in sorted order of the spelled names.
		{name: "collision", headers: map[string]string{"User-Agent": "a" + secret, "user-agent": "b" + secret}, wantRule: guard.RuleCaseCollision, wantHeader: "user-agent"},
		{name: "collision with equal values", headers: map[string]string{"Accept": secret, "accept": secret}, wantRule: guard.RuleCaseCollision, wantHeader: "accept"},
		{name: "three-way collision", headers: map[string]string{"ACCEPT": secret, "Accept": secret, "accept": secret}, wantRule: guard.RuleCaseCollision, wantHeader: "Accept"},
		// Values, judged after trimming.
		{name: "CRLF splitting", headers: map[string]string{"X-Test": secret + "\r\nX-Injected: two"}, wantRule: guard.RuleInvalidValue, wantHeader: "X-Test"},
		{name: "bare LF", headers: map[string]string{"X-Test": secret + "\nX-Injected: two"}, wantRule: guard.RuleInvalidValue, wantHeader: "X-Test"},
		{name: "bare CR", headers: map[string]string{"X-Test": secret + "\rtwo"}, wantRule: guard.RuleInvalidValue, wantHeader: "X-Test"},
		{name: "NUL in value", headers: map[string]string{"X-Test": secret + "\x00two"}, wantRule: guard.RuleInvalidValue, wantHeader: "X-Test"},
		{name: "ESC", headers: map[string]string{"X-Test": secret + "\x1btwo"}, wantRule: guard.RuleInvalidValue, wantHeader: "X-Test"},
		{name: "interior HTAB", headers: map[string]string{"X-Test": secret + "\ttwo"}, wantRule: guard.RuleInvalidValue, wantHeader: "X-Test"},
		{name: "DEL", headers: map[string]string{"X-Test": secret + "\x7f"}, wantRule: guard.RuleInvalidValue, wantHeader: "X-Test"},
		{name: "latin-1 obs-text", headers: map[string]string{"X-Test": secret + "caf\xe9"}, wantRule: guard.RuleInvalidValue, wantHeader: "X-Test"},
		{name: "UTF-8", headers: map[string]string{"X-Test": secret + "snőw"}, wantRule: guard.RuleInvalidValue, wantHeader: "X-Test"},
		{name: "NBSP inside", headers: map[string]string{"X-Test": secret + "\u00a0two"}, wantRule: guard.RuleInvalidValue, wantHeader: "X-Test"},
		// Count and size, at and past the limits.
		{name: "33 headers", headers: manyHeaders(guard.MaxHeaders + 1), wantRule: guard.RuleTooManyHeaders},
		{name: "8193 bytes in one header", headers: sized("x-big", guard.MaxHeaderBytes+1), wantRule: guard.RuleHeadersTooLarge},
		{name: "value of 8192 bytes", headers: map[string]string{"x-big": strings.Repeat("v", guard.MaxHeaderBytes)}, wantRule: guard.RuleHeadersTooLarge},
		{name: "8193 bytes over two headers", headers: merge(sized("x-a", 4096), sized("x-b", 4097)), wantRule: guard.RuleHeadersTooLarge},
		// Order of judgement: the count before any header, a bad header
		// before the total size.
		{name: "count before a bad value", headers: merge(manyHeaders(guard.MaxHeaders+1), map[string]string{"X-Test": "a\nb"}), wantRule: guard.RuleTooManyHeaders},
		{name: "bad value before the total", headers: merge(sized("x-big", 9000), map[string]string{"X-Test": "a\nb"}), wantRule: guard.RuleInvalidValue, wantHeader: "X-Test"},
		{name: "first bad name in sorted order", headers: map[string]string{"b:": secret, "Host": secret, "a b": secret}, wantRule: guard.RuleRefusedName, wantHeader: "Host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := guard.SanitizeHeaders(tt.headers)
			if got != nil {
				t.Errorf("SanitizeHeaders returned headers %v with a refusal", got)
			}
			if !errors.Is(err, guard.ErrInvalidOptions) {
				t.Fatalf("SanitizeHeaders error = %v, want one wrapping ErrInvalidOptions", err)
			}
			var oe *guard.OptionsError
			if !errors.As(err, &oe) {
				t.Fatalf("SanitizeHeaders error %T is not an *OptionsError", err)
			}
			if diff := cmp.Diff(tt.wantRule+"|"+tt.wantHeader, oe.Rule+"|"+oe.Header); diff != "" {
				t.Errorf("rule|header mismatch (-want +got):\n%s", diff)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "guard: invalid request options: ") {
				t.Errorf("message %q lacks the package prefix", msg)
			}
			if tt.wantHeader != "" && !strings.Contains(msg, strconv.Quote(tt.wantHeader)) {
				t.Errorf("message %q does not name header %q as spelled", msg, tt.wantHeader)
			}
			if strings.Contains(msg, secret) {
				t.Errorf("message %q contains a header value", msg)
			}
			if err := guard.ScreenHeaders(tt.headers); !errors.Is(err, guard.ErrInvalidOptions) || err.Error() != msg {
				t.Errorf("ScreenHeaders = %v, want the same refusal %q", err, msg)
			}
		})
	}
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func TestSanitizeHeadersAccepts(t *testing.T) {
	lower32 := manyHeaders(guard.MaxHeaders)
	exact := sized("x-big", guard.MaxHeaderBytes)
	tests := []struct {
		name    string
		headers map[string]string
		want    map[string]string
	}{
		{name: "nil stays nil", headers: nil, want: nil},
		{name: "empty stays empty", headers: map[string]string{}, want: map[string]string{}},
		{name: "names are lower-cased", headers: map[string]string{"User-Agent": "watcher/0.1.0"}, want: map[string]string{"user-agent": "watcher/0.1.0"}},
		{name: "surrounding spaces trimmed", headers: map[string]string{"accept": "  text/html  "}, want: map[string]string{"accept": "text/html"}},
		{name: "surrounding CRLF and tabs trimmed", headers: map[string]string{"accept": "\t\r\ntext/html\r\n"}, want: map[string]string{"accept": "text/html"}},
		{name: "unicode white space trimmed as python strips", headers: map[string]string{"accept": "\u00a0\u3000text/html\u2028\x1f"}, want: map[string]string{"accept": "text/html"}},
		{name: "interior space kept", headers: map[string]string{"If-None-Match": `W/"a b"`}, want: map[string]string{"if-none-match": `W/"a b"`}},
		{name: "blank value kept blank", headers: map[string]string{"x-empty": "   "}, want: map[string]string{"x-empty": ""}},
		{name: "every token character", headers: map[string]string{"!#$%&'*+-.^_`|~09AZaz": "v"}, want: map[string]string{"!#$%&'*+-.^_`|~09azaz": "v"}},
		{name: "exactly 32 headers", headers: lower32, want: lower32},
		{name: "exactly 8192 bytes", headers: exact, want: exact},
		{name: "8192 bytes once trimmed", headers: map[string]string{"x-big": "  " + exact["x-big"] + "  "}, want: exact},
		{name: "8192 bytes over two headers", headers: merge(sized("x-a", 4096), sized("x-b", 4096)), want: merge(sized("x-a", 4096), sized("x-b", 4096))},
		{name: "authorization is an ordinary header here", headers: map[string]string{"Authorization": "Bearer x"}, want: map[string]string{"authorization": "Bearer x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := guard.SanitizeHeaders(tt.headers)
			if err != nil {
				t.Fatalf("SanitizeHeaders: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("SanitizeHeaders mismatch (-want +got):\n%s", diff)
			}
			if (tt.want == nil) != (got == nil) {
				t.Errorf("SanitizeHeaders nil-ness: want nil %v, got nil %v", tt.want == nil, got == nil)
			}
		})
	}
}

// Independent statements of the byte rules, for the exhaustive tests.
func isPrintable(b byte) bool { return 0x20 <= b && b <= 0x7e }
func isTrimmedASCII(b byte) bool {
	return b == ' ' || ('\t' <= b && b <= '\r') || (0x1c <= b && b <= 0x1f)
}
func isTchar(b byte) bool {
	return ('0' <= b && b <= '9') || ('a' <= b && b <= 'z') || ('A' <= b && b <= 'Z') ||
		strings.IndexByte("!#$%&'*+-.^_`|~", b) >= 0
}

func TestEveryByteAsHeaderValue(t *testing.T) {
	positions := []struct {
		name  string
		value func(b byte) string
		// accepted says whether the rules accept b in this position; want is
		// the value sent when they do.
		accepted func(b byte) bool
		want     func(b byte) string
		count    int
	}{
		{
			name:     "middle",
			value:    func(b byte) string { return "a" + string([]byte{b}) + "z" },
			accepted: isPrintable,
			want:     func(b byte) string { return "a" + string([]byte{b}) + "z" },
			count:    95,
		},
		{
			name:     "start",
			value:    func(b byte) string { return string([]byte{b}) + "az" },
			accepted: func(b byte) bool { return isPrintable(b) || isTrimmedASCII(b) },
			want: func(b byte) string {
				if isTrimmedASCII(b) {
					return "az"
				}
				return string([]byte{b}) + "az"
			},
			count: 95 + 9,
		},
		{
			name:     "end",
			value:    func(b byte) string { return "az" + string([]byte{b}) },
			accepted: func(b byte) bool { return isPrintable(b) || isTrimmedASCII(b) },
			want: func(b byte) string {
				if isTrimmedASCII(b) {
					return "az"
				}
				return "az" + string([]byte{b})
			},
			count: 95 + 9,
		},
	}
	for _, pos := range positions {
		t.Run(pos.name, func(t *testing.T) {
			accepted := 0
			for i := range 256 {
				b := byte(i)
				got, err := guard.SanitizeHeaders(map[string]string{"x-test": pos.value(b)})
				if pos.accepted(b) {
					if err != nil {
						t.Errorf("byte %#02x: refused: %v", b, err)
						continue
					}
					accepted++
					if diff := cmp.Diff(map[string]string{"x-test": pos.want(b)}, got); diff != "" {
						t.Errorf("byte %#02x: mismatch (-want +got):\n%s", b, diff)
					}
					continue
				}
				var oe *guard.OptionsError
				if !errors.As(err, &oe) || oe.Rule != guard.RuleInvalidValue {
					t.Errorf("byte %#02x: got %v, want an %s refusal", b, err, guard.RuleInvalidValue)
				}
			}
			// Guards against a rule narrowed to nothing as loudly as one widened.
			if accepted != pos.count {
				t.Errorf("accepted %d byte values, want %d", accepted, pos.count)
			}
		})
	}
}

func TestEveryByteInHeaderName(t *testing.T) {
	positions := map[string]func(b byte) string{
		"start":  func(b byte) string { return string([]byte{b}) + "xy" },
		"middle": func(b byte) string { return "x" + string([]byte{b}) + "y" },
		"end":    func(b byte) string { return "xy" + string([]byte{b}) },
		"alone":  func(b byte) string { return string([]byte{b}) },
	}
	for pos, spell := range positions {
		t.Run(pos, func(t *testing.T) {
			accepted := 0
			for i := range 256 {
				b := byte(i)
				name := spell(b)
				got, err := guard.SanitizeHeaders(map[string]string{name: "v"})
				if !isTchar(b) {
					var oe *guard.OptionsError
					if !errors.As(err, &oe) || oe.Rule != guard.RuleInvalidName || oe.Header != name {
						t.Errorf("byte %#02x: got %v, want an %s refusal naming %q", b, err, guard.RuleInvalidName, name)
					}
					continue
				}
				if err != nil {
					t.Errorf("byte %#02x: refused: %v", b, err)
					continue
				}
				accepted++
				if diff := cmp.Diff(map[string]string{strings.ToLower(name): "v"}, got); diff != "" {
					t.Errorf("byte %#02x: mismatch (-want +got):\n%s", b, diff)
				}
			}
			if accepted != 77 { // 10 digits + 52 letters + 15 symbols
				t.Errorf("accepted %d byte values, want 77", accepted)
			}
		})
	}
}

func ptr(f float64) *float64 { return &f }

func TestSanitizeTimeout(t *testing.T) {
	tests := []struct {
		name     string
		seconds  *float64
		max      time.Duration
		want     time.Duration
		wantRule string
	}{
		{name: "nil means the default", seconds: nil, want: 0},
		{name: "fractional", seconds: ptr(2.5), want: 2500 * time.Millisecond},
		{name: "the default ceiling itself", seconds: ptr(120), want: 120 * time.Second},
		{name: "just over the default ceiling", seconds: ptr(120.000001), wantRule: guard.RuleTimeoutTooLong},
		{name: "a custom ceiling", seconds: ptr(10), max: 10 * time.Second, want: 10 * time.Second},
		{name: "over a custom ceiling", seconds: ptr(10.5), max: 10 * time.Second, wantRule: guard.RuleTimeoutTooLong},
		{name: "negative ceiling means the default", seconds: ptr(100), max: -time.Second, want: 100 * time.Second},
		{name: "tiny stays positive", seconds: ptr(1e-12), want: time.Nanosecond},
		{name: "smallest float stays positive", seconds: ptr(math.SmallestNonzeroFloat64), want: time.Nanosecond},
		{name: "huge", seconds: ptr(1e300), wantRule: guard.RuleTimeoutTooLong},
		{name: "zero", seconds: ptr(0), wantRule: guard.RuleInvalidTimeout},
		{name: "negative zero", seconds: ptr(math.Copysign(0, -1)), wantRule: guard.RuleInvalidTimeout},
		{name: "negative", seconds: ptr(-1), wantRule: guard.RuleInvalidTimeout},
		{name: "NaN", seconds: ptr(math.NaN()), wantRule: guard.RuleInvalidTimeout},
		{name: "+Inf", seconds: ptr(math.Inf(1)), wantRule: guard.RuleInvalidTimeout},
		{name: "-Inf", seconds: ptr(math.Inf(-1)), wantRule: guard.RuleInvalidTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := guard.SanitizeTimeout(tt.seconds, tt.max)
			if tt.wantRule == "" {
				if err != nil {
					t.Fatalf("SanitizeTimeout: %v", err)
				}
				if got != tt.want {
					t.Errorf("SanitizeTimeout = %v, want %v", got, tt.want)
				}
				return
			}
			var oe *guard.OptionsError
			if !errors.As(err, &oe) || !errors.Is(err, guard.ErrInvalidOptions) {
				t.Fatalf("SanitizeTimeout error = %v, want an *OptionsError wrapping ErrInvalidOptions", err)
			}
			if oe.Rule != tt.wantRule || oe.Header != "" {
				t.Errorf("rule, header = %q, %q; want %q, \"\"", oe.Rule, oe.Header, tt.wantRule)
			}
		})
	}
}

func TestSanitizeOptions(t *testing.T) {
	tests := []struct {
		name     string
		headers  map[string]string
		timeout  *float64
		want     guard.RequestOptions
		wantRule string
	}{
		{name: "nothing asked", want: guard.RequestOptions{}},
		{name: "both", headers: map[string]string{"Accept": " text/html "}, timeout: ptr(5),
			want: guard.RequestOptions{Headers: map[string]string{"accept": "text/html"}, Timeout: 5 * time.Second}},
		{name: "headers judged first", headers: map[string]string{"Host": "x"}, timeout: ptr(math.NaN()), wantRule: guard.RuleRefusedName},
		{name: "then the timeout", headers: map[string]string{"accept": "x"}, timeout: ptr(121), wantRule: guard.RuleTimeoutTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := guard.SanitizeOptions(tt.headers, tt.timeout, 0)
			if tt.wantRule != "" {
				var oe *guard.OptionsError
				if !errors.As(err, &oe) || oe.Rule != tt.wantRule {
					t.Fatalf("SanitizeOptions error = %v, want rule %s", err, tt.wantRule)
				}
				if diff := cmp.Diff(guard.RequestOptions{}, got); diff != "" {
					t.Errorf("options returned with a refusal (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("SanitizeOptions: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("SanitizeOptions mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEffectiveTimeout(t *testing.T) {
	if got := (guard.RequestOptions{}).EffectiveTimeout(); got != guard.DefaultTimeout {
		t.Errorf("zero options: EffectiveTimeout = %v, want %v", got, guard.DefaultTimeout)
	}
	if got := (guard.RequestOptions{Timeout: time.Second}).EffectiveTimeout(); got != time.Second {
		t.Errorf("EffectiveTimeout = %v, want 1s", got)
	}
}

func TestOptionsErrorMessages(t *testing.T) {
	long := strings.Repeat("n", 100)
	tests := []struct {
		name    string
		headers map[string]string
		timeout *float64
		want    string
	}{
		{name: "refused name", headers: map[string]string{"Host": secret},
			want: `guard: invalid request options: header "Host": not a header the fetcher sends on an issuer's behalf (hop-by-hop, derived, or proxy-*)`},
		{name: "invalid name escaped", headers: map[string]string{"a\r\nb": secret},
			want: `guard: invalid request options: header "a\r\nb": name is not an RFC 9110 token`},
		{name: "empty name", headers: map[string]string{"": secret},
			want: `guard: invalid request options: header "": name is not an RFC 9110 token`},
		{name: "long name truncated", headers: map[string]string{long + " ": secret},
			want: `guard: invalid request options: header "` + long[:64] + `"... (101 bytes): name is not an RFC 9110 token`},
		{name: "value", headers: map[string]string{"X-Token": secret + "\nX-Injected: 1"},
			want: `guard: invalid request options: header "X-Token": value has a byte outside printable US-ASCII (\x20-\x7e)`},
		{name: "collision", headers: map[string]string{"X-A": secret, "x-a": secret},
			want: `guard: invalid request options: header "x-a": given more than once, differing only in case`},
		{name: "count", headers: manyHeaders(40),
			want: `guard: invalid request options: more than 32 headers (40 given)`},
		{name: "size", headers: sized("x-big", 9000),
			want: `guard: invalid request options: headers exceed 8192 bytes (9000 bytes)`},
		{name: "timeout", timeout: ptr(math.Inf(1)),
			want: `guard: invalid request options: timeout_seconds is not a positive finite duration (timeout_seconds=+Inf)`},
		{name: "timeout ceiling", timeout: ptr(300),
			want: `guard: invalid request options: timeout_seconds is over the ceiling (timeout_seconds=300, ceiling 120)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := guard.SanitizeOptions(tt.headers, tt.timeout, 0)
			if err == nil {
				t.Fatal("SanitizeOptions accepted the options")
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("message mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSendableValidator(t *testing.T) {
	tests := []struct {
		value string
		want  bool
	}{
		{value: `"abc123"`, want: true},
		{value: `W/"abc123"`, want: true},
		{value: "Wed, 21 Oct 2015 07:28:00 GMT", want: true},
		{value: `  "padded"  `, want: true},
		{value: "", want: false},
		{value: "   ", want: false},
		{value: `"caf` + "\xe9" + `"`, want: false},
		{value: `"café"`, want: false},
		{value: "\"a\tb\"", want: false},
		{value: "\"a\r\nSet-Cookie: x\"", want: false},
		{value: "\"a\x00\"", want: false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.value), func(t *testing.T) {
			if got := guard.SendableValidator(tt.value); got != tt.want {
				t.Errorf("SendableValidator(%q) = %v, want %v", tt.value, got, tt.want)
			}
			// A sendable validator must pass the worker's own rules.
			if tt.want {
				if err := guard.ScreenHeaders(map[string]string{"If-None-Match": tt.value}); err != nil {
					t.Errorf("sendable validator refused by ScreenHeaders: %v", err)
				}
			}
		})
	}
}
