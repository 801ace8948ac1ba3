package envelope_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/replicator-go/replicator/envelope"
)

var update = flag.Bool("update", false, "rewrite testdata/project goldens from the models in golden_test.go")

const (
	cid = "01JQ8Z3K4M5N6P7Q8R9S0T1V2W"
	fp  = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

	// The ids a replicate command carries and both its facts echo.
	repSpec  = "01JQ0000000000000000000002"
	revision = "01JQ0000000000000000000003"
)

var fpE = strings.Repeat("e", 64)

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func ptrTime(s string) *time.Time { return new(utc(s)) }

// pythonGoldens are frames in the co-core shape and the models they must
// decode to. samePayload marks those whose payload this package writes byte
// for byte too (pydantic drops a zero fraction; this package never does).
var pythonGoldens = []struct {
	file        string
	want        envelope.Model
	samePayload bool
}{
	{
		file: "content_fetch_headers_timeout",
		want: &envelope.ContentFetch{
			SchemaVersion: 1,
			OccurredAt:    utc("2026-11-29T23:18:58.123456Z"),
			CommandID:     cid,
			URL:           "https://example.test/a?b=1&c=2",
			InfoSourceID:  "isrc-01JQ8Z",
			Headers: map[string]string{
				"accept":        "text/html",
				"if-none-match": `"v1-abc"`,
				"user-agent":    "Watcher/1.0 (+https://example.test/bot)",
			},
			TimeoutSeconds: new(45.0),
		},
		samePayload: true,
	},
	{
		file: "content_fetch_nulls",
		want: &envelope.ContentFetch{
			SchemaVersion: 1,
			OccurredAt:    utc("2026-11-30T00:00:01.000500Z"),
			CommandID:     "cmd-2",
			URL:           "https://example.test/b",
			InfoSourceID:  "isrc-01JQ8Z",
		},
		samePayload: true,
	},
	{
		file: "blob_available",
		want: &envelope.BlobAvailable{
			SchemaVersion:      1,
			OccurredAt:         utc("2026-11-29T23:19:00.654321Z"),
			ContentFingerprint: fp,
			BlobURI:            "gs://co-blobs/blobs/" + fp + ".bin",
			SizeBytes:          18,
			MediaType:          "text/html",
			URL:                "https://example.test/a?b=1&c=2",
			CommandID:          cid,
			InfoSourceID:       "isrc-01JQ8Z",
			FinalURL:           new("https://example.test/a/landing"),
			StatusCode:         new(200),
			FetchedAt:          ptrTime("2026-11-29T23:18:59.987654Z"),
			ContentTypeRaw:     new("text/html; charset=utf-8"),
			ETag:               new(`W/"v1-abc"`),
			LastModified:       new("Sun, 29 Nov 2026 20:00:00 GMT"),
			BlobExpiresAt:      ptrTime("2026-12-06T23:18:59.900001Z"),
		},
		samePayload: true,
	},
	{
		file: "blob_available_nulls",
		want: &envelope.BlobAvailable{
			SchemaVersion:      1,
			OccurredAt:         utc("2026-11-29T23:19:01.000001Z"),
			ContentFingerprint: fp,
			BlobURI:            "file:///var/lib/replicator/blobs/9f/86/" + fp + ".bin",
			MediaType:          "application/octet-stream",
			URL:                "https://example.test/c",
			CommandID:          "cmd-3",
			InfoSourceID:       "isrc-01JQ8Z",
		},
		samePayload: true,
	},
	{
		file: "fetch_failed",
		want: &envelope.FetchFailed{
			SchemaVersion: 1,
			OccurredAt:    utc("2026-11-29T23:19:02.1Z"),
			CommandID:     "cmd-4",
			URL:           "https://example.test/missing",
			InfoSourceID:  "isrc-01JQ8Z",
			Reason:        envelope.ReasonHTTPStatus,
			Terminal:      true,
			StatusCode:    new(404),
			Detail:        new("origin answered 404"),
		},
		samePayload: true,
	},
	{
		file: "fetch_failed_whole_second",
		want: &envelope.FetchFailed{
			SchemaVersion: 1,
			OccurredAt:    utc("2026-11-29T23:19:03Z"),
			CommandID:     "cmd-5",
			URL:           "https://example.test/buggy",
			InfoSourceID:  "isrc-01JQ8Z",
			Reason:        envelope.ReasonHandlerError,
			Terminal:      true,
			Attempts:      new(5),
		},
	},
	{
		file: "fetch_policy_state",
		want: &envelope.FetchPolicyState{
			SchemaVersion:      1,
			OccurredAt:         utc("2026-11-29T22:00:00.000001Z"),
			Host:               "example.test",
			MinIntervalSeconds: new(2.5),
		},
		samePayload: true,
	},
	{
		file: "fetch_policy_state_revoked",
		want: &envelope.FetchPolicyState{
			SchemaVersion: 1,
			OccurredAt:    utc("2026-11-29T22:00:00.000002Z"),
			Host:          "slow.example.test",
			Revoked:       true,
		},
		samePayload: true,
	},
	{
		file: "content_replicate",
		want: &envelope.ContentReplicate{
			SchemaVersion:     1,
			OccurredAt:        utc("2026-11-29T23:20:00.123456Z"),
			CommandID:         "01JQ8Z3K4M5N6P7Q8R9S0T1V2X",
			BlobURI:           "file:///var/lib/replicator/blobs/ee/ee/" + fpE + ".bin",
			MediaType:         "text/html",
			Provider:          "gcs",
			CredentialsAlias:  "gcs-cannobserv-prod",
			Destination:       "archive/wa-lcb/" + fpE + ".html",
			ObjectOptions:     map[string]any{"storage_class": "STANDARD"},
			InfoItemRepSpecID: repSpec,
			SourceRevisionID:  revision,
			InfoSourceID:      "isrc-01JQ8Z",
		},
		samePayload: true,
	},
	{
		// Python keeps a dict's insertion order; this package sorts.
		file: "content_replicate_options_order",
		want: &envelope.ContentReplicate{
			SchemaVersion:    1,
			OccurredAt:       utc("2026-11-29T23:20:01.000001Z"),
			CommandID:        "rep-2",
			BlobURI:          "file:///var/lib/replicator/blobs/ee/ee/" + fpE + ".bin",
			MediaType:        "application/pdf",
			Provider:         "gcs",
			CredentialsAlias: "gcs-cannobserv-prod",
			Destination:      "reports/2026/Q4 (final) [v2].pdf",
			ObjectOptions: map[string]any{
				"storage_class":       "ARCHIVE",
				"cache_control":       "public, max-age=3600",
				"content_disposition": "inline",
				"folder_id":           "not-for-gcs",
			},
			InfoItemRepSpecID: repSpec,
			SourceRevisionID:  revision,
			InfoSourceID:      "isrc-01JQ8Z",
		},
	},
	{
		file: "content_replicate_nulls",
		want: &envelope.ContentReplicate{
			SchemaVersion:     1,
			OccurredAt:        utc("2026-08-13T00:00:00Z"),
			CommandID:         "rep-1",
			BlobURI:           "file:///var/lib/replicator/blobs/ee/ee/" + fpE + ".bin",
			MediaType:         "application/pdf",
			Provider:          "gcs",
			CredentialsAlias:  "primary",
			Destination:       "reports/2026/abcd.pdf",
			InfoItemRepSpecID: repSpec,
			SourceRevisionID:  revision,
			InfoSourceID:      "isrc-01JQ8Z",
		},
	},
	{
		file: "replication_complete",
		want: &envelope.ReplicationComplete{
			SchemaVersion:     1,
			OccurredAt:        utc("2026-11-29T23:20:02.5Z"),
			CommandID:         "cmd-rc",
			PublicURL:         "https://storage.googleapis.com/co-archive/archive/wa-lcb/x.html",
			InfoItemRepSpecID: repSpec,
			SourceRevisionID:  revision,
			InfoSourceID:      "isrc-01JQ8Z",
		},
		samePayload: true,
	},
	{
		file: "replication_failed",
		want: &envelope.ReplicationFailed{
			SchemaVersion:     1,
			OccurredAt:        utc("2026-11-29T23:20:03.0001Z"),
			CommandID:         "cmd-rf",
			InfoItemRepSpecID: repSpec,
			SourceRevisionID:  revision,
			InfoSourceID:      "isrc-01JQ8Z",
			Reason:            envelope.ReplicateReasonBlobExpired,
			Terminal:          true,
			Detail:            new("the blob for this command is no longer stored"),
		},
		samePayload: true,
	},
	{
		file: "replication_failed_handler_error",
		want: &envelope.ReplicationFailed{
			SchemaVersion:     1,
			OccurredAt:        utc("2026-11-29T23:20:04Z"),
			CommandID:         "cmd-rh",
			InfoItemRepSpecID: repSpec,
			SourceRevisionID:  revision,
			InfoSourceID:      "isrc-01JQ8Z",
			Reason:            envelope.ReplicateReasonHandlerError,
			Terminal:          true,
			Attempts:          new(5),
			Detail:            new("ValueError: the provider reported wrote with no public_url"),
		},
	},
}

