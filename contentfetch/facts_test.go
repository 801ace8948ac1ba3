package contentfetch

import (
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/sink"
)

// pySpace is every character Python's str.isspace accepts (CPython 3.11,
// checked over all code points): what the reference's str.strip removes.
var pySpace = []rune{
	'\t', '\n', '\v', '\f', '\r', 0x1c, 0x1d, 0x1e, 0x1f, ' ', 0x85, 0xa0, 0x1680,
	0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200a,
	0x2028, 0x2029, 0x202f, 0x205f, 0x3000,
}

func TestPassthroughStripsWhatPythonStrips(t *testing.T) {
	for _, r := range pySpace {
		in := string(r) + "v" + string(r)
		if got := Passthrough(in); got == nil || *got != "v" {
			t.Errorf("Passthrough(%q) = %v, want \"v\"", in, show(got))
		}
	}
	// Not white space to Python, so part of the value.
	for _, r := range []rune{0x180e, 0x200b, 0xfeff, 0x00} {
		in := string(r) + "v" + string(r)
		if got := Passthrough(in); got == nil || *got != in {
			t.Errorf("Passthrough(%q) = %v, want it unchanged", in, show(got))
		}
	}
}

func TestPassthrough(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want *string
	}{
		{name: "surrounding space stripped, nothing inside touched", in: "  W/\"a b\"\t", want: new(`W/"a b"`)},
		{name: "absent", in: "", want: nil},
		{name: "blank", in: " \t ", want: nil},
		{name: "only separators Python strips", in: "\x1c\x1d\x1e\x1f", want: nil},
		{name: "1024 ASCII characters", in: strings.Repeat("a", 1024), want: new(strings.Repeat("a", 1024))},
		{name: "1025 ASCII characters", in: strings.Repeat("a", 1025), want: nil},
		// Characters, not bytes: 1024 two-byte characters are 2048 bytes.
		{name: "1024 UTF-8 characters", in: strings.Repeat("é", 1024), want: new(strings.Repeat("é", 1024))},
		{name: "1025 UTF-8 characters", in: strings.Repeat("é", 1025), want: nil},
		{name: "length counted after the strip", in: " " + strings.Repeat("a", 1024) + "\x1f", want: new(strings.Repeat("a", 1024))},
		// Bytes that are not UTF-8 read as ISO-8859-1, one character each.
		{name: "ISO-8859-1 byte", in: "text/plain; name=caf\xe9", want: new("text/plain; name=café")},
		{name: "1024 ISO-8859-1 bytes", in: strings.Repeat("\xe9", 1024), want: new(strings.Repeat("é", 1024))},
		{name: "1025 ISO-8859-1 bytes", in: strings.Repeat("\xe9", 1025), want: nil},
		{name: "ISO-8859-1 no-break space is stripped", in: "text/plain\xa0", want: new("text/plain")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Passthrough(tt.in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Passthrough(%q) (-want +got):\n%s", tt.in, diff)
			}
			if got != nil && !utf8.ValidString(*got) {
				t.Errorf("Passthrough(%q) = %q, not valid UTF-8", tt.in, *got)
			}
		})
	}
}

func TestReplayable(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want *string
	}{
		{name: "strong etag", in: `"abc"`, want: new(`"abc"`)},
		{name: "weak etag kept verbatim", in: ` W/"abc" `, want: new(`W/"abc"`)},
		{name: "http-date", in: "Sun, 29 Nov 2026 23:18:58 GMT", want: new("Sun, 29 Nov 2026 23:18:58 GMT")},
		// Python's strip removes \x1c-\x1f, so the reference publishes what is
		// left, and what is left satisfies the byte rule.
		{name: "trailing unit separator stripped", in: "\"abc\"\x1f", want: new(`"abc"`)},
		{name: "leading file separator stripped", in: "\x1c\"abc\"", want: new(`"abc"`)},
		{name: "interior separator", in: "\"a\x1fb\"", want: nil},
		{name: "interior tab", in: "\"a\tb\"", want: nil},
		{name: "UTF-8 no-break space stripped", in: "\"abc\"\u00a0", want: new(`"abc"`)},
		{name: "ideographic space stripped", in: "\u3000\"abc\"", want: new(`"abc"`)},
		{name: "UTF-8 inside", in: `"café"`, want: nil},
		{name: "obs-text inside", in: "\"caf\xe9\"", want: nil},
		{name: "obs-text no-break space at the end", in: "Sun, 29 Nov 2026 \xa0", want: nil},
		{name: "DEL", in: "\"abc\x7f\"", want: nil},
		{name: "1025 characters", in: strings.Repeat("e", 1025), want: nil},
		{name: "blank", in: " \x1f ", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Replayable(tt.in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Replayable(%q) (-want +got):\n%s", tt.in, diff)
			}
			if got != nil && !sendable(*got) {
				t.Errorf("Replayable(%q) = %q, which breaks the byte rule", tt.in, *got)
			}
		})
	}
}

