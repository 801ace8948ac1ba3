package envelope

import (
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/replicator-go/replicator/internal/quote"
)

// FromWire decodes a stream entry's fields into one of the ten models,
// chosen by the frame's event_type field. It reads only event_type,
// payload and (as a fallback) schema_version; every model field comes from
// the payload, and key, occurred_at and content_type are not consulted.
//
// Decoding happens in this order:
//
//  1. An empty field map, a missing or unknown event_type, or a missing
//     payload is malformed.
//  2. The payload must be a JSON object (invalid UTF-8 included in "invalid").
//     Unknown members are ignored.
//  3. The payload's event_type, when present, must equal the frame's.
//  4. The schema version is the payload's schema_version (a JSON integer);
//     only when the payload has none is the frame's schema_version field
//     used. Neither present is malformed, and so is a number that is not
//     an integer; an integer too large for an int reads as math.MaxInt
//     (math.MinInt when negative). A version other than SchemaVersion
//     returns a partial model and an error wrapping ErrUnsupportedVersion:
//     SchemaVersion set, plus every field that is present and reads under
//     the version 1 rules (for content_fetch this is what carries CommandID,
//     URL and InfoSourceID to the unsupported_schema_version fact; for
//     content_replicate, CommandID and the three ids its facts echo).
//     Nothing but correlation should be read from a partial model.
//  5. Otherwise every required field must be present with its JSON type, and
//     times must carry an offset. Optional fields absent or null decode to
//     nil.
//
// Every failure but the version wraps ErrMalformedFrame and returns a nil
// model. Decoded times are in UTC and truncated to microseconds, the wire's
// precision. Python's bare NaN, Infinity and -Infinity tokens are accepted
// as the value of content_fetch's timeout_seconds (the request guard refuses
// them there, so the command gets a fact rather than a dead letter), and a
// number too large for a float64 there reads as ±Inf; anywhere else both are
// malformed. FromWire never panics and is safe for concurrent use.
func FromWire(fields map[string]string) (Model, error) {
	if len(fields) == 0 {
		return nil, malformed("empty frame")
	}
	et, ok := fields[FieldEventType]
	if !ok {
		return nil, malformed("no event_type field")
	}
	spec := specs[et]
	if spec == nil {
		return nil, malformed(fmt.Sprintf("unknown event_type %s", quoteShort(et)))
	}
	payload, ok := fields[FieldPayload]
	if !ok {
		return nil, malformed("no payload field (a frame's fields live in its JSON payload)")
	}
	if !utf8.ValidString(payload) {
		return nil, malformed(et + " payload is not valid UTF-8")
	}
	d := decoder{event: et, names: spec.names}
	if err := scanPayload(payload, spec, &d.raw); err != nil {
		return nil, malformed(fmt.Sprintf("%s payload: %v", et, err))
	}
	raw := &d.raw

	if v := raw[idxEventType]; v != "" {
		pet, err := readString(v)
		if err != nil {
			return nil, malformed(fmt.Sprintf("%s payload: event_type: %v", et, err))
		}
		if pet != et {
			return nil, malformed(fmt.Sprintf("payload event_type %s does not match the frame's %s",
				quoteShort(pet), et))
		}
	}

	version, written, err := readVersion(raw[idxSchemaVersion], fields)
	if err != nil {
		return nil, malformed(fmt.Sprintf("%s payload: schema_version: %v", et, err))
	}
	if version != SchemaVersion {
		d.partial = true
		m := d.decode(version)
		return m, fmt.Errorf("%w: %s has schema_version %s, this codec reads %d",
			ErrUnsupportedVersion, et, written, SchemaVersion)
	}
	if raw[idxEventType] == "" {
		return nil, malformed(fmt.Sprintf("%s payload: event_type: missing", et))
	}
	m := d.decode(version)
	if d.err != nil {
		return nil, d.err
	}
	return m, nil
}

// DecodeCommand decodes a frame read from the command stream. It is FromWire
// plus one rule: a valid frame of any other model type is refused with an
// error wrapping ErrForeignPayload (and a nil command), because any
// command_id it carries belongs to another command. An unsupported schema
// version returns the partial command with an error wrapping
// ErrUnsupportedVersion, as FromWire does; a foreign payload is reported as
// foreign whatever its version. It is safe for concurrent use.
func DecodeCommand(fields map[string]string) (*ContentFetch, error) {
	m, err := FromWire(fields)
	if err != nil && !errors.Is(err, ErrUnsupportedVersion) {
		return nil, err
	}
	cmd, ok := m.(*ContentFetch)
	if !ok {
		return nil, fmt.Errorf("%w: a %s frame is not a command", ErrForeignPayload, m.EventType())
	}
	return cmd, err
}