// projectGoldens are the models behind testdata/project.
var projectGoldens = []struct {
	file  string
	model envelope.Model
}{
	{"content_fetch", &envelope.ContentFetch{
		SchemaVersion: 1,
		OccurredAt:    utc("2026-11-29T23:18:58.123456Z"),
		CommandID:     cid,
		URL:           "https://example.test/a?b=1&c=2",
		InfoSourceID:  "isrc-01JQ8Z",
		Headers: map[string]string{
			"user-agent":    "Watcher/1.0 (+https://example.test/bot)",
			"if-none-match": `"v1-abc"`,
			"accept":        "text/html",
		},
		TimeoutSeconds: new(45.0),
	}},
	{"content_fetch_nulls", &envelope.ContentFetch{
		SchemaVersion: 1,
		OccurredAt:    utc("2026-11-30T00:00:00Z"),
		CommandID:     "cmd-2",
		URL:           "https://example.test/b",
		InfoSourceID:  "isrc-01JQ8Z",
	}},
	{"content_fetch_empty_headers", &envelope.ContentFetch{
		SchemaVersion:  1,
		OccurredAt:     utc("2026-11-30T00:00:00.5Z"),
		CommandID:      "cmd-empty",
		URL:            "https://example.test/e",
		InfoSourceID:   "isrc-01JQ8Z",
		Headers:        map[string]string{},
		TimeoutSeconds: new(0.25),
	}},
	{"content_fetch_text", &envelope.ContentFetch{
		SchemaVersion: 1,
		OccurredAt:    utc("2026-11-30T00:00:00.000001Z"),
		CommandID:     "cmd-\"quoted\"\\",
		URL:           "https://bücher.example.test/ä?q=<a>&b=\u2028",
		InfoSourceID:  "isrc\t\n\x01\x7f😀",
		Headers:       map[string]string{"accept-language": "de-CH, fr;q=0.5"},
	}},
	{"blob_available", &envelope.BlobAvailable{
		SchemaVersion:      1,
		OccurredAt:         utc("2026-11-29T23:19:00.654321Z"),
		ContentFingerprint: fp,
		BlobURI:            "gs://co-blobs/blobs/" + fp + ".bin",
		SizeBytes:          67108864,
		MediaType:          "text/html",
		URL:                "https://example.test/a?b=1&c=2",
		CommandID:          cid,
		InfoSourceID:       "isrc-01JQ8Z",
		FinalURL:           new("https://example.test/a/landing"),
		StatusCode:         new(203),
		FetchedAt:          ptrTime("2026-11-29T23:18:59.987654Z"),
		ContentTypeRaw:     new("text/html; charset=utf-8"),
		ETag:               new(`W/"v1-abc"`),
		LastModified:       new("Sun, 29 Nov 2026 20:00:00 GMT"),
		BlobExpiresAt:      ptrTime("2026-12-06T23:18:59.900001Z"),
	}},
	{"blob_available_nulls", &envelope.BlobAvailable{
		SchemaVersion:      1,
		OccurredAt:         utc("2026-11-29T23:19:01.000001Z"),
		ContentFingerprint: fp,
		BlobURI:            "file:///var/lib/replicator/blobs/9f/86/" + fp + ".bin",
		MediaType:          "application/octet-stream",
		URL:                "https://example.test/c",
		CommandID:          "cmd-3",
		InfoSourceID:       "isrc-01JQ8Z",
	}},
	{"fetch_failed", &envelope.FetchFailed{
		SchemaVersion: 1,
		OccurredAt:    utc("2026-11-29T23:19:02.1Z"),
		CommandID:     "cmd-4",
		URL:           "https://example.test/missing",
		InfoSourceID:  "isrc-01JQ8Z",
		Reason:        envelope.ReasonHTTPStatus,
		Terminal:      true,
		StatusCode:    new(404),
		Detail:        new("origin answered 404"),
	}},
	{"fetch_failed_attempts", &envelope.FetchFailed{
		SchemaVersion: 1,
		OccurredAt:    utc("2026-11-29T23:19:03Z"),
		CommandID:     "cmd-5",
		URL:           "https://example.test/buggy",
		InfoSourceID:  "isrc-01JQ8Z",
		Reason:        envelope.ReasonHandlerError,
		Terminal:      true,
		Attempts:      new(5),
	}},
	{"fetch_policy_state", &envelope.FetchPolicyState{
		SchemaVersion:      1,
		OccurredAt:         utc("2026-11-29T22:00:00.000001Z"),
		Host:               "example.test",
		MinIntervalSeconds: new(0.0),
	}},
	{"fetch_policy_state_revoked", &envelope.FetchPolicyState{
		SchemaVersion: 1,
		OccurredAt:    utc("2026-11-29T22:00:00.000002Z"),
		Host:          "slow.example.test",
		Revoked:       true,
	}},
	{"content_replicate", &envelope.ContentReplicate{
		SchemaVersion:    1,
		OccurredAt:       utc("2026-11-29T23:20:00.123456Z"),
		CommandID:        cid,
		BlobURI:          "gs://co-blobs/blobs/" + fp + ".bin",
		MediaType:        "application/pdf",
		Provider:         "gcs",
		CredentialsAlias: "gcs-cannobserv-prod",
		Destination:      "organizations/x/2026-11-29/report (final).pdf",
		ObjectOptions: map[string]any{
			"storage_class":       "ARCHIVE",
			"content_disposition": `attachment; filename="report.pdf"`,
			"cache_control":       "public, max-age=3600",
		},
		InfoItemRepSpecID: repSpec,
		SourceRevisionID:  revision,
		InfoSourceID:      "isrc-01JQ8Z",
	}},
	{"content_replicate_nulls", &envelope.ContentReplicate{
		SchemaVersion:     1,
		OccurredAt:        utc("2026-11-30T00:00:00Z"),
		CommandID:         "rep-1",
		BlobURI:           "file:///var/lib/replicator/blobs/9f/86/" + fp + ".bin",
		MediaType:         "text/html",
		Provider:          "gdrive",
		CredentialsAlias:  "drive",
		Destination:       "a.html",
		InfoItemRepSpecID: repSpec,
		SourceRevisionID:  revision,
		InfoSourceID:      "isrc-01JQ8Z",
	}},
	{"content_replicate_options", &envelope.ContentReplicate{
		SchemaVersion:    1,
		OccurredAt:       utc("2026-11-30T00:00:00.000001Z"),
		CommandID:        "rep-3",
		BlobURI:          "gs://co-blobs/blobs/" + fp + ".bin",
		MediaType:        "application/pdf",
		Provider:         "ia",
		CredentialsAlias: "archive",
		Destination:      "item/file.pdf",
		ObjectOptions: map[string]any{
			"collection": "opensource",
			"metadata": map[string]any{
				"subject": []any{"cannabis", "licensing", nil, true},
				"year":    json.Number("2026"),
				"ratio":   json.Number("2.50"),
				"tiny":    json.Number("1e-7"),
				"quoted":  "\"<&>\"\t\u2028ü",
			},
			"empty": map[string]any{},
			"none":  nil,
		},
		InfoItemRepSpecID: repSpec,
		SourceRevisionID:  revision,
		InfoSourceID:      "isrc-01JQ8Z",
	}},
	{"replication_complete", &envelope.ReplicationComplete{
		SchemaVersion:     1,
		OccurredAt:        utc("2026-11-29T23:20:02.5Z"),
		CommandID:         cid,
		PublicURL:         "https://storage.googleapis.com/co-archive/organizations/x/2026-11-29/report%20%28final%29.pdf",
		InfoItemRepSpecID: repSpec,
		SourceRevisionID:  revision,
		InfoSourceID:      "isrc-01JQ8Z",
	}},
	{"replication_failed", &envelope.ReplicationFailed{
		SchemaVersion:     1,
		OccurredAt:        utc("2026-11-29T23:20:03.0001Z"),
		CommandID:         cid,
		InfoItemRepSpecID: repSpec,
		SourceRevisionID:  revision,
		InfoSourceID:      "isrc-01JQ8Z",
		Reason:            envelope.ReplicateReasonDestinationConflict,
		Terminal:          true,
		Detail:            new("the destination already holds different bytes"),
	}},
	{"replication_failed_attempts", &envelope.ReplicationFailed{
		SchemaVersion:     1,
		OccurredAt:        utc("2026-11-29T23:20:04Z"),
		CommandID:         "rep-5",
		InfoItemRepSpecID: repSpec,
		SourceRevisionID:  revision,
		InfoSourceID:      "isrc-01JQ8Z",
		Reason:            envelope.ReplicateReasonHandlerError,
		Terminal:          true,
		Attempts:          new(5),
	}},
}

