package contentfetch

import (
	"context"
	"log/slog"
	"net/url"
	"strconv"
	"time"

	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/policy"
)

// The content.fetch capability's keys and sizes when nothing overrides
// them: the defaults of the REPLICATOR_* settings (docs/settings.md).
const (
	DefaultStream       = "content.fetch"
	DefaultGroup        = "replicator.fetch"
	DefaultFactsStream  = "content.blobs"
	DefaultDLQStream    = "content.fetch.dlq"
	DefaultDedupePrefix = "replicator:cmd:fetch:"
	// MetricsPrefix names the capability's metrics (docs/operations.md,
	// Metrics and health).
	MetricsPrefix = "replicator_"

	// DefaultConcurrency is the requests in flight of a worker whose
	// Fetcher is unbounded (REPLICATOR_CONCURRENCY).
	DefaultConcurrency      = 16
	DefaultMaxHeldPerHost   = 64
	DefaultMaxActivePerHost = 4
	// DefaultHeldPerRequest and MinDefaultMaxHeld size the default
	// MaxHeld: commands held per request in flight, and never fewer than
	// MinDefaultMaxHeld. Held commands beyond the requests in flight let
	// the scheduler find other hosts' commands while some wait for their
	// host's window (docs/operations.md, Memory).
	DefaultHeldPerRequest = 2
	MinDefaultMaxHeld     = 256
	// SpareHandlings is how many handlings may run beyond the Fetcher's
	// requests in flight: they do the work before a request (the options,
	// the guard, the pacer) while every place is taken, so a place freed is
	// taken again at once. A handling waiting for its host's window parks
	// instead, so no more goroutines than this wait for a place.
	SpareHandlings = 16
	// DrainMargin is added to the Fetcher's MaxFetchTime for the default
	// DrainTimeout, so a fetch that ends at its bound can still record its
	// fate.
	DrainMargin = 10 * time.Second
)

// DefaultMaxHeld is the MaxHeld of a worker with concurrency requests in
// flight: DefaultHeldPerRequest × concurrency, at least MinDefaultMaxHeld.
func DefaultMaxHeld(concurrency int) int {
	return max(DefaultHeldPerRequest*concurrency, MinDefaultMaxHeld)
}

// Capability is content.fetch as the engine runs it, handled by h: its
// default keys, commands queued per host, as many handlings at once as
// h's Fetcher has requests in flight (DefaultConcurrency when it is
// unbounded) and SpareHandlings more, and a drain long enough for the
// longest fetch. Set a field of
// the result to override it.
func Capability(h *Handler) capability.Capability {
	_, concurrency := h.fetcher.InFlight()
	if concurrency == 0 {
		concurrency = DefaultConcurrency
	}
	return capability.Capability{
		Name:            "fetch",
		MetricsPrefix:   MetricsPrefix,
		Handler:         h,
		Stream:          DefaultStream,
		Group:           DefaultGroup,
		FactsStream:     DefaultFactsStream,
		DLQStream:       DefaultDLQStream,
		DedupePrefix:    DefaultDedupePrefix,
		Concurrency:     concurrency + SpareHandlings,
		MaxHeld:         DefaultMaxHeld(concurrency),
		MaxHeldPerKey:   DefaultMaxHeldPerHost,
		MaxActivePerKey: DefaultMaxActivePerHost,
		DrainTimeout:    h.fetcher.MaxFetchTime() + DrainMargin,
	}
}

// Decode reads a content_fetch frame (envelope.DecodeCommand). Its key is
// the URL's host as the pacer keys it (policy.HostKey), so every spelling
// of one host shares one queue; an unparseable URL gets "", and Fetch
// refuses it at once.
func (h *Handler) Decode(fields map[string]string) (*capability.Command, error) {
	cmd, err := envelope.DecodeCommand(fields)
	if cmd == nil {
		return nil, err
	}
	key := hostOf(cmd.URL)
	return &capability.Command{
		ID:    cmd.CommandID,
		Key:   key,
		Value: cmd,
		Attrs: []slog.Attr{slog.String("command_id", cmd.CommandID),
			slog.String("url", guard.RedactURL(cmd.URL)), slog.String("host", key)},
	}, err
}

func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return policy.HostKey(u.Hostname())
}

// Handle fetches a command Decode made (Fetch), its politeness waits cut
// short once the engine begins to shut down. A command that has not parked
// yet parks for any wait over ParkAfter (HandlerOptions).
func (h *Handler) Handle(ctx context.Context, c *capability.Command) capability.Outcome {
	maxWait := h.maxWait
	if c.Parks == 0 && h.parkAfter > 0 && (maxWait == 0 || h.parkAfter < maxWait) {
		maxWait = h.parkAfter
	}
	out := h.fetch(ctx, c.Value.(*envelope.ContentFetch), c.Stop, maxWait)
	var size int64
	if out.Label == Stored {
		size = out.Stored
	}
	out.Attrs = append(out.Attrs, slog.Int("status_code", out.StatusCode),
		slog.Int64("paced_ms", out.Paced.Milliseconds()), slog.Int64("size_bytes", size))
	return out.Outcome
}

// Failed builds the fetch_failed of a reason the engine owns: handler_error
// or unsupported_schema_version.
func (h *Handler) Failed(c *capability.Command, reason, detail string, attempts int, now time.Time) envelope.Model {
	cmd := c.Value.(*envelope.ContentFetch)
	if reason == string(envelope.ReasonUnsupportedSchemaVersion) && detail == "" {
		detail = "schema_version=" + strconv.Itoa(cmd.SchemaVersion)
	}
	return FailedFact(cmd, envelope.Reason(reason), detail, 0, attempts, now)
}

var _ capability.Handler = (*Handler)(nil)
