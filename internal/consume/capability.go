package consume

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/replicator-go/replicator/envelope"
)

// Field is one field of a stream entry.
type Field struct{ Name, Value string }

// Entry is one stream entry as delivered, its fields in stream order.
type Entry struct {
	ID     string
	Fields []Field
}

// Decoded is what a Capability makes of one frame: a command to hold, or a
// refusal that dead-letters the frame before any handling.
type Decoded[C any] struct {
	// Command is the decoded command (unset for a refusal).
	Command C
	// CommandID is the command's correlator and dedupe key. A blank one is
	// dead-lettered by the loop (blank_command_id).
	CommandID string
	// Key groups held commands for the Scheduler (the content.fetch loop:
	// the host).
	Key string
	// Refusal, when set, is the dlq_reason the frame is dead-lettered with.
	Refusal string
	// Fact, with a Refusal, is published before the dead letter (an
	// unsupported schema version is announced); nil for none.
	Fact envelope.Model
	// Err says why the frame was refused, for the log.
	Err error
	// Attrs name the command in log lines (command_id, a redacted URL…).
	// They never carry a header value or a credential.
	Attrs []slog.Attr
}

// Refuse is the triage every capability gives a frame its decoder refused
// with err: another model is foreign_payload, announced to nobody (any
// command_id in it is another command's); an unsupported schema version
// whose command could still be read (readable) is announced with the fact
// unsupported builds, then dead-lettered; anything else is malformed_frame.
// It returns false, leaving d as it is, when err is nil.
func (d *Decoded[C]) Refuse(err error, readable bool, unsupported func() envelope.Model) bool {
	if err == nil {
		return false
	}
	d.Err = err
	switch {
	case errors.Is(err, envelope.ErrForeignPayload):
		d.Refusal, d.Attrs = envelope.DLQForeignPayload, nil
	case errors.Is(err, envelope.ErrUnsupportedVersion) && readable:
		d.Refusal, d.Fact = string(envelope.ReasonUnsupportedSchemaVersion), unsupported()
	default:
		d.Refusal, d.Attrs = envelope.DLQMalformedFrame, nil
	}
	return true
}

// FateKind is what the loop writes for a handled command.
type FateKind int

// The fates of a handled command.
const (
	// Complete: publish the fact (if any), set the dedupe key, ack.
	Complete FateKind = iota + 1
	// Close: publish the terminal fact (a failure is logged and
	// swallowed: the dead letter is the durable record), then dead-letter
	// the frame with Fate.Reason.
	Close
	// Retry: write nothing; the entry stays pending and returns through
	// the reclaim, its delivery given back.
	Retry
	// Unclassified: the entry stays pending; once its delivery count
	// reaches MaxDeliveryAttempts, the capability's handler_error fact is
	// published and the frame dead-lettered.
	Unclassified
)

// Fate is the loop's view of one handling.
type Fate struct {
	Kind FateKind
	// Fact is published for Complete (nil: nothing to announce) and Close.
	Fact envelope.Model
	// Outcome labels the handling in metrics and logs ("stored",
	// "permanent", …).
	Outcome string
	// Reason is the failure token: the metric label and, for Close, the
	// dlq_reason.
	Reason string
	// Err says why, for Close, Retry and Unclassified. It must be safe to
	// log.
	Err error
}

// FateOf is the Fate of a handling whose outcome maps to kind (zero: none
// of the others, so Unclassified, labelled "unclassified").
func FateOf(kind FateKind, fact envelope.Model, outcome, reason string, err error) Fate {
	if kind == 0 {
		kind, outcome = Unclassified, "unclassified"
	}
	return Fate{Kind: kind, Fact: fact, Outcome: outcome, Reason: reason, Err: err}
}

// Capability is what one kind of command brings to a loop. Its methods are
// called concurrently.
type Capability[C, R any] interface {
	// Decode triages one frame, given its fields by name.
	Decode(fields map[string]string) Decoded[C]
	// Handle handles one command; ctx ends at the drain timeout.
	Handle(ctx context.Context, cmd C) R
	// Fate maps a handling's result to the fate the loop writes.
	Fate(r R) Fate
	// HandlerError builds the fact that closes cmd after attempts
	// deliveries failed unclassified, detail saying why.
	HandlerError(cmd C, attempts int, detail string, now time.Time) envelope.Model
	// Observe is told of every handled command (not one requeued by the
	// Scheduler, nor one lost to another consumer) before its fate is
	// written: the capability's own log line and metrics.
	Observe(h *Held[C], r R)
}

// Held is a command the loop holds in memory, from the read that delivered
// it to its fate, or until it is dropped and left pending.
type Held[C any] struct {
	Entry
	Command   C
	CommandID string
	// Key is the Scheduler's grouping key; a Scheduler may change it when
	// it requeues the command.
	Key   string
	Attrs []slog.Attr

	state heldState
	lost  bool // another consumer took it, or it was trimmed
	// renewedAt (unix nanoseconds) is no later than when the entry was last
	// delivered to this consumer or its claim renewed: its idle time is at
	// most the time since (see run.own).
	renewedAt atomic.Int64

	// What of its fate is written, so a fate tried again writes each step
	// once: its fact, its dedupe key, its dead letter; and, for an
	// unclassified failure, how many failures of the entry it makes.
	published, remembered, deadLettered bool
	attempts                            int
}

type heldState int

const (
	// waiting: in the Scheduler, not in the handler.
	waiting heldState = iota
	// active: inside the handler.
	active
	// closing: handled, its fate being written.
	closing
)

// Scheduler decides which held commands run when. The loop calls it under
// its own lock, one call at a time, with the current time; it must not
// block and never sees a Redis type, so it can be tested on its own.
type Scheduler[C, R any] interface {
	// Admit takes h, or says why not. full reports that the loop holds as
	// many commands as it may: h is then admitted only if a waiting
	// command gives up its place to it, and that one is returned as
	// evicted (the loop leaves it pending). A command turned away or
	// evicted stays pending for this consumer; the Scheduler may note its
	// id and name it to Recall once it could be admitted.
	Admit(h *Held[C], full bool, now time.Time) (ok bool, why string, evicted *Held[C])
	// Recall names up to n noted entries that could be admitted now, so
	// the loop takes them back at once instead of through the reclaim; it
	// offers each one found still pending here to Admit again. A call ends
	// the previous one's batch: an id of it not offered back since was no
	// longer pending here, and is forgotten.
	Recall(n int, now time.Time) []string
	// Evictable counts the waiting commands Admit could evict.
	Evictable() int
	// Start returns the commands that may start now, now active.
	Start(now time.Time) []*Held[C]
	// Wake is the earliest instant Start may have more to start; zero when
	// no waiting command waits for a time.
	Wake() time.Time
	// Done takes h back from the handler with its result. It returns true
	// when h stays held, waiting again (requeue is false when the loop is
	// stopping or h was lost: it must not be).
	Done(h *Held[C], r R, requeue bool, now time.Time) bool
	// Remove forgets a waiting h; it reports false when h is not waiting.
	Remove(h *Held[C]) bool
	// Drain forgets every waiting command and returns them.
	Drain() []*Held[C]
	// Parked counts the waiting commands held back until a time.
	Parked() int
}
