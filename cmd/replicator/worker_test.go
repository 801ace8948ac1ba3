package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
)

func TestWorkerRefusesBadSettings(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		want []string // each must appear on stderr
	}{
		{name: "read block not a number", env: []string{"REPLICATOR_READ_BLOCK_MS=abc"},
			want: []string{`REPLICATOR_READ_BLOCK_MS="abc"`}},
		{name: "two bad values", env: []string{"REPLICATOR_CONCURRENCY=0", "REPLICATOR_BLOB_BACKEND=s3"},
			want: []string{`REPLICATOR_CONCURRENCY="0"`, `REPLICATOR_BLOB_BACKEND="s3"`}},
		{name: "gcs without bucket", env: []string{"REPLICATOR_BLOB_BACKEND=gcs"},
			want: []string{"REPLICATOR_BLOB_BUCKET"}},
		{name: "the two groups equal", env: []string{"REPLICATOR_CONSUMER_GROUP=replicator.replicate"},
			want: []string{"must name different groups"}},
		{name: "content.persist without a permanent bucket", env: []string{"REPLICATOR_PERSIST_ENABLED=true"},
			want: []string{"REPLICATOR_PERSIST_ENABLED=true needs REPLICATOR_PERMANENT_BUCKET"}},
		// Positive values too small for a time.Duration used to become 0,
		// which the components read as their defaults.
		{name: "blob TTL under a nanosecond", env: []string{"REPLICATOR_BLOB_TTL_SECONDS=1e-10"},
			want: []string{`REPLICATOR_BLOB_TTL_SECONDS="1e-10"`}},
		{name: "fetch timeout ceiling under a nanosecond", env: []string{"REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS=1e-10"},
			want: []string{`REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS="1e-10"`}},
		// Blank numbers are the reference's validation errors, not defaults.
		{name: "blank number", env: []string{"REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS="},
			want: []string{`REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS="": empty`}},
		{name: "blank consumer group", env: []string{"REPLICATOR_CONSUMER_GROUP=  "},
			want: []string{`REPLICATOR_CONSUMER_GROUP="": empty`}},
		// Values the reference boots with that are unsafe here.
		{name: "read block of 0 (BLOCK 0 waits for ever)", env: []string{"REPLICATOR_READ_BLOCK_MS=0"},
			want: []string{`REPLICATOR_READ_BLOCK_MS="0"`}},
		{name: "unbounded storage timeout", env: []string{"REPLICATOR_BLOB_TIMEOUT_SECONDS=inf"},
			want: []string{`REPLICATOR_BLOB_TIMEOUT_SECONDS="inf": not finite`}},
		{name: "two spellings of one name that disagree", env: []string{"REPLICATOR_LOG_LEVEL=DEBUG", "replicator_log_level=ERROR"},
			want: []string{"REPLICATOR_LOG_LEVEL and replicator_log_level are both set, to different values"}},
	}
	// A case that boots after all must reach no Redis but a closed port.
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	nowhere := "REPLICATOR_REDIS_URL=redis://127.0.0.1:" + strconv.Itoa(port) + "/0"
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runBinary(t, append([]string{nowhere}, tt.env...), "worker")
			if r.code != 2 {
				t.Errorf("exit code = %d, want 2", r.code)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr does not contain %s:\n%s", w, r.stderr)
				}
			}
		})
	}
}

func TestWorkerGCSPreflightFailsTheBoot(t *testing.T) {
	fake := testenv.StartGCS(t, "present")
	host := strings.TrimPrefix(fake.URL, "http://")
	r := runBinary(t, []string{
		"STORAGE_EMULATOR_HOST=" + host,
		"REPLICATOR_BLOB_BACKEND=gcs", "REPLICATOR_BLOB_BUCKET=absent",
		// No Redis is needed: storage is checked first.
		"REPLICATOR_REDIS_URL=redis://127.0.0.1:1/0",
	}, "worker")
	if r.code != 1 {
		t.Errorf("exit code = %d, want 1", r.code)
	}
	if !strings.Contains(r.stderr, "blob bucket is not usable") || !strings.Contains(r.stderr, `"blob_bucket":"absent"`) {
		t.Errorf("stderr does not say the bucket is unusable:\n%s", r.stderr)
	}
}

// workerEnv is the environment of a worker against srv, fetching from
// loopback origins and keeping blobs under dir.
func workerEnv(srv *testenv.Redis, dir string, extra ...string) []string {
	return append([]string{
		"REPLICATOR_REDIS_URL=" + srv.URL(),
		"REPLICATOR_ALLOW_CIDRS=127.0.0.0/8",
		"REPLICATOR_BLOB_DIR=" + dir,
		"REPLICATOR_READ_BLOCK_MS=1000",
		"REPLICATOR_MIN_HOST_INTERVAL_SECONDS=0.01",
	}, extra...)
}

