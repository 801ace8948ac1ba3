package main

// Binary-level checks that the running worker applies its settings and the
// fetch-policy stream. config_test.go proves every REPLICATOR_* value
// parses; these prove the parsed values reach the components that use them.

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
)

// wiringFacts waits until stream content.blobs holds want facts (failing if
// the worker exits first) and returns them decoded, keyed by command_id.
// A command with more than one fact fails the test.
func wiringFacts(t *testing.T, c rueidis.Client, w *process, want int) map[string]envelope.Model {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("%d facts on %s", want, streamFacts), func() bool {
		if w.exited() {
			t.Fatalf("worker exited early with %d", w.code)
		}
		return len(readStream(t, c, streamFacts)) >= want
	})
	facts := map[string]envelope.Model{}
	for _, e := range readStream(t, c, streamFacts) {
		m, err := envelope.FromWire(e.FieldValues)
		if err != nil {
			t.Fatalf("fact %s does not decode: %v", e.ID, err)
		}
		var id string
		switch f := m.(type) {
		case *envelope.BlobAvailable:
			id = f.CommandID
		case *envelope.FetchFailed:
			id = f.CommandID
		default:
			t.Fatalf("fact %s is a %T", e.ID, m)
		}
		if _, dup := facts[id]; dup {
			t.Errorf("command %s has more than one fact", id)
		}
		facts[id] = m
	}
	if len(facts) != want {
		t.Fatalf("%d commands have facts, want %d", len(facts), want)
	}
	return facts
}

