// Package worker is the content.fetch consume loop: it reads content_fetch
// commands from a Redis stream with a consumer group, handles many at once
// through a fetch.Handler, and gives each one fate: a fact on content.blobs
// then a dedupe key then an ack, a fact then a dead letter on
// content.fetch.dlq, or pending for a retry (docs/streams.md,
// docs/taxonomy.md).
//
// It is public so a service can run the loop with its own sink or
// fetcher; the replicator binary's worker subcommand is this loop wired
// from REPLICATOR_* settings. The mechanics it shares with the
// content.replicate loop (reads, reclaims, ownership, batched fates,
// dead letters, the delivery ceiling, back-off, drain) live in an internal
// package; what is particular to fetching is here:
//
//   - the scheduler: a FIFO per host, at most Options.MaxActivePerHost of
//     a host's commands in the Handler at once (one while it has parked
//     commands), a command whose host is not yet due parked in memory
//     until it is (holding no request slot), one the blob store has no
//     room for parked likewise until it is asked again (docs/storage.md),
//     and, when the worker is full,
//     room made for other hosts by leaving the newest command of a
//     backlogged host pending; a command left pending, for a full host or
//     a full worker, is taken back by its entry id as soon as there is
//     room for it, not through the reclaim (docs/politeness.md);
//   - the mapping of the Handler's outcomes to fates: Stored and
//     NotModified complete, Permanent is announced and dead-lettered,
//     Transient stays pending, Unclassified waits for the delivery
//     ceiling and then closes as handler_error;
//   - one log line per handled command, with stable keys (command_id, url
//     redacted, host, outcome, reason, status_code, duration_ms, paced_ms,
//     size_bytes), and the replicator_* metrics.
//
// # Metrics
//
// With Options.Registerer set, a Worker exports
// replicator_commands_total{outcome,reason},
// replicator_fetch_duration_seconds{outcome}, replicator_stored_bytes_total,
// replicator_pacing_wait_seconds, replicator_handlers_busy,
// replicator_reclaimed_total, replicator_dlq_writes_total{reason},
// replicator_broker_failures_total{op}, replicator_cycle_failures_total,
// replicator_held_commands, replicator_parked_commands and
// replicator_requests_in_flight.
package worker
