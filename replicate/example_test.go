package replicate_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/replicate"
	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/local"
)

func ExampleLoadAliases() {
	dir, _ := os.MkdirTemp("", "aliases")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "aliases.json")
	os.WriteFile(path, []byte(`{
		"gcs-archive":  {"provider": "gcs", "bucket": "co-gcs-archive", "prefix": "/reps/"},
		"gcs-broken":   {"provider": "gcs"},
		"gcs-misnamed": {"provider": "gcs", "bucket": "co-gcs-archive"}
	}`), 0o600)

	aliases := replicate.LoadAliases(path, slog.New(slog.DiscardHandler))
	fmt.Println(aliases.Names())
	b, ok := aliases.Resolve("gcs-archive")
	fmt.Printf("%+v %v\n", b, ok)
	_, ok = aliases.Resolve("gcs-broken") // dropped, and logged
	fmt.Println(ok)
	_, ok = aliases.Resolve("gcs-misnamed") // gcs-misnamed binds co-gcs-misnamed only
	fmt.Println(ok)
	// Output:
	// [gcs-archive]
	// {Provider:gcs Bucket:co-gcs-archive Prefix:reps CredentialsFile:} true
	// false
	// false
}

func ExampleHandler_Replicate() {
	// A fake GCS on loopback stands in for the destination bucket.
	g, err := testenv.NewGCS("co-gcs-archive")
	if err != nil {
		panic(err)
	}
	defer g.Close()
	dir, _ := os.MkdirTemp("", "blobs")
	defer os.RemoveAll(dir)
	blobs, _ := local.New(local.Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	blob, _ := blobs.Put(context.Background(), bytes.NewReader([]byte("%PDF-1.4 …")), sink.PutOptions{})

	aliases, _ := replicate.NewAliases(map[string]replicate.Binding{
		"gcs-archive": {Provider: replicate.ProviderGCS, Bucket: "co-gcs-archive", Prefix: "reps"},
	})
	h, _ := replicate.New(replicate.Options{Source: blobs, Aliases: aliases, GCS: g.Client})
	cmd := &envelope.ContentReplicate{
		OccurredAt: time.Now(), CommandID: "rep-1", BlobURI: blob.URI, MediaType: "application/pdf",
		Provider: "gcs", CredentialsAlias: "gcs-archive", Destination: "2026/report (final).pdf",
		InfoItemRepSpecID: "iirs-1", SourceRevisionID: "rev-1", InfoSourceID: "isrc-1",
	}

	out := h.Replicate(context.Background(), cmd)
	fmt.Println(out.Name(), out.Created, out.Fact.(*envelope.ReplicationComplete).PublicURL)
	// A redelivery finds its own copy and announces it again.
	out = h.Replicate(context.Background(), cmd)
	fmt.Println(out.Name(), out.Created)
	// A destination outside the alias's root is refused before any write.
	cmd.Destination = "../elsewhere.pdf"
	out = h.Replicate(context.Background(), cmd)
	fmt.Println(out.Name(), out.Reason)
	// Output:
	// complete true https://storage.googleapis.com/co-gcs-archive/reps/2026/report%20%28final%29.pdf
	// complete false
	// permanent invalid_destination
}

func ExampleFailedFact() {
	// The loop's own fact, once an unclassified failure reaches the
	// delivery ceiling.
	cmd := &envelope.ContentReplicate{CommandID: "rep-1", InfoItemRepSpecID: "iirs-1", SourceRevisionID: "rev-1", InfoSourceID: "isrc-1"}
	fact := replicate.FailedFact(cmd, envelope.ReplicateReasonHandlerError, "replicate: handler panic: boom", 5,
		time.Date(2026, 11, 29, 23, 20, 4, 0, time.UTC))
	fields, _ := envelope.ToWire(fact)
	fmt.Println(fields["key"])
	fmt.Println(fields["payload"])
	// Output:
	// rep-1:2026-11-29T23:20:04.000000Z
	// {"schema_version":1,"event_type":"replication_failed","occurred_at":"2026-11-29T23:20:04.000000Z","command_id":"rep-1","info_item_rep_spec_id":"iirs-1","source_revision_id":"rev-1","info_source_id":"isrc-1","reason":"handler_error","terminal":true,"attempts":5,"detail":"replicate: handler panic: boom"}
}
