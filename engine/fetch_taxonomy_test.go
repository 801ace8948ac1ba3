package engine_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/sink/memory"
)

// taxonomyOrigin serves every row of the failure taxonomy.
func taxonomyOrigin() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/ok/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "body of "+r.URL.Path)
	})
	mux.Handle("/missing", testenv.Status(http.StatusNotFound, nil, "no such page"))
	mux.Handle("/unchanged", testenv.Status(http.StatusNotModified, nil, ""))
	mux.Handle("/big", testenv.Body(4096, true))
	var flaky atomic.Int32
	mux.HandleFunc("/flaky/", func(w http.ResponseWriter, r *http.Request) {
		if flaky.Add(1) <= 2 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "body of "+r.URL.Path)
	})
	return mux
}

// blobFact is the blob_available the taxonomy origin's /ok/ path earns.
func blobFact(cmd *envelope.ContentFetch, path string) *envelope.BlobAvailable {
	body := "body of " + path
	sum := sha256.Sum256([]byte(body))
	fp := hex.EncodeToString(sum[:])
	return &envelope.BlobAvailable{
		SchemaVersion:      1,
		ContentFingerprint: fp,
		BlobURI:            memory.URI(fp),
		SizeBytes:          int64(len(body)),
		MediaType:          "text/plain",
		URL:                cmd.URL,
		CommandID:          cmd.CommandID,
		InfoSourceID:       cmd.InfoSourceID,
		FinalURL:           new(cmd.URL),
		StatusCode:         new(200),
		ContentTypeRaw:     new("text/plain; charset=utf-8"),
	}
}

func failedFact(cmd *envelope.ContentFetch, reason envelope.Reason, status int) *envelope.FetchFailed {
	f := &envelope.FetchFailed{
		SchemaVersion: 1,
		CommandID:     cmd.CommandID,
		URL:           cmd.URL,
		InfoSourceID:  cmd.InfoSourceID,
		Reason:        reason,
		Terminal:      true,
	}
	if status != 0 {
		f.StatusCode = new(status)
	}
	return f
}

// taxonomyRow is one row of the failure taxonomy (docs/taxonomy.md, The failure taxonomy): what is
// published on the command stream and everything that must follow.
type taxonomyRow struct {
	name string
	so   stackOptions
	wo   func(*fetchOptions)
	// run publishes the row's entries (waiting in between where the row
	// needs it) and returns the facts expected, in order, and the frames
	// expected in the DLQ (by their original ids).
	run          func(t *testing.T, e *wenv) (facts []envelope.Model, dlq []string)
	wantReasons  []string // dlq_reason of each dead letter
	wantRequests int      // requests the origin sees
	deduped      []string // command_ids whose dedupe key must exist
	notDeduped   []string
}