// TestWorkerAppliesReplayedFetchPolicy checks per-host floors and the policy
// stream (docs/streams.md, Streams) end to end: policies published on
// content.fetch-policy before the worker starts (with the binary's own
// `policy` subcommand) are replayed before the first command is consumed,
// and then pace each host by its published floor instead of
// REPLICATOR_MIN_HOST_INTERVAL_SECONDS:
//
//   - slow.test, published 1.5 s (above the default floor of 0.8 s): its
//     requests reach the origin at least 1.5 s apart, from the very first
//     pair, so the floor was known before its first command was paced;
//   - fast.test, published 0 ("0.0 is a real value, not absent"): its
//     requests arrive without spacing, faster than the default allows;
//   - revoked.test, published 0 then revoked ("a revoked host falls back to
//     the default, never to unlimited"): spaced by the default 0.8 s;
//   - plain.test, no policy: spaced by the default 0.8 s (the control).
//
// Every command is queued before the worker starts, so nothing but the
// replay can have told it the floors; the real policies come after 200,000
// filler ones (about 0.8 s of replay), so a worker that started consuming
// before the replay ended would pace the first gaps of slow.test and
// fast.test at the default. Spacing is measured at the origin, whose
// handler timestamps may run late on a loaded machine: a gap may fall short
// of its floor by jitterAllowed, still far from the floor it must not be.
func TestWorkerAppliesReplayedFetchPolicy(t *testing.T) {
	const (
		perHost       = 3
		defaultFloor  = 800 * time.Millisecond
		slowFloor     = 1500 * time.Millisecond
		jitterAllowed = 300 * time.Millisecond
	)
	hosts := []string{"slow.test", "fast.test", "revoked.test", "plain.test"}
	origin := testenv.StartOrigin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s\n", r.Host, r.URL.Path) // distinct bytes per command
	}))
	srv := testenv.StartRedis(t)
	c := redisClient(t, srv)

	// Filler policies for other hosts go first, so the replay takes many
	// batches (400 of fleet.DefaultBatchSize entries).
	const fillers = 200000
	fields, err := envelope.ToWire(&envelope.FetchPolicyState{SchemaVersion: envelope.SchemaVersion, OccurredAt: time.Now(),
		Host: "filler-nnnn.test", MinIntervalSeconds: new(5.0)})
	if err != nil {
		t.Fatal(err)
	}
	// Generated inside Redis: a client-side loop under -race takes seconds.
	args := []string{strconv.Itoa(fillers)}
	for k, v := range fields {
		args = append(args, k, v)
	}
	const script = `
for i = 1, tonumber(ARGV[1]) do
  local fv = {}
  for j = 2, #ARGV do fv[#fv+1] = (string.gsub(ARGV[j], "nnnn", tostring(i))) end
  redis.call("XADD", KEYS[1], "*", unpack(fv))
end
return redis.call("XLEN", KEYS[1])`
	if n, err := c.Do(t.Context(), c.B().Eval().Script(script).Numkeys(1).Key(streamPolicy).Arg(args...).Build()).AsInt64(); err != nil || n != fillers {
		t.Fatalf("adding filler policies: %d entries, %v", n, err)
	}
	redisEnv := []string{"REPLICATOR_REDIS_URL=" + srv.URL()}
	for _, args := range [][]string{
		{"policy", "set", "slow.test", "1.5"},
		{"policy", "set", "fast.test", "0"},
		{"policy", "set", "revoked.test", "0"},
		{"policy", "revoke", "revoked.test"}, // stamped later, so it wins
	} {
		if r := runBinary(t, redisEnv, args...); r.code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, r.code, r.stderr)
		}
	}

	var resolve []string
	for _, h := range hosts {
		resolve = append(resolve, h+"=127.0.0.1")
	}
	// Interleaved by round, as a real backlog would be.
	for i := range perHost {
		for _, h := range hosts {
			cmd := &envelope.ContentFetch{OccurredAt: time.Now(), CommandID: fmt.Sprintf("policy-%s-%d", h, i),
				URL: origin.URLFor(h, fmt.Sprintf("/c%d", i)), InfoSourceID: "src-policy"}
			if _, err := publish(t.Context(), c, streamCommands, cmd); err != nil {
				t.Fatal(err)
			}
		}
	}

	w := startBinary(t, workerEnv(srv, t.TempDir(),
		"REPLICATOR_RESOLVE="+strings.Join(resolve, ","),
		"REPLICATOR_MIN_HOST_INTERVAL_SECONDS="+strconv.FormatFloat(defaultFloor.Seconds(), 'f', -1, 64),
		"REPLICATOR_CONSUMER_START_ID=0", // the commands were queued before the group existed
	), "worker")
	facts := wiringFacts(t, c, w, perHost*len(hosts))
	for id, m := range facts {
		if f, ok := m.(*envelope.FetchFailed); ok {
			t.Errorf("command %s failed: %s %v", id, f.Reason, wiringStr(f.Detail))
		}
	}
	if code := w.stop(t, 30*time.Second); code != 0 {
		t.Errorf("worker exited %d after SIGTERM, want 0", code)
	}

	byHost := map[string][]time.Time{}
	for _, s := range origin.Requests() {
		byHost[s.Host] = append(byHost[s.Host], s.At)
	}
	for _, h := range hosts {
		times := byHost[h]
		if len(times) != perHost {
			t.Errorf("%s was asked %d times, want %d", h, len(times), perHost)
			continue
		}
		slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
		var gaps []time.Duration
		for k := 1; k < len(times); k++ {
			gaps = append(gaps, times[k].Sub(times[k-1]))
		}
		t.Logf("%s: gaps between arrivals %v", h, gaps)
		switch h {
		case "slow.test":
			for k, g := range gaps {
				if g < slowFloor-jitterAllowed {
					t.Errorf("%s: requests %d and %d arrived %v apart; want at least the published floor %v (default floor is %v)", h, k, k+1, g, slowFloor, defaultFloor)
				}
			}
		case "fast.test":
			// Unspaced arrivals are milliseconds apart; one paced by the
			// default floor would be 0.8 s behind the previous one.
			for k, g := range gaps {
				if g >= defaultFloor*3/4 {
					t.Errorf("%s: requests %d and %d arrived %v apart; with its published floor of 0 they should not be spaced (the default floor %v was applied?)", h, k, k+1, g, defaultFloor)
				}
			}
		default: // revoked.test, plain.test: the default floor
			for k, g := range gaps {
				if g < defaultFloor-jitterAllowed {
					t.Errorf("%s: requests %d and %d arrived %v apart; want at least the default floor %v", h, k, k+1, g, defaultFloor)
				}
			}
		}
	}
}

