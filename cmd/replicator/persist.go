package main

import (
	"context"
	"fmt"
	"log/slog"

	"cloud.google.com/go/storage"
	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/engine"
	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/internal/redisacl"
	"github.com/replicator-go/replicator/persist"
	"github.com/replicator-go/replicator/sink"
)

// What the worker ready line says of content.persist.
const (
	persistOff     = "disabled"
	persistOn      = "enabled"
	persistRefused = "refused by the broker"
)

// persistLoop builds the content.persist loop when REPLICATOR_PERSIST_ENABLED
// is on: the permanent bucket (a storage client from the host's
// Application Default Credentials, the bucket proved readable), a handler
// reading from blobs, and its consumer group, created now. A broker that
// refuses the group (its ACL does not grant the stream) leaves persist off
// with one line, and the other capabilities run; the reference stops the
// whole worker there. It returns nil and persistOff when persist is off,
// and what to close at shutdown.
func persistLoop(ctx context.Context, cfg Config, ecfg engine.Config, client rueidis.Client, blobs sink.Sink, log *slog.Logger) (*engine.Loop, string, func(), error) {
	if !cfg.PersistEnabled {
		return nil, persistOff, func() {}, nil
	}
	temp, ok := blobs.(persist.Source)
	if !ok {
		return nil, "", nil, fmt.Errorf("persist: the blob store cannot name its blobs")
	}
	gcs, err := storage.NewClient(ctx)
	if err != nil {
		return nil, "", nil, fmt.Errorf("persist: gcs client for REPLICATOR_PERMANENT_BUCKET: %w", err)
	}
	store, err := persist.NewGCSStore(ctx, gcs, cfg.PermanentBucket)
	if err != nil {
		gcs.Close()
		log.Error("permanent bucket is not usable", "permanent_bucket", cfg.PermanentBucket, "error", err)
		return nil, "", nil, err
	}
	h, err := persist.New(persist.Options{Temp: temp, Store: store, Logger: log})
	if err != nil {
		gcs.Close()
		return nil, "", nil, err
	}
	l := engine.New(client, ecfg, persist.Capability(h))
	c := l.Capability()
	if err := l.CreateGroup(ctx); redisacl.IsNoPerm(err) {
		log.Warn("content.persist is off: the broker does not grant this worker its stream; fetch and replicate run",
			"stream", c.Stream, "group", c.Group, "grant", persistGrant(c),
			"error", err)
		gcs.Close()
		return nil, persistRefused, func() {}, nil
	}
	// Any other failure is the broker's trouble, which Run backs off from.
	log.Info("content.persist ready", "group", c.Group, "consumer", c.Consumer, "permanent_bucket", cfg.PermanentBucket,
		"timeout_seconds", h.Timeout().Seconds())
	return l, persistOn, func() { gcs.Close() }, nil
}

// persistGrant is what a worker's Redis user needs beyond the production
// broker's line to run c (docs/operations.md, Redis ACL): its command
// stream and its dead-letter stream, and XADD on the latter. The facts
// stream and the dedupe keys are those the other capabilities use.
func persistGrant(c capability.Capability) string {
	return fmt.Sprintf("~%s ~%s (+xadd ~%s)", c.Stream, c.DLQStream, c.DLQStream)
}
