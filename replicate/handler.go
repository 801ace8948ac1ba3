package replicate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"time"

	"cloud.google.com/go/storage"

	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/envelope"
)

// Defaults for the loop that consumes content.replicate, and for Options
// fields left zero.
const (
	DefaultStream       = "content.replicate"
	DefaultGroup        = "replicator.replicate" // REPLICATOR_REPLICATE_CONSUMER_GROUP
	DefaultFactsStream  = "content.artifacts"
	DefaultDLQStream    = "content.replicate.dlq"
	DefaultDedupePrefix = "replicator:cmd:replicate:"
	DefaultWriteTimeout = 120 * time.Second // REPLICATOR_REPLICATE_WRITE_TIMEOUT_SECONDS
)

// DedupeKey returns the key under which a handled command is remembered:
// DefaultDedupePrefix + command_id. It never collides with a fetch command
// of the same id.
func DedupeKey(commandID string) string { return DefaultDedupePrefix + commandID }

// Outcome is the result of replicating one command: the engine's outcome
// (capability.Outcome: its fate, fact and reason) and what the write did.
//
//	Complete      the copy exists: replication_complete
//	Close         a permanent failure: replication_failed, then the dead letter
//	Retry         a transient failure: no fact; retried without bound, as the
//	              write is create-if-absent and cannot overwrite
//	Unclassified  a panic, or a failure no reason describes (handler_error
//	              at the delivery ceiling)
type Outcome struct {
	capability.Outcome
	// Created is set on a Complete that wrote the object; false when the
	// destination already held the same bytes.
	Created bool
	// Duration is how long handling took.
	Duration time.Duration
}

// unclassified is the outcome of a failure no reason describes.
func unclassified(err error) Outcome { return Outcome{Outcome: capability.Outcome{Err: err}} }

// transient is the outcome of a failure worth retrying.
func transient(err error) Outcome {
	return Outcome{Outcome: capability.Outcome{Fate: capability.Retry, Err: err}}
}

// Options configures a Handler. Source is required; every other zero field
// means its documented default.
type Options struct {
	// Source is the store the blobs were fetched into.
	Source Source
	// Aliases is the provisioned set. Nil provisions nothing: every command
	// is refused alias_unknown.
	Aliases *Aliases
	// GCS is the client gcs writers use; it carries the host's credentials
	// (Application Default Credentials), and nothing else does. Nil means
	// no gcs writer can be built: gcs aliases are logged at ERROR and their
	// commands refused provider_disabled.
	GCS *storage.Client
	// WriteTimeout bounds one write, including the read that settles a
	// precondition failure. Default DefaultWriteTimeout.
	WriteTimeout time.Duration
	// Logger receives the writers that could not be built. Default
	// slog.Default().
	Logger *slog.Logger
}

// Handler turns a decoded content_replicate command into exactly one
// Outcome. It is safe for concurrent use.
type Handler struct {
	source       Source
	aliases      *Aliases
	writers      map[string]writer // by alias: a writer is a bucket
	writeTimeout time.Duration
	log          *slog.Logger
	now          func() time.Time
}

// writer creates an object only if absent. Keyed by alias, never by
// provider, so one alias's bucket is never lent to another.
type writer interface {
	write(ctx context.Context, o object, body *sourceReader) writeResult
}

