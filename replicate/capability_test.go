package replicate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/replicate"
)

// TestCapability: content.replicate's defaults, one queue, and a drain
// that outlasts the longest write.
func TestCapability(t *testing.T) {
	aliases, _ := primary(t)
	h := newHandler(t, replicate.Options{Source: newLocal(t), Aliases: aliases, WriteTimeout: 7 * time.Second})
	c := replicate.Capability(h)
	if c.Handler != capability.Handler(h) || c.Name != "replicate" || c.MetricsPrefix != replicate.MetricsPrefix {
		t.Errorf("handler %v, name %q, prefix %q", c.Handler, c.Name, c.MetricsPrefix)
	}
	if c.Stream != replicate.DefaultStream || c.Group != replicate.DefaultGroup || c.FactsStream != replicate.DefaultFactsStream ||
		c.DLQStream != replicate.DefaultDLQStream || c.DedupePrefix != replicate.DefaultDedupePrefix || c.Consumer != "" {
		t.Errorf("keys = %+v, want the defaults", c)
	}
	if c.Concurrency != replicate.DefaultConcurrency || c.DrainTimeout != 7*time.Second+replicate.DrainMargin {
		t.Errorf("concurrency %d, drain %v; want %d, %v", c.Concurrency, c.DrainTimeout, replicate.DefaultConcurrency, 7*time.Second+replicate.DrainMargin)
	}
}

// TestCapabilityHandler: Decode, Handle and Failed as the engine calls
// them.
func TestCapabilityHandler(t *testing.T) {
	src := newLocal(t)
	blob := store(t, src, []byte("%PDF-1.4 a report"))
	aliases, b := primary(t)
	h := newHandler(t, replicate.Options{Source: src, Aliases: aliases})
	cmd := command(blob.URI)
	fields, err := envelope.ToWire(cmd)
	if err != nil {
		t.Fatal(err)
	}
	c, err := h.Decode(fields)
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != cmd.CommandID || c.Key != "" {
		t.Errorf("id %q, key %q; want %q and the one queue", c.ID, c.Key, cmd.CommandID)
	}
	out := h.Handle(context.Background(), c)
	if out.Fate != capability.Complete {
		t.Fatalf("outcome %v (%v), want complete", out.Name(), out.Err)
	}
	if f, ok := out.Fact.(*envelope.ReplicationComplete); !ok || f.PublicURL != "https://storage.googleapis.com/"+destBucket+"/"+b.Prefix+"/"+cmd.Destination {
		t.Errorf("fact %+v", out.Fact)
	}

	cmd.SchemaVersion = 2
	if fields, err = envelope.ToWire(cmd); err != nil {
		t.Fatal(err)
	}
	c, err = h.Decode(fields)
	if !errors.Is(err, envelope.ErrUnsupportedVersion) || c == nil {
		t.Fatalf("schema version 2: %v, %v; want ErrUnsupportedVersion with the command", c, err)
	}
	f, ok := h.Failed(c, string(envelope.ReplicateReasonUnsupportedSchemaVersion), "", 0, time.Time{}).(*envelope.ReplicationFailed)
	if !ok || f.Reason != envelope.ReplicateReasonUnsupportedSchemaVersion || !f.Terminal || f.Detail == nil || *f.Detail != "schema_version=2" {
		t.Errorf("announced %+v, want a terminal unsupported_schema_version naming schema_version=2", f)
	}
	f, ok = h.Failed(c, string(envelope.ReplicateReasonHandlerError), "boom", 5, at).(*envelope.ReplicationFailed)
	if !ok || f.Reason != envelope.ReplicateReasonHandlerError || f.Attempts == nil || *f.Attempts != 5 || f.Detail == nil || *f.Detail != "boom" || !f.OccurredAt.Equal(at) {
		t.Errorf("handler_error fact %+v", f)
	}
}