// DecodeReplicateCommand is DecodeCommand for the replicate command stream:
// FromWire plus a refusal, wrapping ErrForeignPayload, of a valid frame of
// any model but content_replicate (a content_fetch included). An unsupported
// schema version returns the partial command with an error wrapping
// ErrUnsupportedVersion; it carries what the unsupported_schema_version fact
// needs (CommandID, InfoItemRepSpecID, SourceRevisionID, InfoSourceID) as far
// as the payload holds them. It is safe for concurrent use.
func DecodeReplicateCommand(fields map[string]string) (*ContentReplicate, error) {
	m, err := FromWire(fields)
	if err != nil && !errors.Is(err, ErrUnsupportedVersion) {
		return nil, err
	}
	cmd, ok := m.(*ContentReplicate)
	if !ok {
		return nil, fmt.Errorf("%w: a %s frame is not a replicate command", ErrForeignPayload, m.EventType())
	}
	return cmd, err
}

func malformed(detail string) error {
	return fmt.Errorf("%w: %s", ErrMalformedFrame, detail)
}

// quoteShort quotes a producer-supplied token for an error, bounded so a
// hostile frame cannot flood a log line.
func quoteShort(s string) string {
	q, _ := quote.Bounded(s, 64)
	return q
}

// readVersion reads the payload's schema_version, falling back to the
// frame's field only when the payload has none: the reference branches on
// the payload's value, and the frame field is a copy of it. written is the
// version for an error message: as decoded, or as the producer wrote it
// (bounded) when it was clamped.
//
// An integer too large for an int is clamped to math.MaxInt or math.MinInt
// rather than refused: it is still an integer that is not SchemaVersion, so
// the frame is unsupported, not malformed, and a content_fetch keeps the
// correlation fields its unsupported_schema_version fact needs. Clamping
// cannot manufacture SchemaVersion.
func readVersion(raw string, fields map[string]string) (version int, written string, err error) {
	fromFrame := raw == ""
	if fromFrame {
		s, ok := fields[FieldSchemaVersion]
		if !ok {
			return 0, "", errors.New("missing from the payload and the frame")
		}
		raw = s
	}
	v, err := readInt(raw, strconv.IntSize)
	switch {
	case errors.Is(err, errIntRange):
		return int(v), boundDigits(raw), nil
	case err != nil && fromFrame:
		return 0, "", errors.New("frame field is not a decimal integer")
	case err != nil:
		return 0, "", err
	}
	return int(v), strconv.Itoa(int(v)), nil
}

// boundDigits bounds a producer-supplied number for an error message.
func boundDigits(s string) string {
	const limit = 40
	if len(s) > limit {
		return s[:limit] + "..."
	}
	return s
}

// Payload member tables. Indices 0–2 are common to every model; the order is
// the wire order.
const (
	idxSchemaVersion = iota
	idxEventType
	idxOccurredAt
)

const maxFields = 17 // blob_available's member count, the largest

// rawFields holds each known member's raw JSON value, "" when absent (a
// present value is never empty).
type rawFields [maxFields]string

type modelSpec struct {
	names []string
	// nonFinite is the member that may hold Python's NaN/Infinity tokens,
	// or -1.
	nonFinite int
}

var specs = map[string]*modelSpec{
	EventContentFetch: {
		names:     []string{"schema_version", "event_type", "occurred_at", "command_id", "url", "info_source_id", "headers", "timeout_seconds"},
		nonFinite: 7,
	},
	EventBlobAvailable: {
		names: []string{"schema_version", "event_type", "occurred_at", "content_fingerprint", "blob_uri", "size_bytes",
			"media_type", "url", "command_id", "info_source_id", "final_url", "status_code", "fetched_at",
			"content_type_raw", "etag", "last_modified", "blob_expires_at"},
		nonFinite: -1,
	},
	EventFetchFailed: {
		names: []string{"schema_version", "event_type", "occurred_at", "command_id", "url", "info_source_id",
			"reason", "terminal", "status_code", "attempts", "detail"},
		nonFinite: -1,
	},
	EventFetchPolicyState: {
		names:     []string{"schema_version", "event_type", "occurred_at", "host", "min_interval_seconds", "revoked"},
		nonFinite: -1,
	},
	EventContentReplicate: {
		names: []string{"schema_version", "event_type", "occurred_at", "command_id", "blob_uri", "media_type",
			"provider", "credentials_alias", "destination", "object_options", "info_item_rep_spec_id",
			"source_revision_id", "info_source_id"},
		nonFinite: -1,
	},
	EventReplicationComplete: {
		names: []string{"schema_version", "event_type", "occurred_at", "command_id", "public_url",
			"info_item_rep_spec_id", "source_revision_id", "info_source_id"},
		nonFinite: -1,
	},
	EventReplicationFailed: {
		names: []string{"schema_version", "event_type", "occurred_at", "command_id", "info_item_rep_spec_id",
			"source_revision_id", "info_source_id", "reason", "terminal", "attempts", "detail"},
		nonFinite: -1,
	},
	EventContentPersist: {names: contentPersistNames, nonFinite: -1},
	EventBlobPersisted:  {names: blobPersistedNames, nonFinite: -1},
	EventPersistFailed:  {names: persistFailedNames, nonFinite: -1},
}

