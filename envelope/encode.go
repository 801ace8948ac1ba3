package envelope

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
	"unsafe"
)

// Frame field names.
const (
	FieldKey           = "key"
	FieldPayload       = "payload"
	FieldEventType     = "event_type"
	FieldSchemaVersion = "schema_version"
	FieldOccurredAt    = "occurred_at"
	FieldContentType   = "content_type"
)

// Frame is a frame's six values in the order of FrameFields: what a
// publisher appends to a stream, field by field.
type Frame [6]string

// ToFrame encodes m as ToWire does, with the values in FrameFields order
// and no map built: the cheaper of the two for a publisher that writes the
// fields in order.
func ToFrame(m Model) (Frame, error) {
	var (
		payload []byte
		err     error
	)
	switch v := m.(type) {
	case *ContentFetch:
		if v != nil {
			payload, err = encodeContentFetch(v)
		}
	case *BlobAvailable:
		if v != nil {
			payload, err = encodeBlobAvailable(v)
		}
	case *FetchFailed:
		if v != nil {
			payload, err = encodeFetchFailed(v)
		}
	case *FetchPolicyState:
		if v != nil {
			payload, err = encodeFetchPolicyState(v)
		}
	case *ContentReplicate:
		if v != nil {
			payload, err = encodeContentReplicate(v)
		}
	case *ReplicationComplete:
		if v != nil {
			payload, err = encodeReplicationComplete(v)
		}
	case *ReplicationFailed:
		if v != nil {
			payload, err = encodeReplicationFailed(v)
		}
	case *ContentPersist:
		if v != nil {
			payload, err = encodeContentPersist(v)
		}
	case *BlobPersisted:
		if v != nil {
			payload, err = encodeBlobPersisted(v)
		}
	case *PersistFailed:
		if v != nil {
			payload, err = encodePersistFailed(v)
		}
	default:
		return Frame{}, fmt.Errorf("%w: %T is not a model of this package", ErrUnencodable, m)
	}
	if err != nil {
		return Frame{}, err
	}
	if payload == nil {
		return Frame{}, fmt.Errorf("%w: nil %T", ErrUnencodable, m)
	}
	occurredAt := FormatTime(m.When())
	// Keys that embed the time reuse the formatted occurred_at.
	var key string
	switch f := m.(type) {
	case *FetchFailed:
		key = f.CommandID + ":" + occurredAt
	case *ReplicationComplete:
		key = f.CommandID + ":" + occurredAt
	case *ReplicationFailed:
		key = f.CommandID + ":" + occurredAt
	default:
		key = m.Key()
	}
	return Frame{
		key,
		// The buffer is this call's alone and never written again, so
		// it becomes the string without a copy, as strings.Builder does.
		unsafe.String(unsafe.SliceData(payload), len(payload)),
		m.EventType(),
		strconv.Itoa(wireVersion(m.Version())),
		occurredAt,
		ContentType,
	}, nil
}

// ToWire encodes m as the six string fields of a stream entry: key, payload,
// event_type, schema_version, occurred_at and content_type (see the package
// documentation for each). The payload is compact JSON with the model's
// fields in their documented order, optional fields written as null when nil,
// and headers and object_options members sorted by name: the frame shape of
// docs/streams.md, Frames.
//
// A SchemaVersion of 0 is written as SchemaVersion; any other value is
// written as is. ToWire returns an error wrapping ErrUnencodable for a nil
// model, a non-finite TimeoutSeconds or MinIntervalSeconds, a time outside
// the years 0000–9999, or an ObjectOptions value it cannot write (a type
// other than those listed on ContentReplicate, a non-finite float, an invalid
// json.Number, or nesting deeper than 512). It is safe for concurrent use.
func ToWire(m Model) (map[string]string, error) {
	f, err := ToFrame(m)
	if err != nil {
		return nil, err
	}
	fields := make(map[string]string, len(f))
	for i, name := range FrameFields() {
		fields[name] = f[i]
	}
	return fields, nil
}

func wireVersion(v int) int {
	if v == 0 {
		return SchemaVersion
	}
	return v
}

// payloadWriter appends one JSON object's members in order. Member names are
// constants of this package and need no escaping.
type payloadWriter struct {
	b   []byte
	err error
	// event names the model in errors.
	event string
}

