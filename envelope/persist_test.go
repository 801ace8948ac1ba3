package envelope_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/replicator-go/replicator/envelope"
)

// The persist models' base payloads, for payload() and the fuzz seeds.
func init() {
	baseMembers[envelope.EventContentPersist] = []member{
		{"schema_version", `1`},
		{"event_type", `"content_persist"`},
		{"occurred_at", `"2026-11-29T23:18:58.123456Z"`},
		{"command_id", `"per-1"`},
		{"content_fingerprint", `"` + fp + `"`},
		{"blob_uri", `"file:///blobs/` + fp[:2] + `/` + fp[2:4] + `/` + fp + `.bin"`},
		{"media_type", `"application/pdf"`},
	}
	baseMembers[envelope.EventBlobPersisted] = []member{
		{"schema_version", `1`},
		{"event_type", `"blob_persisted"`},
		{"occurred_at", `"2026-11-29T23:18:58.123456Z"`},
		{"command_id", `"per-1"`},
		{"content_fingerprint", `"` + fp + `"`},
		{"size_bytes", `42`},
	}
	baseMembers[envelope.EventPersistFailed] = []member{
		{"schema_version", `1`},
		{"event_type", `"persist_failed"`},
		{"occurred_at", `"2026-11-29T23:18:58.123456Z"`},
		{"command_id", `"per-1"`},
		{"content_fingerprint", `"` + fp + `"`},
		{"reason", `"blob_expired"`},
		{"terminal", `true`},
		{"detail", `null`},
	}
}

// persistCmd is the model of payload(EventContentPersist), adjusted by edits.
func persistCmd(edits ...func(*envelope.ContentPersist)) *envelope.ContentPersist {
	c := &envelope.ContentPersist{
		SchemaVersion:      1,
		OccurredAt:         utc("2026-11-29T23:18:58.123456Z"),
		CommandID:          "per-1",
		ContentFingerprint: fp,
		BlobURI:            "file:///blobs/" + fp[:2] + "/" + fp[2:4] + "/" + fp + ".bin",
		MediaType:          "application/pdf",
	}
	for _, e := range edits {
		e(c)
	}
	return c
}

func perFrame(edits ...string) map[string]string {
	return frame(envelope.EventContentPersist, payload(envelope.EventContentPersist, edits...))
}

