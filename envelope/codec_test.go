package envelope_test

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/replicator-go/replicator/envelope"
)

// member is one payload member: a name and its raw JSON value.
type member struct{ name, raw string }

var baseMembers = map[string][]member{
	envelope.EventContentFetch: {
		{"schema_version", `1`},
		{"event_type", `"content_fetch"`},
		{"occurred_at", `"2026-11-29T23:18:58.123456Z"`},
		{"command_id", `"cmd-1"`},
		{"url", `"https://example.test/a"`},
		{"info_source_id", `"isrc-1"`},
		{"headers", `null`},
		{"timeout_seconds", `null`},
	},
	envelope.EventBlobAvailable: {
		{"schema_version", `1`},
		{"event_type", `"blob_available"`},
		{"occurred_at", `"2026-11-29T23:18:58.123456Z"`},
		{"content_fingerprint", `"` + fp + `"`},
		{"blob_uri", `"file:///blobs/x.bin"`},
		{"size_bytes", `18`},
		{"media_type", `"text/html"`},
		{"url", `"https://example.test/a"`},
		{"command_id", `"cmd-1"`},
		{"info_source_id", `"isrc-1"`},
		{"final_url", `null`},
		{"status_code", `null`},
		{"fetched_at", `null`},
		{"content_type_raw", `null`},
		{"etag", `null`},
		{"last_modified", `null`},
		{"blob_expires_at", `null`},
	},
	envelope.EventFetchFailed: {
		{"schema_version", `1`},
		{"event_type", `"fetch_failed"`},
		{"occurred_at", `"2026-11-29T23:18:58.123456Z"`},
		{"command_id", `"cmd-1"`},
		{"url", `"https://example.test/a"`},
		{"info_source_id", `"isrc-1"`},
		{"reason", `"not_fetchable"`},
		{"terminal", `true`},
		{"status_code", `null`},
		{"attempts", `null`},
		{"detail", `null`},
	},
	envelope.EventFetchPolicyState: {
		{"schema_version", `1`},
		{"event_type", `"fetch_policy_state"`},
		{"occurred_at", `"2026-11-29T23:18:58.123456Z"`},
		{"host", `"example.test"`},
		{"min_interval_seconds", `1.5`},
		{"revoked", `false`},
	},
	envelope.EventContentReplicate: {
		{"schema_version", `1`},
		{"event_type", `"content_replicate"`},
		{"occurred_at", `"2026-11-29T23:18:58.123456Z"`},
		{"command_id", `"rep-1"`},
		{"blob_uri", `"file:///blobs/` + fp[:2] + `/` + fp[2:4] + `/` + fp + `.bin"`},
		{"media_type", `"application/pdf"`},
		{"provider", `"gcs"`},
		{"credentials_alias", `"primary"`},
		{"destination", `"reports/2026/r.pdf"`},
		{"object_options", `null`},
		{"info_item_rep_spec_id", `"iirs-1"`},
		{"source_revision_id", `"rev-1"`},
		{"info_source_id", `"isrc-1"`},
	},
	envelope.EventReplicationComplete: {
		{"schema_version", `1`},
		{"event_type", `"replication_complete"`},
		{"occurred_at", `"2026-11-29T23:18:58.123456Z"`},
		{"command_id", `"rep-1"`},
		{"public_url", `"https://storage.googleapis.com/b/reps/2026/r.pdf"`},
		{"info_item_rep_spec_id", `"iirs-1"`},
		{"source_revision_id", `"rev-1"`},
		{"info_source_id", `"isrc-1"`},
	},
	envelope.EventReplicationFailed: {
		{"schema_version", `1`},
		{"event_type", `"replication_failed"`},
		{"occurred_at", `"2026-11-29T23:18:58.123456Z"`},
		{"command_id", `"rep-1"`},
		{"info_item_rep_spec_id", `"iirs-1"`},
		{"source_revision_id", `"rev-1"`},
		{"info_source_id", `"isrc-1"`},
		{"reason", `"alias_unknown"`},
		{"terminal", `true`},
		{"attempts", `null`},
		{"detail", `null`},
	},
}

// payload returns a valid payload of the given type with edits applied:
// pairs of member name and raw value; an empty value removes the member and
// an unknown name is appended.
func payload(event string, edits ...string) string {
	ms := append([]member(nil), baseMembers[event]...)
	for i := 0; i+1 < len(edits); i += 2 {
		name, raw := edits[i], edits[i+1]
		found := false
		for j := range ms {
			if ms[j].name == name {
				ms[j].raw = raw
				found = true
			}
		}
		if !found {
			ms = append(ms, member{name, raw})
		}
	}
	var b strings.Builder
	b.WriteByte('{')
	first := true
	for _, m := range ms {
		if m.raw == "" {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteString(`"` + m.name + `":` + m.raw)
	}
	b.WriteByte('}')
	return b.String()
}

// frame wraps a payload in the six fields.
func frame(event, payload string) map[string]string {
	return map[string]string{
		"key":            "k",
		"payload":        payload,
		"event_type":     event,
		"schema_version": "1",
		"occurred_at":    "2026-11-29T23:18:58.123456Z",
		"content_type":   "application/json",
	}
}

func cmdFrame(edits ...string) map[string]string {
	return frame(envelope.EventContentFetch, payload(envelope.EventContentFetch, edits...))
}

func TestKey(t *testing.T) {
	at := time.Date(2026, 11, 29, 23, 18, 58, 123456789, time.FixedZone("CET", 3600))
	tests := []struct {
		name  string
		model envelope.Model
		want  string
	}{
		{
			name:  "content_fetch is its command_id",
			model: &envelope.ContentFetch{CommandID: "cmd-1", URL: "https://example.test/", OccurredAt: at},
			want:  "cmd-1",
		},
		{
			name:  "blob_available is fingerprint:command_id",
			model: &envelope.BlobAvailable{ContentFingerprint: fp, CommandID: "cmd-1", OccurredAt: at},
			want:  fp + ":cmd-1",
		},
		{
			name:  "fetch_failed is command_id:encoded occurred_at, in UTC with microseconds",
			model: &envelope.FetchFailed{CommandID: "cmd-1", OccurredAt: at},
			want:  "cmd-1:2026-11-29T22:18:58.123456Z",
		},
		{
			name:  "fetch_policy_state is its host",
			model: &envelope.FetchPolicyState{Host: "example.test", OccurredAt: at},
			want:  "example.test",
		},
		{
			name:  "content_replicate is its command_id",
			model: &envelope.ContentReplicate{CommandID: "rep-1", OccurredAt: at},
			want:  "rep-1",
		},
		{
			name:  "replication_complete is command_id:encoded occurred_at",
			model: &envelope.ReplicationComplete{CommandID: "rep-1", OccurredAt: at},
			want:  "rep-1:2026-11-29T22:18:58.123456Z",
		},
		{
			name:  "replication_failed is command_id:encoded occurred_at",
			model: &envelope.ReplicationFailed{CommandID: "rep-1", OccurredAt: at},
			want:  "rep-1:2026-11-29T22:18:58.123456Z",
		},
		{
			name:  "an empty command_id gives an empty key",
			model: &envelope.ContentFetch{},
			want:  "",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.model.Key(); got != tc.want {
				t.Errorf("Key() = %q, want %q", got, tc.want)
			}
			wire, err := envelope.ToWire(tc.model)
			if err != nil {
				t.Fatal(err)
			}
			if wire["key"] != tc.want {
				t.Errorf("ToWire key = %q, want %q", wire["key"], tc.want)
			}
		})
	}
}