// wiringBody serves /body/N/FILL/MODE: N bytes of the letter FILL, framed by
// MODE: "cl" with a Content-Length, "chunked" without one (headers flushed
// before the body), "gzip" gzip-encoded (Content-Encoding: gzip), whose
// compressed size is far under N.
func wiringBody(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/body/"), "/")
	if len(parts) != 3 || len(parts[1]) != 1 {
		http.NotFound(w, r)
		return
	}
	n, err := strconv.Atoi(parts[0])
	if err != nil {
		http.NotFound(w, r)
		return
	}
	body := bytes.Repeat([]byte(parts[1]), n)
	w.Header().Set("Content-Type", "application/octet-stream")
	switch parts[2] {
	case "cl":
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.Write(body)
	case "chunked":
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush() // no Content-Length from here on
		w.Write(body)
	case "gzip":
		var zb bytes.Buffer
		zw := gzip.NewWriter(&zb)
		zw.Write(body)
		zw.Close()
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Length", strconv.Itoa(zb.Len()))
		w.Write(zb.Bytes())
	default:
		http.NotFound(w, r)
	}
}

// TestWorkerAppliesSettings runs one worker with unusual values of four
// settings and checks each reaches what it governs (docs/settings.md names them;
// an applied default would pass none of these checks):
//
//   - REPLICATOR_MAX_BLOB_BYTES=1000 (docs/taxonomy.md, The failure taxonomy): a body of exactly
//     1000 bytes is stored, one of 1001 is fetch_failed too_large, whether
//     announced by Content-Length, streamed without one, or gzip-encoded
//     (the ceiling counts decoded bytes); too_large is permanent, so it is
//     dead-lettered, sets no dedupe key, and stores nothing.
//   - REPLICATOR_BLOB_TTL_SECONDS=12345: blob_expires_at is the
//     time read before the store + 12345 s, so it lies between the
//     command's publication and fetched_at (shifted by the TTL), and is
//     never later than the blob file's mtime + TTL, when the sweep reaps it.
//   - REPLICATOR_DEDUPE_TTL_SECONDS=4321: the key
//     replicator:cmd:fetch:<command_id> of each stored command lives 4321 s.
//   - REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS=7: timeout_seconds 7.5
//     ("over" the ceiling) is refused with invalid_request_options before
//     anything reaches the origin; 7 (at it) and 6.5 are fetched.
func TestWorkerAppliesSettings(t *testing.T) {
	const (
		maxBlob   = 1000
		blobTTL   = 12345 * time.Second
		dedupeTTL = 4321 * time.Second
	)
	origin := testenv.StartOrigin(t, http.HandlerFunc(wiringBody))
	srv := testenv.StartRedis(t)
	c := redisClient(t, srv)
	dir := t.TempDir()

	type want struct {
		stored bool
		size   int64           // for stored
		reason envelope.Reason // for failed
	}
	commands := []struct {
		id      string
		path    string
		timeout *float64
		want    want
		reached bool // whether the origin must see the request
	}{
		{id: "cl-at-limit", path: "/body/1000/a/cl", want: want{stored: true, size: maxBlob}, reached: true},
		{id: "cl-over-limit", path: "/body/1001/b/cl", want: want{reason: envelope.ReasonTooLarge}, reached: true},
		{id: "chunked-at-limit", path: "/body/1000/c/chunked", want: want{stored: true, size: maxBlob}, reached: true},
		{id: "chunked-over-limit", path: "/body/1001/d/chunked", want: want{reason: envelope.ReasonTooLarge}, reached: true},
		{id: "gzip-at-limit", path: "/body/1000/e/gzip", want: want{stored: true, size: maxBlob}, reached: true},
		{id: "gzip-over-limit", path: "/body/1001/f/gzip", want: want{reason: envelope.ReasonTooLarge}, reached: true},
		{id: "timeout-at-ceiling", path: "/body/10/g/cl", timeout: new(7.0), want: want{stored: true, size: 10}, reached: true},
		{id: "timeout-within-ceiling", path: "/body/10/h/cl", timeout: new(6.5), want: want{stored: true, size: 10}, reached: true},
		{id: "timeout-over-ceiling", path: "/body/10/i/cl", timeout: new(7.5), want: want{reason: envelope.ReasonInvalidRequestOptions}},
	}
	published := time.Now()
	for _, cmd := range commands {
		m := &envelope.ContentFetch{OccurredAt: time.Now(), CommandID: "settings-" + cmd.id, URL: origin.URL + cmd.path,
			InfoSourceID: "src-settings", TimeoutSeconds: cmd.timeout}
		if _, err := publish(t.Context(), c, streamCommands, m); err != nil {
			t.Fatal(err)
		}
	}

	w := startBinary(t, workerEnv(srv, dir,
		"REPLICATOR_MAX_BLOB_BYTES="+strconv.Itoa(maxBlob),
		"REPLICATOR_BLOB_TTL_SECONDS="+strconv.Itoa(int(blobTTL.Seconds())),
		"REPLICATOR_DEDUPE_TTL_SECONDS="+strconv.Itoa(int(dedupeTTL.Seconds())),
		"REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS=7",
		"REPLICATOR_MIN_HOST_INTERVAL_SECONDS=0",
		"REPLICATOR_CONSUMER_START_ID=0", // the commands were queued before the group existed
	), "worker")
	facts := wiringFacts(t, c, w, len(commands))
	// Every permanent failure is dead-lettered after its fact (docs/taxonomy.md, The failure taxonomy).
	failures := 0
	for _, f := range facts {
		if _, ok := f.(*envelope.FetchFailed); ok {
			failures++
		}
	}
	testenv.Eventually(t, 30*time.Second, fmt.Sprintf("%d dead letters", failures), func() bool {
		return len(readStream(t, c, streamDLQ)) >= failures
	})
	if code := w.stop(t, 30*time.Second); code != 0 {
		t.Errorf("worker exited %d after SIGTERM, want 0", code)
	}

	dlqReasons := map[string]string{}
	for _, e := range readStream(t, c, streamDLQ) {
		cmd, err := envelope.DecodeCommand(e.FieldValues)
		if err != nil {
			t.Errorf("dead letter %s does not decode: %v", e.ID, err)
			continue
		}
		dlqReasons[cmd.CommandID] = e.FieldValues["dlq_reason"]
	}
	reached := map[string]bool{}
	for _, s := range origin.Requests() {
		reached[s.Path] = true
	}

	ctx := context.Background()
	storedBlobs := 0
	for _, cmd := range commands {
		t.Run(cmd.id, func(t *testing.T) {
			id := "settings-" + cmd.id
			if reached[cmd.path] != cmd.reached {
				t.Errorf("origin saw %s: %t, want %t", cmd.path, reached[cmd.path], cmd.reached)
			}
			pttl, err := c.Do(ctx, c.B().Pttl().Key("replicator:cmd:fetch:"+id).Build()).AsInt64()
			if err != nil {
				t.Fatalf("PTTL of the dedupe key: %v", err)
			}
			switch f := facts[id].(type) {
			case *envelope.BlobAvailable:
				if !cmd.want.stored {
					t.Fatalf("got blob_available (size %d), want fetch_failed %s", f.SizeBytes, cmd.want.reason)
				}
				storedBlobs++
				if f.SizeBytes != cmd.want.size {
					t.Errorf("size_bytes = %d, want %d", f.SizeBytes, cmd.want.size)
				}
				info, err := os.Stat(blobPath(t, f.BlobURI))
				if err != nil {
					t.Fatalf("the blob is not stored: %v", err)
				}
				if info.Size() != cmd.want.size {
					t.Errorf("blob file holds %d bytes, want %d", info.Size(), cmd.want.size)
				}

				// REPLICATOR_BLOB_TTL_SECONDS reaches the fact.
				if f.BlobExpiresAt == nil || f.FetchedAt == nil {
					t.Fatalf("blob_expires_at = %v, fetched_at = %v; want both set", f.BlobExpiresAt, f.FetchedAt)
				}
				storeStart := f.BlobExpiresAt.Add(-blobTTL) // what the worker read before the store, if the TTL is 12345 s
				if storeStart.Before(published.Add(-time.Second)) || storeStart.After(*f.FetchedAt) || storeStart.After(f.OccurredAt) {
					t.Errorf("blob_expires_at %s − %v = %s; want it between the command's publication %s and fetched_at %s (occurred_at %s)",
						f.BlobExpiresAt.Format(time.RFC3339Nano), blobTTL, storeStart.Format(time.RFC3339Nano),
						published.UTC().Format(time.RFC3339Nano), f.FetchedAt.Format(time.RFC3339Nano), f.OccurredAt.Format(time.RFC3339Nano))
				}
				if reap := info.ModTime().Add(blobTTL); f.BlobExpiresAt.After(reap.Add(time.Microsecond)) {
					t.Errorf("blob_expires_at %s is after the sweep reaps the blob (mtime + TTL = %s)",
						f.BlobExpiresAt.Format(time.RFC3339Nano), reap.UTC().Format(time.RFC3339Nano))
				}

				// REPLICATOR_DEDUPE_TTL_SECONDS reaches the dedupe key.
				if pttl > dedupeTTL.Milliseconds() || pttl < (dedupeTTL-time.Minute).Milliseconds() {
					t.Errorf("dedupe key TTL = %d ms, want about %d ms (REPLICATOR_DEDUPE_TTL_SECONDS)", pttl, dedupeTTL.Milliseconds())
				}
			case *envelope.FetchFailed:
				if cmd.want.stored {
					t.Fatalf("got fetch_failed %s (%s), want blob_available", f.Reason, wiringStr(f.Detail))
				}
				if f.Reason != cmd.want.reason || !f.Terminal {
					t.Errorf("got fetch_failed reason %s terminal %t, want %s terminal true (detail %q)", f.Reason, f.Terminal, cmd.want.reason, wiringStr(f.Detail))
				}
				if got := dlqReasons[id]; got != string(cmd.want.reason) {
					t.Errorf("dead letter reason = %q, want %q", got, cmd.want.reason)
				}
				if pttl != -2 {
					t.Errorf("dedupe key PTTL = %d, want -2 (no key after a permanent failure)", pttl)
				}
			default:
				t.Fatalf("no fact (%T)", f)
			}
		})
	}

	// Nothing over the ceiling was kept: one .bin per stored (distinct) body,
	// and no temp file left behind.
	var bins, others []string
	filepathWalk(t, dir, func(rel string) {
		if strings.HasSuffix(rel, ".bin") {
			bins = append(bins, rel)
		} else {
			others = append(others, rel)
		}
	})
	if len(bins) != storedBlobs || len(others) != 0 {
		t.Errorf("blob tree holds %d blobs %v and other files %v; want %d blobs and nothing else", len(bins), bins, others, storedBlobs)
	}
}

// filepathWalk calls fn with the path (relative to root) of every file
// under root that is not a directory.
func filepathWalk(t *testing.T, root string, fn func(rel string)) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, path)
		fn(rel)
		return err
	})
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
}

// wiringStr returns *s, or "" for nil.
func wiringStr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
