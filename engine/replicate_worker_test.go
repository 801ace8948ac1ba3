package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/engine"
	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/replicate"
	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/local"
)

// These tests run the content.replicate loop against a private
// redis-server and fake-gcs-server, with blobs in a local sink: what
// reaches content.artifacts, the dead-letter stream and the bucket.

const (
	destBucket  = "loop-dest"
	otherBucket = "loop-other"
)

var seq atomic.Int64

// lenv is one test's world.
type lenv struct {
	t       *testing.T
	client  rueidis.Client
	gcs     *testenv.GCS
	blobs   *local.Sink
	prefix  string // the primary alias's root in destBucket
	stream  string
	facts   string
	dlq     string
	dedupe  string
	group   string
	cancel  context.CancelFunc
	done    chan error
	logs    *testenv.LogBuffer
	upload  atomic.Int32 // status the proxy answers uploads with; 0 passes them
	gcsCli  *storage.Client
	maxAtts int
	reg     prometheus.Registerer // the loop's metrics; nil: none
}

func newReplicateEnv(t *testing.T) *lenv {
	t.Helper()
	r := testenv.StartRedis(t)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	blobs, err := local.New(local.Options{Dir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	n := seq.Add(1)
	e := &lenv{
		t: t, client: client, gcs: testenv.StartGCS(t, destBucket, otherBucket), blobs: blobs,
		prefix: fmt.Sprintf("t%d/reps", n),
		stream: fmt.Sprintf("t%d:content.replicate", n), facts: fmt.Sprintf("t%d:content.artifacts", n),
		dlq: fmt.Sprintf("t%d:content.replicate.dlq", n), dedupe: fmt.Sprintf("t%d:cmd:replicate:", n),
		group: fmt.Sprintf("t%d.replicate", n), logs: &testenv.LogBuffer{}, maxAtts: 2,
	}
	// A real proxy in front of the fake, so a test can make the provider
	// answer an upload with a status the fake never sends.
	proxy := e.gcs.Proxy(t)
	proxy.Answer(func(r *http.Request) int {
		if strings.HasPrefix(r.URL.Path, "/upload/") {
			return int(e.upload.Load())
		}
		return 0
	})
	e.gcsCli = proxy.Client
	return e
}

// start runs the loop until the test ends.
func (e *lenv) start() {
	e.t.Helper()
	aliases, err := replicate.NewAliases(map[string]replicate.Binding{
		"primary": {Provider: replicate.ProviderGCS, Bucket: destBucket, Prefix: e.prefix},
		"other":   {Provider: replicate.ProviderGCS, Bucket: otherBucket, Prefix: "elsewhere"},
		"drive":   {Provider: replicate.ProviderGDrive},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	log := slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h, err := replicate.New(replicate.Options{Source: e.blobs, Aliases: aliases, GCS: e.gcsCli, WriteTimeout: 10 * time.Second, Logger: log})
	if err != nil {
		e.t.Fatal(err)
	}
	l := newReplicateLoop(e.client, replicateOptions{
		Loop: engine.Config{StartID: "0", ReadBlock: 50 * time.Millisecond, ClaimMinIdle: 300 * time.Millisecond,
			MaxDeliveryAttempts: e.maxAtts, Logger: log, Registerer: e.reg},
		Consumer: "w1", Stream: e.stream, Group: e.group, FactsStream: e.facts, DLQStream: e.dlq, DedupePrefix: e.dedupe,
		Handler: h,
	})
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel, e.done = cancel, make(chan error, 1)
	go func() { e.done <- l.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		if err := <-e.done; err != nil {
			e.t.Errorf("Run: %v", err)
		}
	})
}

func (e *lenv) store(data []byte) string {
	e.t.Helper()
	b, err := e.blobs.Put(context.Background(), bytes.NewReader(data), sink.PutOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return b.URI
}

func (e *lenv) command(id, blobURI string, edits ...func(*envelope.ContentReplicate)) *envelope.ContentReplicate {
	c := &envelope.ContentReplicate{
		SchemaVersion: envelope.SchemaVersion, OccurredAt: time.Now().UTC(), CommandID: id,
		BlobURI: blobURI, MediaType: "text/plain", Provider: replicate.ProviderGCS,
		CredentialsAlias: "primary", Destination: "a/" + id + ".txt",
		InfoItemRepSpecID: "spec-1", SourceRevisionID: "rev-1", InfoSourceID: "src-1",
	}
	for _, edit := range edits {
		edit(c)
	}
	return c
}

func (e *lenv) add(fields map[string]string) string {
	e.t.Helper()
	x := e.client.B().Xadd().Key(e.stream).Id("*").FieldValue()
	for k, v := range fields {
		x = x.FieldValue(k, v)
	}
	id, err := e.client.Do(context.Background(), x.Build()).ToString()
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

func (e *lenv) addModel(m envelope.Model) string {
	e.t.Helper()
	fields, err := envelope.ToWire(m)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.add(fields)
}

func (e *lenv) entries(stream string) []rueidis.XRangeEntry {
	e.t.Helper()
	got, err := e.client.Do(context.Background(), e.client.B().Xrange().Key(stream).Start("-").End("+").Build()).AsXRange()
	if err != nil && !rueidis.IsRedisNil(err) {
		e.t.Fatal(err)
	}
	return got
}

func (e *lenv) factsNow() []envelope.Model {
	e.t.Helper()
	var out []envelope.Model
	for _, en := range e.entries(e.facts) {
		m, err := envelope.FromWire(en.FieldValues)
		if err != nil {
			e.t.Fatalf("fact %s: %v", en.ID, err)
		}
		out = append(out, m)
	}
	return out
}

func (e *lenv) pending() int64 {
	e.t.Helper()
	arr, err := e.client.Do(context.Background(), e.client.B().Xpending().Key(e.stream).Group(e.group).Build()).ToArray()
	if err != nil {
		return -1
	}
	n, _ := arr[0].AsInt64()
	return n
}

func (e *lenv) deduped(id string) bool {
	n, _ := e.client.Do(context.Background(), e.client.B().Exists().Key(e.dedupe+id).Build()).AsInt64()
	return n == 1
}

func (e *lenv) object(bucket, key string) ([]byte, bool) {
	e.t.Helper()
	r, err := e.gcs.Client.Bucket(bucket).Object(key).NewReader(context.Background())
	if errors.Is(err, storage.ErrObjectNotExist) {
		return nil, false
	}
	if err != nil {
		e.t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		e.t.Fatal(err)
	}
	return b, true
}

func TestReplicateLoopCompletesAndDedupes(t *testing.T) {
	e := newReplicateEnv(t)
	e.start()
	data := []byte("the fetched bytes")
	cmd := e.command("c1", e.store(data))
	e.addModel(cmd)
	testenv.Eventually(t, 10*time.Second, "the fact", func() bool { return len(e.factsNow()) == 1 })
	done, ok := e.factsNow()[0].(*envelope.ReplicationComplete)
	if !ok {
		t.Fatalf("fact = %#v, want replication_complete", e.factsNow()[0])
	}
	key := e.prefix + "/a/c1.txt"
	if want := replicate.PublicURLBase + "/" + destBucket + "/" + key; done.PublicURL != want || done.CommandID != "c1" || done.InfoItemRepSpecID != "spec-1" {
		t.Errorf("fact = %+v, want public_url %s and the command's ids", done, want)
	}
	if got, ok := e.object(destBucket, key); !ok || !bytes.Equal(got, data) {
		t.Errorf("object %s = %q (exists %v), want the blob's bytes", key, got, ok)
	}
	testenv.Eventually(t, 5*time.Second, "the ack", func() bool { return e.pending() == 0 && e.deduped("c1") })

	// The same command_id again: acked, nothing written or announced.
	e.addModel(e.command("c1", cmd.BlobURI))
	testenv.Eventually(t, 5*time.Second, "the duplicate acked", func() bool {
		return e.pending() == 0 && strings.Contains(e.logs.String(), "skipped an already-handled command")
	})
	if n := len(e.factsNow()); n != 1 {
		t.Errorf("%d facts after the duplicate, want 1", n)
	}
}

func TestReplicateLoopRefusalsAreAnnouncedThenDeadLettered(t *testing.T) {
	e := newReplicateEnv(t)
	e.start()
	uri := e.store([]byte("stored"))
	gone := e.blobs.URI(strings.Repeat("ab", 32))
	conflict := e.store([]byte("new bytes"))
	if err := e.gcs.Client.Bucket(destBucket).Object(e.prefix + "/taken.txt").NewWriter(context.Background()).Close(); err != nil {
		t.Fatal(err)
	}
	rows := []struct {
		cmd  *envelope.ContentReplicate
		want envelope.ReplicateReason
	}{
		{e.command("r-alias", uri, func(c *envelope.ContentReplicate) { c.CredentialsAlias = "nobody" }), envelope.ReplicateReasonAliasUnknown},
		{e.command("r-provider", uri, func(c *envelope.ContentReplicate) { c.Provider = replicate.ProviderIA }), envelope.ReplicateReasonProviderDisabled},
		{e.command("r-drive", uri, func(c *envelope.ContentReplicate) {
			c.CredentialsAlias, c.Provider = "drive", replicate.ProviderGDrive
		}), envelope.ReplicateReasonProviderDisabled},
		{e.command("r-dest", uri, func(c *envelope.ContentReplicate) { c.Destination = "../outside.txt" }), envelope.ReplicateReasonInvalidDestination},
		{e.command("r-source", "file:///etc/passwd"), envelope.ReplicateReasonInvalidSource},
		{e.command("r-expired", gone), envelope.ReplicateReasonBlobExpired},
		{e.command("r-conflict", conflict, func(c *envelope.ContentReplicate) { c.Destination = "taken.txt" }), envelope.ReplicateReasonDestinationConflict},
		// blob_uri spellings that are not what this store mints.
		{e.command("r-traversal", traverse(uri)), envelope.ReplicateReasonInvalidSource},
		{e.command("r-percent", strings.Replace(uri, ".bin", "%2Ebin", 1)), envelope.ReplicateReasonInvalidSource},
		{e.command("r-upper", upperHex(uri)), envelope.ReplicateReasonInvalidSource},
		{e.command("r-query", uri+"?x=1"), envelope.ReplicateReasonInvalidSource},
		{e.command("r-scheme", "https://example.com/"+fingerprintOf(uri)+".bin"), envelope.ReplicateReasonInvalidSource},
		{e.command("r-other-backend", "gs://temp-bucket/blobs/"+fingerprintOf(uri)+".bin"), envelope.ReplicateReasonBlobExpired},
	}
	ids := map[string]string{}
	for _, r := range rows {
		ids[r.cmd.CommandID] = e.addModel(r.cmd)
	}
	testenv.Eventually(t, 10*time.Second, "every dead letter", func() bool { return len(e.entries(e.dlq)) == len(rows) })
	testenv.Eventually(t, 5*time.Second, "every ack", func() bool { return e.pending() == 0 })
	failed := map[string]envelope.ReplicateReason{}
	for _, f := range e.factsNow() {
		rf, ok := f.(*envelope.ReplicationFailed)
		if !ok || !rf.Terminal {
			t.Fatalf("fact = %#v, want a terminal replication_failed", f)
		}
		failed[rf.CommandID] = rf.Reason
	}
	dead := map[string]string{}
	for _, d := range e.entries(e.dlq) {
		m, _ := envelope.FromWire(d.FieldValues)
		cmd := m.(*envelope.ContentReplicate)
		dead[cmd.CommandID] = d.FieldValues[envelope.FieldDLQReason]
		if d.FieldValues[envelope.FieldDLQOriginalID] != ids[cmd.CommandID] {
			t.Errorf("%s: dlq_original_id %s, want %s", cmd.CommandID, d.FieldValues[envelope.FieldDLQOriginalID], ids[cmd.CommandID])
		}
	}
	for _, r := range rows {
		id := r.cmd.CommandID
		if failed[id] != r.want || dead[id] != string(r.want) {
			t.Errorf("%s: fact reason %q, dlq_reason %q; want %q for both", id, failed[id], dead[id], r.want)
		}
		if e.deduped(id) {
			t.Errorf("%s: a refused command set its dedupe key", id)
		}
	}
	if _, ok := e.object(destBucket, e.prefix+"/../outside.txt"); ok {
		t.Error("a refused destination was written")
	}
}

// fingerprintOf is the fingerprint a local blob_uri names.
func fingerprintOf(uri string) string {
	return strings.TrimSuffix(uri[strings.LastIndex(uri, "/")+1:], ".bin")
}

// traverse spells a blob_uri with a dot-dot segment that names the same
// file.
func traverse(uri string) string {
	shard := "/" + fingerprintOf(uri)[0:2] + "/"
	return strings.Replace(uri, shard, shard+".."+shard, 1)
}

// upperHex spells a blob_uri's fingerprint in upper case.
func upperHex(uri string) string {
	fp := fingerprintOf(uri)
	return strings.Replace(uri, fp, strings.ToUpper(fp), 1)
}

// TestReplicateLoopAnAliasWritesOnlyUnderItsRoot: a command naming the alias of
// another bucket writes there, under that alias's prefix, and nowhere else.
func TestReplicateLoopAnAliasWritesOnlyUnderItsRoot(t *testing.T) {
	e := newReplicateEnv(t)
	e.start()
	data := []byte("for the other bucket")
	e.addModel(e.command("other", e.store(data), func(c *envelope.ContentReplicate) {
		c.CredentialsAlias, c.Destination = "other", "x/"+destBucket+"/a.txt"
	}))
	testenv.Eventually(t, 10*time.Second, "the fact", func() bool { return len(e.factsNow()) == 1 })
	done, ok := e.factsNow()[0].(*envelope.ReplicationComplete)
	want := replicate.PublicURLBase + "/" + otherBucket + "/elsewhere/x/" + destBucket + "/a.txt"
	if !ok || done.PublicURL != want {
		t.Fatalf("fact = %#v, want replication_complete at %s", e.factsNow()[0], want)
	}
	if got, ok := e.object(otherBucket, "elsewhere/x/"+destBucket+"/a.txt"); !ok || !bytes.Equal(got, data) {
		t.Errorf("the copy is not under the other alias's root")
	}
	it := e.gcs.Client.Bucket(destBucket).Objects(context.Background(), nil)
	if o, err := it.Next(); err == nil {
		t.Errorf("an object %q appeared in %s", o.Name, destBucket)
	}
}

func TestReplicateLoopFramesRefusedBeforeHandling(t *testing.T) {
	e := newReplicateEnv(t)
	e.start()
	uri := e.store([]byte("stored"))
	future := e.command("v2", uri)
	future.SchemaVersion = 2
	e.add(map[string]string{"payload": "{", "event_type": "content_replicate"})
	e.addModel(&envelope.ContentFetch{CommandID: "fetch-1", URL: "https://example.com/", InfoSourceID: "s", OccurredAt: time.Now()})
	e.addModel(future)
	e.addModel(e.command(" ", uri))
	testenv.Eventually(t, 10*time.Second, "four dead letters", func() bool { return len(e.entries(e.dlq)) == 4 })
	var reasons []string
	for _, d := range e.entries(e.dlq) {
		reasons = append(reasons, d.FieldValues[envelope.FieldDLQReason])
	}
	want := []string{envelope.DLQMalformedFrame, envelope.DLQForeignPayload, "unsupported_schema_version", envelope.DLQBlankCommandID}
	if fmt.Sprint(reasons) != fmt.Sprint(want) {
		t.Errorf("dlq reasons %v, want %v", reasons, want)
	}
	facts := e.factsNow()
	if len(facts) != 1 {
		t.Fatalf("%d facts, want only the unsupported version's", len(facts))
	}
	if rf, ok := facts[0].(*envelope.ReplicationFailed); !ok || rf.CommandID != "v2" || rf.Reason != envelope.ReplicateReasonUnsupportedSchemaVersion {
		t.Errorf("fact = %#v, want replication_failed unsupported_schema_version for v2", facts[0])
	}
}

func TestReplicateLoopProviderTroubleStaysPendingThenCompletes(t *testing.T) {
	e := newReplicateEnv(t)
	e.upload.Store(http.StatusServiceUnavailable)
	e.start()
	e.addModel(e.command("c503", e.store([]byte("retried"))))
	testenv.Eventually(t, 10*time.Second, "a refused upload", func() bool { return strings.Contains(e.logs.String(), `"outcome":"transient"`) })
	if n := len(e.factsNow()); n != 0 || e.pending() != 1 {
		t.Fatalf("%d facts and %d pending after a 503, want none and 1", n, e.pending())
	}
	e.upload.Store(0)
	testenv.Eventually(t, 10*time.Second, "the retry through the reclaim", func() bool { return len(e.factsNow()) == 1 })
	if _, ok := e.factsNow()[0].(*envelope.ReplicationComplete); !ok {
		t.Errorf("fact = %#v, want replication_complete", e.factsNow()[0])
	}
	if n := len(e.entries(e.dlq)); n != 0 {
		t.Errorf("%d dead letters, want none: transient failures never count", n)
	}
}

func TestReplicateLoopProviderRefusalsCloseTheCommand(t *testing.T) {
	for _, tc := range []struct {
		status int
		want   envelope.ReplicateReason
	}{
		{http.StatusBadRequest, envelope.ReplicateReasonInvalidDestination},
		{http.StatusForbidden, envelope.ReplicateReasonProviderDisabled},
		{http.StatusNotFound, envelope.ReplicateReasonProviderDisabled},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			e := newReplicateEnv(t)
			e.upload.Store(int32(tc.status))
			e.start()
			e.addModel(e.command("c", e.store([]byte("refused"))))
			testenv.Eventually(t, 10*time.Second, "the dead letter", func() bool { return len(e.entries(e.dlq)) == 1 })
			facts := e.factsNow()
			if len(facts) != 1 {
				t.Fatalf("%d facts, want 1", len(facts))
			}
			if rf, ok := facts[0].(*envelope.ReplicationFailed); !ok || rf.Reason != tc.want {
				t.Errorf("fact = %#v, want replication_failed %s", facts[0], tc.want)
			}
		})
	}
}

// TestReplicateLoopRedeliveryAfterACrashBetweenWriteAndFact: the object is written
// but its fact cannot be published (the facts key holds a string, so every
// XADD fails), so the command stays pending. Once facts can be published
// again the redelivery finds the same bytes there and announces the same
// public_url: one object, one complete fact.
func TestReplicateLoopRedeliveryAfterACrashBetweenWriteAndFact(t *testing.T) {
	e := newReplicateEnv(t)
	ctx := context.Background()
	if err := e.client.Do(ctx, e.client.B().Set().Key(e.facts).Value("not a stream").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	e.start()
	data := []byte("written once")
	e.addModel(e.command("crash", e.store(data)))
	key := e.prefix + "/a/crash.txt"
	testenv.Eventually(t, 10*time.Second, "the write without its fact", func() bool {
		_, ok := e.object(destBucket, key)
		return ok && strings.Contains(e.logs.String(), `"op":"publish"`)
	})
	attrs, err := e.gcs.Client.Bucket(destBucket).Object(key).Attrs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if e.pending() != 1 || e.deduped("crash") {
		t.Fatalf("pending %d, deduped %v; want the command pending without its key", e.pending(), e.deduped("crash"))
	}
	if err := e.client.Do(ctx, e.client.B().Del().Key(e.facts).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the redelivery's fact", func() bool { return len(e.entries(e.facts)) == 1 })
	done, ok := e.factsNow()[0].(*envelope.ReplicationComplete)
	if want := replicate.PublicURLBase + "/" + destBucket + "/" + key; !ok || done.PublicURL != want {
		t.Fatalf("fact = %#v, want replication_complete for %s", e.factsNow()[0], want)
	}
	again, err := e.gcs.Client.Bucket(destBucket).Object(key).Attrs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again.Generation != attrs.Generation {
		t.Errorf("object generation %d, was %d: the redelivery wrote it again", again.Generation, attrs.Generation)
	}
	testenv.Eventually(t, 5*time.Second, "the ack", func() bool { return e.pending() == 0 && e.deduped("crash") })
}

// TestReplicateLoopUnclassifiedClosesAtTheCeiling: a stored blob that no longer
// hashes to its fingerprint is no refusal a reason describes; it stays
// pending until MaxDeliveryAttempts deliveries, then handler_error with
// attempts, then the dead letter.
func TestReplicateLoopUnclassifiedClosesAtTheCeiling(t *testing.T) {
	e := newReplicateEnv(t)
	uri := e.store([]byte("original bytes"))
	fp := uri[strings.LastIndex(uri, "/")+1 : len(uri)-len(".bin")]
	if err := os.WriteFile(e.blobs.Path(fp), []byte("damaged bytes!"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.start()
	e.addModel(e.command("damaged", uri))
	testenv.Eventually(t, 15*time.Second, "the dead letter", func() bool { return len(e.entries(e.dlq)) == 1 })
	facts := e.factsNow()
	if len(facts) != 1 {
		t.Fatalf("%d facts, want 1", len(facts))
	}
	rf, ok := facts[0].(*envelope.ReplicationFailed)
	if !ok || rf.Reason != envelope.ReplicateReasonHandlerError || rf.Attempts == nil || *rf.Attempts != e.maxAtts {
		t.Errorf("fact = %+v, want handler_error with attempts %d", facts[0], e.maxAtts)
	}
	if d := e.entries(e.dlq)[0].FieldValues[envelope.FieldDLQReason]; d != "handler_error" {
		t.Errorf("dlq_reason %q, want handler_error", d)
	}
	if _, ok := e.object(destBucket, e.prefix+"/a/damaged.txt"); ok {
		t.Error("damaged bytes were copied")
	}
}

// TestReplicateLoopDefaults: a content.replicate loop built with nothing
// set but its Handler has the defaults the replicate worker had:
// DefaultConcurrency writes at once in arrival order, twice as many held,
// a drain of the write timeout plus DrainMargin.
func TestReplicateLoopDefaults(t *testing.T) {
	blobs, err := local.New(local.Options{Dir: t.TempDir(), Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	h, err := replicate.New(replicate.Options{Source: blobs, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	got := newReplicateLoop(nil, replicateOptions{Loop: engine.Config{Logger: discard}, Handler: h}).Capability()
	want := capability.Capability{
		Name:            "replicate",
		MetricsPrefix:   "replicator_replicate_",
		Handler:         h,
		Stream:          "content.replicate",
		Group:           "replicator.replicate",
		FactsStream:     "content.artifacts",
		DLQStream:       "content.replicate.dlq",
		DedupePrefix:    "replicator:cmd:replicate:",
		Consumer:        "replicator-replicate-1",
		Concurrency:     4,
		MaxHeld:         8,
		MaxHeldPerKey:   8, // one queue
		MaxActivePerKey: 4,
		DrainTimeout:    130 * time.Second,
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateComparable(h)); diff != "" {
		t.Errorf("capability defaults mismatch (-want +got):\n%s", diff)
	}
}

// TestReplicateLoopLogLines checks the one line per handled command: stable
// keys, whatever the outcome.
func TestReplicateLoopLogLines(t *testing.T) {
	e := newReplicateEnv(t)
	e.start()
	e.addModel(e.command("c-ok", e.store([]byte("logged"))))
	e.addModel(e.command("c-alias", e.store([]byte("refused")), func(c *envelope.ContentReplicate) { c.CredentialsAlias = "nobody" }))
	testenv.Eventually(t, 10*time.Second, "both commands settled", func() bool {
		return len(e.factsNow()) == 2 && e.pending() == 0
	})
	keys := []string{"capability", "message_id", "command_id", "credentials_alias", "provider", "destination",
		"outcome", "reason", "duration_ms", "created"}
	seen := map[string]bool{}
	for line := range strings.Lines(e.logs.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if rec["msg"] != "handled command" {
			continue
		}
		for _, k := range keys {
			if _, ok := rec[k]; !ok {
				t.Errorf("handled-command line lacks %q: %s", k, line)
			}
		}
		seen[fmt.Sprint(rec["command_id"], "/", rec["outcome"], "/", rec["created"])] = true
	}
	for _, want := range []string{"c-ok/complete/true", "c-alias/permanent/false"} {
		if !seen[want] {
			t.Errorf("no handled-command line for %s; saw %v", want, seen)
		}
	}
}

// TestReplicateLoopMetrics checks the names the dashboards and alert rules
// read (docs/operations.md, Metrics and health).
func TestReplicateLoopMetrics(t *testing.T) {
	e := newReplicateEnv(t)
	reg := prometheus.NewRegistry()
	e.reg = reg
	e.start()
	e.addModel(e.command("c-ok", e.store([]byte("counted"))))
	e.addModel(e.command("c-alias", e.store([]byte("refused")), func(c *envelope.ContentReplicate) { c.CredentialsAlias = "nobody" }))
	e.add(map[string]string{"payload": "{", "event_type": "content_replicate"})
	testenv.Eventually(t, 10*time.Second, "every command settled", func() bool {
		return len(e.entries(e.dlq)) == 2 && len(e.factsNow()) == 2 && e.pending() == 0
	})
	got := gather(t, reg)
	want := map[string]float64{
		`replicator_replicate_commands_total{outcome="complete",reason=""}`:               1,
		`replicator_replicate_commands_total{outcome="permanent",reason="alias_unknown"}`: 1,
		`replicator_replicate_commands_total{outcome="refused",reason="malformed_frame"}`: 1,
		`replicator_replicate_dlq_writes_total{reason="alias_unknown"}`:                   1,
		`replicator_replicate_dlq_writes_total{reason="malformed_frame"}`:                 1,
		`replicator_replicate_duration_seconds{outcome="complete"}`:                       1, // sample count
		`replicator_replicate_handlers_busy`:                                              0,
		`replicator_replicate_held_commands`:                                              0,
		`replicator_replicate_unwritten_fates`:                                            0,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (exported %v), want %v", k, g, ok, v)
		}
	}
	// Counters without labels are exported at zero; broker_failures_total,
	// by op, only once an op has failed.
	for _, name := range []string{"replicator_replicate_reclaimed_total", "replicator_replicate_cycle_failures_total"} {
		if !exported(reg, name) {
			t.Errorf("%s is not exported", name)
		}
	}
}

// exported reports whether reg has a metric family named name.
func exported(reg *prometheus.Registry, name string) bool {
	families, _ := reg.Gather()
	for _, f := range families {
		if f.GetName() == name {
			return true
		}
	}
	return false
}