func TestModelMethods(t *testing.T) {
	at := utc("2026-11-29T23:18:58.123456Z")
	tests := []struct {
		model     envelope.Model
		eventType string
	}{
		{&envelope.ContentFetch{SchemaVersion: 3, OccurredAt: at}, envelope.EventContentFetch},
		{&envelope.BlobAvailable{SchemaVersion: 3, OccurredAt: at}, envelope.EventBlobAvailable},
		{&envelope.FetchFailed{SchemaVersion: 3, OccurredAt: at}, envelope.EventFetchFailed},
		{&envelope.FetchPolicyState{SchemaVersion: 3, OccurredAt: at}, envelope.EventFetchPolicyState},
		{&envelope.ContentReplicate{SchemaVersion: 3, OccurredAt: at}, envelope.EventContentReplicate},
		{&envelope.ReplicationComplete{SchemaVersion: 3, OccurredAt: at}, envelope.EventReplicationComplete},
		{&envelope.ReplicationFailed{SchemaVersion: 3, OccurredAt: at}, envelope.EventReplicationFailed},
	}
	for _, tc := range tests {
		t.Run(tc.eventType, func(t *testing.T) {
			if got := tc.model.EventType(); got != tc.eventType {
				t.Errorf("EventType() = %q, want %q", got, tc.eventType)
			}
			if got := tc.model.When(); !got.Equal(at) {
				t.Errorf("When() = %v, want %v", got, at)
			}
			if got := tc.model.Version(); got != 3 {
				t.Errorf("Version() = %d, want 3", got)
			}
		})
	}
}

func TestToWireFields(t *testing.T) {
	m := &envelope.FetchFailed{
		OccurredAt:   time.Date(2026, 11, 30, 1, 18, 58, 123456999, time.FixedZone("", 2*3600)),
		CommandID:    "cmd-9",
		URL:          "https://example.test/x",
		InfoSourceID: "isrc-9",
		Reason:       envelope.ReasonTooLarge,
		Terminal:     true,
	}
	got, err := envelope.ToWire(m)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"key":            "cmd-9:2026-11-29T23:18:58.123456Z",
		"payload":        `{"schema_version":1,"event_type":"fetch_failed","occurred_at":"2026-11-29T23:18:58.123456Z","command_id":"cmd-9","url":"https://example.test/x","info_source_id":"isrc-9","reason":"too_large","terminal":true,"status_code":null,"attempts":null,"detail":null}`,
		"event_type":     "fetch_failed",
		"schema_version": "1",
		"occurred_at":    "2026-11-29T23:18:58.123456Z",
		"content_type":   "application/json",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ToWire mismatch (-want +got):\n%s", diff)
	}
}

func TestToWireVersion(t *testing.T) {
	tests := []struct {
		name    string
		version int
		want    string
	}{
		{name: "zero means SchemaVersion", version: 0, want: "1"},
		{name: "one", version: 1, want: "1"},
		{name: "other versions are written as is", version: 2, want: "2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wire, err := envelope.ToWire(&envelope.FetchPolicyState{SchemaVersion: tc.version, Host: "h"})
			if err != nil {
				t.Fatal(err)
			}
			if wire["schema_version"] != tc.want {
				t.Errorf("schema_version field = %q, want %q", wire["schema_version"], tc.want)
			}
			if !strings.HasPrefix(wire["payload"], `{"schema_version":`+tc.want+`,`) {
				t.Errorf("payload = %s, want schema_version %s", wire["payload"], tc.want)
			}
		})
	}
}

