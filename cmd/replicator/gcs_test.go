package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
)

// TestWorkerGCSStore runs the worker binary with the gcs backend against
// fake-gcs-server behind a proxy on loopback (STORAGE_EMULATOR_HOST), which
// answers uploads with the status the test sets, and checks what an issuer
// and an operator see:
//
//   - stored: the object's content type is the body's media type;
//   - a bucket answering 403: the command is closed as handler_error, with
//     attempts, at REPLICATOR_MAX_DELIVERY_ATTEMPTS, then dead-lettered;
//   - a bucket answering 503: nothing is published and the command stays
//     pending, retried through the reclaim.
func TestWorkerGCSStore(t *testing.T) {
	const bucket = "worker-blobs"
	fake := testenv.StartGCS(t, bucket)
	var refuse atomic.Int64
	proxy := fake.Proxy(t)
	proxy.Answer(func(r *http.Request) int {
		if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/upload/") {
			return int(refuse.Load())
		}
		return 0
	})
	origin := testenv.StartOrigin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "Text/HTML; charset=utf-8")
		fmt.Fprintf(w, "<p>%s</p>", r.URL.Path) // distinct bytes per command
	}))
	srv := testenv.StartRedis(t)
	c := redisClient(t, srv)
	w := startBinary(t, []string{
		"STORAGE_EMULATOR_HOST=" + strings.TrimPrefix(proxy.URL, "http://"),
		"REPLICATOR_BLOB_BACKEND=gcs",
		"REPLICATOR_BLOB_BUCKET=" + bucket,
		"REPLICATOR_REDIS_URL=" + srv.URL(),
		"REPLICATOR_ALLOW_CIDRS=127.0.0.0/8",
		"REPLICATOR_CONSUMER_START_ID=0", // commands published before the group exists count
		"REPLICATOR_READ_BLOCK_MS=200",
		"REPLICATOR_CLAIM_MIN_IDLE_MS=500",
		"REPLICATOR_MAX_DELIVERY_ATTEMPTS=2",
		"REPLICATOR_MIN_HOST_INTERVAL_SECONDS=0",
	}, "worker")

	issue := func(id, path string) {
		t.Helper()
		cmd := &envelope.ContentFetch{SchemaVersion: envelope.SchemaVersion, OccurredAt: time.Now(), CommandID: id,
			URL: origin.URL + path, InfoSourceID: "src-gcs"}
		if _, err := publish(t.Context(), c, streamCommands, cmd); err != nil {
			t.Fatal(err)
		}
	}
	factFor := func(id string) envelope.Model {
		for _, e := range readStream(t, c, streamFacts) {
			m, err := envelope.FromWire(e.FieldValues)
			if err != nil {
				t.Fatalf("fact %s does not decode: %v", e.ID, err)
			}
			switch f := m.(type) {
			case *envelope.BlobAvailable:
				if f.CommandID == id {
					return f
				}
			case *envelope.FetchFailed:
				if f.CommandID == id {
					return f
				}
			}
		}
		return nil
	}
	waitFact := func(id string) envelope.Model {
		t.Helper()
		var m envelope.Model
		testenv.Eventually(t, 60*time.Second, "a fact for "+id, func() bool {
			if w.exited() {
				t.Fatalf("worker exited early with %d", w.code)
			}
			m = factFor(id)
			return m != nil
		})
		return m
	}

	t.Run("stored with its media type as the content type", func(t *testing.T) {
		issue("01JGCSSTORED00000000000000", "/stored")
		fact, ok := waitFact("01JGCSSTORED00000000000000").(*envelope.BlobAvailable)
		if !ok {
			t.Fatalf("fact is not blob_available")
		}
		if fact.MediaType != "text/html" {
			t.Errorf("media_type = %q, want text/html", fact.MediaType)
		}
		name := strings.TrimPrefix(fact.BlobURI, "gs://"+bucket+"/")
		attrs, err := fake.Client.Bucket(bucket).Object(name).Attrs(context.Background())
		if err != nil {
			t.Fatalf("object of %s: %v", fact.BlobURI, err)
		}
		if attrs.ContentType != "text/html" {
			t.Errorf("object content type = %q, want the media type text/html", attrs.ContentType)
		}
	})

	t.Run("403 closes the command as handler_error at the delivery ceiling", func(t *testing.T) {
		refuse.Store(http.StatusForbidden)
		const id = "01JGCSFORBIDDEN00000000000"
		issue(id, "/forbidden")
		fact, ok := waitFact(id).(*envelope.FetchFailed)
		if !ok {
			t.Fatalf("fact is not fetch_failed")
		}
		if fact.Reason != envelope.ReasonHandlerError || !fact.Terminal || fact.Attempts == nil || *fact.Attempts != 2 {
			t.Errorf("fact = reason %q, terminal %v, attempts %v; want handler_error, true, 2", fact.Reason, fact.Terminal, fact.Attempts)
		}
		if fact.Detail == nil || !strings.Contains(*fact.Detail, "403") {
			t.Errorf("detail = %v, want it to name the store's 403", fact.Detail)
		}
		testenv.Eventually(t, 10*time.Second, "the dead letter of "+id, func() bool {
			for _, e := range readStream(t, c, streamDLQ) {
				if strings.Contains(e.FieldValues[envelope.FieldPayload], id) {
					if got := e.FieldValues["dlq_reason"]; got != "handler_error" {
						t.Fatalf("dlq_reason = %q, want handler_error", got)
					}
					return true
				}
			}
			return false
		})
	})

	t.Run("503 stays pending and silent", func(t *testing.T) {
		refuse.Store(http.StatusServiceUnavailable)
		const id = "01JGCSUNAVAILABLE000000000"
		issue(id, "/unavailable")
		// Three deliveries ended transient: past the delivery ceiling of
		// two, had they counted.
		testenv.Eventually(t, 60*time.Second, "three transient outcomes for "+id, func() bool {
			if w.exited() {
				t.Fatalf("worker exited early with %d", w.code)
			}
			return outcomes(w.stderr.String(), id)["transient"] >= 3
		})
		if m := factFor(id); m != nil {
			t.Errorf("a fact was published for a command whose store answers 503: %#v", m)
		}
		pending, err := c.Do(t.Context(), c.B().Xpending().Key(streamCommands).Group("replicator.fetch").Build()).ToArray()
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := pending[0].AsInt64(); n != 1 {
			t.Errorf("%d entries pending, want the 503 one", n)
		}
		for _, e := range readStream(t, c, streamDLQ) {
			if strings.Contains(e.FieldValues[envelope.FieldPayload], id) {
				t.Errorf("the 503 command was dead-lettered")
			}
		}
	})
	if code := w.stop(t, 30*time.Second); code != 0 {
		t.Errorf("worker exited %d after SIGTERM, want 0", code)
	}
}

// outcomes counts the outcomes of the worker's "handled command" log lines
// about commandID.
func outcomes(logs, commandID string) map[string]int {
	n := map[string]int{}
	for line := range strings.Lines(logs) {
		var rec struct {
			Msg       string `json:"msg"`
			CommandID string `json:"command_id"`
			Outcome   string `json:"outcome"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "handled command" && rec.CommandID == commandID {
			n[rec.Outcome]++
		}
	}
	return n
}
