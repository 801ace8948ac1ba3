package persist

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/internal/quote"
	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/gcs"
)

// The capability's names and sizes by default (docs/persist.md).
const (
	DefaultStream       = "content.persist"
	DefaultGroup        = "replicator.persist"
	DefaultFactsStream  = "content.artifacts"
	DefaultDLQStream    = "content.persist.dlq"
	DefaultDedupePrefix = "replicator:cmd:persist:"

	// DefaultConcurrency is how many persists run at once. Each is a
	// whole blob streamed from one store into another.
	DefaultConcurrency = 4
	// DefaultMaxHeld bounds the commands held in memory.
	DefaultMaxHeld = 2 * DefaultConcurrency
	// DefaultTimeout bounds one persist: the checks, the read and the
	// write.
	DefaultTimeout = 120 * time.Second
	// DrainMargin is added to the Handler's timeout for the capability's
	// DrainTimeout, so a persist that ends at its bound can still record
	// its fate.
	DrainMargin = 10 * time.Second
)

// Options configures a Handler. Temp and Store are required; a zero field
// otherwise means its default.
type Options struct {
	// Temp is the temp store, the sink this host's fetches store into.
	Temp Source
	// Store is the permanent store the bytes are kept in.
	Store Store
	// Timeout bounds one persist. Default DefaultTimeout.
	Timeout time.Duration
	// Logger receives a line per blob written. Default slog.Default().
	Logger *slog.Logger
}

// Handler turns a decoded content_persist command into exactly one
// capability.Outcome. It implements capability.Handler and is safe for
// concurrent use. Create one with New.
type Handler struct {
	temp    Source
	store   Store
	timeout time.Duration
	log     *slog.Logger
	now     func() time.Time // test seam
}

var _ capability.Handler = (*Handler)(nil)

// New returns a Handler for opts.
func New(opts Options) (*Handler, error) {
	if opts.Temp == nil {
		return nil, errors.New("persist: no temp store given")
	}
	if opts.Store == nil {
		return nil, errors.New("persist: no permanent store given")
	}
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("persist: negative timeout %v", opts.Timeout)
	}
	h := &Handler{temp: opts.Temp, store: opts.Store, timeout: opts.Timeout, log: opts.Logger, now: time.Now}
	if h.timeout == 0 {
		h.timeout = DefaultTimeout
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	return h, nil
}

// Timeout returns the bound on one persist.
func (h *Handler) Timeout() time.Duration { return h.timeout }

// Capability registers h with the engine under the default names: stream
// content.persist, group replicator.persist, facts on content.artifacts,
// dead letters on content.persist.dlq, dedupe keys
// replicator:cmd:persist:<command_id>.
func Capability(h *Handler) capability.Capability {
	return capability.Capability{
		Name:         "persist",
		Handler:      h,
		Stream:       DefaultStream,
		Group:        DefaultGroup,
		FactsStream:  DefaultFactsStream,
		DLQStream:    DefaultDLQStream,
		DedupePrefix: DefaultDedupePrefix,
		Concurrency:  DefaultConcurrency,
		MaxHeld:      DefaultMaxHeld,
		DrainTimeout: h.timeout + DrainMargin,
	}
}

// Decode implements capability.Handler with envelope.DecodePersistCommand:
// a foreign payload or an unsupported version is returned as that decoder
// returns it, the latter with the partial command its fact needs.
func (h *Handler) Decode(fields map[string]string) (*capability.Command, error) {
	cmd, err := envelope.DecodePersistCommand(fields)
	if cmd == nil {
		return nil, err
	}
	return &capability.Command{
		ID:    cmd.CommandID,
		Attrs: []slog.Attr{slog.String("content_fingerprint", shown(cmd.ContentFingerprint))},
		Value: cmd,
	}, err
}

// Failed implements capability.Handler: a terminal persist_failed echoing
// the command's command_id and content_fingerprint verbatim.
func (h *Handler) Failed(cmd *capability.Command, reason, detail string, attempts int, now time.Time) envelope.Model {
	c, _ := cmd.Value.(*envelope.ContentPersist)
	if c == nil {
		c = &envelope.ContentPersist{CommandID: cmd.ID}
	}
	switch {
	case reason == string(envelope.PersistReasonUnsupportedSchemaVersion) && detail == "":
		detail = fmt.Sprintf("schema_version=%d", c.SchemaVersion)
	case attempts > 0:
		detail = fmt.Sprintf("after %d handlings: %s", attempts, detail)
	}
	return failedFact(c, envelope.PersistReason(reason), detail, now)
}

// failedFact builds a terminal persist_failed about c, its detail bounded.
func failedFact(c *envelope.ContentPersist, reason envelope.PersistReason, detail string, now time.Time) *envelope.PersistFailed {
	f := &envelope.PersistFailed{
		SchemaVersion:      envelope.SchemaVersion,
		OccurredAt:         now,
		CommandID:          c.CommandID,
		ContentFingerprint: c.ContentFingerprint,
		Reason:             reason,
		Terminal:           true,
	}
	if detail != "" {
		f.Detail = new(envelope.BoundDetail(detail))
	}
	return f
}

