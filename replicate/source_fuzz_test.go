package replicate

import (
	"strings"
	"testing"

	"github.com/replicator-go/replicator/sink/gcs"
)

// fuzzTemp mints as the local backend does.
type fuzzTemp struct{ Source }

func (fuzzTemp) URI(fp string) string { return "file:///var/lib/replicator/blobs/" + fp + ".bin" }

// FuzzLocate feeds the source guard arbitrary blob_uri values. A URI it
// accepts is exactly what one of the two stores mints for the fingerprint
// it returns, and a permanent one is marked so; nothing else is accepted.
func FuzzLocate(f *testing.F) {
	const fp = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, seed := range []string{
		"file:///var/lib/replicator/blobs/" + fp + ".bin",
		gcs.URI("perm", fp),
		"gs://perm/blobs/../blobs/" + fp + ".bin",
		"gs://perm/blobs/" + strings.ToUpper(fp) + ".bin",
		"gs://perm/blobs/" + fp + ".bin?x",
		"gs://other/blobs/" + fp + ".bin",
		"file:///etc/passwd",
		"gs://perm/blobs/" + fp,
		"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		src := fuzzTemp{}
		got, reason, _ := locate(uri, src, "perm")
		if reason != "" {
			if got != (located{}) {
				t.Fatalf("refused %q (%s) yet located %+v", uri, reason, got)
			}
			return
		}
		want := src.URI(got.fp)
		if got.permanent {
			want = gcs.URI("perm", got.fp)
		}
		if got.uri != uri || want != uri {
			t.Fatalf("accepted %q as %+v, which the store mints as %q", uri, got, want)
		}
	})
}
