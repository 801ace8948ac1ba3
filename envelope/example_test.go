package envelope_test

import (
	"fmt"
	"slices"
	"time"

	"github.com/replicator-go/replicator/envelope"
)

func ExampleToWire() {
	cmd := &envelope.ContentFetch{
		SchemaVersion:  envelope.SchemaVersion,
		OccurredAt:     time.Date(2026, 11, 29, 23, 18, 58, 123456000, time.UTC),
		CommandID:      "01JQ8Z3K4M5N6P7Q8R9S0T1V2W",
		URL:            "https://example.test/a",
		InfoSourceID:   "isrc-01JQ8Z",
		Headers:        map[string]string{"accept": "text/html"},
		TimeoutSeconds: new(30.0),
	}
	fields, err := envelope.ToWire(cmd)
	if err != nil {
		panic(err)
	}
	// A stream entry's fields; XADD them as they are.
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fmt.Printf("%s: %s\n", name, fields[name])
	}
	// Output:
	// content_type: application/json
	// event_type: content_fetch
	// key: 01JQ8Z3K4M5N6P7Q8R9S0T1V2W
	// occurred_at: 2026-11-29T23:18:58.123456Z
	// payload: {"schema_version":1,"event_type":"content_fetch","occurred_at":"2026-11-29T23:18:58.123456Z","command_id":"01JQ8Z3K4M5N6P7Q8R9S0T1V2W","url":"https://example.test/a","info_source_id":"isrc-01JQ8Z","headers":{"accept":"text/html"},"timeout_seconds":30.0}
	// schema_version: 1
}

func ExampleFromWire() {
	// A fact as it arrives on content.blobs, here written by the Python
	// co-core (note the +00:00 offset on the frame).
	fields := map[string]string{
		"key":            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08:cmd-1",
		"event_type":     "blob_available",
		"schema_version": "1",
		"occurred_at":    "2026-11-29T23:19:00.654321+00:00",
		"content_type":   "application/json",
		"payload": `{"schema_version":1,"event_type":"blob_available","occurred_at":"2026-11-29T23:19:00.654321Z",` +
			`"content_fingerprint":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",` +
			`"blob_uri":"gs://co-blobs/blobs/9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08.bin",` +
			`"size_bytes":18,"media_type":"text/html","url":"https://example.test/a","command_id":"cmd-1",` +
			`"info_source_id":"isrc-01JQ8Z","final_url":null,"status_code":200,"fetched_at":"2026-11-29T23:18:59.987654Z",` +
			`"content_type_raw":"text/html; charset=utf-8","etag":"\"v1\"","last_modified":null,"blob_expires_at":null}`,
	}
	m, err := envelope.FromWire(fields)
	if err != nil {
		panic(err)
	}
	switch fact := m.(type) {
	case *envelope.BlobAvailable:
		fmt.Println("command:", fact.CommandID, "stored at", fact.BlobURI)
		fmt.Println("size:", fact.SizeBytes, fact.MediaType)
		fmt.Println("status:", *fact.StatusCode, "etag:", *fact.ETag)
		fmt.Println("final_url known:", fact.FinalURL != nil)
		fmt.Println("fetched at:", envelope.FormatTime(*fact.FetchedAt))
	case *envelope.FetchFailed:
		fmt.Println("command:", fact.CommandID, "failed:", fact.Reason)
	}
	// Output:
	// command: cmd-1 stored at gs://co-blobs/blobs/9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08.bin
	// size: 18 text/html
	// status: 200 etag: "v1"
	// final_url known: false
	// fetched at: 2026-11-29T23:18:59.987654Z
}

func ExampleDecodeCommand() {
	fields := map[string]string{
		"event_type": "content_fetch",
		"payload": `{"schema_version":2,"event_type":"content_fetch","occurred_at":"2026-11-29T23:18:58Z",` +
			`"command_id":"cmd-future","url":"https://example.test/a","info_source_id":"isrc-1","retry":{"max":3}}`,
	}
	cmd, err := envelope.DecodeCommand(fields)
	fmt.Println(err)
	// The partial command still names itself, so the worker can publish
	// unsupported_schema_version about it.
	fmt.Println(cmd.CommandID, cmd.SchemaVersion)
	// Output:
	// envelope: unsupported schema version: content_fetch has schema_version 2, this codec reads 1
	// cmd-future 2
}

