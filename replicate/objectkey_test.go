package replicate_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/replicator-go/replicator/replicate"
)

func TestObjectKeyAccepts(t *testing.T) {
	tests := []struct {
		name        string
		prefix      string
		destination string
		want        string
	}{
		{name: "under a prefix", prefix: "reps", destination: "2026/report.pdf", want: "reps/2026/report.pdf"},
		{name: "no prefix roots at the bucket", prefix: "", destination: "2026/report.pdf", want: "2026/report.pdf"},
		{name: "prefix slashes are dropped", prefix: "/reps/a/", destination: "r.pdf", want: "reps/a/r.pdf"},
		{name: "a prefix of slashes is the root", prefix: "//", destination: "r.pdf", want: "r.pdf"},
		{name: "one segment", prefix: "p", destination: "r", want: "p/r"},
		{name: "every allowed character", prefix: "p", destination: "AZaz09._-+=@,()[]~ x", want: "p/AZaz09._-+=@,()[]~ x"},
		{name: "interior spaces", prefix: "p", destination: "Q4 report/final (v2).pdf", want: "p/Q4 report/final (v2).pdf"},
		{name: "dots inside a segment", prefix: "p", destination: "a/..b/c../...", want: "p/a/..b/c../..."},
		{name: "a prefix an operator may write", prefix: "reps:2026/ü", destination: "r.pdf", want: "reps:2026/ü/r.pdf"},
		{name: "a key of exactly the limit", prefix: "p", destination: strings.Repeat("a", replicate.MaxObjectKeyBytes-2), want: "p/" + strings.Repeat("a", replicate.MaxObjectKeyBytes-2)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := replicate.ObjectKey(tc.prefix, tc.destination)
			if err != nil {
				t.Fatalf("ObjectKey(%q, %q): %v", tc.prefix, tc.destination, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ObjectKey mismatch (-want +got):\n%s", diff)
			}
			if err := replicate.CheckDestination(tc.destination); err != nil {
				t.Errorf("CheckDestination refused what ObjectKey accepted: %v", err)
			}
		})
	}
}

