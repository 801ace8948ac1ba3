package replicate

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/envelope"
)

// The content.replicate capability's sizes when nothing overrides them.
const (
	// DefaultConcurrency is how many writes run at once. Each is a whole
	// upload; a few keep the bucket busy without crowding out fetches.
	DefaultConcurrency = 4
	// DrainMargin is added to the Handler's write timeout for the default
	// DrainTimeout, so a write that ends at its bound can still record its
	// fate.
	DrainMargin = 10 * time.Second
	// MetricsPrefix names the capability's metrics (docs/operations.md,
	// Metrics and health).
	MetricsPrefix = "replicator_replicate_"
)

// Capability is content.replicate as the engine runs it, handled by h: its
// default keys, DefaultConcurrency writes at once in arrival order, and a
// drain long enough for the longest write. Set a field of the result to
// override it.
func Capability(h *Handler) capability.Capability {
	return capability.Capability{
		Name:          "replicate",
		MetricsPrefix: MetricsPrefix,
		Handler:       h,
		Stream:        DefaultStream,
		Group:         DefaultGroup,
		FactsStream:   DefaultFactsStream,
		DLQStream:     DefaultDLQStream,
		DedupePrefix:  DefaultDedupePrefix,
		Concurrency:   DefaultConcurrency,
		DrainTimeout:  h.WriteTimeout() + DrainMargin,
	}
}

// Decode reads a content_replicate frame (envelope.DecodeReplicateCommand).
// Every command shares one queue: writes wait for nothing but a free
// place.
func (h *Handler) Decode(fields map[string]string) (*capability.Command, error) {
	cmd, err := envelope.DecodeReplicateCommand(fields)
	if cmd == nil {
		return nil, err
	}
	return &capability.Command{
		ID:    cmd.CommandID,
		Value: cmd,
		Attrs: []slog.Attr{slog.String("command_id", cmd.CommandID),
			slog.String("credentials_alias", cmd.CredentialsAlias), slog.String("provider", cmd.Provider),
			slog.String("destination", cmd.Destination)},
	}, err
}

// Handle replicates a command Decode made (Replicate). Its line says
// whether the object was created, whatever the outcome: the keys of the
// line per handled command are stable.
func (h *Handler) Handle(ctx context.Context, c *capability.Command) capability.Outcome {
	out := h.Replicate(ctx, c.Value.(*envelope.ContentReplicate))
	out.Attrs = append(out.Attrs, slog.Bool("created", out.Created), slog.String("method", out.Method))
	return out.Outcome
}

// Failed builds the replication_failed of a reason the engine owns:
// handler_error or unsupported_schema_version.
func (h *Handler) Failed(c *capability.Command, reason, detail string, attempts int, now time.Time) envelope.Model {
	cmd := c.Value.(*envelope.ContentReplicate)
	if reason == string(envelope.ReplicateReasonUnsupportedSchemaVersion) && detail == "" {
		detail = "schema_version=" + strconv.Itoa(cmd.SchemaVersion)
	}
	return FailedFact(cmd, envelope.ReplicateReason(reason), detail, attempts, now)
}

var _ capability.Handler = (*Handler)(nil)
