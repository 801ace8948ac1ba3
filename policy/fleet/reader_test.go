package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/policy"
)

var stamp0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// published is a live fetch_policy_state for host, stamped sec seconds after
// stamp0.
func published(host string, interval float64, sec int) *envelope.FetchPolicyState {
	return &envelope.FetchPolicyState{
		SchemaVersion:      envelope.SchemaVersion,
		OccurredAt:         stamp0.Add(time.Duration(sec) * time.Second),
		Host:               host,
		MinIntervalSeconds: &interval,
	}
}

// revoked is a tombstone for host, stamped sec seconds after stamp0.
func revoked(host string, sec int) *envelope.FetchPolicyState {
	return &envelope.FetchPolicyState{
		SchemaVersion: envelope.SchemaVersion,
		OccurredAt:    stamp0.Add(time.Duration(sec) * time.Second),
		Host:          host,
		Revoked:       true,
	}
}

// frame encodes m as the stream entry a producer would XADD.
func frame(t testing.TB, m envelope.Model) map[string]string {
	t.Helper()
	f, err := envelope.ToWire(m)
	if err != nil {
		t.Fatalf("ToWire: %v", err)
	}
	return f
}

// poison is an entry that will never decode.
var poison = map[string]string{
	"key": "x", "event_type": envelope.EventFetchPolicyState, "payload": "{not json",
	"schema_version": "1", "occurred_at": "2026-03-01T12:00:00.000000Z", "content_type": envelope.ContentType,
}

func xaddCmd(client rueidis.Client, stream string, fields map[string]string) rueidis.Completed {
	fv := client.B().Xadd().Key(stream).Id("*").FieldValue()
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		fv = fv.FieldValue(k, fields[k])
	}
	return fv.Build()
}

// xadd appends entries to stream, pipelined in chunks.
func xadd(t testing.TB, client rueidis.Client, stream string, entries ...map[string]string) {
	t.Helper()
	for chunk := range slices.Chunk(entries, 1000) {
		cmds := make(rueidis.Commands, 0, len(chunk))
		for _, f := range chunk {
			cmds = append(cmds, xaddCmd(client, stream, f))
		}
		for _, res := range client.DoMulti(context.Background(), cmds...) {
			if err := res.Error(); err != nil {
				t.Fatalf("XADD: %v", err)
			}
		}
	}
}

// startReader runs a reader until the test ends, and returns it with a
// channel that receives after every batch it applies.
func startReader(t *testing.T, client rueidis.Client, tab *policy.Table, opts ReaderOptions) (*Reader, <-chan struct{}) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	r := NewReader(client, tab, opts)
	batches := make(chan struct{}, 1)
	r.afterBatch = func() {
		select {
		case batches <- struct{}{}:
		default:
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("Run returned %v; want context.Canceled", err)
		}
	})
	return r, batches
}

// waitFor waits, batch by batch, until cond holds or within passes.
func waitFor(t *testing.T, batches <-chan struct{}, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-batches:
		case <-deadline.C:
			t.Fatalf("%s: not within %v", what, within)
		}
	}
}

func waitReplayed(t *testing.T, r *Reader, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := r.WaitReplayed(ctx); err != nil {
		t.Fatalf("replay not done within %v: %v", within, err)
	}
}

func TestReaderReplayLosesNothingAroundAPoisonFrame(t *testing.T) {
	srv := testenv.StartRedis(t)
	client := newClient(t, srv.Addr)
	const n = 10_000
	var entries []map[string]string
	for i := range n {
		if i == n/2 {
			entries = append(entries,
				poison,
				// A foreign model and a future version decode, and are ignored.
				frame(t, &envelope.BlobAvailable{OccurredAt: stamp0, ContentFingerprint: "ab", BlobURI: "file:///x",
					MediaType: "text/plain", URL: "https://h1.test/", CommandID: "c", InfoSourceID: "i"}),
				frame(t, withSchema(published("h2.test", 99, 5), 2)),
			)
		}
		entries = append(entries, frame(t, published(fmt.Sprintf("h%d.test", i), float64(i%7), 0)))
	}
	// The last frame revokes a host replayed earlier.
	entries = append(entries, frame(t, revoked("h3.test", 1)))
	xadd(t, client, DefaultPolicyStream, entries...)

	tab := policy.NewTable()
	r, _ := startReader(t, client, tab, ReaderOptions{BatchSize: 500, Block: 200 * time.Millisecond})
	waitReplayed(t, r, 60*time.Second)

	if got, want := tab.Len(), n-1; got != want {
		t.Errorf("Len() = %d; want %d", got, want)
	}
	for i := range n {
		host := fmt.Sprintf("h%d.test", i)
		d, ok := tab.Floor(host)
		want := time.Duration(i%7) * time.Second
		if i == 3 {
			if ok {
				t.Errorf("Floor(%s) = %v; want revoked", host, d)
			}
			continue
		}
		if !ok || d != want {
			t.Errorf("Floor(%s) = %v, %v; want %v", host, d, ok, want)
		}
	}
	if got := r.Skipped(); got != 1 {
		t.Errorf("Skipped() = %d; want 1", got)
	}
	if got := r.Applied(); got != n+1 {
		t.Errorf("Applied() = %d; want %d", got, n+1)
	}
}

