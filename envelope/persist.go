package envelope

import (
	"errors"
	"fmt"
	"time"
)

// The persist capability's event types (docs/persist.md).
const (
	EventContentPersist = "content_persist"
	EventBlobPersisted  = "blob_persisted"
	EventPersistFailed  = "persist_failed"
)

// ContentPersist is the command an issuer publishes on content.persist:
// keep the bytes whose sha256 is ContentFingerprint, permanently. No
// destination travels in it: the digest is the address.
type ContentPersist struct {
	// SchemaVersion is the payload's schema_version (SchemaVersion when 0).
	// FromWire reads a version too large for an int as math.MaxInt
	// (math.MinInt when negative): unsupported, like any other.
	SchemaVersion int
	// OccurredAt is when the issuer minted the command.
	OccurredAt time.Time
	// CommandID is the sole correlator and dedupe key.
	CommandID string
	// ContentFingerprint is the raw bytes' sha256 as the issuer wrote it:
	// lower-case hex when well formed. It decodes whatever it holds, so a
	// malformed one can be refused with a fact that echoes it.
	ContentFingerprint string
	// BlobURI is a blob_uri this worker's stores minted (file://… or
	// gs://…). It is a reference, never a path: the worker rebuilds it from
	// the fingerprint.
	BlobURI string
	// MediaType is recorded with the kept bytes on their first write.
	MediaType string
}

// BlobPersisted is the persist success fact: the bytes are kept. It names
// no URL: a reader derives the location from the digest and the bucket it
// is configured with.
type BlobPersisted struct {
	// SchemaVersion is the payload's schema_version (SchemaVersion when 0).
	// FromWire reads a version too large for an int as math.MaxInt
	// (math.MinInt when negative): unsupported, like any other.
	SchemaVersion int
	// OccurredAt is when the worker published the fact: an upper bound on
	// the write, not the write's time.
	OccurredAt time.Time
	// CommandID and ContentFingerprint are the command's, echoed verbatim.
	CommandID          string
	ContentFingerprint string
	// SizeBytes is the kept blob's length.
	SizeBytes int64
}

// PersistFailed is the persist failure fact.
type PersistFailed struct {
	// SchemaVersion is the payload's schema_version (SchemaVersion when 0).
	// FromWire reads a version too large for an int as math.MaxInt
	// (math.MinInt when negative): unsupported, like any other.
	SchemaVersion int
	// OccurredAt is when the worker published the fact.
	OccurredAt time.Time
	// CommandID and ContentFingerprint are the command's, echoed verbatim,
	// a malformed fingerprint included.
	CommandID          string
	ContentFingerprint string
	// Reason is the failure's token.
	Reason PersistReason
	// Terminal says the command is closed; every fact the worker emits
	// carries true.
	Terminal bool
	// Detail is bounded free text for operators; never a credential.
	Detail *string
}

// PersistReason is a persist_failed reason token. The vocabulary is the
// persist stream's own; consumers must treat tokens they do not know as
// opaque.
type PersistReason string

// The persist reason tokens the worker emits. Every one of them is
// terminal.
const (
	// The blob_uri is not a reference this worker's stores mint, the
	// content_fingerprint is malformed, or the two name different digests.
	PersistReasonInvalidSource PersistReason = "invalid_source"
	// The bytes left the temp store before the persist ran.
	PersistReasonBlobExpired PersistReason = "blob_expired"
	// The stored bytes do not hash to their fingerprint, so the permanent
	// store refused them.
	PersistReasonSourceCorrupt PersistReason = "source_corrupt"
	// The permanent store refused the write for good (403, 404).
	PersistReasonStoreRefused PersistReason = "store_refused"
	// The command's schema_version is not SchemaVersion.
	PersistReasonUnsupportedSchemaVersion PersistReason = "unsupported_schema_version"
	// Unclassified failures reached the delivery ceiling.
	PersistReasonHandlerError PersistReason = "handler_error"
)

// DecodePersistCommand is DecodeCommand for the persist command stream:
// FromWire plus a refusal, wrapping ErrForeignPayload, of a valid frame of
// any model but content_persist (the other capabilities' commands
// included). An unsupported schema version returns the partial command with
// an error wrapping ErrUnsupportedVersion; it carries what the
// unsupported_schema_version fact needs (CommandID, ContentFingerprint) as
// far as the payload holds them. It is safe for concurrent use.
func DecodePersistCommand(fields map[string]string) (*ContentPersist, error) {
	m, err := FromWire(fields)
	if err != nil && !errors.Is(err, ErrUnsupportedVersion) {
		return nil, err
	}
	cmd, ok := m.(*ContentPersist)
	if !ok {
		return nil, fmt.Errorf("%w: a %s frame is not a persist command", ErrForeignPayload, m.EventType())
	}
	return cmd, err
}

