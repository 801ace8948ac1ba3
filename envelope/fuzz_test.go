package envelope_test

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/replicator-go/replicator/envelope"
)

// FuzzFromWire feeds FromWire frames built from three fields (an empty string
// leaves the field out). It must never panic; whatever it accepts must
// re-encode and decode again to an equal model, and the re-encoding must be
// stable.
func FuzzFromWire(f *testing.F) {
	// Every golden frame, Python-shaped and the project's own.
	goldens, _ := filepath.Glob(filepath.Join("testdata", "*", "*.json"))
	for _, path := range goldens {
		fields := readFrame(f, path)
		f.Add(fields["event_type"], fields["payload"], fields["schema_version"])
	}
	cf := envelope.EventContentFetch
	// Python's non-finite tokens where they are allowed, and where not.
	f.Add(cf, payload(cf, "timeout_seconds", "NaN"), "1")
	f.Add(cf, payload(cf, "timeout_seconds", "-Infinity"), "1")
	f.Add(cf, payload(cf, "timeout_seconds", "1e400"), "1")
	f.Add(cf, payload(cf, "headers", `{"x":Infinity}`), "1")
	f.Add(envelope.EventFetchPolicyState, payload(envelope.EventFetchPolicyState, "min_interval_seconds", "NaN"), "1")
	// Unsupported versions, from the payload and from the frame.
	f.Add(cf, payload(cf, "schema_version", "2", "url", "7"), "2")
	f.Add(cf, payload(cf, "schema_version", ""), "3")
	f.Add(cf, payload(cf, "schema_version", "-99999999999999999999"), "1")
	f.Add(cf, payload(cf, "schema_version", ""), "99999999999999999999")
	// Flat fields with no payload, and no event_type.
	f.Add(cf, "", "1")
	f.Add("", payload(cf), "1")
	// Invalid JSON of several kinds.
	f.Add(cf, "{", "1")
	f.Add(cf, `{"schema_version":1,}`, "1")
	f.Add(cf, "[1,2]", "1")
	f.Add(cf, "\xff", "1")
	f.Add(cf, payload(cf, "extra", strings.Repeat("[", 100)), "1")
	// Wrong types, missing fields, naive and offset times, escapes.
	f.Add(cf, payload(cf, "command_id", "1"), "1")
	f.Add(cf, payload(cf, "url", ""), "1")
	f.Add(cf, payload(cf, "occurred_at", `"2026-11-29T23:18:58"`), "1")
	f.Add(cf, payload(cf, "occurred_at", `"2026-11-30T01:18:58.123456789+02:00"`), "1")
	f.Add(cf, payload(cf, "url", `"\ud83d\ude00\ud800\u00e4"`), "1")
	f.Add(cf, payload(cf, "headers", `{"a":"1","a":"2","B":"\n"}`), "1")
	// A payload whose event_type disagrees with the frame.
	f.Add(cf, payload(envelope.EventFetchFailed), "1")
	// The replicate models: object_options of every JSON shape, numbers
	// spelled oddly, non-finite tokens where none is allowed, a version 2
	// command, and the two facts with their optional members set.
	cr := envelope.EventContentReplicate
	f.Add(cr, payload(cr), "1")
	f.Add(cr, payload(cr, "object_options", `{"storage_class":"ARCHIVE","cache_control":null}`), "1")
	f.Add(cr, payload(cr, "object_options", `{"a":[1e5,-0.0,{"b":"\u00e4\ud800"}],"a":true,"c":123456789012345678901234567890}`), "1")
	f.Add(cr, payload(cr, "object_options", `{"a":NaN}`), "1")
	f.Add(cr, payload(cr, "object_options", `["storage_class"]`), "1")
	f.Add(cr, payload(cr, "object_options", strings.Repeat(`{"a":`, 513)+"1"+strings.Repeat("}", 513)), "1")
	f.Add(cr, payload(cr, "schema_version", "2", "destination", `{"key":"x"}`), "2")
	f.Add(cr, payload(cr, "destination", `"../../etc/passwd"`, "blob_uri", `"file:///etc/passwd"`), "1")
	f.Add(envelope.EventReplicationComplete, payload(envelope.EventReplicationComplete), "1")
	f.Add(envelope.EventReplicationFailed, payload(envelope.EventReplicationFailed, "attempts", "5", "detail", `"x"`), "1")
	f.Add(envelope.EventReplicationFailed, payload(envelope.EventReplicationFailed, "reason", `"brand_new_reason"`, "terminal", "false"), "1")

	f.Fuzz(func(t *testing.T, eventType, payload, schemaVersion string) {
		fields := map[string]string{}
		for name, v := range map[string]string{
			"event_type": eventType, "payload": payload, "schema_version": schemaVersion,
		} {
			if v != "" {
				fields[name] = v
			}
		}
		m, err := envelope.FromWire(fields)
		switch {
		case errors.Is(err, envelope.ErrUnsupportedVersion):
			if m == nil {
				t.Fatalf("unsupported version without a partial model: %v", err)
			}
			return
		case err != nil:
			if !errors.Is(err, envelope.ErrMalformedFrame) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			if m != nil {
				t.Fatalf("malformed frame with a model: %v", err)
			}
			return
		}
		if m == nil {
			t.Fatal("nil model with a nil error")
		}
		// Accepted JSON is JSON, bar Python's non-finite tokens.
		if !json.Valid([]byte(payload)) && !strings.Contains(payload, "NaN") && !strings.Contains(payload, "Infinity") {
			t.Fatalf("accepted a payload encoding/json calls invalid: %q", payload)
		}
		if c, ok := m.(*envelope.ContentFetch); ok && c.TimeoutSeconds != nil &&
			(math.IsNaN(*c.TimeoutSeconds) || math.IsInf(*c.TimeoutSeconds, 0)) {
			if _, err := envelope.ToWire(m); !errors.Is(err, envelope.ErrUnencodable) {
				t.Fatalf("ToWire of a non-finite timeout: %v, want ErrUnencodable", err)
			}
			return
		}
		wire, err := envelope.ToWire(m)
		if err != nil {
			t.Fatalf("ToWire of an accepted model: %v", err)
		}
		again, err := envelope.FromWire(wire)
		if err != nil {
			t.Fatalf("FromWire(ToWire(m)): %v\npayload: %s", err, wire["payload"])
		}
		if diff := cmp.Diff(m, again); diff != "" {
			t.Fatalf("round trip mismatch (-first +second):\n%s", diff)
		}
		wire2, err := envelope.ToWire(again)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wire, wire2); diff != "" {
			t.Fatalf("re-encoding is not stable (-first +second):\n%s", diff)
		}
	})
}

// The golden glob must find the files, or the corpus silently shrinks.
func TestFuzzSeedsExist(t *testing.T) {
	goldens, _ := filepath.Glob(filepath.Join("testdata", "*", "*.json"))
	if len(goldens) < len(pythonGoldens)+len(projectGoldens) {
		t.Fatalf("found %d golden frames, want %d", len(goldens), len(pythonGoldens)+len(projectGoldens))
	}
	if _, err := os.Stat(filepath.Join("testdata", "python")); err != nil {
		t.Fatal(err)
	}
}
