// Package engine runs a capability's consume loop on a Redis stream of
// commands: everything every capability shares, whatever its commands do.
// A capability (package engine/capability) brings a Handler, which decodes
// a command, handles it and says its outcome, and the names of its
// streams; New runs it under one Config shared by every loop of a process:
//
//	loop := engine.New(client, cfg, contentfetch.Capability(handler))
//	err := loop.Run(ctx)
//
// One command's path, in one place:
//
//	read      XREADGROUP delivers it (or XAUTOCLAIM takes it back)
//	triage    Handler.Decode; refusals dead-lettered; duplicates acked away
//	schedule  held in its key's queue until its key and the loop have room
//	handle    Handler.Handle, in a goroutine only while it runs
//	fate      from Outcome.Fate: fact → dedupe key → ack, or fact → dead
//	          letter, or pending for the reclaim, or parked in memory
//
// # Reading
//
// The loop creates its group (MKSTREAM, at Config.StartID; an existing
// group is fine), reads new entries with XREADGROUP … BLOCK, and reclaims
// entries idle for Config.ClaimMinIdle with XAUTOCLAIM: the retry path of
// transient failures as well as crash recovery. A group found gone later
// is recreated where the loop left off: after the newest entry it has
// read, or at 0. Entries trimmed from the stream while pending are logged
// and acked away. Every command held in memory is kept owned well inside
// ClaimMinIdle by reading it again from this consumer's own pending list
// (XREADGROUP … <the id before it>), which renews the claim and can never
// take an entry from another consumer; one found taken is dropped.
// An entry the scheduler turns away stays pending for this consumer; the
// loop takes back the ones the scheduler recalls as soon as they fit, by
// the same read.
//
// # Triage
//
// Each delivered frame, in stream order: a frame without fields is re-read
// by id (a synthesized record stands in when it is gone); the capability
// decodes it, and a refusal (malformed, foreign, an unsupported schema
// version with its announcing fact) is dead-lettered; a blank command_id is
// dead-lettered before any handling; a command_id whose dedupe key exists
// is acked and dropped. The rest is held and given to the scheduler.
//
// # Fates
//
// Every handling ends in one fate (docs/streams.md, "Fates"):
//
//	Complete      fact (if any), then dedupe key, then ack
//	Close         terminal fact (a failure to publish is logged), then dead letter
//	Retry         nothing written; pending until the reclaim, the delivery given back
//	Unclassified  pending; at Config.MaxDeliveryAttempts failed handlings
//	              the Handler's handler_error fact, then the dead letter
//
// Before any of it, the loop confirms that the delivery is still pending
// for this consumer and renews its claim (the same read); one taken by
// another consumer gets nothing written. A crash anywhere may repeat a
// fact, never announce one whose command was not handled. Completed
// commands have their ownership checked and their facts, dedupe keys and
// acks written in batches, one round trip per step, each command's steps
// still in order. A fate that cannot be written is written again after a
// back-off, each step once, while the loop takes no new command: the
// outcome was earned once, and the origin is not asked again. The delivery
// ceiling counts failed handlings in this worker's memory (ceiling.go).
//
// # Least privilege
//
// The loop sends only XGROUP CREATE, XREADGROUP, XAUTOCLAIM, XACK, XRANGE,
// XADD (facts and dead letters), EXISTS and SET (dedupe keys): no script,
// no XPENDING, no XCLAIM, so it runs as a Redis user with exactly the
// grants of docs/operations.md, "Redis ACL". A refused command (NOPERM)
// is broker trouble like any other: the loop backs off, and no command is
// closed for it.
//
// # Broker trouble
//
// Failing reads, claims and writes are the loop's problem, not the
// message's: a failed cycle backs off from Config.BackoffBase doubling to
// Config.BackoffMax. Once Redis has kept failing for Config.OutageLimit,
// measured from when it was due to answer the operation that failed first,
// Run returns ErrBrokerUnavailable so a supervisor restarts the process;
// attempts under way then are cut short, so a silent network cannot
// stretch the limit.
// Cancelling Run's context stops reading, drops waiting commands (they stay
// pending) and lets handlings finish for up to Capability.DrainTimeout.
//
// Every Redis command names one key (the command stream, the facts stream,
// the dead-letter stream or one dedupe key), so a loop runs against Redis
// Cluster as well as a single server.
package engine