func TestToWireErrors(t *testing.T) {
	tooLate := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	tooEarly := time.Date(-1, 12, 31, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		model envelope.Model
	}{
		{name: "nil interface", model: nil},
		{name: "nil command", model: (*envelope.ContentFetch)(nil)},
		{name: "nil blob_available", model: (*envelope.BlobAvailable)(nil)},
		{name: "nil fetch_failed", model: (*envelope.FetchFailed)(nil)},
		{name: "nil fetch_policy_state", model: (*envelope.FetchPolicyState)(nil)},
		{name: "NaN timeout", model: &envelope.ContentFetch{TimeoutSeconds: new(math.NaN())}},
		{name: "+Inf timeout", model: &envelope.ContentFetch{TimeoutSeconds: new(math.Inf(1))}},
		{name: "-Inf timeout", model: &envelope.ContentFetch{TimeoutSeconds: new(math.Inf(-1))}},
		{name: "NaN min interval", model: &envelope.FetchPolicyState{MinIntervalSeconds: new(math.NaN())}},
		{name: "occurred_at after 9999", model: &envelope.ContentFetch{OccurredAt: tooLate}},
		{name: "occurred_at before 0000", model: &envelope.FetchFailed{OccurredAt: tooEarly}},
		{name: "fetched_at after 9999", model: &envelope.BlobAvailable{FetchedAt: &tooLate}},
		{name: "blob_expires_at after 9999", model: &envelope.BlobAvailable{BlobExpiresAt: &tooLate}},
		{name: "nil content_replicate", model: (*envelope.ContentReplicate)(nil)},
		{name: "nil replication_complete", model: (*envelope.ReplicationComplete)(nil)},
		{name: "nil replication_failed", model: (*envelope.ReplicationFailed)(nil)},
		{name: "replication_failed occurred_at after 9999", model: &envelope.ReplicationFailed{OccurredAt: tooLate}},
		{name: "an object_options value of another type", model: &envelope.ContentReplicate{ObjectOptions: map[string]any{"a": struct{}{}}}},
		{name: "a nested object_options value of another type", model: &envelope.ContentReplicate{ObjectOptions: map[string]any{"a": []any{map[string]string{}}}}},
		{name: "a NaN object_options value", model: &envelope.ContentReplicate{ObjectOptions: map[string]any{"a": math.NaN()}}},
		{name: "an infinite object_options value", model: &envelope.ContentReplicate{ObjectOptions: map[string]any{"a": float32(math.Inf(-1))}}},
		{name: "an invalid json.Number", model: &envelope.ContentReplicate{ObjectOptions: map[string]any{"a": json.Number("0x10")}}},
		{name: "an empty json.Number", model: &envelope.ContentReplicate{ObjectOptions: map[string]any{"a": json.Number("")}}},
		{name: "object_options nested too deep", model: &envelope.ContentReplicate{ObjectOptions: deepOptions(600)}},
		{name: "a foreign Model", model: foreignModel{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := envelope.ToWire(tc.model)
			if !errors.Is(err, envelope.ErrUnencodable) {
				t.Fatalf("ToWire error = %v, want ErrUnencodable", err)
			}
			if got != nil {
				t.Errorf("ToWire fields = %v, want nil", got)
			}
			if !strings.HasPrefix(err.Error(), "envelope: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
		})
	}
}

// deepOptions nests n objects.
func deepOptions(n int) map[string]any {
	o := map[string]any{}
	for range n {
		o = map[string]any{"a": o}
	}
	return o
}

type foreignModel struct{}

func (foreignModel) EventType() string { return "other" }
func (foreignModel) Key() string       { return "" }
func (foreignModel) When() time.Time   { return time.Time{} }
func (foreignModel) Version() int      { return 1 }

func TestFromWireMalformed(t *testing.T) {
	ev := envelope.EventContentFetch
	tests := []struct {
		name   string
		fields map[string]string
		// detail is a substring the error must carry.
		detail string
	}{
		{name: "nil map", fields: nil, detail: "empty frame"},
		{name: "empty map", fields: map[string]string{}, detail: "empty frame"},
		{name: "no event_type", fields: map[string]string{"payload": payload(ev)}, detail: "no event_type"},
		{name: "unknown event_type", fields: frame("content_archive", payload(ev)), detail: `unknown event_type "content_archive"`},
		{name: "event_type in another case", fields: frame("Content_Fetch", payload(ev)), detail: "unknown event_type"},
		{name: "empty event_type", fields: frame("", payload(ev)), detail: "unknown event_type"},
		{
			name: "flat fields with no payload",
			fields: map[string]string{
				"event_type": ev, "schema_version": "1", "command_id": "cmd-1",
				"url": "https://example.test/", "info_source_id": "i", "occurred_at": "2026-11-29T23:18:58Z",
			},
			detail: "no payload",
		},
		{name: "empty payload", fields: frame(ev, ""), detail: "invalid JSON"},
		{name: "truncated JSON", fields: frame(ev, "{"), detail: "invalid JSON"},
		{name: "JSON array", fields: frame(ev, "[]"), detail: "invalid JSON"},
		{name: "JSON string", fields: frame(ev, `"payload"`), detail: "invalid JSON"},
		{name: "JSON null", fields: frame(ev, `null`), detail: "invalid JSON"},
		{name: "trailing data", fields: frame(ev, payload(ev)+"{}"), detail: "invalid JSON"},
		{name: "trailing comma", fields: frame(ev, strings.TrimSuffix(payload(ev), "}")+",}"), detail: "invalid JSON"},
		{name: "single quotes", fields: frame(ev, `{'command_id':'x'}`), detail: "invalid JSON"},
		{name: "raw newline in a string", fields: cmdFrame("url", "\"https://example.test/\n\""), detail: "invalid JSON"},
		{name: "bad escape", fields: cmdFrame("url", `"\x41"`), detail: "invalid JSON"},
		{name: "short unicode escape", fields: cmdFrame("url", `"\u12"`), detail: "invalid JSON"},
		{name: "leading zero", fields: cmdFrame("timeout_seconds", `01`), detail: "invalid JSON"},
		{name: "bare dot number", fields: cmdFrame("timeout_seconds", `.5`), detail: "invalid JSON"},
		{name: "invalid UTF-8", fields: cmdFrame("url", "\"https://example.test/\xff\""), detail: "not valid UTF-8"},
		{name: "invalid JSON in an unknown member", fields: cmdFrame("extra", `[1,]`), detail: "invalid JSON"},
		{name: "too deeply nested unknown member", fields: cmdFrame("extra", strings.Repeat("[", 600)+strings.Repeat("]", 600)), detail: "nested deeper"},
		{name: "missing command_id", fields: cmdFrame("command_id", ""), detail: "command_id: missing"},
		{name: "missing url", fields: cmdFrame("url", ""), detail: "url: missing"},
		{name: "missing info_source_id", fields: cmdFrame("info_source_id", ""), detail: "info_source_id: missing"},
		{name: "missing occurred_at", fields: cmdFrame("occurred_at", ""), detail: "occurred_at: missing"},
		{name: "missing payload event_type", fields: cmdFrame("event_type", ""), detail: "event_type: missing"},
		{name: "name matching is case-sensitive", fields: cmdFrame("command_id", "", "Command_ID", `"cmd-1"`), detail: "command_id: missing"},
		{name: "null command_id", fields: cmdFrame("command_id", `null`), detail: "command_id: want a string, got null"},
		{name: "numeric command_id", fields: cmdFrame("command_id", `42`), detail: "command_id: want a string, got number"},
		{name: "url as object", fields: cmdFrame("url", `{}`), detail: "url: want a string, got object"},
		{name: "headers as array", fields: cmdFrame("headers", `[]`), detail: "headers: want an object, got array"},
		{name: "headers as string", fields: cmdFrame("headers", `"accept: */*"`), detail: "headers: want an object, got string"},
		{name: "header value not a string", fields: cmdFrame("headers", `{"x-n":1}`), detail: `header "x-n": want a string, got number`},
		{name: "header value null", fields: cmdFrame("headers", `{"x-n":null}`), detail: `header "x-n": want a string, got null`},
		{name: "timeout as string", fields: cmdFrame("timeout_seconds", `"30"`), detail: "timeout_seconds: want a number, got string"},
		{name: "timeout NaN as string", fields: cmdFrame("timeout_seconds", `"NaN"`), detail: "timeout_seconds: want a number, got string"},
		{name: "timeout true", fields: cmdFrame("timeout_seconds", `true`), detail: "timeout_seconds: want a number, got boolean"},
		{name: "schema_version as string", fields: cmdFrame("schema_version", `"1"`), detail: "schema_version: want an integer, got string"},
		{name: "schema_version as float", fields: cmdFrame("schema_version", `1.0`), detail: "schema_version: want an integer"},
		{name: "schema_version null", fields: cmdFrame("schema_version", `null`), detail: "schema_version: want an integer, got null"},
		{name: "schema_version huge and fractional", fields: cmdFrame("schema_version", `99999999999999999999.5`), detail: "schema_version: want an integer"},
		{name: "schema_version huge with an exponent", fields: cmdFrame("schema_version", `1e20`), detail: "schema_version: want an integer"},
		{
			name:   "no schema_version anywhere",
			fields: map[string]string{"event_type": ev, "payload": payload(ev, "schema_version", "")},
			detail: "schema_version: missing",
		},
		{
			name: "frame schema_version not decimal",
			fields: map[string]string{
				"event_type": ev, "payload": payload(ev, "schema_version", ""), "schema_version": "one",
			},
			detail: "not a decimal integer",
		},
		{name: "payload event_type not a string", fields: cmdFrame("event_type", `1`), detail: "event_type: want a string"},
		{
			name:   "payload event_type disagrees",
			fields: frame(ev, payload(envelope.EventBlobAvailable)),
			detail: `payload event_type "blob_available" does not match the frame's content_fetch`,
		},
		{name: "naive occurred_at", fields: cmdFrame("occurred_at", `"2026-11-29T23:18:58.123456"`), detail: "no UTC offset"},
		{name: "date-only occurred_at", fields: cmdFrame("occurred_at", `"2026-11-29"`), detail: "not RFC 3339"},
		{name: "epoch occurred_at", fields: cmdFrame("occurred_at", `1764458338`), detail: "want a string, got number"},
		{
			name:   "size_bytes as float",
			fields: frame(envelope.EventBlobAvailable, payload(envelope.EventBlobAvailable, "size_bytes", `18.0`)),
			detail: "size_bytes: want an integer",
		},
		{
			// Only the schema version reads an out-of-range integer as an answer.
			name:   "size_bytes too large",
			fields: frame(envelope.EventBlobAvailable, payload(envelope.EventBlobAvailable, "size_bytes", `99999999999999999999`)),
			detail: "size_bytes: integer out of range",
		},
		{
			name:   "size_bytes as string",
			fields: frame(envelope.EventBlobAvailable, payload(envelope.EventBlobAvailable, "size_bytes", `"18"`)),
			detail: "size_bytes: want an integer, got string",
		},
		{
			name:   "status_code as exponent",
			fields: frame(envelope.EventBlobAvailable, payload(envelope.EventBlobAvailable, "status_code", `2e2`)),
			detail: "status_code: want an integer",
		},
		{
			name:   "naive fetched_at",
			fields: frame(envelope.EventBlobAvailable, payload(envelope.EventBlobAvailable, "fetched_at", `"2026-11-29T23:18:58"`)),
			detail: "fetched_at: envelope: time has no UTC offset",
		},
		{
			name:   "naive blob_expires_at",
			fields: frame(envelope.EventBlobAvailable, payload(envelope.EventBlobAvailable, "blob_expires_at", `"2026-12-06T00:00:00.5"`)),
			detail: "blob_expires_at: envelope: time has no UTC offset",
		},
		{
			name:   "missing content_fingerprint",
			fields: frame(envelope.EventBlobAvailable, payload(envelope.EventBlobAvailable, "content_fingerprint", "")),
			detail: "content_fingerprint: missing",
		},
		{
			name:   "terminal as string",
			fields: frame(envelope.EventFetchFailed, payload(envelope.EventFetchFailed, "terminal", `"true"`)),
			detail: "terminal: want a boolean, got string",
		},
		{
			name:   "missing terminal",
			fields: frame(envelope.EventFetchFailed, payload(envelope.EventFetchFailed, "terminal", "")),
			detail: "terminal: missing",
		},
		{
			name:   "missing reason",
			fields: frame(envelope.EventFetchFailed, payload(envelope.EventFetchFailed, "reason", "")),
			detail: "reason: missing",
		},
		{
			name:   "attempts as float",
			fields: frame(envelope.EventFetchFailed, payload(envelope.EventFetchFailed, "attempts", `5.5`)),
			detail: "attempts: want an integer",
		},
		{
			name:   "revoked null",
			fields: frame(envelope.EventFetchPolicyState, payload(envelope.EventFetchPolicyState, "revoked", `null`)),
			detail: "revoked: want a boolean, got null",
		},
		{
			name:   "missing host",
			fields: frame(envelope.EventFetchPolicyState, payload(envelope.EventFetchPolicyState, "host", "")),
			detail: "host: missing",
		},
		{
			name:   "min_interval_seconds as string",
			fields: frame(envelope.EventFetchPolicyState, payload(envelope.EventFetchPolicyState, "min_interval_seconds", `"2"`)),
			detail: "min_interval_seconds: want a number, got string",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := envelope.FromWire(tc.fields)
			if !errors.Is(err, envelope.ErrMalformedFrame) {
				t.Fatalf("FromWire error = %v, want ErrMalformedFrame", err)
			}
			if m != nil {
				t.Errorf("FromWire model = %#v, want nil", m)
			}
			if !strings.HasPrefix(err.Error(), "envelope: malformed frame: ") {
				t.Errorf("error %q lacks the prefix", err)
			}
			if !strings.Contains(err.Error(), tc.detail) {
				t.Errorf("error %q does not mention %q", err, tc.detail)
			}
			if _, err := envelope.DecodeCommand(tc.fields); !errors.Is(err, envelope.ErrMalformedFrame) {
				t.Errorf("DecodeCommand error = %v, want ErrMalformedFrame", err)
			}
		})
	}
}