// metricsAddr returns a free loopback address for the metrics server.
func metricsAddr(t *testing.T) string {
	t.Helper()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(port)
}

// httpGet returns the status and body of a GET, or status 0 when nothing
// answered.
func httpGet(t *testing.T, u string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestWorkerEndToEnd(t *testing.T) {
	const secret = "Bearer secret-e2e-4b1d9c"
	const body = "the served bytes\n"
	origin := testenv.StartOrigin(t, testenv.Status(200, map[string]string{"Content-Type": "text/plain"}, body))
	srv := testenv.StartRedis(t)
	c := redisClient(t, srv)
	dir := t.TempDir()
	addr := metricsAddr(t)
	w := startBinary(t, workerEnv(srv, dir, "REPLICATOR_METRICS_ADDR="+addr, "REPLICATOR_LOG_LEVEL=DEBUG"), "worker")

	testenv.Eventually(t, 30*time.Second, "/healthz to answer 200", func() bool {
		if w.exited() {
			t.Fatalf("worker exited early with %d", w.code)
		}
		code, _ := httpGet(t, "http://"+addr+"/healthz")
		return code == http.StatusOK
	})

	// seed → worker → fact, with a credential header riding along.
	r := runBinary(t, []string{"REPLICATOR_REDIS_URL=" + srv.URL()}, "seed", "--production", "--info-source-id", "src-e2e",
		"-H", "Authorization: "+secret, "--watch", "--watch-timeout", "30s", origin.URL+"/doc")
	if r.code != 0 {
		t.Fatalf("seed --watch: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	m := regexp.MustCompile(`(?m)^\[1/1\] blob_available command_id=\S+ status=200 size=(\d+) blob_uri=(\S+)$`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("seed printed no blob_available progress line:\n%s", r.stdout)
	}
	path := blobPath(t, m[2])
	if !strings.HasPrefix(path, dir) {
		t.Fatalf("blob_uri %q is not a file under %s", m[2], dir)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != body {
		t.Errorf("blob file holds %q (%v), want %q", got, err, body)
	}
	if reqs := origin.Requests(); len(reqs) != 1 || reqs[0].Header.Get("Authorization") != secret {
		t.Errorf("origin saw %d requests; want 1 carrying the Authorization header", len(reqs))
	}

	// A command the worker must refuse for its headers: the refusal is
	// logged and published without the values.
	refused := &envelope.ContentFetch{OccurredAt: time.Now(), CommandID: "01JREFUSED0000000000000000", URL: origin.URL + "/refused",
		InfoSourceID: "src-e2e", Headers: map[string]string{"Authorization": secret, "Connection": "close " + secret}}
	if _, err := publish(t.Context(), c, streamCommands, refused); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the refused command's dead letter", func() bool {
		return len(readStream(t, c, streamDLQ)) == 1
	})
	facts := readStream(t, c, streamFacts)
	if got := facts[len(facts)-1].FieldValues[envelope.FieldPayload]; !strings.Contains(got, `"reason":"invalid_request_options"`) || strings.Contains(got, "secret-e2e") {
		t.Errorf("refusal fact = %s", got)
	}
	r = runBinary(t, []string{"REPLICATOR_REDIS_URL=" + srv.URL()}, "dlq")
	if r.code != 0 || !strings.Contains(r.stdout, "command_id=01JREFUSED0000000000000000") || !strings.Contains(r.stdout, "dlq_reason=invalid_request_options") {
		t.Errorf("dlq: exit %d, stdout:\n%s", r.code, r.stdout)
	}
	if strings.Contains(r.stdout, "secret-e2e") {
		t.Errorf("dlq printed a header value:\n%s", r.stdout)
	}

	code, metrics := httpGet(t, "http://"+addr+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics answered %d", code)
	}
	for _, series := range []string{"replicator_blob_store_bytes", "replicator_policy_hosts", "go_goroutines"} {
		if !strings.Contains(metrics, series) {
			t.Errorf("/metrics has no %s series", series)
		}
	}
	if n := strings.Count(metrics, "\nreplicator_"); n < 5 {
		t.Errorf("/metrics has only %d replicator_ samples:\n%s", n, tail(metrics, 3000))
	}

	if code := w.stop(t, 30*time.Second); code != 0 {
		t.Errorf("worker exited %d after SIGTERM, want 0", code)
	}
	logs := w.stderr.String()
	if strings.Contains(logs, "secret-e2e") {
		t.Errorf("the worker logged a header value:\n%s", logs)
	}
	if !strings.Contains(logs, `"level":"DEBUG"`) || !strings.Contains(logs, "01JREFUSED0000000000000000") {
		t.Errorf("the worker's log is not the JSON debug log expected:\n%s", tail(logs, 3000))
	}
}

func TestWorkerExitsWhenTheBrokerIsGone(t *testing.T) {
	srv := testenv.StartRedis(t)
	addr := metricsAddr(t)
	w := startBinary(t, workerEnv(srv, t.TempDir(),
		"REPLICATOR_METRICS_ADDR="+addr,
		"REPLICATOR_READ_BLOCK_MS=200",
		"REPLICATOR_ERROR_BACKOFF_BASE_SECONDS=0.2",
		"REPLICATOR_ERROR_BACKOFF_MAX_SECONDS=0.4",
		"REPLICATOR_MAX_CONSECUTIVE_CYCLE_FAILURES=5",
	), "worker")
	testenv.Eventually(t, 30*time.Second, "/healthz to answer 200", func() bool {
		code, _ := httpGet(t, "http://"+addr+"/healthz")
		return code == http.StatusOK
	})
	srv.Stop()
	testenv.Eventually(t, 10*time.Second, "/healthz to answer 503 or the worker to exit", func() bool {
		if w.exited() {
			return true
		}
		code, _ := httpGet(t, "http://"+addr+"/healthz")
		return code == http.StatusServiceUnavailable
	})
	if code := w.wait(t, 60*time.Second); code != 1 {
		t.Errorf("worker exited %d once the broker was gone, want 1", code)
	}
	logs := w.stderr.String()
	if !strings.Contains(logs, "worker failed") {
		t.Errorf("the worker did not log why it exited:\n%s", tail(logs, 3000))
	}
	// The outage limit, 0.2 + 0.4 + 0.4 + 0.4 s, is stated at start-up and
	// on the way out, with the stream and operation that failed first.
	if !strings.Contains(logs, `"outage_limit_seconds":1.4`) {
		t.Errorf("the start-up line does not state the outage limit:\n%s", tail(logs, 3000))
	}
	if !regexp.MustCompile(`"worker failed".*content\.(fetch|replicate): Redis failing for .*, since op \\"[a-z_]+\\" at .*\(outage limit 1\.4s\)`).MatchString(logs) {
		t.Errorf("the last line does not name the stream, the operation and the limit:\n%s", tail(logs, 3000))
	}
}

// TestWorkerFleetPoliteness runs three worker processes in one group over
// 300 commands for 10 hosts: every command gets exactly one fact, and the
// fleet paces each host by the interval, as one worker would.
//
// Spacing is measured where politeness matters, at the origin, whose
// handler timestamps carry scheduling noise on a loaded machine. Two checks:
// no host's k-th request arrives before its first command was published plus
// k intervals (less the 5 ms tolerance), which noise cannot fake, so a fleet
// that did not share its spacing would run ahead of that schedule at once;
// and gaps between consecutive arrivals shorter than the interval less the
// tolerance stay rare (at most 5%), each one logged, with the smallest.
func TestWorkerFleetPoliteness(t *testing.T) {
	const (
		workers   = 3
		hosts     = 10
		perHost   = 30
		interval  = 50 * time.Millisecond
		tolerance = 5 * time.Millisecond
	)
	origin := testenv.StartOrigin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s\n", r.Host, r.URL.Path) // distinct bytes per command
	}))
	srv := testenv.StartRedis(t)
	c := redisClient(t, srv)
	var resolve, urls []string
	for h := range hosts {
		resolve = append(resolve, fmt.Sprintf("h%d.test=127.0.0.1", h))
		for i := range perHost {
			urls = append(urls, origin.URLFor(fmt.Sprintf("h%d.test", h), fmt.Sprintf("/c%d", i)))
		}
	}
	// Interleave hosts, as a real backlog would be.
	slices.SortStableFunc(urls, func(a, b string) int {
		return strings.Compare(a[strings.LastIndexByte(a, '/'):], b[strings.LastIndexByte(b, '/'):])
	})

	var procs []*process
	for i := range workers {
		// One blob tree each, as on separate machines. (Processes sharing a
		// tree can lose a store to another's sweep removing a fresh shard
		// directory; that store is transient and fetched again.)
		procs = append(procs, startBinary(t, workerEnv(srv, t.TempDir(),
			"REPLICATOR_RESOLVE="+strings.Join(resolve, ","),
			"REPLICATOR_MIN_HOST_INTERVAL_SECONDS="+strconv.FormatFloat(interval.Seconds(), 'f', -1, 64),
			"REPLICATOR_CONSUMER_NAME="+fmt.Sprintf("fleet-%d", i),
			"REPLICATOR_CONSUMER_START_ID=0",
			"REPLICATOR_LOG_LEVEL=WARNING",
		), "worker"))
	}

	r := runBinary(t, []string{"REPLICATOR_REDIS_URL=" + srv.URL()},
		append([]string{"seed", "--production", "--info-source-id", "fleet", "--watch", "--watch-timeout", "100s"}, urls...)...)
	if r.code != 0 {
		t.Fatalf("seed --watch: exit %d\nstderr:\n%s\nstdout tail:\n%s", r.code, r.stderr, tail(r.stdout, 2000))
	}
	for i, w := range procs {
		if code := w.stop(t, 30*time.Second); code != 0 {
			t.Errorf("worker %d exited %d after SIGTERM, want 0", i, code)
		}
	}

	// Exactly one blob_available per command, and nothing else.
	seeded := map[string]bool{}
	for _, id := range publishedIDs(t, r.stdout) {
		seeded[id] = true
	}
	if len(seeded) != len(urls) {
		t.Fatalf("seed published %d distinct command ids, want %d", len(seeded), len(urls))
	}
	perCommand := map[string]int{}
	for _, e := range readStream(t, c, streamFacts) {
		m, err := envelope.FromWire(e.FieldValues)
		if err != nil {
			t.Fatalf("fact %s does not decode: %v", e.ID, err)
		}
		switch f := m.(type) {
		case *envelope.BlobAvailable:
			perCommand[f.CommandID]++
		case *envelope.FetchFailed:
			t.Errorf("command %s failed: %s %v", f.CommandID, f.Reason, f.Detail)
		}
	}
	for id := range seeded {
		if perCommand[id] != 1 {
			t.Errorf("command %s has %d blob_available facts, want 1", id, perCommand[id])
		}
	}
	if n := len(readStream(t, c, streamDLQ)); n != 0 {
		t.Errorf("%d dead letters, want none", n)
	}

	// When each host's first command was published: the entry id's
	// milliseconds, on this machine's clock like the origin's.
	published := map[string]time.Time{}
	for _, e := range readStream(t, c, streamCommands) {
		cmd, err := envelope.DecodeCommand(e.FieldValues)
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(cmd.URL)
		ms, _, _ := strings.Cut(e.ID, "-")
		n, _ := strconv.ParseInt(ms, 10, 64)
		if at, ok := published[u.Hostname()]; !ok || time.UnixMilli(n).Before(at) {
			published[u.Hostname()] = time.UnixMilli(n)
		}
	}

	byHost := map[string][]time.Time{}
	for _, s := range origin.Requests() {
		byHost[s.Host] = append(byHost[s.Host], s.At)
	}
	if len(byHost) != hosts {
		t.Fatalf("origin saw %d hosts, want %d", len(byHost), hosts)
	}
	smallest, short, gaps := time.Hour, 0, 0
	for host, times := range byHost {
		if len(times) != perHost {
			t.Errorf("%s was asked %d times, want %d", host, len(times), perHost)
		}
		slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
		start, ok := published[host]
		if !ok {
			t.Fatalf("no command for %s on %s", host, streamCommands)
		}
		for k, at := range times {
			// Entry ids have millisecond resolution: allow the one lost.
			if ahead := start.Add(time.Duration(k) * interval).Sub(at); ahead > tolerance+time.Millisecond {
				t.Errorf("%s: request %d arrived %v ahead of the earliest schedule (first command published + %d × %v)", host, k, ahead, k, interval)
			}
			if k == 0 {
				continue
			}
			gaps++
			gap := at.Sub(times[k-1])
			smallest = min(smallest, gap)
			if gap < interval-tolerance {
				short++
				t.Logf("%s: requests %d and %d arrived %v apart (the earlier one left late)", host, k-1, k, gap)
			}
		}
	}
	t.Logf("smallest gap between arrivals %v for an interval of %v; %d of %d gaps shorter than %v", smallest, interval, short, gaps, interval-tolerance)
	// Each request reports its departure and the next slot counts from it,
	// so a short gap here is the origin's own timing noise (its handler runs
	// late on a loaded machine), which stays rare; a fleet spacing from
	// reservations rather than departures shows many.
	if short > gaps/20 {
		t.Errorf("%d of %d gaps shorter than %v; want at most 5%% (timing noise)", short, gaps, interval-tolerance)
	}
}

