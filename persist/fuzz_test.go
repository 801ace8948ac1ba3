package persist_test

import (
	"context"
	"strings"
	"testing"

	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/persist"
	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/memory"
)

// FuzzSource feeds the handler arbitrary blob_uri and content_fingerprint
// values. It must never panic, and a command whose blob_uri is not exactly
// what one of the two stores mints for its well-formed fingerprint must
// close invalid_source, having asked no store anything.
func FuzzSource(f *testing.F) {
	temp := memory.New(memory.Options{})
	blob, err := temp.Put(context.Background(), strings.NewReader(string(data)), sink.PutOptions{})
	if err != nil {
		f.Fatal(err)
	}
	perm, err := persist.NewLocalStore(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	// Seeds: the minted URIs, and the ways a value can come close.
	for _, uri := range []string{blob.URI, perm.URI(fp), "file:///etc/passwd", "gs://b/blobs/" + fp + ".bin",
		perm.URI(fp) + "?x", strings.ToUpper(blob.URI), "mem://" + fp, "file:" + fp + ".bin",
		"gs://b/blobs/%2e%2e/" + fp + ".bin", "file:///../" + fp + ".bin", "", "\x00", "::"} {
		f.Add(uri, fp)
		f.Add(uri, strings.ToUpper(fp))
	}
	f.Add(blob.URI, "NOT-A-DIGEST")
	f.Add(blob.URI, fp[:63])

	f.Fuzz(func(t *testing.T, blobURI, fingerprint string) {
		h, err := persist.New(persist.Options{Temp: temp, Store: perm, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		cmd := &capability.Command{ID: "per-1", Value: &envelope.ContentPersist{
			CommandID: "per-1", ContentFingerprint: fingerprint, BlobURI: blobURI}}
		out := h.Handle(context.Background(), cmd)
		minted := sink.CheckFingerprint(fingerprint) == nil &&
			(blobURI == temp.URI(fingerprint) || blobURI == perm.URI(fingerprint))
		if !minted {
			if out.Fate != capability.Close || out.Reason != string(envelope.PersistReasonInvalidSource) {
				t.Fatalf("blob_uri %q, fingerprint %q: %v %q (%v), want invalid_source", blobURI, fingerprint, out.Fate, out.Reason, out.Err)
			}
			return
		}
		if out.Reason == string(envelope.PersistReasonInvalidSource) {
			t.Fatalf("a minted URI %q refused: %v", blobURI, out.Err)
		}
	})
}
