package replicate_test

import (
	"errors"
	"path"
	"strings"
	"testing"

	"github.com/replicator-go/replicator/replicate"
)

func FuzzObjectKey(f *testing.F) {
	// Seed corpus: prefix, destination.
	f.Add("reps", "2026/report.pdf")                 // ordinary
	f.Add("", "2026/report.pdf")                     // bucket root
	f.Add("/reps/", "Q4 (final) [v2]/r+1=2@x,~.pdf") // every allowed character
	f.Add("reps", "../reps-other/r.pdf")             // escape through a lookalike
	f.Add("reps", "a/../../escape.pdf")              // traversal mid-path
	f.Add("reps", "%2e%2e/%2F")                      // encoded traversal and separator
	f.Add("reps", "/absolute")                       // absolute
	f.Add("reps", "C:/windows")                      // drive qualifier
	f.Add("reps", `a\..\b`)                          // backslash traversal
	f.Add("reps", "a//b")                            // empty segment
	f.Add("reps", "./a/.")                           // dot segments
	f.Add("reps", " a ")                             // surrounding white space
	f.Add("reps", "{ns.field}/x")                    // unrendered template
	f.Add("reps", "nul\x00/ctl\x1f/del\x7f")         // control characters
	f.Add("reps", "caf\xc3\xa9/\xff")                // non-ASCII, invalid UTF-8
	f.Add("a/../b", "x")                             // a prefix that climbs
	f.Add("p", strings.Repeat("a", 1022))            // exactly the length limit
	f.Fuzz(func(t *testing.T, prefix, destination string) {
		key, err := replicate.ObjectKey(prefix, destination)
		if err != nil {
			if !errors.Is(err, replicate.ErrInvalidDestination) || key != "" {
				t.Fatalf("refusal %v with key %q", err, key)
			}
			if len(err.Error()) > 400 {
				t.Fatalf("refusal is %d bytes long", len(err.Error()))
			}
			return
		}
		// Never repaired: the key is the prefix and the destination, joined.
		root := strings.Trim(prefix, "/")
		want := destination
		if root != "" {
			want = root + "/" + destination
		}
		if key != want {
			t.Fatalf("ObjectKey(%q, %q) = %q, want %q", prefix, destination, key, want)
		}
		if err := replicate.CheckDestination(destination); err != nil {
			t.Fatalf("CheckDestination refused an accepted destination: %v", err)
		}
		if len(key) > replicate.MaxObjectKeyBytes || strings.HasPrefix(key, "/") || strings.HasSuffix(key, "/") {
			t.Fatalf("key %q is too long or not relative", key)
		}
		if root != "" && !strings.HasPrefix(key, root+"/") {
			t.Fatalf("key %q is not under %q", key, root)
		}
		for _, seg := range strings.Split(destination, "/") {
			if seg == "" || seg == "." || seg == ".." {
				t.Fatalf("accepted destination %q has segment %q", destination, seg)
			}
		}
		for _, seg := range strings.Split(key, "/") {
			if seg == "" || seg == "." || seg == ".." {
				t.Fatalf("key %q has segment %q", key, seg)
			}
		}
		for i := 0; i < len(destination); i++ {
			c := destination[i]
			if c < 0x20 || c >= 0x7f || strings.IndexByte(`%\{}:`, c) >= 0 {
				t.Fatalf("accepted destination %q holds %q", destination, c)
			}
		}
		if strings.TrimSpace(destination) != destination {
			t.Fatalf("accepted destination %q has surrounding white space", destination)
		}
		// What the key's root is, nothing in the destination can change:
		// path.Clean of the key stays under the root.
		if root != "" {
			if cleaned := path.Clean("/" + key); !strings.HasPrefix(cleaned, path.Clean("/"+root)+"/") {
				t.Fatalf("key %q cleans to %q, outside %q", key, cleaned, root)
			}
		}
	})
}