// newPayloadWriter starts a payload with the members every model shares.
// size is the caller's estimate of the whole payload, so the buffer is
// allocated once in the common case.
func newPayloadWriter(event string, version int, occurredAt time.Time, size int) *payloadWriter {
	w := &payloadWriter{b: make([]byte, 0, size), event: event}
	w.b = append(w.b, `{"schema_version":`...)
	w.b = strconv.AppendInt(w.b, int64(wireVersion(version)), 10)
	w.b = append(w.b, `,"event_type":`...)
	w.b = appendString(w.b, event)
	w.time("occurred_at", occurredAt)
	return w
}

func (w *payloadWriter) name(n string) {
	w.b = append(w.b, ',', '"')
	w.b = append(w.b, n...)
	w.b = append(w.b, '"', ':')
}

func (w *payloadWriter) str(n, v string) {
	w.name(n)
	w.b = appendString(w.b, v)
}

func (w *payloadWriter) optStr(n string, v *string) {
	if v == nil {
		w.null(n)
		return
	}
	w.str(n, *v)
}

func (w *payloadWriter) null(n string) {
	w.name(n)
	w.b = append(w.b, "null"...)
}

func (w *payloadWriter) int(n string, v int64) {
	w.name(n)
	w.b = strconv.AppendInt(w.b, v, 10)
}

func (w *payloadWriter) optInt(n string, v *int) {
	if v == nil {
		w.null(n)
		return
	}
	w.int(n, int64(*v))
}

func (w *payloadWriter) bool(n string, v bool) {
	w.name(n)
	w.b = strconv.AppendBool(w.b, v)
}

func (w *payloadWriter) optFloat(n string, v *float64) {
	if v == nil {
		w.null(n)
		return
	}
	if math.IsNaN(*v) || math.IsInf(*v, 0) {
		w.fail("%s is not a finite number", n)
		return
	}
	w.name(n)
	w.b = appendFloat(w.b, *v)
}

func (w *payloadWriter) time(n string, t time.Time) {
	if !timeInRange(t) {
		w.fail("%s is outside the years 0000-9999", n)
		return
	}
	w.name(n)
	w.b = append(w.b, '"')
	w.b = appendTime(w.b, t)
	w.b = append(w.b, '"')
}

func (w *payloadWriter) optTime(n string, t *time.Time) {
	if t == nil {
		w.null(n)
		return
	}
	w.time(n, *t)
}

// headers writes h sorted by name, so a model always encodes to the same
// bytes (Go maps have no order to preserve).
func (w *payloadWriter) headers(n string, h map[string]string) {
	if h == nil {
		w.null(n)
		return
	}
	w.name(n)
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	slices.Sort(names)
	w.b = append(w.b, '{')
	for i, k := range names {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.b = appendString(w.b, k)
		w.b = append(w.b, ':')
		w.b = appendString(w.b, h[k])
	}
	w.b = append(w.b, '}')
}

// object writes an arbitrary JSON object (object_options), members sorted
// by name at every level, as headers are.
func (w *payloadWriter) object(n string, o map[string]any) {
	if o == nil {
		w.null(n)
		return
	}
	w.name(n)
	b, err := appendValue(w.b, o, 1)
	if err != nil {
		w.fail("%s: %v", n, err)
		return
	}
	w.b = b
}

func (w *payloadWriter) fail(format string, args ...any) {
	if w.err == nil {
		w.err = fmt.Errorf("%w: %s: %s", ErrUnencodable, w.event, fmt.Sprintf(format, args...))
	}
}

func (w *payloadWriter) done() ([]byte, error) {
	if w.err != nil {
		return nil, w.err
	}
	return append(w.b, '}'), nil
}

// The encoders write fields in the co-core models' order.

func encodeContentFetch(m *ContentFetch) ([]byte, error) {
	size := len(m.CommandID) + len(m.URL) + len(m.InfoSourceID)
	for k, v := range m.Headers {
		size += len(k) + len(v) + 6
	}
	w := newPayloadWriter(EventContentFetch, m.SchemaVersion, m.OccurredAt, size+200)
	w.str("command_id", m.CommandID)
	w.str("url", m.URL)
	w.str("info_source_id", m.InfoSourceID)
	w.headers("headers", m.Headers)
	w.optFloat("timeout_seconds", m.TimeoutSeconds)
	return w.done()
}