// The payload members of the persist models, in the wire order.
var (
	contentPersistNames = []string{"schema_version", "event_type", "occurred_at", "command_id",
		"content_fingerprint", "blob_uri", "media_type"}
	blobPersistedNames = []string{"schema_version", "event_type", "occurred_at", "command_id",
		"content_fingerprint", "size_bytes"}
	persistFailedNames = []string{"schema_version", "event_type", "occurred_at", "command_id",
		"content_fingerprint", "reason", "terminal", "detail"}
)

func decodeContentPersist(d *decoder, version int) Model {
	return &ContentPersist{
		SchemaVersion:      version,
		OccurredAt:         d.time(2),
		CommandID:          d.str(3),
		ContentFingerprint: d.str(4),
		BlobURI:            d.str(5),
		MediaType:          d.str(6),
	}
}

func decodeBlobPersisted(d *decoder, version int) Model {
	return &BlobPersisted{
		SchemaVersion:      version,
		OccurredAt:         d.time(2),
		CommandID:          d.str(3),
		ContentFingerprint: d.str(4),
		SizeBytes:          d.int64(5),
	}
}

func decodePersistFailed(d *decoder, version int) Model {
	return &PersistFailed{
		SchemaVersion:      version,
		OccurredAt:         d.time(2),
		CommandID:          d.str(3),
		ContentFingerprint: d.str(4),
		Reason:             PersistReason(d.str(5)),
		Terminal:           d.bool(6),
		Detail:             d.optStr(7),
	}
}

func encodeContentPersist(m *ContentPersist) ([]byte, error) {
	size := len(m.CommandID) + len(m.ContentFingerprint) + len(m.BlobURI) + len(m.MediaType)
	w := newPayloadWriter(EventContentPersist, m.SchemaVersion, m.OccurredAt, size+192)
	w.str("command_id", m.CommandID)
	w.str("content_fingerprint", m.ContentFingerprint)
	w.str("blob_uri", m.BlobURI)
	w.str("media_type", m.MediaType)
	return w.done()
}

func encodeBlobPersisted(m *BlobPersisted) ([]byte, error) {
	size := len(m.CommandID) + len(m.ContentFingerprint)
	w := newPayloadWriter(EventBlobPersisted, m.SchemaVersion, m.OccurredAt, size+176)
	w.str("command_id", m.CommandID)
	w.str("content_fingerprint", m.ContentFingerprint)
	w.int("size_bytes", m.SizeBytes)
	return w.done()
}

func encodePersistFailed(m *PersistFailed) ([]byte, error) {
	size := len(m.CommandID) + len(m.ContentFingerprint) + len(m.Reason) + optLen(m.Detail)
	w := newPayloadWriter(EventPersistFailed, m.SchemaVersion, m.OccurredAt, size+200)
	w.str("command_id", m.CommandID)
	w.str("content_fingerprint", m.ContentFingerprint)
	w.str("reason", string(m.Reason))
	w.bool("terminal", m.Terminal)
	w.optStr("detail", m.Detail)
	return w.done()
}

// EventType returns EventContentPersist.
func (*ContentPersist) EventType() string { return EventContentPersist }

// Key returns the command_id: a command is one occurrence.
func (m *ContentPersist) Key() string { return m.CommandID }

// When returns OccurredAt.
func (m *ContentPersist) When() time.Time { return m.OccurredAt }

// Version returns SchemaVersion as set (ToWire writes 0 as SchemaVersion).
func (m *ContentPersist) Version() int { return m.SchemaVersion }

// EventType returns EventBlobPersisted.
func (*BlobPersisted) EventType() string { return EventBlobPersisted }

// Key returns command_id:occurred_at, the time as FormatTime writes it. Not
// the bare command_id: a redelivery announces the kept bytes again, and each
// announcement is its own occurrence.
func (m *BlobPersisted) Key() string { return m.CommandID + ":" + FormatTime(m.OccurredAt) }

// When returns OccurredAt.
func (m *BlobPersisted) When() time.Time { return m.OccurredAt }

// Version returns SchemaVersion as set (ToWire writes 0 as SchemaVersion).
func (m *BlobPersisted) Version() int { return m.SchemaVersion }

// EventType returns EventPersistFailed.
func (*PersistFailed) EventType() string { return EventPersistFailed }

// Key returns command_id:occurred_at, the time as FormatTime writes it, for
// the reason FetchFailed's key carries the time.
func (m *PersistFailed) Key() string { return m.CommandID + ":" + FormatTime(m.OccurredAt) }

// When returns OccurredAt.
func (m *PersistFailed) When() time.Time { return m.OccurredAt }

// Version returns SchemaVersion as set (ToWire writes 0 as SchemaVersion).
func (m *PersistFailed) Version() int { return m.SchemaVersion }

var (
	_ Model = (*ContentPersist)(nil)
	_ Model = (*BlobPersisted)(nil)
	_ Model = (*PersistFailed)(nil)
)