// scanPayload validates the whole payload object and records the raw value of
// each known member (the last one wins on duplicates, as in Python).
func scanPayload(data string, spec *modelSpec, out *rawFields) error {
	r, err := openObject(data, 0)
	if err != nil {
		return err
	}
	for {
		name, escaped, ok, err := r.next()
		if err != nil {
			return err
		}
		if !ok {
			return r.finish()
		}
		if escaped {
			name = unquote(name)
		}
		idx := indexOf(spec.names, name)
		v, err := r.value(idx >= 0 && idx == spec.nonFinite)
		if err != nil {
			return err
		}
		if idx >= 0 {
			out[idx] = v
		}
	}
}

func indexOf(names []string, n string) int {
	for i, s := range names {
		if s == n {
			return i
		}
	}
	return -1
}

var errMissing = errors.New("missing")

// decoder reads typed members out of rawFields. In full mode it keeps the
// first error; in partial mode (an unsupported version) a member that is
// missing or does not read is left at its zero value.
type decoder struct {
	event   string
	names   []string
	raw     rawFields
	partial bool
	err     error
}

func (d *decoder) fail(i int, err error) {
	if !d.partial && d.err == nil {
		d.err = malformed(fmt.Sprintf("%s payload: %s: %v", d.event, d.names[i], err))
	}
}

// decode builds the model the decoder's event type names. A switch rather
// than a function table keeps the decoder on the stack.
func (d *decoder) decode(version int) Model {
	switch d.event {
	case EventContentFetch:
		return decodeContentFetch(d, version)
	case EventBlobAvailable:
		return decodeBlobAvailable(d, version)
	case EventFetchFailed:
		return decodeFetchFailed(d, version)
	case EventContentReplicate:
		return decodeContentReplicate(d, version)
	case EventReplicationComplete:
		return decodeReplicationComplete(d, version)
	case EventReplicationFailed:
		return decodeReplicationFailed(d, version)
	case EventContentPersist:
		return decodeContentPersist(d, version)
	case EventBlobPersisted:
		return decodeBlobPersisted(d, version)
	case EventPersistFailed:
		return decodePersistFailed(d, version)
	default:
		return decodeFetchPolicyState(d, version)
	}
}

// required returns member i's raw value, or "" after recording it missing.
func (d *decoder) required(i int) string {
	v := d.raw[i]
	if v == "" {
		d.fail(i, errMissing)
	}
	return v
}

// optional returns member i's raw value, or "" when absent or null.
func (d *decoder) optional(i int) string {
	v := d.raw[i]
	if isNull(v) {
		return ""
	}
	return v
}

func (d *decoder) str(i int) string {
	v := d.required(i)
	if v == "" {
		return ""
	}
	s, err := readString(v)
	if err != nil {
		d.fail(i, err)
	}
	return s
}

func (d *decoder) optStr(i int) *string {
	v := d.optional(i)
	if v == "" {
		return nil
	}
	s, err := readString(v)
	if err != nil {
		d.fail(i, err)
		return nil
	}
	return &s
}

func (d *decoder) int64(i int) int64 {
	v := d.required(i)
	if v == "" {
		return 0
	}
	n, err := readInt(v, 64)
	if err != nil {
		d.fail(i, err)
		return 0
	}
	return n
}

func (d *decoder) optInt(i int) *int {
	v := d.optional(i)
	if v == "" {
		return nil
	}
	n, err := readInt(v, strconv.IntSize)
	if err != nil {
		d.fail(i, err)
		return nil
	}
	out := int(n)
	return &out
}

func (d *decoder) bool(i int) bool {
	v := d.required(i)
	if v == "" {
		return false
	}
	b, err := readBool(v)
	if err != nil {
		d.fail(i, err)
	}
	return b
}

func (d *decoder) optFloat(i int, allowNonFinite bool) *float64 {
	v := d.optional(i)
	if v == "" {
		return nil
	}
	f, err := readFloat(v, allowNonFinite)
	if err != nil {
		d.fail(i, err)
		return nil
	}
	return &f
}

