package envelope_test

import (
	"strings"
	"testing"
	"time"

	"github.com/replicator-go/replicator/envelope"
)

func TestFormatTime(t *testing.T) {
	tests := []struct {
		name string
		in   time.Time
		want string
	}{
		{
			name: "UTC with microseconds",
			in:   time.Date(2026, 11, 29, 23, 18, 58, 123456000, time.UTC),
			want: "2026-11-29T23:18:58.123456Z",
		},
		{
			name: "nanoseconds are truncated, not rounded",
			in:   time.Date(2026, 11, 29, 23, 18, 58, 999999999, time.UTC),
			want: "2026-11-29T23:18:58.999999Z",
		},
		{
			name: "a whole second keeps six zeros",
			in:   time.Date(2026, 11, 29, 23, 18, 58, 0, time.UTC),
			want: "2026-11-29T23:18:58.000000Z",
		},
		{
			name: "an offset is converted to UTC",
			in:   time.Date(2026, 11, 30, 1, 18, 58, 500, time.FixedZone("", 2*3600)),
			want: "2026-11-29T23:18:58.000000Z",
		},
		{
			name: "a negative offset crossing a year",
			in:   time.Date(2026, 12, 31, 20, 0, 0, 1000, time.FixedZone("", -5*3600)),
			want: "2027-01-01T01:00:00.000001Z",
		},
		{
			name: "the zero time",
			in:   time.Time{},
			want: "0001-01-01T00:00:00.000000Z",
		},
		{
			name: "the last representable microsecond",
			in:   time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC),
			want: "9999-12-31T23:59:59.999999Z",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := envelope.FormatTime(tc.in)
			if got != tc.want {
				t.Errorf("FormatTime = %q, want %q", got, tc.want)
			}
			back, err := envelope.ParseTime(got)
			if err != nil {
				t.Fatalf("ParseTime(%q): %v", got, err)
			}
			if again := envelope.FormatTime(back); again != got {
				t.Errorf("FormatTime(ParseTime(%q)) = %q", got, again)
			}
		})
	}
}

func TestParseTime(t *testing.T) {
	base := time.Date(2026, 11, 29, 23, 18, 58, 0, time.UTC)
	tests := []struct {
		name string
		in   string
		want time.Time
	}{
		{name: "Z, no fraction", in: "2026-11-29T23:18:58Z", want: base},
		{name: "Z, 3 digits", in: "2026-11-29T23:18:58.123Z", want: base.Add(123 * time.Millisecond)},
		{name: "Z, 6 digits", in: "2026-11-29T23:18:58.123456Z", want: base.Add(123456 * time.Microsecond)},
		{name: "Z, 9 digits", in: "2026-11-29T23:18:58.123456789Z", want: base.Add(123456789)},
		{name: "Z, 1 digit", in: "2026-11-29T23:18:58.5Z", want: base.Add(500 * time.Millisecond)},
		{name: "Z, 12 digits drop past nanoseconds", in: "2026-11-29T23:18:58.123456789999Z", want: base.Add(123456789)},
		{name: "+00:00, no fraction", in: "2026-11-29T23:18:58+00:00", want: base},
		{name: "+00:00, 3 digits", in: "2026-11-29T23:18:58.123+00:00", want: base.Add(123 * time.Millisecond)},
		{name: "+00:00, 6 digits", in: "2026-11-29T23:18:58.123456+00:00", want: base.Add(123456 * time.Microsecond)},
		{name: "+00:00, 9 digits", in: "2026-11-29T23:18:58.123456789+00:00", want: base.Add(123456789)},
		{name: "-00:00", in: "2026-11-29T23:18:58-00:00", want: base},
		{name: "+02:00 is normalized", in: "2026-11-30T01:18:58+02:00", want: base},
		{name: "+02:00, 6 digits", in: "2026-11-30T01:18:58.000001+02:00", want: base.Add(time.Microsecond)},
		{name: "-05:30 crosses midnight", in: "2026-11-29T17:48:58-05:30", want: base},
		{name: "+23:59", in: "2026-11-30T23:17:58+23:59", want: base},
		{name: "lower-case t and z", in: "2026-11-29t23:18:58z", want: base},
		{name: "leap day", in: "2028-02-29T00:00:00Z", want: time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC)},
		{name: "year 0000", in: "0000-01-01T00:00:00Z", want: time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)},
		{name: "year 9999", in: "9999-12-31T23:59:59.999999Z", want: time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := envelope.ParseTime(tc.in)
			if err != nil {
				t.Fatalf("ParseTime(%q): %v", tc.in, err)
			}
			if !got.Equal(tc.want) {
				t.Errorf("ParseTime(%q) = %v, want %v", tc.in, got, tc.want)
			}
			if got.Location() != time.UTC {
				t.Errorf("ParseTime(%q) location = %v, want UTC", tc.in, got.Location())
			}
		})
	}
}