func TestFromWireNeverQuotesHeaderValues(t *testing.T) {
	secret := "Bearer s3cr3t-token"
	tests := []struct {
		name   string
		fields map[string]string
	}{
		{name: "bad sibling header", fields: cmdFrame("headers", `{"authorization":"`+secret+`","x-n":1}`)},
		{name: "bad JSON after header", fields: cmdFrame("headers", `{"authorization":"`+secret+`",}`)},
		{name: "wrong type elsewhere", fields: cmdFrame("headers", `{"authorization":"`+secret+`"}`, "url", `7`)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := envelope.FromWire(tc.fields)
			if err == nil {
				t.Fatal("FromWire accepted the frame")
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("error %q quotes a header value", err)
			}
		})
	}
}

func TestFromWireLenient(t *testing.T) {
	tests := []struct {
		name   string
		fields map[string]string
		want   envelope.Model
	}{
		{
			name:   "unknown members are ignored, whatever their type",
			fields: cmdFrame("producer", `{"name":"co-core","tags":[1,2.5e3,true,null,"x"]}`, "priority", `-3`),
			want:   command(),
		},
		{
			name:   "whitespace between tokens",
			fields: frame(envelope.EventContentFetch, " \n{ \"schema_version\" : 1 ,\t\"event_type\":\"content_fetch\",\"occurred_at\":\"2026-11-29T23:18:58.123456Z\",\"command_id\":\"cmd-1\",\"url\":\"https://example.test/a\",\"info_source_id\":\"isrc-1\"}\r\n"),
			want:   command(),
		},
		{
			name:   "members in any order, optional ones absent",
			fields: frame(envelope.EventContentFetch, `{"info_source_id":"isrc-1","url":"https://example.test/a","command_id":"cmd-1","occurred_at":"2026-11-29T23:18:58.123456Z","event_type":"content_fetch","schema_version":1}`),
			want:   command(),
		},
		{
			name:   "the last duplicate member wins",
			fields: cmdFrame("command_id", `"cmd-0"`, "command_id", `"cmd-1"`),
			want:   command(),
		},
		{
			name:   "an escaped member name matches",
			fields: frame(envelope.EventContentFetch, strings.Replace(payload(envelope.EventContentFetch), `"command_id"`, `"command\u005fid"`, 1)),
			want:   command(),
		},
		{
			name: "the frame's key, occurred_at and content_type are not consulted",
			fields: func() map[string]string {
				f := cmdFrame()
				f["key"] = "something else"
				f["occurred_at"] = "not a time"
				f["content_type"] = "text/plain"
				f["dlq_reason"] = "handler_error"
				return f
			}(),
			want: command(),
		},
		{
			name: "the frame's schema_version is a fallback only",
			fields: func() map[string]string {
				f := cmdFrame("schema_version", "")
				f["schema_version"] = "1"
				return f
			}(),
			want: command(),
		},
		{
			name:   "string escapes",
			fields: cmdFrame("url", `"https:\/\/example.test\/\u00e4\ud83d\ude00\"\\\b\f\n\r\t"`),
			want:   command(func(c *envelope.ContentFetch) { c.URL = "https://example.test/ä😀\"\\\b\f\n\r\t" }),
		},
		{
			name:   "a lone surrogate becomes U+FFFD",
			fields: cmdFrame("url", `"a\ud800b\udc00c\ud800\u0041"`),
			want:   command(func(c *envelope.ContentFetch) { c.URL = "a\uFFFDb\uFFFDc\uFFFDA" }),
		},
		{
			name:   "timeout as a JSON integer",
			fields: cmdFrame("timeout_seconds", `30`),
			want:   command(func(c *envelope.ContentFetch) { c.TimeoutSeconds = new(30.0) }),
		},
		{
			name:   "timeout with exponent",
			fields: cmdFrame("timeout_seconds", `1.5E1`),
			want:   command(func(c *envelope.ContentFetch) { c.TimeoutSeconds = new(15.0) }),
		},
		{
			name:   "negative timeout decodes (the guard refuses it)",
			fields: cmdFrame("timeout_seconds", `-1`),
			want:   command(func(c *envelope.ContentFetch) { c.TimeoutSeconds = new(-1.0) }),
		},
		{
			name:   "times with an offset are normalized to UTC",
			fields: cmdFrame("occurred_at", `"2026-11-30T01:18:58.123456+02:00"`),
			want:   command(),
		},
		{
			name:   "times are truncated to microseconds",
			fields: cmdFrame("occurred_at", `"2026-11-29T23:18:58.123456789Z"`),
			want:   command(),
		},
		{
			name:   "blank command_id decodes (the worker dead-letters it)",
			fields: cmdFrame("command_id", `"  "`),
			want:   command(func(c *envelope.ContentFetch) { c.CommandID = "  " }),
		},
		{
			name:   "an unknown reason token is opaque",
			fields: frame(envelope.EventFetchFailed, payload(envelope.EventFetchFailed, "reason", `"brand_new_reason"`, "terminal", `false`)),
			want: &envelope.FetchFailed{
				SchemaVersion: 1, OccurredAt: utc("2026-11-29T23:18:58.123456Z"), CommandID: "cmd-1",
				URL: "https://example.test/a", InfoSourceID: "isrc-1", Reason: "brand_new_reason",
			},
		},
		{
			name:   "a number too small for a float64 is zero",
			fields: frame(envelope.EventFetchPolicyState, payload(envelope.EventFetchPolicyState, "min_interval_seconds", `1e-400`)),
			want: &envelope.FetchPolicyState{
				SchemaVersion: 1, OccurredAt: utc("2026-11-29T23:18:58.123456Z"), Host: "example.test",
				MinIntervalSeconds: new(0.0),
			},
		},
		{
			name:   "negative zero size",
			fields: frame(envelope.EventBlobAvailable, payload(envelope.EventBlobAvailable, "size_bytes", `-0`)),
			want: &envelope.BlobAvailable{
				SchemaVersion: 1, OccurredAt: utc("2026-11-29T23:18:58.123456Z"), ContentFingerprint: fp,
				BlobURI: "file:///blobs/x.bin", MediaType: "text/html", URL: "https://example.test/a",
				CommandID: "cmd-1", InfoSourceID: "isrc-1",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := envelope.FromWire(tc.fields)
			if err != nil {
				t.Fatalf("FromWire: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("FromWire mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// command is the model of cmdFrame(), adjusted by edits.
func command(edits ...func(*envelope.ContentFetch)) *envelope.ContentFetch {
	c := &envelope.ContentFetch{
		SchemaVersion: 1,
		OccurredAt:    utc("2026-11-29T23:18:58.123456Z"),
		CommandID:     "cmd-1",
		URL:           "https://example.test/a",
		InfoSourceID:  "isrc-1",
	}
	for _, e := range edits {
		e(c)
	}
	return c
}

func TestOptionalFields(t *testing.T) {
	type getter func(envelope.Model) any
	cf := func(f func(*envelope.ContentFetch) any) getter {
		return func(m envelope.Model) any { return f(m.(*envelope.ContentFetch)) }
	}
	ba := func(f func(*envelope.BlobAvailable) any) getter {
		return func(m envelope.Model) any { return f(m.(*envelope.BlobAvailable)) }
	}
	ff := func(f func(*envelope.FetchFailed) any) getter {
		return func(m envelope.Model) any { return f(m.(*envelope.FetchFailed)) }
	}
	ps := func(f func(*envelope.FetchPolicyState) any) getter {
		return func(m envelope.Model) any { return f(m.(*envelope.FetchPolicyState)) }
	}
	cr := func(f func(*envelope.ContentReplicate) any) getter {
		return func(m envelope.Model) any { return f(m.(*envelope.ContentReplicate)) }
	}
	rf := func(f func(*envelope.ReplicationFailed) any) getter {
		return func(m envelope.Model) any { return f(m.(*envelope.ReplicationFailed)) }
	}
	tests := []struct {
		event string
		field string
		raw   string // a present value
		want  any    // what raw decodes to
		get   getter
	}{
		{envelope.EventContentFetch, "headers", `{"Accept":"text/html","x-a":""}`, map[string]string{"Accept": "text/html", "x-a": ""},
			cf(func(m *envelope.ContentFetch) any { return m.Headers })},
		{envelope.EventContentFetch, "headers", `{}`, map[string]string{},
			cf(func(m *envelope.ContentFetch) any { return m.Headers })},
		{envelope.EventContentFetch, "timeout_seconds", `12.5`, new(12.5),
			cf(func(m *envelope.ContentFetch) any { return m.TimeoutSeconds })},
		{envelope.EventContentFetch, "timeout_seconds", `0`, new(0.0),
			cf(func(m *envelope.ContentFetch) any { return m.TimeoutSeconds })},
		{envelope.EventBlobAvailable, "final_url", `"https://example.test/z"`, new("https://example.test/z"),
			ba(func(m *envelope.BlobAvailable) any { return m.FinalURL })},
		{envelope.EventBlobAvailable, "status_code", `206`, new(206),
			ba(func(m *envelope.BlobAvailable) any { return m.StatusCode })},
		{envelope.EventBlobAvailable, "fetched_at", `"2026-11-29T23:00:00+00:00"`, ptrTime("2026-11-29T23:00:00Z"),
			ba(func(m *envelope.BlobAvailable) any { return m.FetchedAt })},
		{envelope.EventBlobAvailable, "content_type_raw", `" text/html; charset=UTF-8"`, new(" text/html; charset=UTF-8"),
			ba(func(m *envelope.BlobAvailable) any { return m.ContentTypeRaw })},
		{envelope.EventBlobAvailable, "content_type_raw", `""`, new(""),
			ba(func(m *envelope.BlobAvailable) any { return m.ContentTypeRaw })},
		{envelope.EventBlobAvailable, "etag", `"\"abc\""`, new(`"abc"`),
			ba(func(m *envelope.BlobAvailable) any { return m.ETag })},
		{envelope.EventBlobAvailable, "last_modified", `"Sun, 29 Nov 2026 20:00:00 GMT"`, new("Sun, 29 Nov 2026 20:00:00 GMT"),
			ba(func(m *envelope.BlobAvailable) any { return m.LastModified })},
		{envelope.EventBlobAvailable, "blob_expires_at", `"2026-12-06T23:00:00.000001Z"`, ptrTime("2026-12-06T23:00:00.000001Z"),
			ba(func(m *envelope.BlobAvailable) any { return m.BlobExpiresAt })},
		{envelope.EventFetchFailed, "status_code", `304`, new(304),
			ff(func(m *envelope.FetchFailed) any { return m.StatusCode })},
		{envelope.EventFetchFailed, "attempts", `5`, new(5),
			ff(func(m *envelope.FetchFailed) any { return m.Attempts })},
		{envelope.EventFetchFailed, "detail", `"origin reset the connection"`, new("origin reset the connection"),
			ff(func(m *envelope.FetchFailed) any { return m.Detail })},
		{envelope.EventFetchPolicyState, "min_interval_seconds", `0.0`, new(0.0),
			ps(func(m *envelope.FetchPolicyState) any { return m.MinIntervalSeconds })},
		{envelope.EventFetchPolicyState, "min_interval_seconds", `3`, new(3.0),
			ps(func(m *envelope.FetchPolicyState) any { return m.MinIntervalSeconds })},
		{envelope.EventContentReplicate, "object_options", `{"storage_class":"ARCHIVE","cache_control":null}`,
			map[string]any{"storage_class": "ARCHIVE", "cache_control": nil},
			cr(func(m *envelope.ContentReplicate) any { return m.ObjectOptions })},
		{envelope.EventContentReplicate, "object_options", `{}`, map[string]any{},
			cr(func(m *envelope.ContentReplicate) any { return m.ObjectOptions })},
		{envelope.EventReplicationFailed, "attempts", `5`, new(5),
			rf(func(m *envelope.ReplicationFailed) any { return m.Attempts })},
		{envelope.EventReplicationFailed, "detail", `"the destination already holds different bytes"`,
			new("the destination already holds different bytes"),
			rf(func(m *envelope.ReplicationFailed) any { return m.Detail })},
	}
	for _, tc := range tests {
		for _, variant := range []struct {
			name string
			raw  string
		}{{"absent", ""}, {"null", "null"}, {"value " + tc.raw, tc.raw}} {
			t.Run(tc.event+"/"+tc.field+"/"+variant.name, func(t *testing.T) {
				m, err := envelope.FromWire(frame(tc.event, payload(tc.event, tc.field, variant.raw)))
				if err != nil {
					t.Fatalf("FromWire: %v", err)
				}
				got := tc.get(m)
				if variant.raw == "" || variant.raw == "null" {
					if !reflect.ValueOf(got).IsNil() {
						t.Errorf("%s = %v, want nil", tc.field, got)
					}
				} else if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("%s mismatch (-want +got):\n%s", tc.field, diff)
				}
				// nil encodes as null, never omitted and never a default.
				wire, err := envelope.ToWire(m)
				if err != nil {
					t.Fatalf("ToWire: %v", err)
				}
				if variant.raw == "" || variant.raw == "null" {
					if !strings.Contains(wire["payload"], `"`+tc.field+`":null`) {
						t.Errorf("payload %s does not carry %s as null", wire["payload"], tc.field)
					}
				}
				again, err := envelope.FromWire(wire)
				if err != nil {
					t.Fatalf("FromWire(ToWire): %v", err)
				}
				if diff := cmp.Diff(m, again); diff != "" {
					t.Errorf("round trip mismatch (-first +second):\n%s", diff)
				}
			})
		}
	}
}

func TestNonFiniteTokens(t *testing.T) {
	tests := []struct {
		name    string
		fields  map[string]string
		check   func(float64) bool
		wantErr bool
	}{
		{name: "NaN", fields: cmdFrame("timeout_seconds", `NaN`), check: math.IsNaN},
		{name: "Infinity", fields: cmdFrame("timeout_seconds", `Infinity`), check: func(f float64) bool { return math.IsInf(f, 1) }},
		{name: "-Infinity", fields: cmdFrame("timeout_seconds", `-Infinity`), check: func(f float64) bool { return math.IsInf(f, -1) }},
		{name: "NaN after whitespace", fields: frame(envelope.EventContentFetch, strings.Replace(payload(envelope.EventContentFetch), `"timeout_seconds":null`, "\"timeout_seconds\" :\n NaN ", 1)), check: math.IsNaN},
		{name: "NaN as the first member", fields: frame(envelope.EventContentFetch, `{"timeout_seconds":NaN,`+strings.TrimPrefix(payload(envelope.EventContentFetch, "timeout_seconds", ""), "{")), check: math.IsNaN},
		{name: "overflowing number reads as +Inf", fields: cmdFrame("timeout_seconds", `1e400`), check: func(f float64) bool { return math.IsInf(f, 1) }},
		{name: "overflowing negative number reads as -Inf", fields: cmdFrame("timeout_seconds", `-1e400`), check: func(f float64) bool { return math.IsInf(f, -1) }},
		{name: "NaN followed by garbage", fields: cmdFrame("timeout_seconds", `NaNa`), wantErr: true},
		{name: "lower-case nan", fields: cmdFrame("timeout_seconds", `nan`), wantErr: true},
		{name: "inf", fields: cmdFrame("timeout_seconds", `inf`), wantErr: true},
		{name: "+Infinity", fields: cmdFrame("timeout_seconds", `+Infinity`), wantErr: true},
		{name: "NaN in an unknown member", fields: cmdFrame("retry_after", `NaN`), wantErr: true},
		{name: "NaN in another number field", fields: frame(envelope.EventFetchPolicyState, payload(envelope.EventFetchPolicyState, "min_interval_seconds", `NaN`)), wantErr: true},
		{name: "Infinity in another number field", fields: frame(envelope.EventFetchPolicyState, payload(envelope.EventFetchPolicyState, "min_interval_seconds", `Infinity`)), wantErr: true},
		{name: "overflow in another number field", fields: frame(envelope.EventFetchPolicyState, payload(envelope.EventFetchPolicyState, "min_interval_seconds", `1e400`)), wantErr: true},
		{name: "NaN as a header value", fields: cmdFrame("headers", `{"x":NaN}`), wantErr: true},
		{name: "nested timeout_seconds", fields: cmdFrame("extra", `{"timeout_seconds":NaN}`), wantErr: true},
		{name: "NaN in an array", fields: cmdFrame("timeout_seconds", `[NaN]`), wantErr: true},
		{name: "timeout_seconds of another model", fields: frame(envelope.EventFetchFailed, payload(envelope.EventFetchFailed, "timeout_seconds", `NaN`)), wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := envelope.FromWire(tc.fields)
			if tc.wantErr {
				if !errors.Is(err, envelope.ErrMalformedFrame) {
					t.Fatalf("FromWire error = %v, want ErrMalformedFrame", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("FromWire: %v", err)
			}
			cmd := m.(*envelope.ContentFetch)
			if cmd.TimeoutSeconds == nil || !tc.check(*cmd.TimeoutSeconds) {
				t.Errorf("TimeoutSeconds = %v, want the matching non-finite value", cmd.TimeoutSeconds)
			}
			if cmd.CommandID != "cmd-1" {
				t.Errorf("CommandID = %q, want cmd-1", cmd.CommandID)
			}
			if _, err := envelope.ToWire(m); !errors.Is(err, envelope.ErrUnencodable) {
				t.Errorf("ToWire error = %v, want ErrUnencodable", err)
			}
		})
	}
}

func TestNonFiniteTokenInsideString(t *testing.T) {
	// The tokens are only special as a bare value; as text they are text.
	m, err := envelope.FromWire(cmdFrame("url", `"https://example.test/NaN?Infinity=-Infinity"`, "timeout_seconds", `"x"`))
	if !errors.Is(err, envelope.ErrMalformedFrame) {
		t.Fatalf("a string timeout_seconds must stay malformed, got %v, %v", m, err)
	}
	m, err = envelope.FromWire(cmdFrame("url", `"NaN"`, "info_source_id", `"Infinity"`))
	if err != nil {
		t.Fatal(err)
	}
	want := command(func(c *envelope.ContentFetch) { c.URL = "NaN"; c.InfoSourceID = "Infinity" })
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("FromWire mismatch (-want +got):\n%s", diff)
	}
}

func TestUnsupportedVersion(t *testing.T) {
	at := utc("2026-11-29T23:18:58.123456Z")
	tests := []struct {
		name   string
		fields map[string]string
		want   envelope.Model
	}{
		{
			name: "content_fetch version 2 keeps what correlation needs",
			fields: func() map[string]string {
				f := cmdFrame("schema_version", `2`, "headers", `["v2 headers are a list"]`, "timeout_seconds", `"PT30S"`)
				f["schema_version"] = "2"
				return f
			}(),
			want: &envelope.ContentFetch{SchemaVersion: 2, OccurredAt: at, CommandID: "cmd-1", URL: "https://example.test/a", InfoSourceID: "isrc-1"},
		},
		{
			name:   "the payload's version wins over the frame's",
			fields: cmdFrame("schema_version", `2`),
			want:   &envelope.ContentFetch{SchemaVersion: 2, OccurredAt: at, CommandID: "cmd-1", URL: "https://example.test/a", InfoSourceID: "isrc-1"},
		},
		{
			name: "the frame's version when the payload has none",
			fields: func() map[string]string {
				f := cmdFrame("schema_version", "")
				f["schema_version"] = "3"
				return f
			}(),
			want: &envelope.ContentFetch{SchemaVersion: 3, OccurredAt: at, CommandID: "cmd-1", URL: "https://example.test/a", InfoSourceID: "isrc-1"},
		},
		{
			// An integer past int's range is still an integer that is not 1.
			name:   "a version too large for an int reads as math.MaxInt",
			fields: cmdFrame("schema_version", `99999999999999999999`),
			want:   &envelope.ContentFetch{SchemaVersion: math.MaxInt, OccurredAt: at, CommandID: "cmd-1", URL: "https://example.test/a", InfoSourceID: "isrc-1"},
		},
		{
			name:   "a version too negative for an int reads as math.MinInt",
			fields: cmdFrame("schema_version", `-99999999999999999999`),
			want:   &envelope.ContentFetch{SchemaVersion: math.MinInt, OccurredAt: at, CommandID: "cmd-1", URL: "https://example.test/a", InfoSourceID: "isrc-1"},
		},
		{
			name: "the frame's version too large for an int",
			fields: func() map[string]string {
				f := cmdFrame("schema_version", "")
				f["schema_version"] = "99999999999999999999"
				return f
			}(),
			want: &envelope.ContentFetch{SchemaVersion: math.MaxInt, OccurredAt: at, CommandID: "cmd-1", URL: "https://example.test/a", InfoSourceID: "isrc-1"},
		},
		{
			name:   "a huge version on a fact is unsupported too",
			fields: frame(envelope.EventFetchFailed, payload(envelope.EventFetchFailed, "schema_version", `18446744073709551616`)),
			want: &envelope.FetchFailed{
				SchemaVersion: math.MaxInt, OccurredAt: at, CommandID: "cmd-1", URL: "https://example.test/a",
				InfoSourceID: "isrc-1", Reason: envelope.ReasonNotFetchable, Terminal: true,
			},
		},
		{
			name:   "version 0",
			fields: cmdFrame("schema_version", `0`),
			want:   &envelope.ContentFetch{SchemaVersion: 0, OccurredAt: at, CommandID: "cmd-1", URL: "https://example.test/a", InfoSourceID: "isrc-1"},
		},
		{
			name:   "missing and mistyped fields are left empty",
			fields: cmdFrame("schema_version", `2`, "url", `{"href":"https://example.test/a"}`, "info_source_id", "", "occurred_at", `"yesterday"`, "event_type", ""),
			want:   &envelope.ContentFetch{SchemaVersion: 2, CommandID: "cmd-1"},
		},
		{
			name:   "a naive time is left empty",
			fields: cmdFrame("schema_version", `2`, "occurred_at", `"2026-11-29T23:18:58"`),
			want:   &envelope.ContentFetch{SchemaVersion: 2, CommandID: "cmd-1", URL: "https://example.test/a", InfoSourceID: "isrc-1"},
		},
		{
			name:   "blob_available version 2",
			fields: frame(envelope.EventBlobAvailable, payload(envelope.EventBlobAvailable, "schema_version", `2`, "size_bytes", `"18 bytes"`, "etag", `"\"e\""`)),
			want: &envelope.BlobAvailable{
				SchemaVersion: 2, OccurredAt: at, ContentFingerprint: fp, BlobURI: "file:///blobs/x.bin",
				MediaType: "text/html", URL: "https://example.test/a", CommandID: "cmd-1", InfoSourceID: "isrc-1",
				ETag: new(`"e"`),
			},
		},
		{
			name:   "an out-of-range size_bytes in a partial model is left empty, not clamped",
			fields: frame(envelope.EventBlobAvailable, payload(envelope.EventBlobAvailable, "schema_version", `2`, "size_bytes", `99999999999999999999`)),
			want: &envelope.BlobAvailable{
				SchemaVersion: 2, OccurredAt: at, ContentFingerprint: fp, BlobURI: "file:///blobs/x.bin",
				MediaType: "text/html", URL: "https://example.test/a", CommandID: "cmd-1", InfoSourceID: "isrc-1",
			},
		},
		{
			name:   "fetch_failed version 2",
			fields: frame(envelope.EventFetchFailed, payload(envelope.EventFetchFailed, "schema_version", `2`, "terminal", "")),
			want: &envelope.FetchFailed{
				SchemaVersion: 2, OccurredAt: at, CommandID: "cmd-1", URL: "https://example.test/a",
				InfoSourceID: "isrc-1", Reason: envelope.ReasonNotFetchable,
			},
		},
		{
			name:   "fetch_policy_state version 2",
			fields: frame(envelope.EventFetchPolicyState, payload(envelope.EventFetchPolicyState, "schema_version", `2`, "min_interval_seconds", `NaN`)),
			want:   nil, // NaN is still invalid JSON there: malformed, checked below
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := envelope.FromWire(tc.fields)
			if tc.want == nil {
				if !errors.Is(err, envelope.ErrMalformedFrame) {
					t.Fatalf("FromWire error = %v, want ErrMalformedFrame", err)
				}
				return
			}
			if !errors.Is(err, envelope.ErrUnsupportedVersion) {
				t.Fatalf("FromWire error = %v, want ErrUnsupportedVersion", err)
			}
			if errors.Is(err, envelope.ErrMalformedFrame) {
				t.Errorf("error %v is also ErrMalformedFrame", err)
			}
			if !strings.HasPrefix(err.Error(), "envelope: unsupported schema version: ") {
				t.Errorf("error %q lacks the prefix", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("partial model mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// An out-of-range version is clamped in the model but named as written in
// the error, so an operator reading the log sees what the producer sent.
func TestUnsupportedVersionTooLargeIsNamedAsWritten(t *testing.T) {
	_, err := envelope.FromWire(cmdFrame("schema_version", `99999999999999999999`))
	if !errors.Is(err, envelope.ErrUnsupportedVersion) {
		t.Fatalf("FromWire error = %v, want ErrUnsupportedVersion", err)
	}
	if want := "content_fetch has schema_version 99999999999999999999, this codec reads 1"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
	long := strings.Repeat("9", 5000)
	_, err = envelope.FromWire(cmdFrame("schema_version", long))
	if !errors.Is(err, envelope.ErrUnsupportedVersion) {
		t.Fatalf("FromWire error = %v, want ErrUnsupportedVersion", err)
	}
	if len(err.Error()) > 300 {
		t.Errorf("error for a 5000-digit version is %d bytes long; want it bounded", len(err.Error()))
	}
}

func TestUnsupportedVersionStillNeedsAnObject(t *testing.T) {
	tests := []struct {
		name   string
		fields map[string]string
	}{
		{name: "invalid JSON", fields: frame(envelope.EventContentFetch, `{"schema_version":2,`)},
		{name: "mismatched event_type", fields: frame(envelope.EventContentFetch, payload(envelope.EventBlobAvailable, "schema_version", `2`))},
		{name: "mistyped version", fields: cmdFrame("schema_version", `"2"`)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := envelope.FromWire(tc.fields)
			if !errors.Is(err, envelope.ErrMalformedFrame) || m != nil {
				t.Fatalf("FromWire = %v, %v; want nil, ErrMalformedFrame", m, err)
			}
		})
	}
}

func TestDecodeCommand(t *testing.T) {
	blobV2 := frame(envelope.EventBlobAvailable, payload(envelope.EventBlobAvailable, "schema_version", `2`))
	tests := []struct {
		name    string
		fields  map[string]string
		want    *envelope.ContentFetch
		wantErr error
	}{
		{name: "a command", fields: cmdFrame(), want: command()},
		{
			name:   "a command with options",
			fields: cmdFrame("headers", `{"accept":"text/html"}`, "timeout_seconds", `10.0`),
			want: command(func(c *envelope.ContentFetch) {
				c.Headers = map[string]string{"accept": "text/html"}
				c.TimeoutSeconds = new(10.0)
			}),
		},
		{
			name:    "a blob_available fact is foreign",
			fields:  frame(envelope.EventBlobAvailable, payload(envelope.EventBlobAvailable)),
			wantErr: envelope.ErrForeignPayload,
		},
		{
			name:    "a fetch_failed fact is foreign",
			fields:  frame(envelope.EventFetchFailed, payload(envelope.EventFetchFailed)),
			wantErr: envelope.ErrForeignPayload,
		},
		{
			name:    "a policy is foreign",
			fields:  frame(envelope.EventFetchPolicyState, payload(envelope.EventFetchPolicyState)),
			wantErr: envelope.ErrForeignPayload,
		},
		{
			name:    "a replicate command is foreign",
			fields:  frame(envelope.EventContentReplicate, payload(envelope.EventContentReplicate)),
			wantErr: envelope.ErrForeignPayload,
		},
		{name: "a foreign payload of an unknown version is still foreign", fields: blobV2, wantErr: envelope.ErrForeignPayload},
		{
			name:    "an unsupported command version returns the partial command",
			fields:  cmdFrame("schema_version", `2`),
			want:    command(func(c *envelope.ContentFetch) { c.SchemaVersion = 2 }),
			wantErr: envelope.ErrUnsupportedVersion,
		},
		{name: "malformed", fields: cmdFrame("url", ""), wantErr: envelope.ErrMalformedFrame},
		{name: "empty", fields: map[string]string{}, wantErr: envelope.ErrMalformedFrame},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := envelope.DecodeCommand(tc.fields)
			if tc.wantErr == nil && err != nil {
				t.Fatalf("DecodeCommand: %v", err)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("DecodeCommand error = %v, want %v", err, tc.wantErr)
			}
			if errors.Is(tc.wantErr, envelope.ErrForeignPayload) && errors.Is(err, envelope.ErrUnsupportedVersion) {
				t.Errorf("a foreign payload reported as unsupported: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("DecodeCommand mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSentinelsAreDistinct(t *testing.T) {
	all := []error{envelope.ErrMalformedFrame, envelope.ErrUnsupportedVersion, envelope.ErrForeignPayload, envelope.ErrUnencodable}
	for i, a := range all {
		if !strings.HasPrefix(a.Error(), "envelope: ") {
			t.Errorf("%q lacks the package prefix", a)
		}
		for j, b := range all {
			if i != j && errors.Is(a, b) {
				t.Errorf("%v is %v", a, b)
			}
		}
	}
}
