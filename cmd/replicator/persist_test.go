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

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/persist"
	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/gcs"
)

// publishPersist publishes a content_persist command as c.
func publishPersist(t *testing.T, c rueidis.Client, cmd *envelope.ContentPersist) {
	t.Helper()
	if cmd.OccurredAt.IsZero() {
		cmd.OccurredAt = time.Now()
	}
	if _, err := publish(context.Background(), c, persist.DefaultStream, cmd); err != nil {
		t.Fatalf("publish %s: %v", cmd.CommandID, err)
	}
}

// persistFact waits for the fact about commandID on content.artifacts and
// returns it.
func persistFact(t *testing.T, w *process, c rueidis.Client, commandID string, within time.Duration) envelope.Model {
	t.Helper()
	var fact envelope.Model
	testenv.Eventually(t, within, "the fact of "+commandID, func() bool {
		if w.exited() {
			t.Fatalf("worker exited %d:\n%s", w.code, tail(w.stderr.String(), 3000))
		}
		for _, e := range readStream(t, c, persist.DefaultFactsStream) {
			m, err := envelope.FromWire(e.FieldValues)
			if err != nil {
				continue
			}
			switch f := m.(type) {
			case *envelope.BlobPersisted:
				if f.CommandID == commandID {
					fact = m
				}
			case *envelope.PersistFailed:
				if f.CommandID == commandID {
					fact = m
				}
			}
		}
		return fact != nil
	})
	return fact
}

// wantRefused checks that fact is a terminal persist_failed for reason.
func wantRefused(t *testing.T, fact envelope.Model, reason envelope.PersistReason) {
	t.Helper()
	f, ok := fact.(*envelope.PersistFailed)
	if !ok || f.Reason != reason || !f.Terminal {
		t.Errorf("fact %#v, want a terminal persist_failed %s", fact, reason)
	}
}

// fetchBlob has the worker fetch path from origin through `seed --watch`
// and returns the blob_uri and fingerprint it announced.
func fetchBlob(t *testing.T, w *process, redisURL, url string) (uri, fp string) {
	t.Helper()
	r := runBinary(t, nil, "seed", "--redis-url", redisURL, "--production", "--info-source-id", "demo", "--watch", url)
	if r.code != 0 {
		t.Fatalf("seed fetch exit %d:\n%s%s\nworker:\n%s", r.code, r.stdout, r.stderr, tail(w.stderr.String(), 3000))
	}
	m := regexp.MustCompile(`blob_uri=(\S+)`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no blob_uri in:\n%s", r.stdout)
	}
	f := regexp.MustCompile(`([0-9a-f]{64})\.bin$`).FindStringSubmatch(m[1])
	if f == nil {
		t.Fatalf("blob_uri %s names no fingerprint", m[1])
	}
	return m[1], f[1]
}

// tempURI is the temp store's URI for fp, given one it minted for known:
// the local store shards by the first two pairs of hex digits.
func tempURI(t *testing.T, known, knownFP, fp string) string {
	t.Helper()
	shard := func(f string) string { return f[0:2] + "/" + f[2:4] + "/" + f + ".bin" }
	root, ok := strings.CutSuffix(known, shard(knownFP))
	if !ok {
		t.Fatalf("blob_uri %s does not end in its shard", known)
	}
	return root + shard(fp)
}