func readFrame(t testing.TB, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]string
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return fields
}

// renderFrame is the golden file format: the fields as an indented JSON
// object, names sorted, no HTML escaping.
func renderFrame(t testing.TB, fields map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(fields); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestPythonGoldens(t *testing.T) {
	for _, tc := range pythonGoldens {
		t.Run(tc.file, func(t *testing.T) {
			golden := readFrame(t, filepath.Join("testdata", "python", tc.file+".json"))
			got, err := envelope.FromWire(golden)
			if err != nil {
				t.Fatalf("FromWire: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("FromWire mismatch (-want +got):\n%s", diff)
			}
			switch got.EventType() {
			case envelope.EventFetchFailed, envelope.EventReplicationComplete, envelope.EventReplicationFailed:
				// These keys embed the time, which Python spells +00:00.
				id, at, _ := strings.Cut(golden["key"], ":")
				if want := id + ":" + envelope.FormatTime(got.When()); got.Key() != want || at != golden["occurred_at"] {
					t.Errorf("Key() = %q, the frame says %q", got.Key(), golden["key"])
				}
			default:
				if got.Key() != golden["key"] {
					t.Errorf("Key() = %q, the frame says %q", got.Key(), golden["key"])
				}
			}
			if !tc.samePayload {
				return
			}
			wire, err := envelope.ToWire(got)
			if err != nil {
				t.Fatalf("ToWire: %v", err)
			}
			if diff := cmp.Diff(golden["payload"], wire["payload"]); diff != "" {
				t.Errorf("payload differs from the co-core shape (-python +project):\n%s", diff)
			}
		})
	}
}

func TestProjectGoldens(t *testing.T) {
	for _, tc := range projectGoldens {
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
			golden := readFrame(t, path)
			m, err := envelope.FromWire(golden)
			if err != nil {
				t.Fatalf("FromWire: %v", err)
			}
			if diff := cmp.Diff(tc.model, m); diff != "" {
				t.Errorf("FromWire mismatch (-want +got):\n%s", diff)
			}
			again, err := envelope.ToWire(m)
			if err != nil {
				t.Fatalf("ToWire(FromWire(golden)): %v", err)
			}
			if diff := cmp.Diff(golden, again); diff != "" {
				t.Errorf("ToWire(FromWire(golden)) is not byte-identical (-golden +got):\n%s", diff)
			}
		})
	}
}

