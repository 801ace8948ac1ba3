package main

import (
	"context"
	"fmt"
	"log/slog"

	"cloud.google.com/go/storage"

	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/replicate"
	"github.com/replicator-go/replicator/sink"
)

// replicateCapability builds content.replicate: the aliases the operator
// provisioned (none when REPLICATOR_REPLICATION_ALIASES_FILE is unset, and
// every command is then refused alias_unknown), one writer per alias, and
// the blobs this worker stores as the source. A GCS client, which reads the
// host's Application Default Credentials, is made only when an alias needs
// one; if it cannot be made, those aliases' commands are refused
// provider_disabled rather than failing the boot. It also returns the
// provisioned aliases' names.
func replicateCapability(ctx context.Context, cfg Config, blobs sink.Sink, log *slog.Logger) (capability.Capability, []string, func(), error) {
	src, ok := blobs.(replicate.Source)
	if !ok {
		return capability.Capability{}, nil, nil, fmt.Errorf("replicate: the blob store cannot name its blobs")
	}
	aliases := replicate.LoadAliases(cfg.ReplicationAliasesFile, log)
	var gcsClient *storage.Client
	closeGCS := func() {}
	if needsGCS(aliases) {
		c, err := storage.NewClient(ctx)
		if err != nil {
			log.Error("no GCS client for content.replicate; its gcs aliases are refused provider_disabled", "error", err)
		} else {
			gcsClient, closeGCS = c, func() { c.Close() }
		}
	}
	h, err := replicate.New(replicate.Options{
		Source:          src,
		PermanentBucket: cfg.PermanentBucket,
		Aliases:         aliases,
		GCS:             gcsClient,
		WriteTimeout:    cfg.ReplicateWriteTimeout,
		Logger:          log,
	})
	if err != nil {
		closeGCS()
		return capability.Capability{}, nil, nil, err
	}
	closeAll := func() { h.Close(); closeGCS() }
	log.Info("content.replicate ready", "group", cfg.ReplicateConsumerGroup, "aliases", h.Names(),
		"permanent_bucket", cfg.PermanentBucket, "write_timeout_seconds", h.WriteTimeout().Seconds())
	rc := replicate.Capability(h)
	rc.Group, rc.Consumer = cfg.ReplicateConsumerGroup, cfg.ReplicateConsumerName
	return rc, h.Names(), closeAll, nil
}

// needsGCS reports whether any provisioned alias writes to GCS.
func needsGCS(a *replicate.Aliases) bool {
	for _, name := range a.Names() {
		if b, _ := a.Resolve(name); b.Provider == replicate.ProviderGCS {
			return true
		}
	}
	return false
}