// Whatever Replayable publishes satisfies the byte rule of docs/streams.md, blob_available,, whatever the
// origin sent around it.
func TestReplayablePublishesOnlyPrintableASCII(t *testing.T) {
	edges := []string{"", " ", "\t", "\x1c", "\x1f", "\x00", "\x7f", "\x85", "\xa0", "\u00a0", "\u0085", "\u2028", "é", "\xe9", "\xff"}
	for _, a := range edges {
		for _, b := range edges {
			for _, mid := range []string{`"v"`, `"a` + a + `b"`, a} {
				in := a + mid + b
				if got := Replayable(in); got != nil && !sendable(*got) {
					t.Errorf("Replayable(%q) = %q, which breaks the byte rule", in, *got)
				}
			}
		}
	}
}

func sendable(v string) bool {
	if v == "" || v[0] == ' ' || v[len(v)-1] == ' ' {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return true
}

// httpx picks one encoding for a whole response: UTF-8 when every header is
// valid UTF-8, ISO-8859-1 for all of them otherwise. The fact carries what
// the reference would, and the JSON carries it as text, never U+FFFD.
func TestFactHeaderEncoding(t *testing.T) {
	tests := []struct {
		name     string
		header   http.Header
		wantRaw  *string
		wantType string
		wantETag *string
	}{
		{
			name:     "all UTF-8",
			header:   http.Header{"Content-Type": {"text/plain; name=café"}, "Etag": {"\"abc\"\u00a0"}},
			wantRaw:  new("text/plain; name=café"),
			wantType: "text/plain",
			wantETag: new(`"abc"`),
		},
		{
			name:     "ISO-8859-1 content type",
			header:   http.Header{"Content-Type": {"Text/Caf\xe9; name=caf\xe9"}, "Etag": {`"abc"`}},
			wantRaw:  new("Text/Café; name=café"),
			wantType: "text/café",
			wantETag: new(`"abc"`),
		},
		{
			// One stray byte elsewhere makes httpx read every header as
			// ISO-8859-1, UTF-8 Content-Type included.
			name:     "another header not UTF-8",
			header:   http.Header{"Content-Type": {"text/plain; name=café"}, "Etag": {"\"abc\"\u00a0"}, "Server": {"caf\xe9"}},
			wantRaw:  new("text/plain; name=cafÃ©"),
			wantType: "text/plain",
			wantETag: nil, // "\"abc\"Â" once the no-break space is stripped
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fact := blobFact(&envelope.ContentFetch{CommandID: "cmd-1", URL: "https://origin.test/", InfoSourceID: "isrc-1"},
				&fetch.Result{StatusCode: 200, Header: tt.header, Blob: sink.Blob{Fingerprint: strings.Repeat("0", 64), URI: "file:///b", Size: 1}},
				time.Date(2026, 11, 29, 23, 18, 58, 0, time.UTC))
			if diff := cmp.Diff(tt.wantRaw, fact.ContentTypeRaw); diff != "" {
				t.Errorf("content_type_raw (-want +got):\n%s", diff)
			}
			if fact.MediaType != tt.wantType {
				t.Errorf("media_type = %q, want %q", fact.MediaType, tt.wantType)
			}
			if diff := cmp.Diff(tt.wantETag, fact.ETag); diff != "" {
				t.Errorf("etag (-want +got):\n%s", diff)
			}
			wire, err := envelope.ToWire(fact)
			if err != nil {
				t.Fatal(err)
			}
			if p := wire[envelope.FieldPayload]; strings.Contains(p, "\uFFFD") || strings.Contains(p, `\ufffd`) {
				t.Errorf("payload carries U+FFFD: %s", p)
			}
			back, err := envelope.FromWire(wire)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantRaw, back.(*envelope.BlobAvailable).ContentTypeRaw); diff != "" {
				t.Errorf("content_type_raw after the wire (-want +got):\n%s", diff)
			}
		})
	}
}

func show(p *string) string {
	if p == nil {
		return "nil"
	}
	return "\"" + *p + "\""
}
