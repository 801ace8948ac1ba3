package engine

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/envelope"
)

// accept triages a batch of delivered entries in stream order: frames that
// cannot be commands are dead-lettered, already-handled commands acked, and
// the rest taken into memory. Entries already held are skipped. The first
// broker failure ends the batch; what was not triaged stays pending and
// returns through the reclaim.
func (r *run) accept(ctx context.Context, entries []entry, delivered time.Time) error {
	l := r.l
	cands := make([]*task, 0, len(entries))
	for _, e := range entries {
		if r.isHeld(e.ID) {
			continue
		}
		h, err := r.triage(ctx, e)
		if err != nil {
			return err
		}
		if h != nil {
			h.renewedAt.Store(delivered.UnixNano())
			cands = append(cands, h)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	ids := make([]string, len(cands))
	for i, h := range cands {
		ids[i] = h.CommandID
	}
	seen, errs := l.b.seen(ctx, ids)
	var (
		dups     []string
		firstErr error
	)
	for i, h := range cands {
		if errs[i] != nil {
			if firstErr == nil {
				firstErr = l.brokerFailure("dedupe", errs[i])
			}
			continue // left pending, unhandled
		}
		if seen[i] {
			dups = append(dups, h.ID)
			l.o.Metrics.count("duplicate", "", 1)
			l.o.Logger.LogAttrs(ctx, slog.LevelInfo, "skipped an already-handled command",
				append(commandAttrs(h), slog.String("outcome", "duplicate"))...)
			continue
		}
		ok, why, evicted := r.hold(h)
		if !ok {
			l.o.Metrics.count("deferred", "", 1)
			l.o.Logger.LogAttrs(ctx, slog.LevelDebug, "left a command pending",
				append(commandAttrs(h), slog.String("why", why))...)
		}
		if evicted != nil {
			l.o.Metrics.count("deferred", "", 1)
			l.o.Logger.LogAttrs(ctx, slog.LevelDebug, "left a held command pending to make room for another",
				commandAttrs(evicted)...)
		}
	}
	if len(dups) > 0 {
		if err := l.b.ack(ctx, dups...); err != nil && firstErr == nil {
			firstErr = l.brokerFailure("ack", err)
		}
	}
	if firstErr == nil {
		l.markOK()
	}
	return firstErr
}

// commandAttrs names a held command in a log line.
func commandAttrs(h *task) []slog.Attr {
	attrs := make([]slog.Attr, 0, len(h.Attrs)+2)
	attrs = append(attrs, slog.String("message_id", h.ID))
	return append(attrs, h.Attrs...)
}

// triage applies the checks that come before any handling: a frame that the
// Capability refuses, or whose command_id is blank, is dead-lettered here
// and triage returns nil. An error is a broker failure.
func (r *run) triage(ctx context.Context, e entry) (*task, error) {
	if len(e.Fields) == 0 {
		return nil, r.deadLetterEmpty(ctx, e.ID)
	}
	byName := make(map[string]string, len(e.Fields))
	for _, f := range e.Fields {
		byName[f.Name] = f.Value
	}
	cmd, err := r.l.handler.Decode(byName)
	if err != nil {
		reason, attrs := refusal(err, cmd)
		if reason == unsupportedVersion {
			// occurred_at is stamped when it is published.
			r.announce(ctx, e.ID, cmd.ID, reason, r.l.handler.Failed(cmd, reason, "", 0, time.Time{}))
		}
		return nil, r.refuse(ctx, e, reason, err, attrs)
	}
	if strings.TrimSpace(cmd.ID) == "" {
		// Refused before it could take the empty dedupe key and silence
		// every later blank command.
		return nil, r.refuse(ctx, e, envelope.DLQBlankCommandID, errors.New("command_id is blank"), cmd.Attrs)
	}
	return &task{entry: e, Command: cmd, CommandID: cmd.ID, Key: cmd.Key, Attrs: cmd.Attrs}, nil
}

// unsupportedVersion is the reason of a command whose schema version this
// worker does not read; it is announced before the dead letter.
const unsupportedVersion = string(envelope.ReasonUnsupportedSchemaVersion)

// refusal is the triage of a frame the Handler could not decode (err): a
// frame of another model is foreign_payload, announced to nobody (any
// command_id in it is another command's); an unsupported schema version
// whose command could still be read is announced, then dead-lettered;
// anything else is malformed_frame. attrs name the command when it could
// be read.
func refusal(err error, cmd *capability.Command) (reason string, attrs []slog.Attr) {
	switch {
	case errors.Is(err, envelope.ErrForeignPayload):
		return envelope.DLQForeignPayload, nil
	case errors.Is(err, envelope.ErrUnsupportedVersion) && cmd != nil:
		return unsupportedVersion, cmd.Attrs
	}
	return envelope.DLQMalformedFrame, nil
}

// deadLetterEmpty dead-letters an entry delivered without fields: the frame
// is re-read by id, and if it is gone a synthesized record carries the id,
// so the entry can never stick in the pending list.
func (r *run) deadLetterEmpty(ctx context.Context, id string) error {
	fields, ok, err := r.l.b.entry(ctx, id)
	if err != nil {
		return r.l.brokerFailure("dlq", err)
	}
	if !ok {
		fields = []field{
			{Name: "error", Value: "entry delivered without fields and no longer in the stream"},
			{Name: "original_message_id", Value: id},
			{Name: "original_topic", Value: r.l.o.Stream},
		}
	}
	return r.refuse(ctx, entry{ID: id, Fields: fields}, envelope.DLQMalformedFrame,
		errors.New("entry delivered without fields"), nil)
}

// refuse dead-letters a frame refused before any handling.
func (r *run) refuse(ctx context.Context, e entry, reason string, cause error, attrs []slog.Attr) error {
	if err := r.deadLetter(ctx, e.ID, e.Fields, reason, cause, attrs); err != nil {
		return err
	}
	r.l.o.Metrics.count("refused", reason, 1)
	return nil
}

// deadLetter copies a frame to the dead-letter stream with its reason, then
// acks the original. attrs name the command in the log, when known.
func (r *run) deadLetter(ctx context.Context, id string, fields []field, reason string, cause error, attrs []slog.Attr) error {
	l := r.l
	if err := l.b.deadLetter(ctx, id, fields, reason); err != nil {
		return l.brokerFailure("dlq", err)
	}
	l.o.Metrics.deadLettered(reason)
	if err := l.b.ack(ctx, id); err != nil {
		return l.brokerFailure("ack", err)
	}
	r.logDeadLetter(ctx, id, reason, cause, attrs)
	return nil
}

// logDeadLetter logs a frame dead-lettered for reason.
func (r *run) logDeadLetter(ctx context.Context, id, reason string, cause error, attrs []slog.Attr) {
	l := r.l
	line := make([]slog.Attr, 0, len(attrs)+4)
	line = append(line, slog.String("message_id", id), slog.String("stream", l.o.Stream), slog.String("reason", reason))
	line = append(line, attrs...)
	if cause != nil {
		line = append(line, slog.String("error", cause.Error()))
	}
	l.o.Logger.LogAttrs(ctx, slog.LevelWarn, "dead-lettered a frame", line...)
}

// announce publishes the fact that closes a command about to be
// dead-lettered. A failure is logged and swallowed: the dead letter is the
// durable record, and the issuer's reaper the backstop for the fact.
func (r *run) announce(ctx context.Context, id, commandID, reason string, fact envelope.Model) {
	l := r.l
	if strings.TrimSpace(commandID) == "" {
		l.o.Logger.WarnContext(ctx, "cannot announce this failure: the command carries no command_id",
			"message_id", id, "reason", reason)
		return
	}
	if err := l.b.publish(ctx, fact); err != nil {
		l.o.Metrics.brokerFailure("publish")
		l.o.Logger.ErrorContext(ctx, "could not publish the failure fact; dead-lettering anyway", "message_id", id,
			"command_id", commandID, "reason", reason, "error", err)
	}
}
