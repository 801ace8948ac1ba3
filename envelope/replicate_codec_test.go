package envelope_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/replicator-go/replicator/envelope"
)

// replicate is the model of payload(EventContentReplicate), adjusted by edits.
func replicate(edits ...func(*envelope.ContentReplicate)) *envelope.ContentReplicate {
	c := &envelope.ContentReplicate{
		SchemaVersion:     1,
		OccurredAt:        utc("2026-11-29T23:18:58.123456Z"),
		CommandID:         "rep-1",
		BlobURI:           "file:///blobs/" + fp[:2] + "/" + fp[2:4] + "/" + fp + ".bin",
		MediaType:         "application/pdf",
		Provider:          "gcs",
		CredentialsAlias:  "primary",
		Destination:       "reports/2026/r.pdf",
		InfoItemRepSpecID: "iirs-1",
		SourceRevisionID:  "rev-1",
		InfoSourceID:      "isrc-1",
	}
	for _, e := range edits {
		e(c)
	}
	return c
}

func repFrame(edits ...string) map[string]string {
	return frame(envelope.EventContentReplicate, payload(envelope.EventContentReplicate, edits...))
}

func TestReplicateToWire(t *testing.T) {
	at := time.Date(2026, 11, 30, 1, 18, 58, 123456999, time.FixedZone("", 2*3600))
	tests := []struct {
		name        string
		model       envelope.Model
		wantKey     string
		wantPayload string
	}{
		{
			name: "content_replicate with Go-typed object_options",
			model: &envelope.ContentReplicate{
				OccurredAt: at, CommandID: "rep-9", BlobURI: "gs://b/blobs/x.bin", MediaType: "text/html",
				Provider: "gcs", CredentialsAlias: "primary", Destination: "a/b.html",
				ObjectOptions: map[string]any{
					"z": int64(-3), "y": uint8(7), "x": 30.0, "w": float32(0.5), "v": []any{1, "s"},
					"u": map[string]any{"b": false, "a": nil},
				},
				InfoItemRepSpecID: "iirs-9", SourceRevisionID: "rev-9", InfoSourceID: "isrc-9",
			},
			wantKey: "rep-9",
			wantPayload: `{"schema_version":1,"event_type":"content_replicate","occurred_at":"2026-11-29T23:18:58.123456Z",` +
				`"command_id":"rep-9","blob_uri":"gs://b/blobs/x.bin","media_type":"text/html","provider":"gcs",` +
				`"credentials_alias":"primary","destination":"a/b.html",` +
				`"object_options":{"u":{"a":null,"b":false},"v":[1,"s"],"w":0.5,"x":30.0,"y":7,"z":-3},` +
				`"info_item_rep_spec_id":"iirs-9","source_revision_id":"rev-9","info_source_id":"isrc-9"}`,
		},
		{
			name: "replication_complete",
			model: &envelope.ReplicationComplete{
				OccurredAt: at, CommandID: "rep-9", PublicURL: "https://storage.googleapis.com/b/a/b.html",
				InfoItemRepSpecID: "iirs-9", SourceRevisionID: "rev-9", InfoSourceID: "isrc-9",
			},
			wantKey: "rep-9:2026-11-29T23:18:58.123456Z",
			wantPayload: `{"schema_version":1,"event_type":"replication_complete","occurred_at":"2026-11-29T23:18:58.123456Z",` +
				`"command_id":"rep-9","public_url":"https://storage.googleapis.com/b/a/b.html",` +
				`"info_item_rep_spec_id":"iirs-9","source_revision_id":"rev-9","info_source_id":"isrc-9"}`,
		},
		{
			name: "replication_failed",
			model: &envelope.ReplicationFailed{
				OccurredAt: at, CommandID: "rep-9", InfoItemRepSpecID: "iirs-9", SourceRevisionID: "rev-9",
				InfoSourceID: "isrc-9", Reason: envelope.ReplicateReasonInvalidSource, Terminal: true,
			},
			wantKey: "rep-9:2026-11-29T23:18:58.123456Z",
			wantPayload: `{"schema_version":1,"event_type":"replication_failed","occurred_at":"2026-11-29T23:18:58.123456Z",` +
				`"command_id":"rep-9","info_item_rep_spec_id":"iirs-9","source_revision_id":"rev-9","info_source_id":"isrc-9",` +
				`"reason":"invalid_source","terminal":true,"attempts":null,"detail":null}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := envelope.ToWire(tc.model)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{
				"key":            tc.wantKey,
				"payload":        tc.wantPayload,
				"event_type":     tc.model.EventType(),
				"schema_version": "1",
				"occurred_at":    "2026-11-29T23:18:58.123456Z",
				"content_type":   "application/json",
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("ToWire mismatch (-want +got):\n%s", diff)
			}
			if got["key"] != tc.model.Key() {
				t.Errorf("frame key %q, Key() %q", got["key"], tc.model.Key())
			}
		})
	}
}

// Numbers inside object_options keep their spelling both ways, so a
// command relayed through this codec says what its issuer said.
func TestObjectOptionsNumbersKeepTheirSpelling(t *testing.T) {
	raw := `{"a":1e5,"b":-0.0,"c":123456789012345678901234567890,"d":2.50,"e":[0,1E-2]}`
	m, err := envelope.FromWire(repFrame("object_options", raw))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"a": json.Number("1e5"), "b": json.Number("-0.0"), "c": json.Number("123456789012345678901234567890"),
		"d": json.Number("2.50"), "e": []any{json.Number("0"), json.Number("1E-2")},
	}
	if diff := cmp.Diff(want, m.(*envelope.ContentReplicate).ObjectOptions); diff != "" {
		t.Errorf("object_options mismatch (-want +got):\n%s", diff)
	}
	wire, err := envelope.ToWire(m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(wire["payload"], `"object_options":`+raw+`,`) {
		t.Errorf("payload %s does not carry %s as written", wire["payload"], raw)
	}
}

func TestReplicateMalformed(t *testing.T) {
	cr, rc, rf := envelope.EventContentReplicate, envelope.EventReplicationComplete, envelope.EventReplicationFailed
	tests := []struct {
		name   string
		fields map[string]string
		detail string
	}{
		{name: "missing blob_uri", fields: repFrame("blob_uri", ""), detail: "blob_uri: missing"},
		{name: "missing media_type", fields: repFrame("media_type", ""), detail: "media_type: missing"},
		{name: "missing provider", fields: repFrame("provider", ""), detail: "provider: missing"},
		{name: "missing credentials_alias", fields: repFrame("credentials_alias", ""), detail: "credentials_alias: missing"},
		{name: "null destination", fields: repFrame("destination", "null"), detail: "destination: want a string, got null"},
		{name: "missing info_item_rep_spec_id", fields: repFrame("info_item_rep_spec_id", ""), detail: "info_item_rep_spec_id: missing"},
		{name: "missing source_revision_id", fields: repFrame("source_revision_id", ""), detail: "source_revision_id: missing"},
		{name: "missing info_source_id", fields: repFrame("info_source_id", ""), detail: "info_source_id: missing"},
		{name: "object_options a list", fields: repFrame("object_options", `["storage_class"]`), detail: "object_options: want an object, got array"},
		{name: "object_options a string", fields: repFrame("object_options", `"STANDARD"`), detail: "object_options: want an object, got string"},
		{name: "NaN inside object_options", fields: repFrame("object_options", `{"a":NaN}`), detail: "invalid JSON"},
		{name: "a naive occurred_at", fields: repFrame("occurred_at", `"2026-11-29T23:18:58"`), detail: "occurred_at"},
		{name: "public_url missing", fields: frame(rc, payload(rc, "public_url", "")), detail: "public_url: missing"},
		{name: "public_url a number", fields: frame(rc, payload(rc, "public_url", "7")), detail: "public_url: want a string, got number"},
		{name: "reason missing", fields: frame(rf, payload(rf, "reason", "")), detail: "reason: missing"},
		{name: "terminal a string", fields: frame(rf, payload(rf, "terminal", `"true"`)), detail: "terminal: want a boolean, got string"},
		{name: "attempts a float", fields: frame(rf, payload(rf, "attempts", `1.0`)), detail: "attempts"},
		{name: "a fetch payload in a replicate frame", fields: frame(cr, payload(envelope.EventContentFetch)), detail: "does not match the frame's content_replicate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := envelope.FromWire(tc.fields)
			if !errors.Is(err, envelope.ErrMalformedFrame) || m != nil {
				t.Fatalf("FromWire = %v, %v; want nil, ErrMalformedFrame", m, err)
			}
			if !strings.Contains(err.Error(), tc.detail) {
				t.Errorf("error %q does not mention %q", err, tc.detail)
			}
		})
	}
}

func TestDecodeReplicateCommand(t *testing.T) {
	tests := []struct {
		name    string
		fields  map[string]string
		want    *envelope.ContentReplicate
		wantErr error
	}{
		{name: "a command", fields: repFrame(), want: replicate()},
		{
			name:   "a command with object_options",
			fields: repFrame("object_options", `{"storage_class":"ARCHIVE"}`),
			want: replicate(func(c *envelope.ContentReplicate) {
				c.ObjectOptions = map[string]any{"storage_class": "ARCHIVE"}
			}),
		},
		{
			// Refused later, with a fact: an empty alias resolves to nothing.
			name:   "empty strings decode",
			fields: repFrame("credentials_alias", `""`, "provider", `""`, "destination", `""`),
			want: replicate(func(c *envelope.ContentReplicate) {
				c.CredentialsAlias, c.Provider, c.Destination = "", "", ""
			}),
		},
		{
			name:    "a fetch command is foreign",
			fields:  cmdFrame(),
			wantErr: envelope.ErrForeignPayload,
		},
		{
			name:    "a replication_complete fact is foreign",
			fields:  frame(envelope.EventReplicationComplete, payload(envelope.EventReplicationComplete)),
			wantErr: envelope.ErrForeignPayload,
		},
		{
			name:    "a replication_failed fact is foreign",
			fields:  frame(envelope.EventReplicationFailed, payload(envelope.EventReplicationFailed)),
			wantErr: envelope.ErrForeignPayload,
		},
		{
			name:    "a foreign payload of an unknown version is still foreign",
			fields:  frame(envelope.EventReplicationFailed, payload(envelope.EventReplicationFailed, "schema_version", `2`)),
			wantErr: envelope.ErrForeignPayload,
		},
		{
			name:    "an unsupported version returns what its fact needs",
			fields:  repFrame("schema_version", `2`, "object_options", `["v2 options are a list"]`, "destination", `{"key":"x"}`, "blob_uri", ""),
			want:    &envelope.ContentReplicate{SchemaVersion: 2, OccurredAt: utc("2026-11-29T23:18:58.123456Z"), CommandID: "rep-1", MediaType: "application/pdf", Provider: "gcs", CredentialsAlias: "primary", InfoItemRepSpecID: "iirs-1", SourceRevisionID: "rev-1", InfoSourceID: "isrc-1"},
			wantErr: envelope.ErrUnsupportedVersion,
		},
		{
			name: "the frame's version when the payload has none",
			fields: func() map[string]string {
				f := repFrame("schema_version", "")
				f["schema_version"] = "7"
				return f
			}(),
			want:    replicate(func(c *envelope.ContentReplicate) { c.SchemaVersion = 7 }),
			wantErr: envelope.ErrUnsupportedVersion,
		},
		{name: "malformed", fields: repFrame("command_id", ""), wantErr: envelope.ErrMalformedFrame},
		{name: "empty", fields: map[string]string{}, wantErr: envelope.ErrMalformedFrame},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := envelope.DecodeReplicateCommand(tc.fields)
			if tc.wantErr == nil && err != nil {
				t.Fatalf("DecodeReplicateCommand: %v", err)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("DecodeReplicateCommand error = %v, want %v", err, tc.wantErr)
			}
			if errors.Is(tc.wantErr, envelope.ErrForeignPayload) && errors.Is(err, envelope.ErrUnsupportedVersion) {
				t.Errorf("a foreign payload reported as unsupported: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("DecodeReplicateCommand mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// The reason tokens are the wire's; pinned so a rename cannot slip through.
func TestReplicateReasonTokens(t *testing.T) {
	got := []envelope.ReplicateReason{
		envelope.ReplicateReasonAliasUnknown,
		envelope.ReplicateReasonProviderDisabled,
		envelope.ReplicateReasonInvalidDestination,
		envelope.ReplicateReasonInvalidSource,
		envelope.ReplicateReasonBlobExpired,
		envelope.ReplicateReasonDestinationConflict,
		envelope.ReplicateReasonUnsupportedSchemaVersion,
		envelope.ReplicateReasonHandlerError,
	}
	want := []envelope.ReplicateReason{
		"alias_unknown", "provider_disabled", "invalid_destination", "invalid_source",
		"blob_expired", "destination_conflict", "unsupported_schema_version", "handler_error",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tokens (-want +got):\n%s", diff)
	}
}