// New returns a Handler with one writer per alias, built now. A binding
// whose writer cannot be built (gdrive and ia have none; gcs needs
// Options.GCS) is logged at ERROR and skipped, and its commands are refused
// provider_disabled. New fails only on a nil Source or a negative
// WriteTimeout.
func New(opts Options) (*Handler, error) {
	if opts.Source == nil {
		return nil, errors.New("replicate: no source store given")
	}
	if opts.WriteTimeout < 0 {
		return nil, fmt.Errorf("replicate: negative write timeout %v", opts.WriteTimeout)
	}
	h := &Handler{
		source:       opts.Source,
		aliases:      opts.Aliases,
		writers:      map[string]writer{},
		writeTimeout: opts.WriteTimeout,
		log:          opts.Logger,
		now:          time.Now,
	}
	if h.writeTimeout == 0 {
		h.writeTimeout = DefaultWriteTimeout
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	if h.aliases == nil {
		h.aliases = &Aliases{}
	}
	for _, name := range slices.Sorted(maps.Keys(h.aliases.bindings)) {
		b := h.aliases.bindings[name]
		switch {
		case b.Provider != ProviderGCS:
			h.log.Error("replicate: no writer for this provider; commands naming the alias are refused provider_disabled",
				"alias", name, "provider", b.Provider)
		case opts.GCS == nil:
			h.log.Error("replicate: could not build a gcs writer (no storage client); commands naming the alias are refused provider_disabled",
				"alias", name, "provider", b.Provider, "bucket", b.Bucket)
		default:
			h.writers[name] = &gcsWriter{bucket: opts.GCS.Bucket(b.Bucket), name: b.Bucket}
		}
	}
	return h, nil
}

// WriteTimeout returns the bound on one write in force.
func (h *Handler) WriteTimeout() time.Duration { return h.writeTimeout }

// Handle handles one command. The guards run first, in this order, each
// decided from host configuration and the command alone, so a refused
// command is refused before any credential is used: the alias
// (alias_unknown), the provider and the alias's writer
// (provider_disabled), the destination and object_options
// (invalid_destination), the source (invalid_source, blob_expired). Then
// the blob is read once for its digests and streamed once into a
// create-if-absent write; a precondition failure is settled by comparing
// md5. A panic inside is recovered as an Unclassified outcome.
func (h *Handler) Replicate(ctx context.Context, cmd *envelope.ContentReplicate) (out Outcome) {
	start := h.now()
	defer func() {
		if p := recover(); p != nil {
			out = unclassified(fmt.Errorf("replicate: handler panic: %v\n%s", p, debug.Stack()))
		}
		out.Duration = h.now().Sub(start)
	}()
	if cmd == nil {
		return unclassified(errors.New("replicate: nil command"))
	}

	binding, ok := h.aliases.Resolve(cmd.CredentialsAlias)
	if !ok {
		// The alias is a key and nothing more: looked up, never echoed.
		return h.permanent(cmd, envelope.ReplicateReasonAliasUnknown,
			"the alias named by this command is not provisioned on this host")
	}
	if cmd.Provider != binding.Provider {
		return h.permanent(cmd, envelope.ReplicateReasonProviderDisabled,
			fmt.Sprintf("the alias is bound to %q, not %q", binding.Provider, bounded(cmd.Provider)))
	}
	w := h.writers[cmd.CredentialsAlias]
	if w == nil {
		return h.permanent(cmd, envelope.ReplicateReasonProviderDisabled,
			fmt.Sprintf("no %q writer is enabled on this host for this alias", binding.Provider))
	}
	key, err := ObjectKey(binding.Prefix, cmd.Destination)
	if err != nil {
		out := h.permanent(cmd, envelope.ReplicateReasonInvalidDestination, err.Error())
		out.Err = fmt.Errorf("replicate: %w", err) // errors.Is ErrInvalidDestination
		return out
	}
	o, err := gcsObject(key, cmd.MediaType, cmd.ObjectOptions)
	if err != nil {
		return h.permanent(cmd, envelope.ReplicateReasonInvalidDestination, err.Error())
	}
	fp, reason, why := locate(cmd.BlobURI, h.source)
	if reason != "" {
		return h.permanent(cmd, reason, why)
	}

	d, out, ok := h.digest(ctx, cmd, fp)
	if !ok {
		return out
	}
	o.md5, o.crc32c = d.md5, d.crc32c
	return h.write(ctx, cmd, w, fp, o, d)
}

// permanent builds a Close outcome whose error is the fact's detail.
func (h *Handler) permanent(cmd *envelope.ContentReplicate, reason envelope.ReplicateReason, detail string) Outcome {
	return Outcome{Outcome: capability.Outcome{
		Fate:   capability.Close,
		Fact:   FailedFact(cmd, reason, detail, 0, h.now()),
		Reason: string(reason),
		Err:    errors.New("replicate: " + detail),
	}}
}

func (h *Handler) complete(cmd *envelope.ContentReplicate, publicURL string, created bool) Outcome {
	return Outcome{Outcome: capability.Outcome{
		Fate: capability.Complete,
		Fact: &envelope.ReplicationComplete{
			SchemaVersion:     envelope.SchemaVersion,
			OccurredAt:        h.now(),
			CommandID:         cmd.CommandID,
			PublicURL:         publicURL,
			InfoItemRepSpecID: cmd.InfoItemRepSpecID,
			SourceRevisionID:  cmd.SourceRevisionID,
			InfoSourceID:      cmd.InfoSourceID,
		},
	}, Created: created}
}
