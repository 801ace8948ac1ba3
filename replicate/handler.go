package replicate

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"

	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/sink"
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
	// Method is how the bytes went, once the write began: MethodCopy or
	// MethodUpload. Empty for a command refused before it.
	Method string
	// Duration is how long handling took.
	Duration time.Duration
}

// unclassified is the outcome of a failure no reason describes.
func unclassified(err error) Outcome { return Outcome{Outcome: capability.Outcome{Err: err}} }

// transient is the outcome of a failure worth retrying.
func transient(err error) Outcome {
	return Outcome{Outcome: capability.Outcome{Fate: capability.Retry, Err: err}}
}

// The ways a blob reaches its destination (Outcome.Method).
const (
	// MethodCopy is a server-side copy: the source is a bucket, and the
	// bytes never pass through this host.
	MethodCopy = "copy"
	// MethodUpload is a streamed upload of the blob read through its
	// Source (the local backend).
	MethodUpload = "upload"
)

// Options configures a Handler. Source is required; every other zero field
// means its documented default.
type Options struct {
	// Source is the store the blobs were fetched into (the temp store).
	Source Source
	// PermanentBucket is REPLICATOR_PERMANENT_BUCKET: the bucket of the
	// permanent store, whose blobs (gs://<bucket>/blobs/<sha256>.bin, see
	// sink/gcs.URI) are a source too, and never expire. Empty means none.
	PermanentBucket string
	// Aliases is the provisioned set. Nil provisions nothing: every command
	// is refused alias_unknown. A gcs binding whose bucket is one this host
	// stores blobs in (the temp store's, PermanentBucket) is dropped at
	// New, logged at ERROR, and its commands refused alias_unknown:
	// aliases are publication destinations.
	Aliases *Aliases
	// GCS is the client gcs writers use unless their binding names a
	// credentials file; it carries the host's credentials (Application
	// Default Credentials). Nil means such an alias has no writer: it is
	// logged at ERROR and its commands refused provider_disabled.
	GCS *storage.Client
	// NewGCS builds the client of a binding that names a credentials file,
	// one per binding. Default: storage.NewClient with the file as a
	// service-account key (option.WithAuthCredentialsFile). A binding whose
	// client cannot be built is logged at ERROR (the path, never the file's
	// contents) and its commands refused provider_disabled.
	NewGCS func(ctx context.Context, credentialsFile string) (*storage.Client, error)
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
	permanent    string // the permanent store's bucket, or ""
	aliases      *Aliases
	writers      map[string]writer // by alias: a writer is a bucket
	owned        []*storage.Client // built from credentials files; closed by Close
	writeTimeout time.Duration
	log          *slog.Logger
	now          func() time.Time
}

// writer creates an object only if absent. Keyed by alias, never by
// provider, so one alias's bucket is never lent to another.
type writer interface {
	write(ctx context.Context, o object, body *sourceReader) writeResult
	// copy creates o.key from the object srcObject of srcBucket, server
	// side, only if absent.
	copy(ctx context.Context, o object, srcBucket, srcObject string) writeResult
}

// New returns a Handler with one writer per alias, built now. A binding
// whose writer cannot be built (gdrive and ia have none; gcs needs
// Options.GCS, or a client built from its credentials file) is logged at
// ERROR and skipped, and its commands are refused provider_disabled. A gcs
// binding to a bucket this host stores blobs in is dropped (see
// Options.Aliases). New fails only on a nil Source or a negative
// WriteTimeout. Close releases the clients it built.
func New(opts Options) (*Handler, error) {
	if opts.Source == nil {
		return nil, errors.New("replicate: no source store given")
	}
	if opts.WriteTimeout < 0 {
		return nil, fmt.Errorf("replicate: negative write timeout %v", opts.WriteTimeout)
	}
	h := &Handler{
		source:       opts.Source,
		permanent:    opts.PermanentBucket,
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
	newGCS := opts.NewGCS
	if newGCS == nil {
		newGCS = newGCSClient
	}
	hostBuckets := []string{hostBucket(h.source), h.permanent}
	kept := map[string]Binding{}
	if opts.Aliases != nil {
		for _, name := range slices.Sorted(maps.Keys(opts.Aliases.bindings)) {
			b := opts.Aliases.bindings[name]
			if b.Provider == ProviderGCS && slices.Contains(hostBuckets, b.Bucket) {
				h.log.Error("replicate: ignoring an alias bound to a bucket this host stores blobs in; aliases are publication destinations, and commands naming it are refused alias_unknown",
					"alias", name, "bucket", b.Bucket)
				continue
			}
			kept[name] = b
			h.buildWriter(name, b, opts.GCS, newGCS)
		}
	}
	h.aliases = &Aliases{bindings: kept}
	return h, nil
}

// buildWriter builds the writer of one binding, or logs why there is none.
func (h *Handler) buildWriter(name string, b Binding, host *storage.Client, newGCS func(context.Context, string) (*storage.Client, error)) {
	switch {
	case b.Provider != ProviderGCS:
		h.log.Error("replicate: no writer for this provider; commands naming the alias are refused provider_disabled",
			"alias", name, "provider", b.Provider)
	case b.CredentialsFile != "":
		// Building a client reads the file; no request is sent.
		c, err := newGCS(context.Background(), b.CredentialsFile)
		if err != nil {
			h.log.Error("replicate: could not build a gcs client from the alias's credentials file; commands naming the alias are refused provider_disabled",
				"alias", name, "bucket", b.Bucket, "credentials_file", b.CredentialsFile, "error", err.Error())
			return
		}
		h.owned = append(h.owned, c)
		h.writers[name] = &gcsWriter{client: c, bucket: c.Bucket(b.Bucket), name: b.Bucket}
	case host == nil:
		h.log.Error("replicate: could not build a gcs writer (no storage client); commands naming the alias are refused provider_disabled",
			"alias", name, "provider", b.Provider, "bucket", b.Bucket)
	default:
		h.writers[name] = &gcsWriter{client: host, bucket: host.Bucket(b.Bucket), name: b.Bucket}
	}
}

// newGCSClient is the default Options.NewGCS: a client authenticated by
// the service-account key in file, checked first (checkServiceAccountKey).
// Under STORAGE_EMULATOR_HOST the storage package talks to the emulator
// without credentials.
func newGCSClient(ctx context.Context, file string) (*storage.Client, error) {
	if err := checkServiceAccountKey(file); err != nil {
		return nil, err
	}
	return storage.NewClient(ctx, option.WithAuthCredentialsFile(option.ServiceAccount, file))
}

// checkServiceAccountKey refuses a key file the storage client would accept
// at start and fail on only when it first asks for a token, an error with
// no status that would leave every command of the alias transient for
// ever: it must be a JSON service-account key with a client_email and a
// private_key that parses. The errors never quote the file.
func checkServiceAccountKey(file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("replicate: reading the key file: %w", err)
	}
	var key struct {
		Type        string `json:"type"`
		ClientEmail string `json:"client_email"`
		PrivateKey  string `json:"private_key"`
	}
	if json.Unmarshal(data, &key) != nil {
		return errors.New("replicate: the key file is not JSON")
	}
	if key.Type != "service_account" || key.ClientEmail == "" {
		return errors.New("replicate: the key file is not a service-account key (type service_account, with a client_email)")
	}
	block, _ := pem.Decode([]byte(key.PrivateKey))
	if block == nil {
		return errors.New("replicate: the key file's private_key is not PEM")
	}
	if _, err := x509.ParsePKCS8PrivateKey(block.Bytes); err != nil {
		if _, err := x509.ParsePKCS1PrivateKey(block.Bytes); err != nil {
			return errors.New("replicate: the key file's private_key does not parse")
		}
	}
	return nil
}

