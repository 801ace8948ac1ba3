package fetch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/envelope"
)

// Dead-letter reasons of frames refused before any fetch. A dead letter of
// a handled command carries its failure's reason token instead
// (http_status, handler_error, …).
const (
	DLQMalformedFrame = "malformed_frame"
	DLQForeignPayload = "foreign_payload"
	DLQBlankCommandID = "blank_command_id"
)

// Fields a dead letter adds to the original frame's.
const (
	FieldDLQReason     = "dlq_reason"
	FieldDLQOriginalID = "dlq_original_id"
)

// fateTimeout bounds the writes that give one command its fate.
const fateTimeout = 10 * time.Second

// accept triages a batch of delivered entries in stream order: frames that
// cannot be commands are dead-lettered, already-handled commands acked, and
// the rest taken into memory. Entries this worker already holds are
// skipped. The first broker failure ends the batch; what was not triaged
// stays pending and returns through the reclaim.
func (w *Worker) accept(ctx context.Context, entries []rueidis.XRangeSlice) error {
	cands := make([]*item, 0, len(entries))
	for _, e := range entries {
		if w.isHeld(e.ID) {
			continue
		}
		it, err := w.triage(ctx, e)
		if err != nil {
			return err
		}
		if it != nil {
			cands = append(cands, it)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	exists := make(rueidis.Commands, len(cands))
	for i, it := range cands {
		exists[i] = w.client.B().Exists().Key(w.dedupeKey(it.cmd.CommandID)).Build()
	}
	var (
		dups      []string
		unhandled []string // left pending without being handled
		firstErr  error
	)
	for i, r := range w.client.DoMulti(ctx, exists...) {
		it := cands[i]
		n, err := r.AsInt64()
		if err != nil {
			if firstErr == nil {
				w.brokerFailure("dedupe")
				firstErr = fmt.Errorf("fetch: EXISTS dedupe key: %w", err)
			}
			continue
		}
		if n > 0 {
			dups = append(dups, it.id)
			w.m.commands.WithLabelValues("duplicate", "").Inc()
			w.log.InfoContext(ctx, "skipped an already-handled command", "message_id", it.id,
				"command_id", it.cmd.CommandID, "url", envelope.RedactURL(it.cmd.URL), "host", it.host, "outcome", "duplicate")
			continue
		}
		ok, why, evicted := w.route(it)
		if !ok {
			w.m.commands.WithLabelValues("deferred", "").Inc()
			w.log.DebugContext(ctx, "left a command pending", "message_id", it.id,
				"command_id", it.cmd.CommandID, "host", it.host, "why", why)
			unhandled = append(unhandled, it.id)
		}
		if evicted != "" {
			unhandled = append(unhandled, evicted)
		}
	}
	w.giveBack(ctx, unhandled...)
	if len(dups) > 0 {
		if err := w.ack(ctx, dups...); err != nil && firstErr == nil {
			w.brokerFailure("ack")
			firstErr = err
		}
	}
	if firstErr == nil {
		w.markOK()
	}
	return firstErr
}

// triage applies the checks that come before any fetch (SPEC 3.4): a frame
// that does not decode, is not a command, has another schema version or a
// blank command_id is dead-lettered here and triage returns nil. An error
// is a broker failure.
func (w *Worker) triage(ctx context.Context, e rueidis.XRangeSlice) (*item, error) {
	if len(e.FieldValues) == 0 {
		return nil, w.deadLetterEmpty(ctx, e.ID)
	}
	fields := make(map[string]string, len(e.FieldValues))
	for _, f := range e.FieldValues {
		fields[f.Field] = f.Value
	}
	cmd, err := envelope.DecodeCommand(fields)
	switch {
	case errors.Is(err, envelope.ErrForeignPayload):
		// Any command_id in it belongs to another command: no fact.
		return nil, w.refuse(ctx, e, DLQForeignPayload, err, nil)
	case errors.Is(err, envelope.ErrUnsupportedVersion) && cmd != nil:
		fact := FailedFact(cmd, envelope.ReasonUnsupportedSchemaVersion,
			fmt.Sprintf("schema_version=%d", cmd.SchemaVersion), 0, 0, w.now())
		w.announce(ctx, e.ID, cmd, fact)
		return nil, w.refuse(ctx, e, string(envelope.ReasonUnsupportedSchemaVersion), err, cmd)
	case err != nil:
		return nil, w.refuse(ctx, e, DLQMalformedFrame, err, nil)
	case strings.TrimSpace(cmd.CommandID) == "":
		// Refused before it could take the empty dedupe key and silence
		// every later blank command.
		return nil, w.refuse(ctx, e, DLQBlankCommandID, errors.New("command_id is blank"), cmd)
	}
	return &item{id: e.ID, fields: e.FieldValues, cmd: cmd, host: hostOf(cmd.URL)}, nil
}

// deadLetterEmpty dead-letters an entry delivered without fields: the frame
// is re-read by id, and if it is gone a synthesized record carries the id,
// so the entry can never stick in the pending list.
func (w *Worker) deadLetterEmpty(ctx context.Context, id string) error {
	fields, ok, err := w.xrange(ctx, id)
	if err != nil {
		w.brokerFailure("dlq")
		return err
	}
	if !ok {
		fields = []rueidis.XRangeFieldValue{
			{Field: "error", Value: "entry delivered without fields and no longer in the stream"},
			{Field: "original_message_id", Value: id},
			{Field: "original_topic", Value: w.o.Stream},
		}
	}
	return w.refuse(ctx, rueidis.XRangeSlice{ID: id, FieldValues: fields}, DLQMalformedFrame,
		errors.New("entry delivered without fields"), nil)
}

// refuse dead-letters a frame refused before any fetch.
func (w *Worker) refuse(ctx context.Context, e rueidis.XRangeSlice, reason string, cause error, cmd *envelope.ContentFetch) error {
	if err := w.deadLetter(ctx, e.ID, e.FieldValues, reason, cause, cmd); err != nil {
		return err
	}
	w.m.commands.WithLabelValues("refused", reason).Inc()
	return nil
}

// deadLetter copies a frame to the DLQ stream with its reason, then acks
// the original. cmd, when known, only names the command in the log.
func (w *Worker) deadLetter(ctx context.Context, id string, fields []rueidis.XRangeFieldValue, reason string, cause error, cmd *envelope.ContentFetch) error {
	if err := w.addDeadLetter(ctx, id, fields, reason); err != nil {
		w.brokerFailure("dlq")
		return err
	}
	w.m.dlq.WithLabelValues(reason).Inc()
	if err := w.ack(ctx, id); err != nil {
		w.brokerFailure("ack")
		return err
	}
	attrs := []slog.Attr{slog.String("message_id", id), slog.String("stream", w.o.Stream), slog.String("reason", reason)}
	if cmd != nil {
		attrs = append(attrs, slog.String("command_id", cmd.CommandID), slog.String("url", envelope.RedactURL(cmd.URL)))
	}
	if cause != nil {
		attrs = append(attrs, slog.String("error", cause.Error()))
	}
	w.log.LogAttrs(ctx, slog.LevelWarn, "dead-lettered a frame", attrs...)
	return nil
}

// announce publishes the fact that closes a command about to be
// dead-lettered. A failure is logged and swallowed: the dead letter is the
// durable record, and the issuer's reaper the backstop for the fact.
func (w *Worker) announce(ctx context.Context, id string, cmd *envelope.ContentFetch, fact *envelope.FetchFailed) {
	if strings.TrimSpace(cmd.CommandID) == "" {
		w.log.WarnContext(ctx, "cannot announce this failure: the command carries no command_id",
			"message_id", id, "reason", string(fact.Reason))
		return
	}
	if err := w.publish(ctx, fact); err != nil {
		w.brokerFailure("publish")
		w.log.ErrorContext(ctx, "could not publish fetch_failed; dead-lettering anyway", "message_id", id,
			"command_id", cmd.CommandID, "reason", string(fact.Reason), "error", err)
	}
}

// close gives a handled command its fate (SPEC 3.5). A write that fails
// leaves the entry pending: it returns through the reclaim, and the cycle
// counts as failed.
func (w *Worker) close(it *item, out Outcome) {
	if out.Kind == Stored || out.Kind == NotModified {
		// Fact, then dedupe key, then ack: a crash in between repeats the
		// fact, never loses it. Unlike a failure's fact, this one is not
		// swallowed: no dead letter would stand in for it.
		w.complete(it, out.Fact)
		return
	}
	ctx, cancel := context.WithTimeout(w.writeCtx, fateTimeout)
	defer cancel()
	switch out.Kind {
	case Permanent:
		if fact, ok := out.Fact.(*envelope.FetchFailed); ok {
			w.announce(ctx, it.id, it.cmd, fact)
		}
		if err := w.deadLetter(ctx, it.id, it.fields, string(out.Reason), out.Err, it.cmd); err != nil {
			w.fateError(ctx, it, "dlq", err)
		}
	case Unclassified:
		attempts, err := w.deliveryCount(ctx, it.id)
		if err != nil {
			w.brokerFailure("pending")
			w.log.WarnContext(ctx, "cannot read the delivery count; leaving the command pending",
				"message_id", it.id, "command_id", it.cmd.CommandID, "error", err)
			return
		}
		if attempts < w.o.MaxDeliveryAttempts {
			w.log.WarnContext(ctx, "unclassified failure; leaving the command pending for redelivery",
				"message_id", it.id, "command_id", it.cmd.CommandID, "attempts", attempts,
				"max_delivery_attempts", w.o.MaxDeliveryAttempts)
			return
		}
		detail, _, _ := strings.Cut(errString(out.Err), "\n") // the stack stays in the log
		fact := FailedFact(it.cmd, envelope.ReasonHandlerError, detail, 0, attempts, w.now())
		w.announce(ctx, it.id, it.cmd, fact)
		if err := w.deadLetter(ctx, it.id, it.fields, string(envelope.ReasonHandlerError), out.Err, it.cmd); err != nil {
			w.fateError(ctx, it, "dlq", err)
		}
	case Transient:
		// Nothing is written; the entry returns through the reclaim, and
		// this delivery does not count toward the ceiling.
		w.giveBack(ctx, it.id)
	}
}

func (w *Worker) fateError(ctx context.Context, it *item, op string, err error) {
	w.fateFailure(op)
	w.log.ErrorContext(ctx, "could not record a command's fate; it stays pending", "message_id", it.id,
		"command_id", it.cmd.CommandID, "op", op, "error", err)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// logOutcome writes the one line per handled command. Its keys are stable;
// no header value ever reaches it (the Handler's errors carry none, and the
// URL is redacted).
func (w *Worker) logOutcome(it *item, out Outcome) {
	level := slog.LevelInfo
	switch out.Kind {
	case Permanent, Transient:
		level = slog.LevelWarn
	case Unclassified:
		level = slog.LevelError
	}
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs,
		slog.String("message_id", it.id),
		slog.String("command_id", it.cmd.CommandID),
		slog.String("url", envelope.RedactURL(it.cmd.URL)),
		slog.String("host", it.host),
		slog.String("outcome", out.Kind.String()),
		slog.String("reason", string(out.Reason)),
		slog.Int("status_code", out.StatusCode),
		slog.Int64("duration_ms", out.Duration.Milliseconds()),
	)
	var paced time.Duration
	var size int64
	if out.Result != nil {
		paced = out.Result.Paced
		if out.Kind == Stored {
			size = out.Result.Blob.Size
		}
	}
	attrs = append(attrs, slog.Int64("paced_ms", paced.Milliseconds()), slog.Int64("size_bytes", size))
	if it.parks > 0 {
		attrs = append(attrs, slog.Int("parks", it.parks))
	}
	if out.Err != nil {
		attrs = append(attrs, slog.String("error", out.Err.Error()))
	}
	w.log.LogAttrs(context.Background(), level, "handled command", attrs...)
}
