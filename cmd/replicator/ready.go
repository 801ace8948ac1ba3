package main

import (
	"context"
	"log/slog"
	"os"
	"strings"

	"github.com/replicator-go/replicator/fetch"
)

// logReady writes the one "worker ready" line, after the policy replay (and
// the blob tree's measure) and before the first command is read: the line
// operators' runbooks wait for. It carries the Python worker's fields and
// this worker's own, and is not written once a stop was asked for, since
// nothing is then read. fleet says whether requests are paced through
// Redis (docs/operations.md, Redis ACL), cached whether the fleet pacer's
// client-side cache is on.
func logReady(ctx context.Context, log *slog.Logger, cfg Config, aliases []string, persisting string, fleet, cached bool) {
	if ctx.Err() != nil {
		return
	}
	if aliases == nil {
		aliases = []string{} // "replication_aliases":[] says plainly that none is provisioned
	}
	log.Info("worker ready",
		"group", cfg.ConsumerGroup,
		"consumer", cfg.ConsumerName,
		"replicate_group", cfg.ReplicateConsumerGroup,
		"replicate_consumer", cfg.ReplicateConsumerName,
		"build", buildID(),
		// How long Redis may keep failing before the worker exits 1: the
		// unit's StartLimitIntervalSec is sized against it.
		"worst_case_outage_seconds", cfg.engine(nil, nil).OutageLimit().Seconds(),
		"replication_aliases", aliases,
		// This worker's own.
		"content_fetch", "enabled",
		"content_replicate", "enabled",
		"persist", persisting,
		"concurrency", cfg.Concurrency,
		"robots", map[bool]string{false: "ignore", true: "obey"}[cfg.ObeyRobots],
		"pacing", map[bool]string{false: "local", true: "fleet"}[fleet],
		"pacing_client_cache", fleet && cached,
	)
}

// buildID names the running build: BUILD_ID when the unit stamps one, as
// the Python worker's unit does, else the binary's version.
func buildID() string {
	if b := strings.TrimSpace(os.Getenv("BUILD_ID")); b != "" {
		return b
	}
	return fetch.Version()
}