// Close closes the storage clients New built from credentials files. The
// Options.GCS client stays the caller's to close. Commands must not be
// handled after Close.
func (h *Handler) Close() error {
	var errs []error
	for _, c := range h.owned {
		errs = append(errs, c.Close())
	}
	h.owned = nil
	return errors.Join(errs...)
}

// Names returns the aliases the Handler accepts, sorted: those of
// Options.Aliases less any bound to a bucket this host stores blobs in.
func (h *Handler) Names() []string { return h.aliases.Names() }

// WriteTimeout returns the bound on one write in force.
func (h *Handler) WriteTimeout() time.Duration { return h.writeTimeout }

// Handle handles one command. The guards run first, in this order, each
// decided from host configuration and the command alone, so a refused
// command is refused before any credential is used: the alias
// (alias_unknown), the provider and the alias's writer
// (provider_disabled), the destination and object_options
// (invalid_destination), the source (invalid_source, blob_expired). Then a
// blob in a bucket (the temp store on the gcs backend, the permanent store)
// is copied server-side, create-if-absent; any other is read once for its
// digests and streamed once into a create-if-absent upload. Either way the
// object is stamped with its fingerprint (sink.ContentStampKey), and a
// precondition failure is settled by comparing md5. A panic inside is
// recovered as an Unclassified outcome.
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
		return h.refuse(cmd, envelope.ReplicateReasonAliasUnknown,
			"the alias named by this command is not provisioned on this host")
	}
	if cmd.Provider != binding.Provider {
		return h.refuse(cmd, envelope.ReplicateReasonProviderDisabled,
			fmt.Sprintf("the alias is bound to %q, not %q", binding.Provider, bounded(cmd.Provider)))
	}
	w := h.writers[cmd.CredentialsAlias]
	if w == nil {
		return h.refuse(cmd, envelope.ReplicateReasonProviderDisabled,
			fmt.Sprintf("no %q writer is enabled on this host for this alias", binding.Provider))
	}
	key, err := ObjectKey(binding.Prefix, cmd.Destination)
	if err != nil {
		out := h.refuse(cmd, envelope.ReplicateReasonInvalidDestination, err.Error())
		out.Err = fmt.Errorf("replicate: %w", err) // errors.Is ErrInvalidDestination
		return out
	}
	o, err := gcsObject(key, cmd.MediaType, cmd.ObjectOptions)
	if err != nil {
		return h.refuse(cmd, envelope.ReplicateReasonInvalidDestination, err.Error())
	}
	src, reason, why := locate(cmd.BlobURI, h.source, h.permanent)
	if reason != "" {
		return h.refuse(cmd, reason, why)
	}
	o.metadata = sink.ContentStamp(src.fp)
	if bucket, name, ok := gcsObjectOf(src.uri); ok {
		out := h.copy(ctx, cmd, w, o, bucket, name)
		out.Method = MethodCopy
		return out
	}

	d, out, ok := h.digest(ctx, cmd, src.fp)
	if !ok {
		return out
	}
	o.md5, o.crc32c = d.md5, d.crc32c
	out = h.write(ctx, cmd, w, src.fp, o, d)
	out.Method = MethodUpload
	return out
}

// refuse builds a Close outcome whose error is the fact's detail.
func (h *Handler) refuse(cmd *envelope.ContentReplicate, reason envelope.ReplicateReason, detail string) Outcome {
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