func taxonomyRows() []taxonomyRow {
	frame := func(e *wenv, cmd *envelope.ContentFetch, edit func(map[string]string)) string {
		fields, err := envelope.ToWire(cmd)
		if err != nil {
			panic(err)
		}
		edit(fields)
		var kv []string
		for k, v := range fields {
			kv = append(kv, k, v)
		}
		return e.add(kv...)
	}
	malformed := func(edit func(e *wenv, cmd *envelope.ContentFetch) string) func(*testing.T, *wenv) ([]envelope.Model, []string) {
		return func(t *testing.T, e *wenv) ([]envelope.Model, []string) {
			cmd := e.command("c-bad", e.url("w.test", "/ok/c-bad"))
			return nil, []string{edit(e, cmd)}
		}
	}
	permanent := func(id string, url func(e *wenv) string, headers map[string]string, reason envelope.Reason, status int) func(*testing.T, *wenv) ([]envelope.Model, []string) {
		return func(t *testing.T, e *wenv) ([]envelope.Model, []string) {
			cmd := e.command(id, url(e))
			for k, v := range headers {
				cmd.Headers[k] = v
			}
			mid := e.addModel(cmd)
			return []envelope.Model{failedFact(cmd, reason, status)}, []string{mid}
		}
	}
	return []taxonomyRow{
		{
			name: "stored",
			run: func(t *testing.T, e *wenv) ([]envelope.Model, []string) {
				cmd := e.command("c-ok", e.url("w.test", "/ok/c-ok"))
				e.addModel(cmd)
				return []envelope.Model{blobFact(cmd, "/ok/c-ok")}, nil
			},
			wantRequests: 1,
			deduped:      []string{"c-ok"},
		},
		{
			name: "malformed frame: payload not JSON",
			run: malformed(func(e *wenv, cmd *envelope.ContentFetch) string {
				return frame(e, cmd, func(f map[string]string) { f[envelope.FieldPayload] = "{not json" })
			}),
			wantReasons: []string{envelope.DLQMalformedFrame},
		},
		{
			name: "malformed frame: flat fields",
			run: malformed(func(e *wenv, cmd *envelope.ContentFetch) string {
				return e.add("command_id", cmd.CommandID, "url", cmd.URL, "info_source_id", cmd.InfoSourceID)
			}),
			wantReasons: []string{envelope.DLQMalformedFrame},
		},
		{
			name: "malformed frame: naive time",
			run: malformed(func(e *wenv, cmd *envelope.ContentFetch) string {
				return frame(e, cmd, func(f map[string]string) {
					f[envelope.FieldPayload] = strings.Replace(f[envelope.FieldPayload], ".000000Z", ".000000", 1)
				})
			}),
			wantReasons: []string{envelope.DLQMalformedFrame},
		},
		{
			name: "malformed frame: unknown event type",
			run: malformed(func(e *wenv, cmd *envelope.ContentFetch) string {
				return frame(e, cmd, func(f map[string]string) { f[envelope.FieldEventType] = "content_fetch_v9" })
			}),
			wantReasons: []string{envelope.DLQMalformedFrame},
		},
		{
			name: "foreign payload",
			run: func(t *testing.T, e *wenv) ([]envelope.Model, []string) {
				cmd := e.command("c-foreign", e.url("w.test", "/ok/c-foreign"))
				mid := e.addModel(blobFact(cmd, "/ok/c-foreign"))
				return nil, []string{mid}
			},
			wantReasons: []string{envelope.DLQForeignPayload},
			notDeduped:  []string{"c-foreign"},
		},
		{
			name: "schema version 2",
			run: func(t *testing.T, e *wenv) ([]envelope.Model, []string) {
				cmd := e.command("c-v2", e.url("w.test", "/ok/c-v2"))
				cmd.SchemaVersion = 2
				mid := e.addModel(cmd)
				return []envelope.Model{failedFact(cmd, envelope.ReasonUnsupportedSchemaVersion, 0)}, []string{mid}
			},
			wantReasons: []string{string(envelope.ReasonUnsupportedSchemaVersion)},
			notDeduped:  []string{"c-v2"},
		},
		{
			name: "blank command_id",
			run: func(t *testing.T, e *wenv) ([]envelope.Model, []string) {
				mid := e.addModel(e.command(" \t", e.url("w.test", "/ok/blank")))
				return nil, []string{mid}
			},
			wantReasons: []string{envelope.DLQBlankCommandID},
		},
		{
			name: "duplicate command_id",
			run: func(t *testing.T, e *wenv) ([]envelope.Model, []string) {
				cmd := e.command("c-dup", e.url("w.test", "/ok/c-dup"))
				e.addModel(cmd)
				e.waitFacts(1, 10*time.Second)
				e.waitSettled(10 * time.Second)
				e.addModel(cmd)
				return []envelope.Model{blobFact(cmd, "/ok/c-dup")}, nil
			},
			wantRequests: 1,
			deduped:      []string{"c-dup"},
		},
		{
			name:         "http_status 404",
			run:          permanent("c-404", func(e *wenv) string { return e.url("w.test", "/missing") }, nil, envelope.ReasonHTTPStatus, 404),
			wantReasons:  []string{string(envelope.ReasonHTTPStatus)},
			wantRequests: 1,
			notDeduped:   []string{"c-404"},
		},
		{
			name:        "not_fetchable",
			run:         permanent("c-ftp", func(e *wenv) string { return "ftp://w.test/file" }, nil, envelope.ReasonNotFetchable, 0),
			wantReasons: []string{string(envelope.ReasonNotFetchable)},
			notDeduped:  []string{"c-ftp"},
		},
		{
			name:        "destination_refused",
			run:         permanent("c-meta", func(e *wenv) string { return e.url("metadata.test", "/latest") }, nil, envelope.ReasonDestinationRefused, 0),
			wantReasons: []string{string(envelope.ReasonDestinationRefused)},
			notDeduped:  []string{"c-meta"},
		},
		{
			name:         "too_large",
			so:           stackOptions{maxBody: 1024},
			run:          permanent("c-big", func(e *wenv) string { return e.url("w.test", "/big") }, nil, envelope.ReasonTooLarge, 0),
			wantReasons:  []string{string(envelope.ReasonTooLarge)},
			wantRequests: 1,
			notDeduped:   []string{"c-big"},
		},
		{
			name: "invalid_request_options",
			run: permanent("c-opts", func(e *wenv) string { return e.url("w.test", "/ok/c-opts") },
				map[string]string{"Proxy-Authorization": "Basic " + secretValue}, envelope.ReasonInvalidRequestOptions, 0),
			wantReasons: []string{string(envelope.ReasonInvalidRequestOptions)},
			notDeduped:  []string{"c-opts"},
		},
		{
			name: "transient: 500 twice, then stored",
			run: func(t *testing.T, e *wenv) ([]envelope.Model, []string) {
				cmd := e.command("c-flaky", e.url("w.test", "/flaky/c-flaky"))
				e.addModel(cmd)
				return []envelope.Model{blobFact(cmd, "/flaky/c-flaky")}, nil
			},
			wantRequests: 3,
			deduped:      []string{"c-flaky"},
		},
		{
			name: "unclassified: handler_error at the delivery ceiling",
			so:   stackOptions{sink: panicSink{memory.New(memory.Options{})}},
			wo:   func(o *fetchOptions) { o.Loop.MaxDeliveryAttempts = 2 },
			run: func(t *testing.T, e *wenv) ([]envelope.Model, []string) {
				cmd := e.command("c-bug", e.url("w.test", "/ok/c-bug"))
				mid := e.addModel(cmd)
				f := failedFact(cmd, envelope.ReasonHandlerError, 0)
				f.Attempts = new(2)
				return []envelope.Model{f}, []string{mid}
			},
			wantReasons:  []string{string(envelope.ReasonHandlerError)},
			wantRequests: 2,
			notDeduped:   []string{"c-bug"},
		},
		{
			name: "not_modified",
			run: func(t *testing.T, e *wenv) ([]envelope.Model, []string) {
				cmd := e.command("c-304", e.url("w.test", "/unchanged"))
				cmd.Headers["If-None-Match"] = `"v1"`
				e.addModel(cmd)
				return []envelope.Model{failedFact(cmd, envelope.ReasonNotModified, 304)}, nil
			},
			wantRequests: 1,
			deduped:      []string{"c-304"},
		},
	}
}