func ExampleDecodeReplicateCommand() {
	// A command as the Python co-core writes it on content.replicate.
	fields := map[string]string{
		"event_type": "content_replicate",
		"payload": `{"schema_version":1,"event_type":"content_replicate","occurred_at":"2026-11-29T23:20:00.123456Z",` +
			`"command_id":"rep-1","blob_uri":"gs://co-blobs/blobs/9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08.bin",` +
			`"media_type":"application/pdf","provider":"gcs","credentials_alias":"primary",` +
			`"destination":"reports/2026/r.pdf","object_options":{"storage_class":"ARCHIVE"},` +
			`"info_item_rep_spec_id":"iirs-1","source_revision_id":"rev-1","info_source_id":"isrc-1"}`,
	}
	cmd, err := envelope.DecodeReplicateCommand(fields)
	if err != nil {
		panic(err)
	}
	fmt.Println(cmd.CommandID, cmd.Provider, cmd.CredentialsAlias, cmd.Destination)
	fmt.Println("storage_class:", cmd.ObjectOptions["storage_class"])

	// A fetch command on the replicate stream is foreign: no fact about it.
	_, err = envelope.DecodeReplicateCommand(map[string]string{
		"event_type": "content_fetch",
		"payload": `{"schema_version":1,"event_type":"content_fetch","occurred_at":"2026-11-29T23:18:58Z",` +
			`"command_id":"cmd-1","url":"https://example.test/a","info_source_id":"isrc-1"}`,
	})
	fmt.Println(err)
	// Output:
	// rep-1 gcs primary reports/2026/r.pdf
	// storage_class: ARCHIVE
	// envelope: foreign payload: a content_fetch frame is not a replicate command
}

func ExampleToWire_replicationFailed() {
	fact := &envelope.ReplicationFailed{
		OccurredAt:        time.Date(2026, 11, 29, 23, 20, 3, 0, time.UTC),
		CommandID:         "rep-1",
		InfoItemRepSpecID: "iirs-1",
		SourceRevisionID:  "rev-1",
		InfoSourceID:      "isrc-1",
		Reason:            envelope.ReplicateReasonAliasUnknown,
		Terminal:          true,
		Detail:            new("the alias named by this command is not provisioned on this host"),
	}
	fields, err := envelope.ToWire(fact)
	if err != nil {
		panic(err)
	}
	fmt.Println(fields["key"])
	fmt.Println(fields["payload"])
	// Output:
	// rep-1:2026-11-29T23:20:03.000000Z
	// {"schema_version":1,"event_type":"replication_failed","occurred_at":"2026-11-29T23:20:03.000000Z","command_id":"rep-1","info_item_rep_spec_id":"iirs-1","source_revision_id":"rev-1","info_source_id":"isrc-1","reason":"alias_unknown","terminal":true,"attempts":null,"detail":"the alias named by this command is not provisioned on this host"}
}

func ExampleToFrame() {
	fact := &envelope.FetchFailed{
		SchemaVersion: envelope.SchemaVersion,
		OccurredAt:    time.Date(2026, 11, 29, 23, 18, 58, 123456000, time.UTC),
		CommandID:     "01JQ8Z3K4M5N6P7Q8R9S0T1V2W",
		URL:           "https://example.test/a",
		InfoSourceID:  "isrc-01JQ8Z",
		Reason:        envelope.ReasonHTTPStatus,
		Terminal:      true,
		StatusCode:    new(404),
	}
	frame, err := envelope.ToFrame(fact)
	if err != nil {
		panic(err)
	}
	// XADD the values under FrameFields, in this order.
	for i, name := range envelope.FrameFields() {
		fmt.Printf("%s: %s\n", name, frame[i])
	}
	// Output:
	// key: 01JQ8Z3K4M5N6P7Q8R9S0T1V2W:2026-11-29T23:18:58.123456Z
	// payload: {"schema_version":1,"event_type":"fetch_failed","occurred_at":"2026-11-29T23:18:58.123456Z","command_id":"01JQ8Z3K4M5N6P7Q8R9S0T1V2W","url":"https://example.test/a","info_source_id":"isrc-01JQ8Z","reason":"http_status","terminal":true,"status_code":404,"attempts":null,"detail":null}
	// event_type: fetch_failed
	// schema_version: 1
	// occurred_at: 2026-11-29T23:18:58.123456Z
	// content_type: application/json
}