// TestWorkerPersistsAFetchedBlob is the acceptance of content.persist
// (docs/persist.md) through the binary, on a private Redis and
// fake-gcs-server reached through a proxy that can refuse: a fetched blob
// is persisted (blob_persisted; the object at blobs/<sha256>.bin in the
// permanent bucket, with its media type and content stamp), persisted again
// (a second blob_persisted), then replicated from its permanent URI
// (replication_complete). Then each refusal a command can earn:
// invalid_source, blob_expired, source_corrupt, store_refused,
// unsupported_schema_version and, through the delivery ceiling,
// handler_error, each a terminal persist_failed and a dead letter.
func TestWorkerPersistsAFetchedBlob(t *testing.T) {
	const bucket, permanent = "co-gcs-archive", "co-gcs-replicator"
	fake := testenv.StartGCS(t, bucket, permanent)
	proxy := fake.Proxy(t)
	origin := testenv.StartOrigin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "the bytes of "+r.URL.Path+"\n")
	}))
	srv := testenv.StartRedis(t)
	dir := t.TempDir()
	blobDir := filepath.Join(dir, "blobs")
	aliases := filepath.Join(dir, "aliases.json")
	if err := os.WriteFile(aliases, []byte(`{"gcs-archive": {"provider": "gcs", "bucket": "`+bucket+`", "prefix": "copies"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	metrics := metricsAddr(t)
	w := startBinary(t, []string{
		"STORAGE_EMULATOR_HOST=" + strings.TrimPrefix(proxy.URL, "http://"),
		"REPLICATOR_REDIS_URL=" + srv.URL(),
		"REPLICATOR_BLOB_DIR=" + blobDir,
		"REPLICATOR_ALLOW_CIDRS=127.0.0.0/8",
		"REPLICATOR_MIN_HOST_INTERVAL_SECONDS=0",
		"REPLICATOR_READ_BLOCK_MS=200",
		// A command left unclassified comes back soon, and twice is its
		// ceiling: handler_error is reached within the test.
		"REPLICATOR_CLAIM_MIN_IDLE_MS=1000",
		"REPLICATOR_MAX_DELIVERY_ATTEMPTS=2",
		"REPLICATOR_REPLICATION_ALIASES_FILE=" + aliases,
		"REPLICATOR_PERSIST_ENABLED=true",
		"REPLICATOR_PERMANENT_BUCKET=" + permanent,
		"REPLICATOR_METRICS_ADDR=" + metrics,
	}, "worker")
	testenv.Eventually(t, 30*time.Second, "the worker ready", func() bool {
		if w.exited() {
			t.Fatalf("worker exited early with %d:\n%s", w.code, w.stderr.String())
		}
		return strings.Contains(w.stderr.String(), `"msg":"worker ready"`)
	})
	logs := w.stderr.String()
	if n := strings.Count(logs, `"msg":"consumer group ready"`); n != 3 {
		t.Errorf("%d consumer groups ready, want 3 (fetch, replicate, persist)", n)
	}
	if !strings.Contains(logs, `"persist":"enabled"`) {
		t.Errorf("the ready line does not say content_persist enabled:\n%s", grepLines(logs, "worker ready"))
	}
	c := redisClient(t, srv)

	// Persisted, then persisted again.
	uri, fp := fetchBlob(t, w, srv.URL(), origin.URL+"/keep.txt")
	body := "the bytes of /keep.txt\n"
	if fp != contentDigest(body) {
		t.Fatalf("fetched fingerprint %s, want the sha256 of %q", fp, body)
	}
	publishPersist(t, c, &envelope.ContentPersist{CommandID: "persist-1", ContentFingerprint: fp, BlobURI: uri, MediaType: "text/plain"})
	fact := persistFact(t, w, c, "persist-1", 30*time.Second)
	if f, ok := fact.(*envelope.BlobPersisted); !ok || f.ContentFingerprint != fp || f.SizeBytes != int64(len(body)) {
		t.Fatalf("fact %#v, want blob_persisted of %s, %d bytes", fact, fp, len(body))
	}
	obj := fake.Client.Bucket(permanent).Object(persist.ObjectPrefix + fp + ".bin")
	r, err := obj.NewReader(context.Background())
	if err != nil {
		t.Fatalf("the blob is not in the permanent bucket: %v", err)
	}
	got, _ := io.ReadAll(r)
	r.Close()
	attrs, err := obj.Attrs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != body || attrs.ContentType != "text/plain" || attrs.Metadata[sink.ContentStampKey] != fp {
		t.Errorf("object %q, %s, metadata %v; want the fetched bytes as text/plain stamped %s=%s",
			got, attrs.ContentType, attrs.Metadata, sink.ContentStampKey, fp)
	}
	publishPersist(t, c, &envelope.ContentPersist{CommandID: "persist-2", ContentFingerprint: fp, BlobURI: uri, MediaType: "text/plain"})
	if f, ok := persistFact(t, w, c, "persist-2", 30*time.Second).(*envelope.BlobPersisted); !ok || f.SizeBytes != int64(len(body)) {
		t.Errorf("the second persist's fact is %#v, want blob_persisted again", f)
	}

	// Replicated from the permanent store.
	copied := runBinary(t, nil, "seed", "replicate", "--redis-url", srv.URL(), "--production", "--info-source-id", "demo",
		"--alias", "gcs-archive", "--destination", "2026/keep.txt", "--media-type", "text/plain", "--watch", gcs.URI(permanent, fp))
	if copied.code != 0 || !strings.Contains(copied.stdout, "replication_complete") {
		t.Fatalf("seed replicate from the permanent URI exit %d:\n%s%s\nworker:\n%s", copied.code, copied.stdout, copied.stderr, tail(w.stderr.String(), 3000))
	}
	r, err = fake.Client.Bucket(bucket).Object("copies/2026/keep.txt").NewReader(context.Background())
	if err != nil {
		t.Fatalf("the copy is not in the bucket: %v", err)
	}
	got, _ = io.ReadAll(r)
	r.Close()
	if string(got) != body {
		t.Errorf("copy = %q, want the persisted bytes", got)
	}

	// The refusals.
	missing := strings.Repeat("e", 64)
	publishPersist(t, c, &envelope.ContentPersist{CommandID: "invalid", ContentFingerprint: fp, BlobURI: "file:///etc/" + fp + ".bin"})
	wantRefused(t, persistFact(t, w, c, "invalid", 30*time.Second), envelope.PersistReasonInvalidSource)
	publishPersist(t, c, &envelope.ContentPersist{CommandID: "expired", ContentFingerprint: missing, BlobURI: tempURI(t, uri, fp, missing)})
	wantRefused(t, persistFact(t, w, c, "expired", 30*time.Second), envelope.PersistReasonBlobExpired)

	// A temp blob whose bytes changed on disk since they were stored.
	uri2, fp2 := fetchBlob(t, w, srv.URL(), origin.URL+"/corrupt.txt")
	onDisk := filepath.Join(blobDir, fp2[0:2], fp2[2:4], fp2+".bin")
	if err := os.WriteFile(onDisk, []byte("not the bytes that were fetched\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	publishPersist(t, c, &envelope.ContentPersist{CommandID: "corrupt", ContentFingerprint: fp2, BlobURI: uri2})
	wantRefused(t, persistFact(t, w, c, "corrupt", 30*time.Second), envelope.PersistReasonSourceCorrupt)
	if _, err := fake.Client.Bucket(permanent).Object(persist.ObjectPrefix + fp2 + ".bin").Attrs(context.Background()); err == nil {
		t.Error("bytes that do not hash to their name were kept")
	}

	// The permanent bucket refuses the write (403, as for a missing
	// storage.objects.create).
	uri3, fp3 := fetchBlob(t, w, srv.URL(), origin.URL+"/refused.txt")
	proxy.RefuseUploads(http.StatusForbidden)
	publishPersist(t, c, &envelope.ContentPersist{CommandID: "refused", ContentFingerprint: fp3, BlobURI: uri3})
	wantRefused(t, persistFact(t, w, c, "refused", 30*time.Second), envelope.PersistReasonStoreRefused)
	if proxy.Count("POST /upload/") == 0 {
		t.Error("no upload reached the proxy")
	}

	// The permanent bucket refuses even the check for a digest: no reason
	// says "this host cannot read its own store", so the delivery ceiling
	// closes it.
	unreadable := strings.Repeat("d", 64)
	proxy.Answer(func(r *http.Request) int {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, unreadable) {
			return http.StatusForbidden
		}
		return 0
	})
	publishPersist(t, c, &envelope.ContentPersist{CommandID: "unreadable", ContentFingerprint: unreadable, BlobURI: tempURI(t, uri, fp, unreadable)})
	wantRefused(t, persistFact(t, w, c, "unreadable", 60*time.Second), envelope.PersistReasonHandlerError)
	proxy.Answer(func(*http.Request) int { return 0 })

	publishPersist(t, c, &envelope.ContentPersist{SchemaVersion: envelope.SchemaVersion + 1, CommandID: "future", ContentFingerprint: fp, BlobURI: uri})
	wantRefused(t, persistFact(t, w, c, "future", 30*time.Second), envelope.PersistReasonUnsupportedSchemaVersion)

	// Each refusal is dead-lettered, each success acknowledged.
	testenv.Eventually(t, 30*time.Second, "six dead letters and nothing pending", func() bool {
		return len(readStream(t, c, persist.DefaultDLQStream)) == 6 && pendingCount(t, c, persist.DefaultStream, persist.DefaultGroup) == 0
	})
	reasons := map[string]int{}
	for _, e := range readStream(t, c, persist.DefaultDLQStream) {
		reasons[e.FieldValues[envelope.FieldDLQReason]]++
	}
	t.Logf("dead letters by reason: %v", reasons)
	_, text := httpGet(t, "http://"+metrics+"/metrics")
	if !strings.Contains(text, `replicator_persist_commands_total{outcome="persisted",reason=""} 1`) ||
		!strings.Contains(text, `replicator_persist_commands_total{outcome="already_kept",reason=""} 1`) {
		t.Errorf("/metrics lacks the persist outcomes:\n%s", grepLines(text, "replicator_persist_commands_total"))
	}
	if !strings.Contains(text, `replicator_group_pending{group="replicator.persist",stream="content.persist"}`) {
		t.Errorf("/metrics lacks the persist stream's gauges:\n%s", grepLines(text, "replicator_group_pending"))
	}
	if code := w.stop(t, 30*time.Second); code != 0 {
		t.Errorf("worker exit %d after SIGTERM:\n%s", code, tail(w.stderr.String(), 3000))
	}
}

// TestWorkerWithPersistOff: off (the default), the worker creates no
// persist group, not even its stream, and says nothing of persist but the
// ready line's field.
func TestWorkerWithPersistOff(t *testing.T) {
	srv := testenv.StartRedis(t)
	blobDir := t.TempDir()
	w := startBinary(t, []string{
		"REPLICATOR_REDIS_URL=" + srv.URL(),
		"REPLICATOR_BLOB_DIR=" + blobDir,
		"REPLICATOR_READ_BLOCK_MS=200",
	}, "worker")
	testenv.Eventually(t, 30*time.Second, "the worker ready", func() bool {
		if w.exited() {
			t.Fatalf("worker exited early with %d:\n%s", w.code, w.stderr.String())
		}
		return strings.Contains(w.stderr.String(), `"msg":"worker ready"`)
	})
	if code := w.stop(t, 30*time.Second); code != 0 {
		t.Errorf("worker exit %d after SIGTERM", code)
	}
	c := redisClient(t, srv)
	n, err := c.Do(context.Background(), c.B().Exists().Key(persist.DefaultStream).Build()).AsInt64()
	if err != nil || n != 0 {
		t.Errorf("EXISTS %s = %d, %v; want 0: a worker with persist off created its stream", persist.DefaultStream, n, err)
	}
	var mentions []string
	for _, l := range strings.Split(w.stderr.String(), "\n") {
		// The test's directory is named after it.
		l = strings.ReplaceAll(l, filepath.Dir(blobDir), "")
		if strings.Contains(strings.ToLower(l), "persist") {
			mentions = append(mentions, l)
		}
	}
	if len(mentions) != 1 || !strings.Contains(mentions[0], `"msg":"worker ready"`) || !strings.Contains(mentions[0], `"persist":"disabled"`) {
		t.Errorf("persist is mentioned by %d lines, want only the ready line's content_persist disabled:\n%s", len(mentions), strings.Join(mentions, "\n"))
	}
}

// TestWorkerPersistUnderTheACL: as the production broker's worker user.
// Its line grants nothing on content.persist, so persist on is refused its
// group: one WARN line naming the grant, the ready line says so, and fetch
// and replicate run. With persistGrant appended (docs/operations.md, Redis
// ACL), persist runs, success and refusal, and the broker refuses the
// worker nothing.
func TestWorkerPersistUnderTheACL(t *testing.T) {
	users, err := os.ReadFile(minimalACL)
	if err != nil {
		t.Fatal(err)
	}
	grant := persistGrant(persist.Capability(new(persist.Handler)))
	var withPersist []string
	for _, l := range strings.Split(string(users), "\n") {
		if strings.HasPrefix(l, "user replicator ") {
			l += " " + grant
		}
		withPersist = append(withPersist, l)
	}
	granted := filepath.Join(t.TempDir(), "persist.acl")
	if err := os.WriteFile(granted, []byte(strings.Join(withPersist, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name    string
		acl     string
		granted bool
	}{
		{name: "the production line", acl: minimalACL},
		{name: "with the persist grant", acl: granted, granted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const permanent = "co-gcs-replicator"
			fake := testenv.StartGCS(t, permanent)
			origin := aclOrigin(t)
			srv := testenv.StartRedisACL(t, tc.acl)
			admin := srv.ClientAs(t, testenv.AdminUser, testenv.AdminPassword)
			issuer := srv.ClientAs(t, "watcher", aclPass)
			w := startBinary(t, aclWorkerEnv(srv, t.TempDir(),
				"STORAGE_EMULATOR_HOST="+strings.TrimPrefix(fake.URL, "http://"),
				"REPLICATOR_PERSIST_ENABLED=true",
				"REPLICATOR_PERMANENT_BUCKET="+permanent), "worker")
			testenv.Eventually(t, 30*time.Second, "the worker ready", func() bool {
				if w.exited() {
					t.Fatalf("worker exited early with %d:\n%s", w.code, w.stderr.String())
				}
				return strings.Contains(w.stderr.String(), `"msg":"worker ready"`)
			})

			publishAs(t, issuer, "fetch-1", origin.URL+"/doc/1")
			var blob *envelope.BlobAvailable
			testenv.Eventually(t, 30*time.Second, "the fetch's fact", func() bool {
				for _, e := range readStream(t, admin, streamFacts) {
					if m, err := envelope.FromWire(e.FieldValues); err == nil {
						if b, ok := m.(*envelope.BlobAvailable); ok && b.CommandID == "fetch-1" {
							blob = b
						}
					}
				}
				return blob != nil
			})

			logs := w.stderr.String()
			warns := grepLines(logs, `"level":"WARN"`)
			if !tc.granted {
				refusals := grepLines(warns, "content.persist is off")
				if strings.Count(refusals, "\n") != 0 || !strings.Contains(refusals, grant) {
					t.Errorf("want one WARN line naming the grant %q, got:\n%s", grant, warns)
				}
				if !strings.Contains(logs, `"persist":"refused by the broker"`) {
					t.Errorf("the ready line does not say persist was refused:\n%s", grepLines(logs, "worker ready"))
				}
				if n, err := admin.Do(context.Background(), admin.B().Exists().Key(persist.DefaultStream).Build()).AsInt64(); err != nil || n != 0 {
					t.Errorf("EXISTS %s = %d, %v; want 0", persist.DefaultStream, n, err)
				}
				// Replicate runs too: no alias is provisioned, so its
				// command is refused alias_unknown.
				repl := &envelope.ContentReplicate{SchemaVersion: envelope.SchemaVersion, OccurredAt: time.Now(), CommandID: "repl-1",
					BlobURI: blob.BlobURI, MediaType: "text/plain", Provider: "gcs", CredentialsAlias: "none", Destination: "x/y.txt",
					InfoItemRepSpecID: "s", SourceRevisionID: "r", InfoSourceID: "acl-test"}
				if _, err := publish(context.Background(), admin, streamReplicate, repl); err != nil {
					t.Fatal(err)
				}
				testenv.Eventually(t, 30*time.Second, "the replicate command's fact", func() bool {
					a := readStream(t, admin, streamArtifacts)
					return len(a) == 1 && a[0].FieldValues[envelope.FieldEventType] == "replication_failed"
				})
				if code := w.stop(t, 30*time.Second); code != 0 {
					t.Errorf("worker exit %d after SIGTERM", code)
				}
				return
			}

			if strings.Contains(logs, "content.persist is off") || !strings.Contains(logs, `"persist":"enabled"`) {
				t.Errorf("persist did not run with its grant:\n%s", tail(logs, 3000))
			}
			// Commands for content.persist come from an issuer; the
			// production file names none, so the admin publishes them.
			publishPersist(t, admin, &envelope.ContentPersist{CommandID: "persist-1", ContentFingerprint: blob.ContentFingerprint,
				BlobURI: blob.BlobURI, MediaType: "text/plain"})
			if _, ok := persistFact(t, w, admin, "persist-1", 30*time.Second).(*envelope.BlobPersisted); !ok {
				t.Error("no blob_persisted")
			}
			publishPersist(t, admin, &envelope.ContentPersist{CommandID: "persist-bad", ContentFingerprint: "x", BlobURI: "file:///x"})
			wantRefused(t, persistFact(t, w, admin, "persist-bad", 30*time.Second), envelope.PersistReasonInvalidSource)
			testenv.Eventually(t, 30*time.Second, "a dead letter and nothing pending", func() bool {
				return len(readStream(t, admin, persist.DefaultDLQStream)) == 1 &&
					pendingCount(t, admin, persist.DefaultStream, persist.DefaultGroup) == 0
			})
			if code := w.stop(t, 30*time.Second); code != 0 {
				t.Errorf("worker exit %d after SIGTERM", code)
			}
			noDenials(t, srv, "replicator")
		})
	}
}

// contentDigest is the hex sha256 of s.
func contentDigest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