// TestWorkerTaxonomy runs every row of the failure taxonomy against a
// single Redis server and a three-master cluster: each must end with
// exactly the facts and dead letters the contract names, and nothing left
// pending.
func TestWorkerTaxonomy(t *testing.T) {
	backends := []backend{standalone(t, testenv.StartRedis(t)), cluster(t, testenv.StartCluster(t))}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			for _, row := range taxonomyRows() {
				t.Run(row.name, func(t *testing.T) {
					t.Parallel()
					runTaxonomyRow(t, b, row)
				})
			}
		})
	}
}

func runTaxonomyRow(t *testing.T, b backend, row taxonomyRow) {
	e := newEnv(t, b.client, taxonomyOrigin())
	wo := e.workerOptions()
	if row.wo != nil {
		row.wo(&wo)
	}
	e.start(row.so, wo)
	wantFacts, dlqIDs := row.run(t, e)

	e.waitDLQ(len(row.wantReasons), 15*time.Second)
	e.waitFacts(len(wantFacts), 15*time.Second)
	e.waitSettled(15 * time.Second)
	for _, id := range row.deduped {
		testenv.Eventually(t, 5*time.Second, "dedupe key of "+id, func() bool { return e.deduped(id) })
	}

	gotFacts := e.factsNow()
	if diff := cmp.Diff(wantFacts, gotFacts, factOpts, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("facts mismatch (-want +got):\n%s", diff)
	}
	for _, f := range gotFacts {
		if ff, ok := f.(*envelope.FetchFailed); ok && (ff.Detail == nil || *ff.Detail == "") {
			t.Errorf("fetch_failed %s has no detail", ff.Reason)
		}
		if ff, ok := f.(*envelope.FetchFailed); ok && ff.Reason == envelope.ReasonUnsupportedSchemaVersion && *ff.Detail != "schema_version=2" {
			t.Errorf("detail = %q, want schema_version=2", *ff.Detail)
		}
	}
	dl := e.dlqNow()
	if diff := cmp.Diff(row.wantReasons, dlqReasons(dl), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("dead-letter reasons mismatch (-want +got):\n%s", diff)
	}
	for i, d := range dl {
		if i < len(dlqIDs) && d[envelope.FieldDLQOriginalID] != dlqIDs[i] {
			t.Errorf("dead letter %d: dlq_original_id = %q, want %q", i, d[envelope.FieldDLQOriginalID], dlqIDs[i])
		}
	}
	checkDLQCopies(t, e, dl)
	if got := e.origin.Count(); got != row.wantRequests {
		t.Errorf("origin saw %d requests, want %d", got, row.wantRequests)
	}
	for _, id := range row.notDeduped {
		if e.deduped(id) {
			t.Errorf("dedupe key of %s exists; a closed failure must not set it", id)
		}
	}
}

// checkDLQCopies checks each dead letter carries its original frame's
// fields verbatim, plus its reason and original id.
func checkDLQCopies(t *testing.T, e *wenv, dl []map[string]string) {
	t.Helper()
	for _, d := range dl {
		id := d[envelope.FieldDLQOriginalID]
		entries, err := e.do(e.client.B().Xrange().Key(e.stream).Start(id).End(id).Build()).AsXRange()
		if err != nil || len(entries) != 1 {
			t.Errorf("original %s: %v (%d entries)", id, err, len(entries))
			continue
		}
		want := entries[0].FieldValues
		want[envelope.FieldDLQReason] = d[envelope.FieldDLQReason]
		want[envelope.FieldDLQOriginalID] = id
		if diff := cmp.Diff(want, d); diff != "" {
			t.Errorf("dead letter of %s mismatch (-want +got):\n%s", id, diff)
		}
	}
}