// Handle implements capability.Handler: the rules of docs/persist.md, in
// order. Every check on the command comes before any I/O, so a gone blob
// never masks a command that could not have succeeded.
func (h *Handler) Handle(ctx context.Context, cmd *capability.Command) capability.Outcome {
	c, ok := cmd.Value.(*envelope.ContentPersist)
	if !ok || c == nil {
		return capability.Outcome{Err: fmt.Errorf("persist: a %T is not a persist command", cmd.Value)}
	}
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	fp := c.ContentFingerprint

	// 1. The digest is well formed and both digests agree.
	if sink.CheckFingerprint(fp) != nil {
		return h.close(c, envelope.PersistReasonInvalidSource,
			"content_fingerprint is not a lower-case hex sha256: "+shown(fp))
	}
	if named := fingerprintIn(c.BlobURI); named != "" && named != fp {
		return h.close(c, envelope.PersistReasonInvalidSource,
			"blob_uri names a different digest from content_fingerprint")
	}
	// 2. The source is a URI one of this host's stores minted, rebuilt
	// from the fingerprint and compared byte for byte: never read as a
	// path.
	fromTemp := c.BlobURI == h.temp.URI(fp)
	if !fromTemp && c.BlobURI != h.store.URI(fp) {
		return h.close(c, envelope.PersistReasonInvalidSource,
			"blob_uri is not a reference this host's stores minted: "+shown(guard.RedactURL(c.BlobURI)))
	}

	// 3. Already kept: the permanent store is the authority, so the bytes
	// are not read again, and a temp blob that expired since an earlier
	// persist is no failure.
	size, err := h.store.Size(ctx, fp)
	switch {
	case err == nil:
		return h.complete(c, Kept{Size: size})
	case !errors.Is(err, sink.ErrNotFound):
		return h.unreadable(err, "checking the permanent store")
	case !fromTemp:
		return h.close(c, envelope.PersistReasonBlobExpired,
			"blob_uri names the permanent store, which does not hold this digest")
	}

	// 4. Read, hash while writing, create if absent.
	rc, err := h.temp.Open(ctx, fp)
	if errors.Is(err, sink.ErrNotFound) {
		return h.close(c, envelope.PersistReasonBlobExpired, "the blob for this command is no longer stored")
	}
	if err != nil {
		return h.unreadable(err, "opening the blob")
	}
	defer rc.Close()
	mediaType := strings.TrimSpace(c.MediaType)
	kept, err := h.store.Keep(ctx, fp, sourceReader{rc}, mediaType)
	var se *sourceError
	switch {
	case err == nil:
		return h.complete(c, kept)
	case errors.Is(err, ErrCorrupt):
		h.log.Error("persist: a stored blob does not hash to its fingerprint",
			slog.String("command_id", c.CommandID), slog.String("content_fingerprint", fp))
		return h.close(c, envelope.PersistReasonSourceCorrupt, err.Error())
	case errors.As(err, &se):
		if errors.Is(err, sink.ErrNotFound) {
			return h.close(c, envelope.PersistReasonBlobExpired,
				"the blob for this command was swept while it was read")
		}
		return h.unreadable(err, "reading the blob")
	case errors.Is(err, sink.ErrPermanent):
		return h.close(c, envelope.PersistReasonStoreRefused, err.Error())
	default:
		return capability.Outcome{Fate: capability.Retry, Err: fmt.Errorf("persist: the permanent store write failed: %w", err)}
	}
}

// complete is the success: the bytes are kept, by this call or before it.
func (h *Handler) complete(c *envelope.ContentPersist, k Kept) capability.Outcome {
	label := "already_kept"
	if k.Created {
		label = "persisted"
		h.log.Info("persist: kept a blob", slog.String("command_id", c.CommandID),
			slog.String("content_fingerprint", c.ContentFingerprint), slog.Int64("size_bytes", k.Size))
	}
	return capability.Outcome{
		Fate:  capability.Complete,
		Label: label,
		Fact: &envelope.BlobPersisted{
			SchemaVersion:      envelope.SchemaVersion,
			OccurredAt:         h.now(),
			CommandID:          c.CommandID,
			ContentFingerprint: c.ContentFingerprint,
			SizeBytes:          k.Size,
		},
		Attrs: []slog.Attr{slog.Int64("size_bytes", k.Size)},
	}
}

// close is a refusal: the terminal fact, then the dead letter.
func (h *Handler) close(c *envelope.ContentPersist, reason envelope.PersistReason, detail string) capability.Outcome {
	return capability.Outcome{
		Fate:   capability.Close,
		Fact:   failedFact(c, reason, detail, h.now()),
		Reason: string(reason),
		Err:    errors.New("persist: " + detail),
	}
}

// unreadable classifies a failure reaching a store the host reads: a
// refusal for good is left to the delivery ceiling (handler_error), because
// no persist reason says "this host cannot read its own store"; anything
// else is retried.
func (h *Handler) unreadable(err error, what string) capability.Outcome {
	err = fmt.Errorf("persist: %s: %w", what, err)
	if errors.Is(err, sink.ErrPermanent) || refusedStatus(err) {
		return capability.Outcome{Fate: capability.Unclassified, Err: err}
	}
	return capability.Outcome{Fate: capability.Retry, Err: err}
}

// refusedStatus reports whether err carries a service status retrying will
// not change (a 4xx other than 408 and 429).
func refusedStatus(err error) bool {
	return errors.Is(gcs.Permanent(err), sink.ErrPermanent)
}

// fingerprintIn returns the fingerprint a blob URI's last path segment
// spells (<sha256>.bin), or "" when it spells none. Only the comparison
// uses it; nothing is opened by it.
func fingerprintIn(blobURI string) string {
	u, err := url.Parse(blobURI)
	if err != nil || u.Opaque != "" || (u.Scheme != "file" && u.Scheme != "gs") {
		return ""
	}
	p := u.EscapedPath()
	stem, ok := strings.CutSuffix(p[strings.LastIndexByte(p, '/')+1:], ".bin")
	if !ok || sink.CheckFingerprint(stem) != nil {
		return ""
	}
	return stem
}

// maxShown bounds how much of a command's value an error or a detail
// carries.
const maxShown = 120

// shown quotes a command's value for a detail or a log line, bounded.
func shown(s string) string {
	q, _ := quote.Bounded(s, maxShown)
	return q
}
