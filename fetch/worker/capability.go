package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/internal/consume"
	"github.com/replicator-go/replicator/policy"
)

// capability is what content.fetch brings to the consume loop: frames
// decode to content_fetch commands, the Handler handles them, and its
// outcomes map to the loop's fates.
type capability struct {
	handler *fetch.Handler
	log     *slog.Logger
	m       *fetchMetrics
}

var _ consume.Capability[*task, fetch.Outcome] = (*capability)(nil)

// Decode refuses a frame that does not decode (malformed_frame), a model
// other than content_fetch (foreign_payload: any command_id in it belongs
// to another command, so nothing is announced), and a schema version other
// than 1 (announced as unsupported_schema_version, then dead-lettered).
func (c *capability) Decode(fields map[string]string) consume.Decoded[*task] {
	cmd, err := envelope.DecodeCommand(fields)
	d := consume.Decoded[*task]{Err: err}
	if cmd != nil {
		d.CommandID = cmd.CommandID
		d.Attrs = make([]slog.Attr, 2, 3) // and host, for a command handled
		d.Attrs[0], d.Attrs[1] = slog.String("command_id", cmd.CommandID), slog.String("url", envelope.RedactURL(cmd.URL))
	}
	switch {
	case errors.Is(err, envelope.ErrForeignPayload):
		d.Refusal, d.Attrs = envelope.DLQForeignPayload, nil
	case errors.Is(err, envelope.ErrUnsupportedVersion) && cmd != nil:
		d.Refusal = string(envelope.ReasonUnsupportedSchemaVersion)
		// occurred_at is stamped when the loop publishes it.
		d.Fact = fetch.FailedFact(cmd, envelope.ReasonUnsupportedSchemaVersion,
			fmt.Sprintf("schema_version=%d", cmd.SchemaVersion), 0, 0, time.Time{})
	case err != nil:
		d.Refusal, d.Attrs = envelope.DLQMalformedFrame, nil
	default:
		d.Command = &task{cmd: cmd}
		d.Key = hostOf(cmd.URL)
		d.Attrs = append(d.Attrs, slog.String("host", d.Key))
	}
	return d
}

// hostOf is the queue key of a command: its URL's host as the pacer keys
// it (policy.HostKey), so every spelling of one host shares one queue. An
// unparseable URL gets "", and the Handler refuses it at once.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return policy.HostKey(u.Hostname())
}

func (c *capability) Handle(ctx context.Context, t *task) fetch.Outcome {
	return c.handler.Handle(ctx, t.cmd)
}

// Fate maps the Handler's outcomes: Stored and NotModified complete (fact,
// dedupe key, ack), Permanent closes (fact, dead letter), Transient
// retries, Unclassified waits for the delivery ceiling.
func (c *capability) Fate(out fetch.Outcome) consume.Fate {
	f := consume.Fate{Fact: out.Fact, Outcome: out.Kind.String(), Reason: string(out.Reason), Err: out.Err}
	switch out.Kind {
	case fetch.Stored, fetch.NotModified:
		f.Kind = consume.Complete
	case fetch.Permanent:
		f.Kind = consume.Close
	case fetch.Transient:
		f.Kind = consume.Retry
	default:
		f.Kind, f.Outcome = consume.Unclassified, fetch.Unclassified.String()
	}
	return f
}

func (c *capability) HandlerError(t *task, attempts int, detail string, now time.Time) envelope.Model {
	return fetch.FailedFact(t.cmd, envelope.ReasonHandlerError, detail, 0, attempts, now)
}

// Observe writes the one line per handled command and its metrics. The
// line's keys are stable; no header value ever reaches it (the Handler's
// errors carry none, and the URL is redacted).
func (c *capability) Observe(h *held, out fetch.Outcome) {
	c.m.observe(out)
	level := slog.LevelInfo
	switch out.Kind {
	case fetch.Permanent, fetch.Transient:
		level = slog.LevelWarn
	case fetch.Stored, fetch.NotModified:
	default:
		level = slog.LevelError
	}
	ctx := context.Background()
	handler := c.log.Handler()
	if !handler.Enabled(ctx, level) {
		return
	}
	var paced time.Duration
	var size int64
	if out.Result != nil {
		paced = out.Result.Paced
		if out.Kind == fetch.Stored {
			size = out.Result.Blob.Size
		}
	}
	// A record made here, without the caller's program counter (which
	// slog.Logger would look up for every line): the line names its command,
	// not its source.
	r := slog.NewRecord(time.Now(), level, "handled command", 0)
	r.AddAttrs(
		slog.String("message_id", h.ID),
		slog.String("command_id", h.CommandID),
		slog.String("url", envelope.RedactURL(h.Command.cmd.URL)),
		slog.String("host", h.Key),
		slog.String("outcome", out.Kind.String()),
		slog.String("reason", string(out.Reason)),
		slog.Int("status_code", out.StatusCode),
		slog.Int64("duration_ms", out.Duration.Milliseconds()),
		slog.Int64("paced_ms", paced.Milliseconds()),
		slog.Int64("size_bytes", size),
	)
	if parks := h.Command.parks; parks > 0 {
		r.AddAttrs(slog.Int("parks", parks))
	}
	if out.Err != nil {
		r.AddAttrs(slog.String("error", out.Err.Error()))
	}
	handler.Handle(ctx, r)
}
