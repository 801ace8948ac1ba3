package persist_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/persist"
	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/memory"
)

// A fetched blob kept for good: the handler the engine runs, driven by
// hand with a temp store in memory and a permanent tree on disk.
func ExampleHandler() {
	dir, _ := os.MkdirTemp("", "permanent")
	defer os.RemoveAll(dir)
	temp := memory.New(memory.Options{})
	blob, _ := temp.Put(context.Background(), strings.NewReader("kept bytes"), sink.PutOptions{})
	perm, _ := persist.NewLocalStore(dir)
	h, _ := persist.New(persist.Options{Temp: temp, Store: perm})

	wire, _ := envelope.ToWire(&envelope.ContentPersist{CommandID: "per-1",
		ContentFingerprint: blob.Fingerprint, BlobURI: blob.URI, MediaType: "text/plain"})
	cmd, _ := h.Decode(wire)
	out := h.Handle(context.Background(), cmd)
	fact := out.Fact.(*envelope.BlobPersisted)
	fmt.Println(out.Name(), fact.CommandID, fact.SizeBytes)

	out = h.Handle(context.Background(), cmd)
	fmt.Println(out.Name())
	fmt.Println(persist.Capability(h).Stream, persist.Capability(h).Group)
	// Output:
	// persisted per-1 10
	// already_kept
	// content.persist replicator.persist
}
