package envelope

import "time"

// Event types: the frame's event_type field, and how FromWire picks a model.
const (
	EventContentFetch     = "content_fetch"
	EventBlobAvailable    = "blob_available"
	EventFetchFailed      = "fetch_failed"
	EventFetchPolicyState = "fetch_policy_state"

	EventContentReplicate    = "content_replicate"
	EventReplicationComplete = "replication_complete"
	EventReplicationFailed   = "replication_failed"
)

// SchemaVersion is the only schema version of every model this package
// writes and fully decodes.
const SchemaVersion = 1

// ContentType is the frame's content_type field: payloads are JSON.
const ContentType = "application/json"

// Model is one of the ten payloads: *ContentFetch, *BlobAvailable,
// *FetchFailed and *FetchPolicyState (the fetch capability),
// *ContentReplicate, *ReplicationComplete and *ReplicationFailed (the
// replicate capability), or *ContentPersist, *BlobPersisted and
// *PersistFailed (the persist capability). Models are plain values: safe to
// read from several goroutines, not to mutate concurrently.
type Model interface {
	// EventType is the payload's event_type.
	EventType() string
	// Key is the frame's idempotency key, derived per payload type.
	Key() string
	// When is the model's occurred_at.
	When() time.Time
	// Version is the model's schema_version.
	Version() int
}

// ContentFetch is the command an issuer publishes on content.fetch.
// In every model, a SchemaVersion of 0 is written by ToWire as SchemaVersion,
// so a literal may leave it out.
type ContentFetch struct {
	// SchemaVersion is the payload's schema_version (SchemaVersion when 0).
	// FromWire reads a version too large for an int as math.MaxInt
	// (math.MinInt when negative): unsupported, like any other.
	SchemaVersion int
	// OccurredAt is when the issuer minted the command.
	OccurredAt time.Time
	// CommandID is the sole correlator and dedupe key.
	CommandID string
	// URL is the http or https URL to fetch, as the issuer wrote it.
	URL string
	// InfoSourceID is echoed verbatim on both facts; never parsed or branched on.
	InfoSourceID string
	// Headers is nil when the command carried no headers (JSON null or absent).
	Headers map[string]string
	// TimeoutSeconds is nil when absent. It may hold NaN or ±Inf decoded from
	// Python's JSON tokens; the guard refuses those, the codec does not.
	TimeoutSeconds *float64
}

// BlobAvailable is the success fact: the bytes are stored at BlobURI.
type BlobAvailable struct {
	// SchemaVersion is the payload's schema_version (SchemaVersion when 0).
	// FromWire reads a version too large for an int as math.MaxInt
	// (math.MinInt when negative): unsupported, like any other.
	SchemaVersion int
	// OccurredAt is when the worker published the fact.
	OccurredAt time.Time
	// ContentFingerprint is the lowercase hex sha256 of the stored bytes.
	ContentFingerprint string
	// BlobURI names the stored bytes: file:///... or gs://bucket/....
	BlobURI string
	// SizeBytes is the stored body's length, after any decompression.
	SizeBytes int64
	// MediaType is normalized: before ';', trimmed, lower-cased,
	// application/octet-stream when absent.
	MediaType string
	// URL, CommandID and InfoSourceID are the command's, echoed verbatim.
	URL          string
	CommandID    string
	InfoSourceID string

	// Optional enrichments; nil means nobody said. FinalURL is the URL
	// of the hop that answered, StatusCode its status, FetchedAt when the
	// body finished arriving, ContentTypeRaw its Content-Type as sent, ETag and
	// LastModified its validators, BlobExpiresAt when the sink may drop
	// the bytes.
	FinalURL       *string
	StatusCode     *int
	FetchedAt      *time.Time
	ContentTypeRaw *string
	ETag           *string
	LastModified   *string
	BlobExpiresAt  *time.Time
}

// FetchFailed is the failure fact.
type FetchFailed struct {
	// SchemaVersion is the payload's schema_version (SchemaVersion when 0).
	// FromWire reads a version too large for an int as math.MaxInt
	// (math.MinInt when negative): unsupported, like any other.
	SchemaVersion int
	// OccurredAt is when the worker published the fact.
	OccurredAt time.Time
	// CommandID, URL and InfoSourceID are the command's, echoed verbatim.
	CommandID    string
	URL          string
	InfoSourceID string
	// Reason is the failure's token.
	Reason Reason
	// Terminal says the command is closed; every fact the worker emits
	// carries true.
	Terminal bool
	// StatusCode is set for http_status and not_modified.
	StatusCode *int
	// Attempts is set only when the attempt count is why the command closed.
	Attempts *int
	// Detail is bounded free text for operators; never a header value.
	Detail *string
}

// FetchPolicyState is one host's politeness setting on content.fetch-policy.
type FetchPolicyState struct {
	// SchemaVersion is the payload's schema_version (SchemaVersion when 0).
	// FromWire reads a version too large for an int as math.MaxInt
	// (math.MinInt when negative): unsupported, like any other.
	SchemaVersion int
	// OccurredAt orders a host's settings: the latest one wins.
	OccurredAt time.Time
	// Host is a hostname, lower-cased, without a port.
	Host string
	// MinIntervalSeconds is nil when the publisher gave no number; 0 is a real
	// value meaning no spacing.
	MinIntervalSeconds *float64
	// Revoked withdraws the host's published setting; the default applies.
	Revoked bool
}

// Reason is a fetch_failed reason token. Consumers must treat tokens they do
// not know as opaque.
type Reason string

