// Package capability is what a capability hands the engine: a Handler that
// decodes its commands, handles them and says each outcome in the one
// vocabulary every capability shares (Outcome and its Fate), and the names
// of its streams. It imports no Redis and no Prometheus, so a capability's
// package (contentfetch, replicate, persist) compiles neither; the engine
// (package engine) runs the loop that reads the stream and writes the fates
// (docs/streams.md, The consume path).
package capability

import (
	"context"
	"log/slog"
	"time"

	"github.com/replicator-go/replicator/envelope"
)

// Fate is what the engine writes for a handled command.
type Fate int

// The fates of a handled command (docs/streams.md, Fates). The zero Fate is
// Unclassified, so an Outcome that names none waits for the delivery
// ceiling rather than being closed or completed by accident.
const (
	// Unclassified: a bug, or a failure nothing on the wire names. The
	// entry stays pending; once its failed handlings reach the delivery
	// ceiling, the Handler's handler_error fact is published and the frame
	// dead-lettered.
	Unclassified Fate = iota
	// Complete: publish the fact (if any), set the dedupe key, ack.
	Complete
	// Close: publish the terminal fact (a failure to publish is logged:
	// the dead letter is the durable record), then dead-letter the frame
	// with Outcome.Reason.
	Close
	// Retry: write nothing; the entry stays pending and returns through the
	// reclaim.
	Retry
	// Park: write nothing; the command waits in memory, holding no place
	// in flight and no goroutine, until Outcome.Wait has passed (its key's
	// politeness window, room in a store), then is handled again.
	Park
)

// String returns the fate's name, the outcome label of an Outcome that has
// none of its own.
func (f Fate) String() string {
	switch f {
	case Complete:
		return "complete"
	case Close:
		return "permanent"
	case Retry:
		return "transient"
	case Park:
		return "parked"
	}
	return "unclassified"
}

// Outcome is what became of one handling: the fate the engine writes and
// what it says in its metrics and its line per handled command.
type Outcome struct {
	// Fate says what the engine does with the command next.
	Fate Fate
	// Label names the outcome in metrics and logs ("stored",
	// "not_modified"); empty means Fate's name.
	Label string
	// Fact is published for Complete (nil: nothing to announce) and Close.
	Fact envelope.Model
	// Reason is the wire failure token: the metric label and, for Close,
	// the dlq_reason. For Park, why the command waits ("politeness",
	// "storage_full").
	Reason string
	// Err says why, for every fate but Complete. It must be safe to log:
	// no header value, no credential, no URL password.
	Err error
	// Wait is how long a parked command waits before it is handled again.
	Wait time.Duration
	// Key, for Park, is the key the command waits for when it is not its
	// own (a redirect's host); empty means its own.
	Key string
	// Paced is how long the handling waited for its key's window before
	// it went out. Non-zero, the key's pace, not a free place, is what its
	// other commands wait for, so they may give up their place in memory.
	Paced time.Duration
	// Stored is how many bytes the handling stored.
	Stored int64
	// Attrs add to the line the engine writes per handled command
	// (status_code, size_bytes…). They never carry a header value or a
	// credential.
	Attrs []slog.Attr
}

// Name is the outcome's label: Label, or the fate's name.
func (o Outcome) Name() string {
	if o.Label != "" {
		return o.Label
	}
	return o.Fate.String()
}

// Command is one decoded command as the engine holds it.
type Command struct {
	// ID is the command_id: the dedupe key and the correlator of its
	// facts. The engine dead-letters a blank one (blank_command_id).
	ID string
	// Key groups commands for the scheduler: commands of one key wait in
	// one queue and run at most Capability.MaxActivePerKey at once
	// (content.fetch: the host). Empty for a capability with one queue.
	Key string
	// Attrs name the command in log lines (a redacted URL, an alias). They
	// never carry a header value or a credential.
	Attrs []slog.Attr
	// Value is the decoded command, the Handler's own type.
	Value any
	// Parks counts how often the command has parked so far; the engine
	// sets it before each handling. A handler may sleep through a short
	// wait rather than park a command that parked before, so a handling
	// with several waits (a redirect chain) makes progress.
	Parks int
	// Stop is closed when the engine begins to shut down: a handling that
	// waits for anything (a politeness window) should end then, Retry,
	// having sent nothing. The engine sets it before each handling; nil
	// outside one.
	Stop <-chan struct{}
}

// Handler is a capability's part of the loop. Its methods are called
// concurrently.
type Handler interface {
	// Decode reads one frame, given its fields by name. An error wrapping
	// envelope.ErrForeignPayload dead-letters the frame as foreign_payload
	// with nothing announced; one wrapping envelope.ErrUnsupportedVersion
	// with a non-nil command announces Failed(cmd,
	// unsupported_schema_version) and dead-letters it; any other error
	// dead-letters it as malformed_frame.
	Decode(fields map[string]string) (*Command, error)
	// Handle handles one command. ctx ends at the drain timeout.
	Handle(ctx context.Context, cmd *Command) Outcome
	// Failed builds the terminal failure fact of cmd for a reason the
	// engine owns: "handler_error" after attempts failed handlings, detail
	// saying why; "unsupported_schema_version" with detail empty (the
	// Handler names the version it read). now is its occurred_at.
	Failed(cmd *Command, reason, detail string, attempts int, now time.Time) envelope.Model
}

// Capability is one kind of command as the engine runs it: its Handler,
// the keys it reads and writes, and how much of it runs at once. Name,
// Handler and the five stream keys are required; for the rest zero means
// the engine's default (package engine).
type Capability struct {
	// Name names the capability in consumer names
	// ("replicator-<Name>-1"), log lines and metrics: "fetch",
	// "replicate", "persist".
	Name string
	// MetricsPrefix prefixes the capability's metric names
	// ("replicator_", "replicator_replicate_"); default
	// "replicator_<Name>_".
	MetricsPrefix string
	// Handler decodes and handles the commands.
	Handler Handler

	// Stream is the command stream; Group the consumer group on it.
	Stream, Group string
	// FactsStream receives the facts; DLQStream the dead letters.
	FactsStream, DLQStream string
	// DedupePrefix prefixes each command_id's dedupe key.
	DedupePrefix string
	// Consumer names this worker in Group; default the engine's
	// ConsumerName of Group ("replicator-fetch-1"). Unique per running
	// worker.
	Consumer string

	// Concurrency bounds the handlings in progress at once.
	Concurrency int
	// MaxHeld bounds the commands held in memory: waiting, parked, being
	// handled or being closed.
	MaxHeld int
	// MaxHeldPerKey bounds the commands held for one Key; beyond it a
	// command is left pending and taken back once its key has room.
	MaxHeldPerKey int
	// MaxActivePerKey bounds the handlings of one Key at once.
	MaxActivePerKey int
	// DrainTimeout is how long handlings may run at shutdown before their
	// context is cancelled (they stay pending).
	DrainTimeout time.Duration
}
