package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/replicate"
	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/gcs"
)

// TestWorkerReplicatesAFetchedBlob is the replicate session of docs/replicate.md,
// Operator tools, through
// the binary: a worker on a private Redis with a local blob store, an
// aliases file naming a bucket of fake-gcs-server (STORAGE_EMULATOR_HOST),
// then `seed --watch` of a fetch and `seed replicate --watch` of the
// blob_uri it announced. The copy ends replication_complete and the object
// holds the fetched bytes; the replicate metrics count it. Then a blob of
// the permanent store (REPLICATOR_PERMANENT_BUCKET) is replicated too.
func TestWorkerReplicatesAFetchedBlob(t *testing.T) {
	const bucket, permanent = "co-gcs-archive", "co-gcs-replicator"
	fake := testenv.StartGCS(t, bucket, permanent)
	body := "the bytes worth keeping\n"
	origin := testenv.StartOrigin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, body)
	}))
	srv := testenv.StartRedis(t)
	dir := t.TempDir()
	aliases := filepath.Join(dir, "aliases.json")
	if err := os.WriteFile(aliases, []byte(`{"gcs-archive": {"provider": "gcs", "bucket": "`+bucket+`", "prefix": "copies"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	metrics := metricsAddr(t)
	env := []string{
		"STORAGE_EMULATOR_HOST=" + strings.TrimPrefix(fake.URL, "http://"),
		"REPLICATOR_REDIS_URL=" + srv.URL(),
		"REPLICATOR_BLOB_DIR=" + filepath.Join(dir, "blobs"),
		"REPLICATOR_ALLOW_CIDRS=127.0.0.0/8",
		"REPLICATOR_READ_BLOCK_MS=200",
		"REPLICATOR_REPLICATION_ALIASES_FILE=" + aliases,
		"REPLICATOR_PERMANENT_BUCKET=" + permanent,
		"REPLICATOR_METRICS_ADDR=" + metrics,
	}
	w := startBinary(t, env, "worker")
	testenv.Eventually(t, 30*time.Second, "both consumer groups", func() bool {
		if w.exited() {
			t.Fatalf("worker exited early with %d:\n%s", w.code, w.stderr.String())
		}
		return strings.Count(w.stderr.String(), `"msg":"consumer group ready"`) == 2
	})

	fetched := runBinary(t, nil, "seed", "--redis-url", srv.URL(), "--production", "--info-source-id", "demo", "--watch", origin.URL+"/keep.txt")
	if fetched.code != 0 {
		t.Fatalf("seed fetch exit %d:\n%s%s", fetched.code, fetched.stdout, fetched.stderr)
	}
	m := regexp.MustCompile(`blob_uri=(\S+)`).FindStringSubmatch(fetched.stdout)
	if m == nil {
		t.Fatalf("no blob_uri in:\n%s", fetched.stdout)
	}
	copied := runBinary(t, nil, "seed", "replicate", "--redis-url", srv.URL(), "--production", "--info-source-id", "demo",
		"--alias", "gcs-archive", "--destination", "2026/keep.txt", "--media-type", "text/plain", "--watch", m[1])
	if copied.code != 0 {
		t.Fatalf("seed replicate exit %d:\n%s%s\nworker:\n%s", copied.code, copied.stdout, copied.stderr, w.stderr.String())
	}
	wantURL := replicate.PublicURLBase + "/" + bucket + "/copies/2026/keep.txt"
	if !strings.Contains(copied.stdout, "replication_complete") || !strings.Contains(copied.stdout, "public_url="+wantURL) {
		t.Errorf("seed replicate printed:\n%s\nwant replication_complete with public_url=%s", copied.stdout, wantURL)
	}
	r, err := fake.Client.Bucket(bucket).Object("copies/2026/keep.txt").NewReader(context.Background())
	if err != nil {
		t.Fatalf("the copy is not in the bucket: %v", err)
	}
	got, _ := io.ReadAll(r)
	r.Close()
	if string(got) != body || r.Attrs.ContentType != "text/plain" {
		t.Errorf("object = %q (%s), want the fetched bytes as text/plain", got, r.Attrs.ContentType)
	}
	// The fact is on content.artifacts, in the frame shape an issuer reads.
	c := redisClient(t, srv)
	facts := readStream(t, c, streamArtifacts)
	if len(facts) != 1 {
		t.Fatalf("%d facts on %s, want 1", len(facts), streamArtifacts)
	}
	if m, err := envelope.FromWire(facts[0].FieldValues); err != nil || m.EventType() != "replication_complete" {
		t.Errorf("fact %v, %v; want replication_complete", m, err)
	}
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(text), `replicator_replicate_commands_total{outcome="complete",reason=""} 1`) {
		t.Errorf("/metrics lacks the replicate outcome:\n%s", grepLines(string(text), "replicator_replicate_commands_total"))
	}

	// A persisted blob, where persist keeps it, is a source with no expiry.
	kept := "bytes kept for good\n"
	sum := sha256.Sum256([]byte(kept))
	fp := hex.EncodeToString(sum[:])
	pw := fake.Client.Bucket(permanent).Object("blobs/" + fp + ".bin").NewWriter(context.Background())
	pw.Metadata = sink.ContentStamp(fp)
	if _, err := io.WriteString(pw, kept); err != nil {
		t.Fatal(err)
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	fromPermanent := runBinary(t, nil, "seed", "replicate", "--redis-url", srv.URL(), "--production", "--info-source-id", "demo",
		"--alias", "gcs-archive", "--destination", "2026/kept.txt", "--media-type", "text/plain", "--watch", gcs.URI(permanent, fp))
	if fromPermanent.code != 0 || !strings.Contains(fromPermanent.stdout, "replication_complete") {
		t.Fatalf("seed replicate from the permanent store exit %d:\n%s%s\nworker:\n%s", fromPermanent.code, fromPermanent.stdout, fromPermanent.stderr, w.stderr.String())
	}
	r, err = fake.Client.Bucket(bucket).Object("copies/2026/kept.txt").NewReader(context.Background())
	if err != nil {
		t.Fatalf("the copy is not in the bucket: %v", err)
	}
	got, _ = io.ReadAll(r)
	r.Close()
	if string(got) != kept {
		t.Errorf("object = %q, want the persisted bytes", got)
	}
	if code := w.stop(t, 30*time.Second); code != 0 {
		t.Errorf("worker exit %d after SIGTERM:\n%s", code, w.stderr.String())
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