func withSchema(p *envelope.FetchPolicyState, v int) *envelope.FetchPolicyState {
	p.SchemaVersion = v
	return p
}

func TestReaderTailAppliesWithinOneBlock(t *testing.T) {
	srv := testenv.StartRedis(t)
	client := newClient(t, srv.Addr)
	const block = 2 * time.Second
	xadd(t, client, "test.policy", frame(t, published("old.test", 5, 0)))

	tab := policy.NewTable()
	r, batches := startReader(t, client, tab, ReaderOptions{Stream: "test.policy", Block: block})
	waitReplayed(t, r, 10*time.Second)
	if d, ok := tab.Floor("old.test"); !ok || d != 5*time.Second {
		t.Fatalf("replayed Floor(old.test) = %v, %v", d, ok)
	}

	// Let the reader settle into its blocking XREAD, then publish.
	select {
	case <-batches:
	default:
	}
	for range 3 {
		sent := time.Now()
		xadd(t, client, "test.policy", frame(t, published("new.test", float64(sent.Nanosecond()%9+1), 1)))
		want := time.Duration(sent.Nanosecond()%9+1) * time.Second
		waitFor(t, batches, block, "the new frame applied", func() bool {
			d, ok := tab.Floor("new.test")
			return ok && d == want
		})
		if took := time.Since(sent); took > block {
			t.Errorf("a new frame took %v to apply; want within one block (%v)", took, block)
		}
	}
}