// TestWorkerAgainstCluster runs seed and the worker against a Redis Cluster
// named by one URL with the other masters as ?addr= seeds.
func TestWorkerAgainstCluster(t *testing.T) {
	origin := testenv.StartOrigin(t, testenv.Status(200, nil, "clustered\n"))
	cluster := testenv.StartCluster(t)
	redisURL := "redis://" + cluster.Addrs[0] + "/0?addr=" + cluster.Addrs[1] + "&addr=" + cluster.Addrs[2]
	w := startBinary(t, []string{
		"REPLICATOR_REDIS_URL=" + redisURL,
		"REPLICATOR_ALLOW_CIDRS=127.0.0.0/8",
		"REPLICATOR_BLOB_DIR=" + t.TempDir(),
		"REPLICATOR_READ_BLOCK_MS=1000",
		// The seed may land before the worker creates the group.
		"REPLICATOR_CONSUMER_START_ID=0",
	}, "worker")
	r := runBinary(t, nil, "seed", "--redis-url", redisURL, "--production", "--info-source-id", "src-cluster", "--watch", "--watch-timeout", "60s", origin.URL+"/")
	if r.code != 0 || !strings.Contains(r.stdout, "[1/1] blob_available") {
		t.Fatalf("seed --watch: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if code := w.stop(t, 30*time.Second); code != 0 {
		t.Errorf("worker exited %d after SIGTERM, want 0", code)
	}
}

// TestWorkerMeasuresTheBlobTreeBeforeConsuming restarts a worker on a blob
// tree already over REPLICATOR_BLOB_MAX_TOTAL_BYTES (docs/storage.md, local): the first
// sweep measures it before the consume loop starts, so the command waiting
// on the stream parks instead of being fetched and stored.
func TestWorkerMeasuresTheBlobTreeBeforeConsuming(t *testing.T) {
	origin := testenv.StartOrigin(t, testenv.Status(200, map[string]string{"Content-Type": "text/plain"}, "body\n"))
	srv := testenv.StartRedis(t)
	c := redisClient(t, srv)
	dir := t.TempDir()
	// What an earlier run left: one fresh 2000-byte blob, twice the ceiling.
	held := filepath.Join(dir, "ab", "cd", "abcd"+strings.Repeat("0", 60)+".bin")
	if err := os.MkdirAll(filepath.Dir(held), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(held, make([]byte, 2000), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := &envelope.ContentFetch{OccurredAt: time.Now(), CommandID: "01JCE1NG000000000000000000", URL: origin.URL + "/doc", InfoSourceID: "src-ceiling"}
	if _, err := publish(t.Context(), c, streamCommands, cmd); err != nil {
		t.Fatal(err)
	}

	w := startBinary(t, workerEnv(srv, dir,
		"REPLICATOR_BLOB_MAX_TOTAL_BYTES=1000",
		"REPLICATOR_CONSUMER_START_ID=0", // the command was published before the group existed
	), "worker")
	testenv.Eventually(t, 30*time.Second, "the command to be refused for the ceiling", func() bool {
		if w.exited() {
			t.Fatalf("worker exited early with %d", w.code)
		}
		return strings.Contains(w.stderr.String(), "the blob store has no room")
	})
	if n := len(origin.Requests()); n != 0 {
		t.Errorf("origin saw %d requests; want none while the tree is over the ceiling", n)
	}
	for _, f := range readStream(t, c, streamFacts) {
		if p := f.FieldValues[envelope.FieldPayload]; strings.Contains(p, "blob_available") {
			t.Errorf("a blob_available fact was published over the ceiling: %s", p)
		}
	}
	if code := w.stop(t, 30*time.Second); code != 0 {
		t.Errorf("worker exited %d after SIGTERM, want 0", code)
	}

	// Start-up says what it waits for, and the answer comes before the
	// consume loop starts.
	logs := w.stderr.String()
	waiting := strings.Index(logs, "waiting for the first blob sweep to measure the tree")
	measured := strings.Index(logs, "blob tree is at or over REPLICATOR_BLOB_MAX_TOTAL_BYTES")
	consuming := strings.Index(logs, `"msg":"consume loop starting","stream":"`+streamCommands+`"`)
	switch {
	case waiting < 0 || measured < 0:
		t.Errorf("the worker did not log waiting for and finding the tree over the ceiling:\n%s", tail(logs, 3000))
	case consuming < 0 || consuming < measured:
		t.Errorf("the consume loop started (at %d) before the tree was measured (at %d):\n%s", consuming, measured, tail(logs, 3000))
	}
	if !strings.Contains(logs, `"bytes_held":2000`) {
		t.Errorf("the measurement does not report the 2000 bytes held:\n%s", tail(logs, 3000))
	}
}