func TestObjectKeyRefuses(t *testing.T) {
	tests := []struct {
		name        string
		prefix      string
		destination string
		// detail is a substring the error must carry.
		detail string
	}{
		{name: "traversal", destination: "../escape.pdf", detail: "relative segment"},
		{name: "traversal mid-path", destination: "a/../../escape.pdf", detail: "relative segment"},
		{name: "a prefix lookalike", destination: "../reps-other/r.pdf", detail: "relative segment"},
		{name: "dot segment", destination: "./relative.pdf", detail: "relative segment"},
		{name: "trailing dot segment", destination: "a/.", detail: "relative segment"},
		{name: "leading slash", destination: "/absolute.pdf", detail: "absolute"},
		{name: "trailing slash", destination: "trailing/", detail: "ends with a separator"},
		{name: "drive qualifier", destination: "C:/windows.pdf", detail: "drive qualifier"},
		{name: "drive qualifier alone", destination: "c:", detail: "drive qualifier"},
		{name: "backslash", destination: `back\slash.pdf`, detail: "backslash"},
		{name: "backslash traversal", destination: `..\..\x`, detail: "backslash"},
		{name: "NUL", destination: "nul\x00byte.pdf", detail: `"\x00"`},
		{name: "control character", destination: "control\x01char.pdf", detail: `"\x01"`},
		{name: "DEL", destination: "del\x7f.pdf", detail: `"\x7f"`},
		{name: "newline inside", destination: "a\nb.pdf", detail: `"\n"`},
		{name: "empty segment", destination: "double//segment.pdf", detail: "empty segment"},
		{name: "empty", destination: "", detail: "it is empty"},
		{name: "white space only", destination: "   ", detail: "it is empty"},
		{name: "leading white space", destination: " lead.pdf", detail: "leading or trailing white space"},
		{name: "trailing white space", destination: "trail.pdf ", detail: "leading or trailing white space"},
		{name: "trailing tab", destination: "trail.pdf\t", detail: "leading or trailing white space"},
		{name: "trailing no-break space", destination: "trail.pdf\u00a0", detail: "leading or trailing white space"},
		{name: "encoded traversal", destination: "%2e%2e/escape.pdf", detail: "percent-encoding"},
		{name: "encoded traversal mid-path", destination: "a/%2e%2e/%2e%2e/escape.pdf", detail: "percent-encoding"},
		{name: "encoded slash", destination: "%2fabsolute.pdf", detail: "percent-encoding"},
		{name: "encoded separator mid-path", destination: "a/b%2Fc.pdf", detail: "percent-encoding"},
		{name: "encoded space", destination: "sp%20ace.pdf", detail: "percent-encoding"},
		{name: "double-encoded", destination: "%252e%252e/x.pdf", detail: "percent-encoding"},
		{name: "bare percent", destination: "100%.pdf", detail: "percent-encoding"},
		{name: "malformed escape", destination: "bad%zz.pdf", detail: "percent-encoding"},
		{name: "trailing percent", destination: "trailing%", detail: "percent-encoding"},
		{name: "percent before every other rule", destination: "/../%", detail: "percent-encoding"},
		{name: "an unrendered template", destination: "{info_item.slug}/report.pdf", detail: `"{}"`},
		{name: "a colon later on", destination: "a/b:c", detail: `":"`},
		{name: "non-ASCII", destination: "caf\u00e9.pdf", detail: `"\xa9\xc3"`},
		{name: "invalid UTF-8", destination: "a\xff.pdf", detail: `"\xff"`},
		{name: "query-like", destination: "a.pdf?x=1#y", detail: `"#?"`},
		{name: "at most eight characters named", destination: "!\"#$&'*/;<>?", detail: `"!\"#$&'*"`},
		{name: "over the length limit", prefix: "p", destination: strings.Repeat("a", replicate.MaxObjectKeyBytes-1), detail: "over 1024"},
		{name: "prefix with a relative segment", prefix: "reps/..", destination: "r.pdf", detail: "alias prefix"},
		{name: "prefix with an empty segment", prefix: "a//b", destination: "r.pdf", detail: "alias prefix"},
		{name: "prefix with a control character", prefix: "a\x00b", destination: "r.pdf", detail: "alias prefix"},
		{name: "prefix with a backslash", prefix: `a\b`, destination: "r.pdf", detail: "alias prefix"},
		{name: "prefix of invalid UTF-8", prefix: "a\xffb", destination: "r.pdf", detail: "alias prefix"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key, err := replicate.ObjectKey(tc.prefix, tc.destination)
			if !errors.Is(err, replicate.ErrInvalidDestination) {
				t.Fatalf("ObjectKey(%q, %q) = %q, %v; want ErrInvalidDestination", tc.prefix, tc.destination, key, err)
			}
			if key != "" {
				t.Errorf("a refusal returned the key %q", key)
			}
			if !strings.Contains(err.Error(), tc.detail) {
				t.Errorf("error %q does not mention %q", err, tc.detail)
			}
			if !strings.HasPrefix(err.Error(), "replicate: invalid destination: ") {
				t.Errorf("error %q lacks the prefix", err)
			}
		})
	}
}

// The refusal becomes a fact's detail and a dead letter's reason, so a
// huge destination must not reach either whole.
func TestObjectKeyRefusalIsBounded(t *testing.T) {
	for _, dest := range []string{
		"!" + strings.Repeat("x", 5000) + ".pdf",
		strings.Repeat("ü", 3000),
		strings.Repeat("a/", 3000) + "{x}",
	} {
		_, err := replicate.ObjectKey("p", dest)
		if !errors.Is(err, replicate.ErrInvalidDestination) {
			t.Fatalf("want a refusal, got %v", err)
		}
		if len(err.Error()) > 400 {
			t.Errorf("refusal is %d bytes long; want it bounded", len(err.Error()))
		}
	}
	_, err := replicate.ObjectKey(strings.Repeat("a", 3000)+"/..", "r")
	if err == nil || len(err.Error()) > 400 {
		t.Errorf("prefix refusal %v is not bounded", err)
	}
}
