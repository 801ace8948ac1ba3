package worker

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/internal/consume"
	"github.com/replicator-go/replicator/policy"
)

// capability is what content.fetch brings to the consume loop: frames
// decode to content_fetch commands, the Handler handles them, and its
// outcomes map to the loop's fates.
type capability struct {
	handler *contentfetch.Handler
	log     *slog.Logger
	m       *fetchMetrics
	// stop is closed when the current run begins to shut down: politeness
	// waits are cut short and those commands stay pending.
	stop atomic.Pointer[<-chan struct{}]
}

var _ consume.Capability[*task, contentfetch.Outcome] = (*capability)(nil)

// Decode refuses a frame that does not decode (malformed_frame), a model
// other than content_fetch (foreign_payload: any command_id in it belongs
// to another command, so nothing is announced), and a schema version other
// than 1 (announced as unsupported_schema_version, then dead-lettered).
func (c *capability) Decode(fields map[string]string) consume.Decoded[*task] {
	cmd, err := envelope.DecodeCommand(fields)
	var d consume.Decoded[*task]
	if cmd != nil {
		d.CommandID = cmd.CommandID
		d.Attrs = make([]slog.Attr, 2, 3) // and host, for a command handled
		d.Attrs[0], d.Attrs[1] = slog.String("command_id", cmd.CommandID), slog.String("url", guard.RedactURL(cmd.URL))
	}
	if d.Refuse(err, cmd != nil, func() envelope.Model {
		// occurred_at is stamped when the loop publishes it.
		return contentfetch.FailedFact(cmd, envelope.ReasonUnsupportedSchemaVersion,
			fmt.Sprintf("schema_version=%d", cmd.SchemaVersion), 0, 0, time.Time{})
	}) {
		return d
	}
	d.Command = &task{cmd: cmd}
	d.Key = hostOf(cmd.URL)
	d.Attrs = append(d.Attrs, slog.String("host", d.Key))
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

func (c *capability) Handle(ctx context.Context, t *task) contentfetch.Outcome {
	var stop <-chan struct{}
	if p := c.stop.Load(); p != nil {
		stop = *p
	}
	return c.handler.Handle(ctx, t.cmd, stop)
}

// Fate maps the Handler's outcomes: Stored and NotModified complete (fact,
// dedupe key, ack), Permanent closes (fact, dead letter), Transient
// retries, Unclassified waits for the delivery ceiling.
func (c *capability) Fate(out contentfetch.Outcome) consume.Fate {
	return consume.FateOf(fates[out.Kind], out.Fact, out.Kind.String(), string(out.Reason), out.Err)
}

// fates maps the Handler's outcomes to the loop's fates; any other kind is
// unclassified.
var fates = map[contentfetch.Kind]consume.FateKind{
	contentfetch.Stored:      consume.Complete,
	contentfetch.NotModified: consume.Complete,
	contentfetch.Permanent:   consume.Close,
	contentfetch.Transient:   consume.Retry,
}

func (c *capability) HandlerError(t *task, attempts int, detail string, now time.Time) envelope.Model {
	return contentfetch.FailedFact(t.cmd, envelope.ReasonHandlerError, detail, 0, attempts, now)
}

// Observe writes the one line per handled command and its metrics. The
// line's keys are stable; no header value ever reaches it (the Handler's
// errors carry none, and the URL is redacted).
func (c *capability) Observe(h *held, out contentfetch.Outcome) {
	c.m.observe(out)
	level := slog.LevelInfo
	switch out.Kind {
	case contentfetch.Permanent, contentfetch.Transient:
		level = slog.LevelWarn
	case contentfetch.Stored, contentfetch.NotModified:
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
		if out.Kind == contentfetch.Stored {
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
		slog.String("url", guard.RedactURL(h.Command.cmd.URL)),
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