// The reason tokens the worker emits. Every one of them is terminal.
const (
	ReasonHTTPStatus               Reason = "http_status"
	ReasonNotModified              Reason = "not_modified"
	ReasonNotFetchable             Reason = "not_fetchable"
	ReasonTooLarge                 Reason = "too_large"
	ReasonDestinationRefused       Reason = "destination_refused"
	ReasonUnsupportedSchemaVersion Reason = "unsupported_schema_version"
	ReasonInvalidRequestOptions    Reason = "invalid_request_options"
	ReasonHandlerError             Reason = "handler_error"
	ReasonRobotsDisallowed         Reason = "robots_disallowed"
)

// ContentReplicate is the command an issuer publishes on content.replicate:
// copy the blob at BlobURI, which this worker stored, to Destination in the
// store the alias CredentialsAlias names. No credential travels in it.
type ContentReplicate struct {
	// SchemaVersion is the payload's schema_version (SchemaVersion when 0).
	// FromWire reads a version too large for an int as math.MaxInt
	// (math.MinInt when negative): unsupported, like any other.
	SchemaVersion int
	// OccurredAt is when the issuer minted the command.
	OccurredAt time.Time
	// CommandID is the sole correlator and dedupe key.
	CommandID string
	// BlobURI is a blob_uri this worker announced (file://… or gs://…). It is
	// a reference, never a path: the worker rebuilds it from the fingerprint.
	BlobURI string
	// MediaType is the content type the copy is written with, as given.
	MediaType string
	// Provider names the kind of store: gcs, gdrive or ia.
	Provider string
	// CredentialsAlias selects a binding the operator provisioned on the
	// worker's host. It is a name, not a secret.
	CredentialsAlias string
	// Destination is the rendered object key, relative to the alias's root.
	Destination string
	// ObjectOptions is the provider's options object (gcs: cache_control,
	// content_disposition, storage_class), nil when null or absent. Values
	// decode as string, bool, nil, json.Number, []any or map[string]any;
	// ToWire also writes Go integers and finite floats.
	ObjectOptions map[string]any
	// InfoItemRepSpecID, SourceRevisionID and InfoSourceID are echoed
	// verbatim on both facts; never parsed or branched on.
	InfoItemRepSpecID string
	SourceRevisionID  string
	InfoSourceID      string
}

// ReplicationComplete is the replicate success fact: the copy exists at
// PublicURL.
type ReplicationComplete struct {
	// SchemaVersion is the payload's schema_version (SchemaVersion when 0).
	// FromWire reads a version too large for an int as math.MaxInt
	// (math.MinInt when negative): unsupported, like any other.
	SchemaVersion int
	// OccurredAt is when the worker published the fact.
	OccurredAt time.Time
	// CommandID is the command's, echoed verbatim.
	CommandID string
	// PublicURL names the copy, inside the alias's store.
	PublicURL string
	// InfoItemRepSpecID, SourceRevisionID and InfoSourceID are the
	// command's, echoed verbatim.
	InfoItemRepSpecID string
	SourceRevisionID  string
	InfoSourceID      string
}

// ReplicationFailed is the replicate failure fact.
type ReplicationFailed struct {
	// SchemaVersion is the payload's schema_version (SchemaVersion when 0).
	// FromWire reads a version too large for an int as math.MaxInt
	// (math.MinInt when negative): unsupported, like any other.
	SchemaVersion int
	// OccurredAt is when the worker published the fact.
	OccurredAt time.Time
	// CommandID, InfoItemRepSpecID, SourceRevisionID and InfoSourceID are the
	// command's, echoed verbatim.
	CommandID         string
	InfoItemRepSpecID string
	SourceRevisionID  string
	InfoSourceID      string
	// Reason is the failure's token.
	Reason ReplicateReason
	// Terminal says the command is closed; every fact the worker emits
	// carries true.
	Terminal bool
	// Attempts is set only when the attempt count is why the command closed.
	Attempts *int
	// Detail is bounded free text for operators; never a credential.
	Detail *string
}

// ReplicateReason is a replication_failed reason token. The vocabulary is
// the replicate stream's own, apart from Reason's; consumers must treat
// tokens they do not know as opaque.
type ReplicateReason string

// The replicate reason tokens the worker emits. Every one of them is
// terminal.
const (
	// The alias is not provisioned on the worker's host.
	ReplicateReasonAliasUnknown ReplicateReason = "alias_unknown"
	// The provider is not the alias's, has no writer here, or refused the
	// host's credential (401, 403, 404 and other 4xx but 400, 408, 429).
	ReplicateReasonProviderDisabled ReplicateReason = "provider_disabled"
	// The destination or object_options was refused, here or by the
	// provider (400).
	ReplicateReasonInvalidDestination ReplicateReason = "invalid_destination"
	// The blob_uri is not a reference this worker's store mints.
	ReplicateReasonInvalidSource ReplicateReason = "invalid_source"
	// The blob is gone, or the blob_uri names the other storage backend.
	ReplicateReasonBlobExpired ReplicateReason = "blob_expired"
	// The destination already holds different bytes.
	ReplicateReasonDestinationConflict ReplicateReason = "destination_conflict"
	// The command's schema_version is not SchemaVersion.
	ReplicateReasonUnsupportedSchemaVersion ReplicateReason = "unsupported_schema_version"
	// Unclassified failures reached the delivery ceiling.
	ReplicateReasonHandlerError ReplicateReason = "handler_error"
)