func TestPersistToWire(t *testing.T) {
	at := time.Date(2026, 11, 30, 1, 18, 58, 123456999, time.FixedZone("", 2*3600))
	tests := []struct {
		name        string
		model       envelope.Model
		wantKey     string
		wantPayload string
	}{
		{
			name: "content_persist",
			model: &envelope.ContentPersist{
				OccurredAt: at, CommandID: "per-9", ContentFingerprint: fp,
				BlobURI: "gs://temp/blobs/" + fp + ".bin", MediaType: "text/html",
			},
			wantKey: "per-9",
			wantPayload: `{"schema_version":1,"event_type":"content_persist","occurred_at":"2026-11-29T23:18:58.123456Z",` +
				`"command_id":"per-9","content_fingerprint":"` + fp + `","blob_uri":"gs://temp/blobs/` + fp + `.bin",` +
				`"media_type":"text/html"}`,
		},
		{
			name:    "blob_persisted",
			model:   &envelope.BlobPersisted{OccurredAt: at, CommandID: "per-9", ContentFingerprint: fp, SizeBytes: 1 << 40},
			wantKey: "per-9:2026-11-29T23:18:58.123456Z",
			wantPayload: `{"schema_version":1,"event_type":"blob_persisted","occurred_at":"2026-11-29T23:18:58.123456Z",` +
				`"command_id":"per-9","content_fingerprint":"` + fp + `","size_bytes":1099511627776}`,
		},
		{
			name: "persist_failed",
			model: &envelope.PersistFailed{
				OccurredAt: at, CommandID: "per-9", ContentFingerprint: "NOT-A-DIGEST",
				Reason: envelope.PersistReasonInvalidSource, Terminal: true,
			},
			wantKey: "per-9:2026-11-29T23:18:58.123456Z",
			wantPayload: `{"schema_version":1,"event_type":"persist_failed","occurred_at":"2026-11-29T23:18:58.123456Z",` +
				`"command_id":"per-9","content_fingerprint":"NOT-A-DIGEST","reason":"invalid_source","terminal":true,"detail":null}`,
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

func TestDecodePersistCommand(t *testing.T) {
	tests := []struct {
		name    string
		fields  map[string]string
		want    *envelope.ContentPersist
		wantErr error
	}{
		{name: "a command", fields: perFrame(), want: persistCmd()},
		{
			// Refused later with a fact that echoes it: invalid_source.
			name:   "a malformed fingerprint decodes",
			fields: perFrame("content_fingerprint", `"NOT-A-DIGEST"`),
			want:   persistCmd(func(c *envelope.ContentPersist) { c.ContentFingerprint = "NOT-A-DIGEST" }),
		},
		{
			name:   "empty strings decode",
			fields: perFrame("blob_uri", `""`, "media_type", `""`),
			want:   persistCmd(func(c *envelope.ContentPersist) { c.BlobURI, c.MediaType = "", "" }),
		},
		{
			name:   "unknown members are ignored, the last duplicate wins",
			fields: perFrame("destination", `"x"`, "command_id", `"per-2"`),
			want:   persistCmd(func(c *envelope.ContentPersist) { c.CommandID = "per-2" }),
		},
		{name: "a fetch command is foreign", fields: cmdFrame(), wantErr: envelope.ErrForeignPayload},
		{name: "a replicate command is foreign", fields: repFrame(), wantErr: envelope.ErrForeignPayload},
		{
			name:    "a blob_persisted fact is foreign",
			fields:  frame(envelope.EventBlobPersisted, payload(envelope.EventBlobPersisted)),
			wantErr: envelope.ErrForeignPayload,
		},
		{
			name:    "a persist_failed fact is foreign",
			fields:  frame(envelope.EventPersistFailed, payload(envelope.EventPersistFailed)),
			wantErr: envelope.ErrForeignPayload,
		},
		{
			name:    "a foreign payload of an unknown version is still foreign",
			fields:  frame(envelope.EventBlobPersisted, payload(envelope.EventBlobPersisted, "schema_version", `2`)),
			wantErr: envelope.ErrForeignPayload,
		},
		{
			name:   "an unsupported version returns what its fact needs",
			fields: perFrame("schema_version", `2`, "blob_uri", `{"v2":"an object"}`, "media_type", ""),
			want: &envelope.ContentPersist{SchemaVersion: 2, OccurredAt: utc("2026-11-29T23:18:58.123456Z"),
				CommandID: "per-1", ContentFingerprint: fp},
			wantErr: envelope.ErrUnsupportedVersion,
		},
		{
			name: "the frame's version when the payload has none",
			fields: func() map[string]string {
				f := perFrame("schema_version", "")
				f["schema_version"] = "7"
				return f
			}(),
			want:    persistCmd(func(c *envelope.ContentPersist) { c.SchemaVersion = 7 }),
			wantErr: envelope.ErrUnsupportedVersion,
		},
		{name: "no command_id", fields: perFrame("command_id", ""), wantErr: envelope.ErrMalformedFrame},
		{name: "no content_fingerprint", fields: perFrame("content_fingerprint", ""), wantErr: envelope.ErrMalformedFrame},
		{name: "no blob_uri", fields: perFrame("blob_uri", ""), wantErr: envelope.ErrMalformedFrame},
		{name: "no media_type", fields: perFrame("media_type", ""), wantErr: envelope.ErrMalformedFrame},
		{name: "a null media_type", fields: perFrame("media_type", "null"), wantErr: envelope.ErrMalformedFrame},
		{name: "a number for a string", fields: perFrame("content_fingerprint", "7"), wantErr: envelope.ErrMalformedFrame},
		{name: "a naive time", fields: perFrame("occurred_at", `"2026-11-29T23:18:58"`), wantErr: envelope.ErrMalformedFrame},
		{name: "no event_type in the payload", fields: perFrame("event_type", ""), wantErr: envelope.ErrMalformedFrame},
		{
			name:    "a payload of another event_type",
			fields:  frame(envelope.EventContentPersist, payload(envelope.EventContentReplicate)),
			wantErr: envelope.ErrMalformedFrame,
		},
		{name: "empty", fields: map[string]string{}, wantErr: envelope.ErrMalformedFrame},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := envelope.DecodePersistCommand(tc.fields)
			if tc.wantErr == nil && err != nil {
				t.Fatalf("DecodePersistCommand: %v", err)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("DecodePersistCommand error = %v, want %v", err, tc.wantErr)
			}
			if errors.Is(tc.wantErr, envelope.ErrForeignPayload) && errors.Is(err, envelope.ErrUnsupportedVersion) {
				t.Errorf("a foreign payload reported as unsupported: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("DecodePersistCommand mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// The other command decoders refuse a persist command as foreign.
func TestPersistCommandIsForeignElsewhere(t *testing.T) {
	if _, err := envelope.DecodeCommand(perFrame()); !errors.Is(err, envelope.ErrForeignPayload) {
		t.Errorf("DecodeCommand: %v, want ErrForeignPayload", err)
	}
	if _, err := envelope.DecodeReplicateCommand(perFrame()); !errors.Is(err, envelope.ErrForeignPayload) {
		t.Errorf("DecodeReplicateCommand: %v, want ErrForeignPayload", err)
	}
}

func TestPersistFactsFromWire(t *testing.T) {
	tests := []struct {
		name    string
		fields  map[string]string
		want    envelope.Model
		wantErr error
	}{
		{
			name:   "blob_persisted",
			fields: frame(envelope.EventBlobPersisted, payload(envelope.EventBlobPersisted)),
			want: &envelope.BlobPersisted{SchemaVersion: 1, OccurredAt: utc("2026-11-29T23:18:58.123456Z"),
				CommandID: "per-1", ContentFingerprint: fp, SizeBytes: 42},
		},
		{
			name:    "blob_persisted without size_bytes",
			fields:  frame(envelope.EventBlobPersisted, payload(envelope.EventBlobPersisted, "size_bytes", "")),
			wantErr: envelope.ErrMalformedFrame,
		},
		{
			name:    "blob_persisted with a fractional size",
			fields:  frame(envelope.EventBlobPersisted, payload(envelope.EventBlobPersisted, "size_bytes", "4.5")),
			wantErr: envelope.ErrMalformedFrame,
		},
		{
			name: "persist_failed with a detail and a token this codec does not know",
			fields: frame(envelope.EventPersistFailed, payload(envelope.EventPersistFailed,
				"reason", `"brand_new_reason"`, "detail", `"swept"`)),
			want: &envelope.PersistFailed{SchemaVersion: 1, OccurredAt: utc("2026-11-29T23:18:58.123456Z"),
				CommandID: "per-1", ContentFingerprint: fp, Reason: "brand_new_reason", Terminal: true,
				Detail: new("swept")},
		},
		{
			name:   "persist_failed with no detail member",
			fields: frame(envelope.EventPersistFailed, payload(envelope.EventPersistFailed, "detail", "")),
			want: &envelope.PersistFailed{SchemaVersion: 1, OccurredAt: utc("2026-11-29T23:18:58.123456Z"),
				CommandID: "per-1", ContentFingerprint: fp, Reason: envelope.PersistReasonBlobExpired, Terminal: true},
		},
		{
			name:    "persist_failed without terminal",
			fields:  frame(envelope.EventPersistFailed, payload(envelope.EventPersistFailed, "terminal", "")),
			wantErr: envelope.ErrMalformedFrame,
		},
		{
			name:    "persist_failed with a string terminal",
			fields:  frame(envelope.EventPersistFailed, payload(envelope.EventPersistFailed, "terminal", `"true"`)),
			wantErr: envelope.ErrMalformedFrame,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := envelope.FromWire(tc.fields)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("FromWire error = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil {
				if got != nil {
					t.Fatalf("a model with an error: %#v", got)
				}
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("FromWire mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStampPersistFacts(t *testing.T) {
	at := utc("2026-12-01T00:00:00Z")
	ok := &envelope.BlobPersisted{}
	failed := &envelope.PersistFailed{}
	cmd := &envelope.ContentPersist{}
	for _, m := range []envelope.Model{ok, failed, cmd} {
		envelope.Stamp(m, at)
	}
	if !ok.OccurredAt.Equal(at) || !failed.OccurredAt.Equal(at) {
		t.Errorf("facts not stamped: %v %v", ok.OccurredAt, failed.OccurredAt)
	}
	if !cmd.OccurredAt.IsZero() {
		t.Errorf("a command was stamped: %v", cmd.OccurredAt)
	}
}

// The reason tokens are the wire's; pinned so a rename cannot slip through.
func TestPersistReasonTokens(t *testing.T) {
	got := []envelope.PersistReason{
		envelope.PersistReasonInvalidSource,
		envelope.PersistReasonBlobExpired,
		envelope.PersistReasonSourceCorrupt,
		envelope.PersistReasonStoreRefused,
		envelope.PersistReasonUnsupportedSchemaVersion,
		envelope.PersistReasonHandlerError,
	}
	want := []envelope.PersistReason{
		"invalid_source", "blob_expired", "source_corrupt", "store_refused",
		"unsupported_schema_version", "handler_error",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tokens (-want +got):\n%s", diff)
	}
}

// persistGoldens are the project's persist frames (testdata/project), kept
// beside the other goldens and regenerated the same way (-update).
var persistGoldens = []struct {
	file  string
	model envelope.Model
}{
	{"content_persist", &envelope.ContentPersist{
		SchemaVersion:      1,
		OccurredAt:         utc("2026-11-29T23:21:00.123456Z"),
		CommandID:          "01JQ8Z3K4M5N6P7Q8R9S0T1V2Y",
		ContentFingerprint: fpE,
		BlobURI:            "gs://co-gcs-blobs/blobs/" + fpE + ".bin",
		MediaType:          "application/pdf",
	}},
	{"blob_persisted", &envelope.BlobPersisted{
		SchemaVersion:      1,
		OccurredAt:         utc("2026-11-29T23:21:01.5Z"),
		CommandID:          "01JQ8Z3K4M5N6P7Q8R9S0T1V2Y",
		ContentFingerprint: fpE,
		SizeBytes:          18,
	}},
	{"persist_failed", &envelope.PersistFailed{
		SchemaVersion:      1,
		OccurredAt:         utc("2026-11-29T23:21:02Z"),
		CommandID:          "per-2",
		ContentFingerprint: fpE,
		Reason:             envelope.PersistReasonSourceCorrupt,
		Terminal:           true,
		Detail:             new("the stored bytes do not hash to their fingerprint"),
	}},
	{"persist_failed_nulls", &envelope.PersistFailed{
		SchemaVersion:      1,
		OccurredAt:         utc("2026-11-29T23:21:03.000001Z"),
		CommandID:          "per-3",
		ContentFingerprint: "not-a-digest",
		Reason:             envelope.PersistReasonInvalidSource,
		Terminal:           true,
	}},
}

func TestPersistGoldens(t *testing.T) {
	for _, tc := range persistGoldens {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("testdata", "project", tc.file+".json")
			wire, err := envelope.ToWire(tc.model)
			if err != nil {
				t.Fatalf("ToWire: %v", err)
			}
			if *update {
				if err := os.WriteFile(path, renderFrame(t, wire), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(renderFrame(t, wire)), string(data)); diff != "" {
				t.Errorf("ToWire differs from the golden file (-got +golden); run with -update if intended:\n%s", diff)
			}
			m, err := envelope.FromWire(readFrame(t, path))
			if err != nil {
				t.Fatalf("FromWire: %v", err)
			}
			if diff := cmp.Diff(tc.model, m); diff != "" {
				t.Errorf("FromWire mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzDecodePersistCommand feeds DecodePersistCommand frames built from
// three fields (an empty string leaves the field out). It must never panic;
// every error wraps a sentinel; a command it accepts must agree, member by
// member, with what encoding/json reads from the same payload, and must
// round-trip through ToWire.
func FuzzDecodePersistCommand(f *testing.F) {
	cp := envelope.EventContentPersist
	// The goldens of every model: all but content_persist are foreign.
	goldens, _ := filepath.Glob(filepath.Join("testdata", "*", "*.json"))
	for _, path := range goldens {
		fields := readFrame(f, path)
		f.Add(fields["event_type"], fields["payload"], fields["schema_version"])
	}
	f.Add(cp, payload(cp), "1")
	// A malformed digest, a stranger's URI, traversal, escapes.
	f.Add(cp, payload(cp, "content_fingerprint", `"NOT-A-DIGEST"`), "1")
	f.Add(cp, payload(cp, "blob_uri", `"file:///etc/passwd"`), "1")
	f.Add(cp, payload(cp, "blob_uri", `"file:///blobs/../../`+fp+`.bin"`), "1")
	f.Add(cp, payload(cp, "media_type", `"text/html; charset=\u00e4\ud800\n"`), "1")
	f.Add(cp, payload(cp, "command_id", `"a","command_id":"b"`), "1")
	// Wrong types, missing and null members.
	f.Add(cp, payload(cp, "size_bytes", `1e400`), "1")
	f.Add(cp, payload(cp, "media_type", `null`), "1")
	f.Add(cp, payload(cp, "content_fingerprint", `["x"]`), "1")
	f.Add(cp, payload(cp, "blob_uri", ``), "1")
	// Versions: unsupported in the payload, in the frame, clamped.
	f.Add(cp, payload(cp, "schema_version", "2", "blob_uri", "7"), "2")
	f.Add(cp, payload(cp, "schema_version", ""), "3")
	f.Add(cp, payload(cp, "schema_version", "99999999999999999999"), "1")
	f.Add(cp, payload(cp, "schema_version", "1.0"), "1")
	// A case-folded member name encoding/json would match to a field.
	f.Add(cp, payload(cp, "Command_ID", `"folded"`), "1")
	f.Add(cp, "{", "1")
	f.Add(cp, payload(envelope.EventBlobPersisted), "1")

	f.Fuzz(func(t *testing.T, eventType, payload, schemaVersion string) {
		fields := map[string]string{}
		for name, v := range map[string]string{
			"event_type": eventType, "payload": payload, "schema_version": schemaVersion,
		} {
			if v != "" {
				fields[name] = v
			}
		}
		cmd, err := envelope.DecodePersistCommand(fields)
		switch {
		case errors.Is(err, envelope.ErrForeignPayload):
			if cmd != nil {
				t.Fatalf("a foreign payload with a command: %v", err)
			}
			if eventType == envelope.EventContentPersist {
				t.Fatalf("a content_persist frame reported foreign: %v", err)
			}
			return
		case errors.Is(err, envelope.ErrUnsupportedVersion):
			if cmd == nil {
				t.Fatalf("unsupported version without a partial command: %v", err)
			}
			if cmd.SchemaVersion == envelope.SchemaVersion {
				t.Fatalf("unsupported version %d", cmd.SchemaVersion)
			}
			return
		case err != nil:
			if !errors.Is(err, envelope.ErrMalformedFrame) || cmd != nil {
				t.Fatalf("error %v with command %v", err, cmd)
			}
			return
		}
		if cmd == nil {
			t.Fatal("nil command with a nil error")
		}
		// The differential: encoding/json reads the same members, exactly
		// named (a map, not a struct: encoding/json folds a struct's member
		// names), the last duplicate winning.
		var members map[string]json.RawMessage
		if err := json.Unmarshal([]byte(payload), &members); err != nil {
			t.Fatalf("accepted a payload encoding/json refuses: %v\n%q", err, payload)
		}
		for name, got := range map[string]string{
			"command_id": cmd.CommandID, "content_fingerprint": cmd.ContentFingerprint,
			"blob_uri": cmd.BlobURI, "media_type": cmd.MediaType, "event_type": envelope.EventContentPersist,
		} {
			var want string
			if err := json.Unmarshal(members[name], &want); err != nil {
				t.Fatalf("%s: encoding/json cannot read as a string what the codec accepted: %v", name, err)
			}
			if want != got {
				t.Fatalf("%s: codec %q, encoding/json %q", name, got, want)
			}
		}
		wire, err := envelope.ToWire(cmd)
		if err != nil {
			t.Fatalf("ToWire of an accepted command: %v", err)
		}
		again, err := envelope.DecodePersistCommand(wire)
		if err != nil {
			t.Fatalf("DecodePersistCommand(ToWire(cmd)): %v\npayload: %s", err, wire["payload"])
		}
		if diff := cmp.Diff(cmd, again); diff != "" {
			t.Fatalf("round trip mismatch (-first +second):\n%s", diff)
		}
	})
}