func TestParseTimeErrors(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		detail string
	}{
		{name: "naive", in: "2026-11-29T23:18:58", detail: "no UTC offset"},
		{name: "naive with fraction", in: "2026-11-29T23:18:58.123456", detail: "no UTC offset"},
		{name: "empty", in: "", detail: "not RFC 3339"},
		{name: "date only", in: "2026-11-29", detail: "not RFC 3339"},
		{name: "no seconds", in: "2026-11-29T23:18Z", detail: "not RFC 3339"},
		{name: "space separator", in: "2026-11-29 23:18:58Z", detail: "not RFC 3339"},
		{name: "offset without colon", in: "2026-11-29T23:18:58+0200", detail: "not RFC 3339"},
		{name: "offset hours only", in: "2026-11-29T23:18:58+02", detail: "not RFC 3339"},
		{name: "named zone", in: "2026-11-29T23:18:58 UTC", detail: "not RFC 3339"},
		{name: "dot without digits", in: "2026-11-29T23:18:58.Z", detail: "not RFC 3339"},
		{name: "comma fraction", in: "2026-11-29T23:18:58,5Z", detail: "not RFC 3339"},
		{name: "trailing text", in: "2026-11-29T23:18:58Zjunk", detail: "not RFC 3339"},
		{name: "two-digit year", in: "26-11-29T23:18:58Z", detail: "not RFC 3339"},
		{name: "signed year", in: "+2026-11-29T23:18:58Z", detail: "not RFC 3339"},
		{name: "letters in digits", in: "2026-1a-29T23:18:58Z", detail: "not RFC 3339"},
		{name: "month 13", in: "2026-13-01T00:00:00Z", detail: "out of range"},
		{name: "month 0", in: "2026-00-01T00:00:00Z", detail: "out of range"},
		{name: "day 0", in: "2026-11-00T00:00:00Z", detail: "out of range"},
		{name: "February 30", in: "2026-02-30T00:00:00Z", detail: "out of range"},
		{name: "February 29 off a leap year", in: "2026-02-29T00:00:00Z", detail: "out of range"},
		{name: "hour 24", in: "2026-11-29T24:00:00Z", detail: "out of range"},
		{name: "leap second", in: "2026-12-31T23:59:60Z", detail: "out of range"},
		{name: "offset hour 24", in: "2026-11-29T23:18:58+24:00", detail: "out of range"},
		{name: "offset minute 60", in: "2026-11-29T23:18:58+01:60", detail: "out of range"},
		{name: "past 9999 in UTC", in: "9999-12-31T23:59:59-01:00", detail: "out of range"},
		{name: "before 0000 in UTC", in: "0000-01-01T00:30:00+01:00", detail: "out of range"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := envelope.ParseTime(tc.in)
			if err == nil {
				t.Fatalf("ParseTime(%q) = %v, want an error", tc.in, got)
			}
			if !strings.HasPrefix(err.Error(), "envelope: ") || !strings.Contains(err.Error(), tc.detail) {
				t.Errorf("ParseTime(%q) error = %q, want one mentioning %q", tc.in, err, tc.detail)
			}
		})
	}
}
