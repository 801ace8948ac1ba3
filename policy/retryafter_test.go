package policy

import (
	"math"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		value  string
		want   time.Duration
		wantOK bool
	}{
		{name: "delta seconds", value: "120", want: 120 * time.Second, wantOK: true},
		{name: "zero", value: "0", want: 0, wantOK: true},
		{name: "surrounding whitespace", value: " 30 ", want: 30 * time.Second, wantOK: true},
		{name: "leading zeros", value: "007", want: 7 * time.Second, wantOK: true},
		{name: "empty", value: "", wantOK: false},
		{name: "blank", value: "   ", wantOK: false},
		{name: "word", value: "soon", wantOK: false},
		{name: "negative", value: "-5", wantOK: false},
		{name: "plus sign", value: "+120", wantOK: false},
		{name: "fraction", value: "1.5", wantOK: false},
		{name: "exponent", value: "1e3", wantOK: false},
		{name: "hex", value: "0x10", wantOK: false},
		{name: "underscore", value: "1_0", wantOK: false},
		{name: "inner space", value: "1 0", wantOK: false},
		{name: "non-ASCII digits", value: "١٢٣", wantOK: false},
		{name: "superscript digit", value: "²", wantOK: false},
		{name: "trailing junk", value: "10s", wantOK: false},
		{name: "IMF-fixdate", value: "Wed, 01 Jan 2025 01:00:00 GMT", want: time.Hour, wantOK: true},
		{name: "RFC 850 date", value: "Wednesday, 01-Jan-25 00:00:30 GMT", want: 30 * time.Second, wantOK: true},
		{name: "asctime date", value: "Wed Jan  1 00:02:00 2025", want: 2 * time.Minute, wantOK: true},
		{name: "date in the past", value: "Tue, 31 Dec 2024 23:00:00 GMT", wantOK: false},
		{name: "date equal to now", value: "Wed, 01 Jan 2025 00:00:00 GMT", wantOK: false},
		{name: "date with a numeric zone", value: "Wed, 01 Jan 2025 01:00:00 +0000", wantOK: false},
		{name: "huge delta saturates", value: "99999999999999999999999", want: time.Duration(math.MaxInt64), wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseRetryAfter(tt.value, now)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseRetryAfter(%q) = (%v, %v); want (%v, %v)", tt.value, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	// Seeds: both wire forms, then the spellings strconv would accept and
	// the grammar does not.
	for _, s := range []string{
		"120", "0", " 30 ",
		"Wed, 01 Jan 2025 01:00:00 GMT", "Wednesday, 01-Jan-25 00:00:30 GMT", "Wed Jan  1 00:02:00 2025",
		"-5", "+1", "1_0", "1.5", "1e3", "١٢٣", "99999999999999999999999",
	} {
		f.Add(s)
	}
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := ParseRetryAfter(v, now)
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) = (%v, false); a refusal must be 0", v, d)
		}
		if d < 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v; negative", v, d)
		}
	})
}
