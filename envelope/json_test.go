package envelope

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

func TestAppendFloat(t *testing.T) {
	// Expected spellings are serde_json's (ryu), which pydantic v2 writes.
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0.0"},
		{math.Copysign(0, -1), "-0.0"},
		{1, "1.0"},
		{30, "30.0"},
		{-2, "-2.0"},
		{1.5, "1.5"},
		{0.1, "0.1"},
		{0.25, "0.25"},
		{120.000001, "120.000001"},
		{0.0001, "0.0001"},
		{0.00001, "0.00001"},
		{0.000001, "1e-6"},
		{1.5e-7, "1.5e-7"},
		{1e15, "1000000000000000.0"},
		{1234567890123456, "1234567890123456.0"},
		{1e16, "1e16"},
		{1.5e16, "1.5e16"},
		{123456789012345678, "1.2345678901234568e17"},
		{math.MaxFloat64, "1.7976931348623157e308"},
		{5e-324, "5e-324"},
		{-1e-7, "-1e-7"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			if got := string(appendFloat(nil, tc.in)); got != tc.want {
				t.Errorf("appendFloat(%v) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestAppendFloatRoundTrips(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 100_000; i++ {
		f := math.Float64frombits(r.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		s := appendFloat(nil, f)
		if !json.Valid(s) {
			t.Fatalf("appendFloat(%v) = %q is not JSON", f, s)
		}
		back, err := strconv.ParseFloat(string(s), 64)
		if err != nil || back != f {
			t.Fatalf("appendFloat(%v) = %q reads back as %v, %v", f, s, back, err)
		}
	}
}

func TestAppendString(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "plain", in: "abc", want: `"abc"`},
		{name: "empty", in: "", want: `""`},
		{name: "quote and backslash", in: `a"b\c`, want: `"a\"b\\c"`},
		{name: "short escapes", in: "\b\f\n\r\t", want: `"\b\f\n\r\t"`},
		{name: "other controls as lower-case \\u00XX", in: "\x00\x01\x1f", want: `"\u0000\u0001\u001f"`},
		{name: "DEL is raw", in: "\x7f", want: "\"\x7f\""},
		{name: "HTML characters are raw", in: "<a href='x'>&amp;</a>", want: `"<a href='x'>&amp;</a>"`},
		{name: "non-ASCII is raw", in: "ä😀\u2028", want: "\"ä😀\u2028\""},
		{name: "slash is raw", in: "https://x/", want: `"https://x/"`},
		{name: "invalid UTF-8 becomes U+FFFD", in: "a\xffb\xc3", want: "\"a\uFFFDb\uFFFD\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := string(appendString(nil, tc.in))
			if got != tc.want {
				t.Errorf("appendString(%q) = %s, want %s", tc.in, got, tc.want)
			}
			var back string
			if err := json.Unmarshal([]byte(got), &back); err != nil {
				t.Fatalf("%s is not a JSON string: %v", got, err)
			}
		})
	}
}