// ToFrame writes the golden frames' values in FrameFields order.
func TestToFrameIsTheGoldenInOrder(t *testing.T) {
	for _, tc := range projectGoldens {
		t.Run(tc.file, func(t *testing.T) {
			golden := readFrame(t, filepath.Join("testdata", "project", tc.file+".json"))
			frame, err := envelope.ToFrame(tc.model)
			if err != nil {
				t.Fatalf("ToFrame: %v", err)
			}
			for i, name := range envelope.FrameFields() {
				if frame[i] != golden[name] {
					t.Errorf("value %d (%s) = %q, the golden says %q", i, name, frame[i], golden[name])
				}
			}
		})
	}
	for _, m := range []envelope.Model{nil, (*envelope.BlobAvailable)(nil)} {
		if _, err := envelope.ToFrame(m); !errors.Is(err, envelope.ErrUnencodable) {
			t.Errorf("ToFrame(%#v) error = %v, want ErrUnencodable", m, err)
		}
	}
}

// FrameFields is the documented order, and what one caller does with its
// copy is not what the next one sees.
func TestFrameFieldsOrder(t *testing.T) {
	want := [6]string{"key", "payload", "event_type", "schema_version", "occurred_at", "content_type"}
	got := envelope.FrameFields()
	if got != want {
		t.Fatalf("FrameFields() = %q, want %q", got, want)
	}
	got[0] = "changed"
	if again := envelope.FrameFields(); again != want {
		t.Errorf("after a caller changed its copy, FrameFields() = %q", again)
	}
}