func (d *decoder) time(i int) time.Time {
	v := d.required(i)
	if v == "" {
		return time.Time{}
	}
	t, err := readTime(v)
	if err != nil {
		d.fail(i, err)
	}
	return t
}

func (d *decoder) optTime(i int) *time.Time {
	v := d.optional(i)
	if v == "" {
		return nil
	}
	t, err := readTime(v)
	if err != nil {
		d.fail(i, err)
		return nil
	}
	return &t
}

func readTime(raw string) (time.Time, error) {
	s, err := readString(raw)
	if err != nil {
		return time.Time{}, err
	}
	t, err := ParseTime(s)
	if err != nil {
		return time.Time{}, err
	}
	return t.Truncate(time.Microsecond), nil
}

func (d *decoder) headers(i int) map[string]string {
	v := d.optional(i)
	if v == "" {
		return nil
	}
	h, err := readHeaders(v)
	if err != nil {
		d.fail(i, err)
		return nil
	}
	return h
}

func (d *decoder) object(i int) map[string]any {
	v := d.optional(i)
	if v == "" {
		return nil
	}
	o, err := readObject(v)
	if err != nil {
		d.fail(i, err)
		return nil
	}
	return o
}

func decodeContentFetch(d *decoder, version int) Model {
	return &ContentFetch{
		SchemaVersion:  version,
		OccurredAt:     d.time(2),
		CommandID:      d.str(3),
		URL:            d.str(4),
		InfoSourceID:   d.str(5),
		Headers:        d.headers(6),
		TimeoutSeconds: d.optFloat(7, true),
	}
}

func decodeBlobAvailable(d *decoder, version int) Model {
	return &BlobAvailable{
		SchemaVersion:      version,
		OccurredAt:         d.time(2),
		ContentFingerprint: d.str(3),
		BlobURI:            d.str(4),
		SizeBytes:          d.int64(5),
		MediaType:          d.str(6),
		URL:                d.str(7),
		CommandID:          d.str(8),
		InfoSourceID:       d.str(9),
		FinalURL:           d.optStr(10),
		StatusCode:         d.optInt(11),
		FetchedAt:          d.optTime(12),
		ContentTypeRaw:     d.optStr(13),
		ETag:               d.optStr(14),
		LastModified:       d.optStr(15),
		BlobExpiresAt:      d.optTime(16),
	}
}

func decodeFetchFailed(d *decoder, version int) Model {
	return &FetchFailed{
		SchemaVersion: version,
		OccurredAt:    d.time(2),
		CommandID:     d.str(3),
		URL:           d.str(4),
		InfoSourceID:  d.str(5),
		Reason:        Reason(d.str(6)),
		Terminal:      d.bool(7),
		StatusCode:    d.optInt(8),
		Attempts:      d.optInt(9),
		Detail:        d.optStr(10),
	}
}

func decodeFetchPolicyState(d *decoder, version int) Model {
	return &FetchPolicyState{
		SchemaVersion:      version,
		OccurredAt:         d.time(2),
		Host:               d.str(3),
		MinIntervalSeconds: d.optFloat(4, false),
		Revoked:            d.bool(5),
	}
}

func decodeContentReplicate(d *decoder, version int) Model {
	return &ContentReplicate{
		SchemaVersion:     version,
		OccurredAt:        d.time(2),
		CommandID:         d.str(3),
		BlobURI:           d.str(4),
		MediaType:         d.str(5),
		Provider:          d.str(6),
		CredentialsAlias:  d.str(7),
		Destination:       d.str(8),
		ObjectOptions:     d.object(9),
		InfoItemRepSpecID: d.str(10),
		SourceRevisionID:  d.str(11),
		InfoSourceID:      d.str(12),
	}
}

func decodeReplicationComplete(d *decoder, version int) Model {
	return &ReplicationComplete{
		SchemaVersion:     version,
		OccurredAt:        d.time(2),
		CommandID:         d.str(3),
		PublicURL:         d.str(4),
		InfoItemRepSpecID: d.str(5),
		SourceRevisionID:  d.str(6),
		InfoSourceID:      d.str(7),
	}
}

func decodeReplicationFailed(d *decoder, version int) Model {
	return &ReplicationFailed{
		SchemaVersion:     version,
		OccurredAt:        d.time(2),
		CommandID:         d.str(3),
		InfoItemRepSpecID: d.str(4),
		SourceRevisionID:  d.str(5),
		InfoSourceID:      d.str(6),
		Reason:            ReplicateReason(d.str(7)),
		Terminal:          d.bool(8),
		Attempts:          d.optInt(9),
		Detail:            d.optStr(10),
	}
}