func TestReaderSurvivesRedisRestart(t *testing.T) {
	srv := testenv.StartRedis(t)
	client := newClient(t, srv.Addr)
	xadd(t, client, DefaultPolicyStream, frame(t, published("a.test", 5, 0)))
	log, logs := testLogger()
	tab := policy.NewTable()
	r, batches := startReader(t, client, tab, ReaderOptions{
		Block: 300 * time.Millisecond, BackoffBase: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond, Logger: log,
	})
	waitReplayed(t, r, 10*time.Second)

	srv.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for logs.Count("fetch policy read failed") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no failed read logged with Redis down\n%s", logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	// The restarted server lost the stream; what was applied stays applied,
	// and what is published now reaches the table.
	// The client's old connection died with the server; its first write may
	// fail before it reconnects.
	for i := 0; ; i++ {
		// A built command is spent by Do, so build it each time.
		add := xaddCmd(client, DefaultPolicyStream, frame(t, published("b.test", 7, 1)))
		err := client.Do(context.Background(), add).Error()
		if err == nil {
			break
		}
		if i == 50 {
			t.Fatalf("XADD after the restart: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitFor(t, batches, 10*time.Second, "a frame published after the restart applied", func() bool {
		d, ok := tab.Floor("b.test")
		return ok && d == 7*time.Second
	})
	if d, ok := tab.Floor("a.test"); !ok || d != 5*time.Second {
		t.Errorf("Floor(a.test) after the outage = %v, %v; want 5s kept", d, ok)
	}
	if logs.Count("fetch policy reads recovered") != 1 {
		t.Errorf("want one recovery line\n%s", logs)
	}
}

func TestReaderRunsOfMalformedFrames(t *testing.T) {
	srv := testenv.StartRedis(t)
	client := newClient(t, srv.Addr)
	var entries []map[string]string
	for range 5 {
		entries = append(entries, poison)
	}
	entries = append(entries, frame(t, published("after.test", 3, 0)))
	xadd(t, client, DefaultPolicyStream, entries...)

	tab := policy.NewTable()
	r, batches := startReader(t, client, tab, ReaderOptions{MaxSkips: 3, Block: 100 * time.Millisecond, BatchSize: 2})
	// Three in a row end the replay early rather than holding the worker.
	waitReplayed(t, r, 10*time.Second)
	// Nothing after the run is lost: the tail reads on from the same place.
	waitFor(t, batches, 10*time.Second, "the frame after the run applied", func() bool {
		_, ok := tab.Floor("after.test")
		return ok
	})
	if got := r.Skipped(); got != 5 {
		t.Errorf("Skipped() = %d; want 5", got)
	}
}

func TestReaderErrorReplyEndsTheReplay(t *testing.T) {
	srv := testenv.StartRedis(t)
	client := newClient(t, srv.Addr)
	if got, err := srv.Do("SET", DefaultPolicyStream, "not a stream"); err != nil || got != "+OK" {
		t.Fatalf("SET: %q, %v", got, err)
	}
	tab := policy.NewTable()
	r, batches := startReader(t, client, tab, ReaderOptions{
		Block: 100 * time.Millisecond, BackoffBase: 20 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
	})
	// WRONGTYPE will not mend by waiting, so the worker is not held back.
	waitReplayed(t, r, 10*time.Second)

	// Once the key is fixed, the reader picks the stream up.
	if _, err := srv.Do("DEL", DefaultPolicyStream); err != nil {
		t.Fatal(err)
	}
	xadd(t, client, DefaultPolicyStream, frame(t, published("a.test", 2, 0)))
	waitFor(t, batches, 10*time.Second, "the stream read after the key was fixed", func() bool {
		_, ok := tab.Floor("a.test")
		return ok
	})
}

func TestReaderReplayWaitsForRedis(t *testing.T) {
	srv := testenv.StartRedis(t)
	client := newClient(t, srv.Addr)
	srv.Stop()
	tab := policy.NewTable()
	r, _ := startReader(t, client, tab, ReaderOptions{
		Block: 100 * time.Millisecond, BackoffBase: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond,
	})
	select {
	case <-r.Replayed():
		t.Fatal("replay reported done while Redis was unreachable")
	case <-time.After(300 * time.Millisecond):
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	waitReplayed(t, r, 10*time.Second)
}

func TestReaderRunStopsPromptlyWhileBlocked(t *testing.T) {
	srv := testenv.StartRedis(t)
	client := newClient(t, srv.Addr)
	r := NewReader(client, policy.NewTable(), ReaderOptions{Block: 30 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	waitReplayed(t, r, 10*time.Second)
	cancel()
	select {
	case err := <-done:
		if err != context.Canceled {
			t.Errorf("Run = %v; want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run still blocked 5s after its context was cancelled")
	}
}

// TestReaderLogsWhatItIgnores: an applied frame is logged at DEBUG, one
// older than the policy in force at INFO (a replay meets those routinely),
// and any other ignored frame at WARN, each with its entry's id.
func TestReaderLogsWhatItIgnores(t *testing.T) {
	srv := testenv.StartRedis(t)
	client := newClient(t, srv.Addr)
	xadd(t, client, DefaultPolicyStream,
		frame(t, published("a.test", 5, 10)),
		frame(t, revoked("b.test", 0)),
		frame(t, published("a.test", 2, 0)), // older than the first
		frame(t, &envelope.BlobAvailable{OccurredAt: stamp0, ContentFingerprint: "ab", BlobURI: "file:///x",
			MediaType: "text/plain", URL: "https://h1.test/", CommandID: "c", InfoSourceID: "i"}),
	)
	log, logs := testLogger()
	r, _ := startReader(t, client, policy.NewTable(), ReaderOptions{Block: 100 * time.Millisecond, Logger: log})
	waitReplayed(t, r, 10*time.Second)

	for _, want := range []struct {
		level, msg string
	}{
		{"DEBUG", `msg="applied a host fetch policy" stream=content.fetch-policy host=a.test min_interval_seconds=5`},
		{"DEBUG", `msg="revoked a host fetch policy; it falls back to the default" stream=content.fetch-policy host=b.test`},
		{"INFO", `msg="ignoring a fetch policy older than the one already applied"`},
		{"WARN", `msg="ignoring a frame on the fetch policy stream"`},
	} {
		if n := logs.Count("level=" + want.level + " " + want.msg); n != 1 {
			t.Errorf("%d lines at %s with %s; want 1\n%s", n, want.level, want.msg, logs)
		}
	}
	if n := logs.Count("level=WARN"); n != 1 {
		t.Errorf("%d WARN lines; want 1\n%s", n, logs)
	}
	if got := r.Applied(); got != 2 {
		t.Errorf("Applied() = %d; want 2", got)
	}
}