func encodeBlobAvailable(m *BlobAvailable) ([]byte, error) {
	size := len(m.ContentFingerprint) + len(m.BlobURI) + len(m.MediaType) + len(m.URL) +
		len(m.CommandID) + len(m.InfoSourceID) + optLen(m.FinalURL) + optLen(m.ContentTypeRaw) +
		optLen(m.ETag) + optLen(m.LastModified)
	w := newPayloadWriter(EventBlobAvailable, m.SchemaVersion, m.OccurredAt, size+416)
	w.str("content_fingerprint", m.ContentFingerprint)
	w.str("blob_uri", m.BlobURI)
	w.int("size_bytes", m.SizeBytes)
	w.str("media_type", m.MediaType)
	w.str("url", m.URL)
	w.str("command_id", m.CommandID)
	w.str("info_source_id", m.InfoSourceID)
	w.optStr("final_url", m.FinalURL)
	w.optInt("status_code", m.StatusCode)
	w.optTime("fetched_at", m.FetchedAt)
	w.optStr("content_type_raw", m.ContentTypeRaw)
	w.optStr("etag", m.ETag)
	w.optStr("last_modified", m.LastModified)
	w.optTime("blob_expires_at", m.BlobExpiresAt)
	return w.done()
}

func encodeFetchFailed(m *FetchFailed) ([]byte, error) {
	size := len(m.CommandID) + len(m.URL) + len(m.InfoSourceID) + len(m.Reason) + optLen(m.Detail)
	w := newPayloadWriter(EventFetchFailed, m.SchemaVersion, m.OccurredAt, size+224)
	w.str("command_id", m.CommandID)
	w.str("url", m.URL)
	w.str("info_source_id", m.InfoSourceID)
	w.str("reason", string(m.Reason))
	w.bool("terminal", m.Terminal)
	w.optInt("status_code", m.StatusCode)
	w.optInt("attempts", m.Attempts)
	w.optStr("detail", m.Detail)
	return w.done()
}

func encodeFetchPolicyState(m *FetchPolicyState) ([]byte, error) {
	w := newPayloadWriter(EventFetchPolicyState, m.SchemaVersion, m.OccurredAt, len(m.Host)+160)
	w.str("host", m.Host)
	w.optFloat("min_interval_seconds", m.MinIntervalSeconds)
	w.bool("revoked", m.Revoked)
	return w.done()
}

func encodeContentReplicate(m *ContentReplicate) ([]byte, error) {
	size := len(m.CommandID) + len(m.BlobURI) + len(m.MediaType) + len(m.Provider) + len(m.CredentialsAlias) +
		len(m.Destination) + len(m.InfoItemRepSpecID) + len(m.SourceRevisionID) + len(m.InfoSourceID)
	w := newPayloadWriter(EventContentReplicate, m.SchemaVersion, m.OccurredAt, size+320+64*len(m.ObjectOptions))
	w.str("command_id", m.CommandID)
	w.str("blob_uri", m.BlobURI)
	w.str("media_type", m.MediaType)
	w.str("provider", m.Provider)
	w.str("credentials_alias", m.CredentialsAlias)
	w.str("destination", m.Destination)
	w.object("object_options", m.ObjectOptions)
	w.str("info_item_rep_spec_id", m.InfoItemRepSpecID)
	w.str("source_revision_id", m.SourceRevisionID)
	w.str("info_source_id", m.InfoSourceID)
	return w.done()
}

func encodeReplicationComplete(m *ReplicationComplete) ([]byte, error) {
	size := len(m.CommandID) + len(m.PublicURL) + len(m.InfoItemRepSpecID) + len(m.SourceRevisionID) + len(m.InfoSourceID)
	w := newPayloadWriter(EventReplicationComplete, m.SchemaVersion, m.OccurredAt, size+192)
	w.str("command_id", m.CommandID)
	w.str("public_url", m.PublicURL)
	w.str("info_item_rep_spec_id", m.InfoItemRepSpecID)
	w.str("source_revision_id", m.SourceRevisionID)
	w.str("info_source_id", m.InfoSourceID)
	return w.done()
}

func encodeReplicationFailed(m *ReplicationFailed) ([]byte, error) {
	size := len(m.CommandID) + len(m.InfoItemRepSpecID) + len(m.SourceRevisionID) + len(m.InfoSourceID) +
		len(m.Reason) + optLen(m.Detail)
	w := newPayloadWriter(EventReplicationFailed, m.SchemaVersion, m.OccurredAt, size+240)
	w.str("command_id", m.CommandID)
	w.str("info_item_rep_spec_id", m.InfoItemRepSpecID)
	w.str("source_revision_id", m.SourceRevisionID)
	w.str("info_source_id", m.InfoSourceID)
	w.str("reason", string(m.Reason))
	w.bool("terminal", m.Terminal)
	w.optInt("attempts", m.Attempts)
	w.optStr("detail", m.Detail)
	return w.done()
}

func optLen(s *string) int {
	if s == nil {
		return 0
	}
	return len(*s)
}
