package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/persist"
	"github.com/replicator-go/replicator/policy/fleet"
)

// The production broker's users (deploy/redis-acl; docs/operations.md,
// Redis ACL), loaded into a private redis-server.
const (
	minimalACL = "../../deploy/redis-acl/minimal.acl"
	fullACL    = "../../deploy/redis-acl/full.acl"
	aclPass    = "PASSWORD"
)

// aclWorkerEnv is the worker's environment as the production user.
func aclWorkerEnv(srv *testenv.Redis, dir string, extra ...string) []string {
	return append([]string{
		"REPLICATOR_REDIS_URL=" + srv.URLAs("replicator", aclPass),
		"REPLICATOR_ALLOW_CIDRS=127.0.0.0/8",
		"REPLICATOR_BLOB_DIR=" + dir,
		"REPLICATOR_READ_BLOCK_MS=500",
		"REPLICATOR_CONSUMER_START_ID=0",
		"REPLICATOR_MIN_HOST_INTERVAL_SECONDS=0",
	}, extra...)
}

// aclOrigin answers 200 with a body naming the path, but 404 for
// /missing.
func aclOrigin(t *testing.T) *testenv.Origin {
	return testenv.StartOrigin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, "body of %s\n", r.URL.Path)
	}))
}

// publishAs publishes a content_fetch for url as the issuer's client.
func publishAs(t *testing.T, c rueidis.Client, commandID, url string) {
	t.Helper()
	cmd := &envelope.ContentFetch{SchemaVersion: envelope.SchemaVersion, OccurredAt: time.Now(), CommandID: commandID,
		URL: url, InfoSourceID: "acl-test"}
	if _, err := publish(context.Background(), c, streamCommands, cmd); err != nil {
		t.Fatalf("publish %s: %v", commandID, err)
	}
}

// pendingCount is a group's pending entries, read as admin.
func pendingCount(t *testing.T, admin rueidis.Client, stream, group string) int64 {
	t.Helper()
	arr, err := admin.Do(context.Background(), admin.B().Xpending().Key(stream).Group(group).Build()).ToArray()
	if err != nil || len(arr) == 0 {
		t.Fatalf("XPENDING %s: %v", stream, err)
	}
	n, _ := arr[0].AsInt64()
	return n
}

// keysLike counts the keys matching pattern, read as admin.
func keysLike(t *testing.T, admin rueidis.Client, pattern string) int {
	t.Helper()
	keys, err := admin.Do(context.Background(), admin.B().Keys().Pattern(pattern).Build()).AsStrSlice()
	if err != nil {
		t.Fatalf("KEYS %s: %v", pattern, err)
	}
	return len(keys)
}

// TestWorkerUnderTheProductionACL runs the whole contract as the
// production broker's worker user: 20 commands and a 404 published by the
// issuer's user end as 20 blob_available facts, one fetch_failed, one dead
// letter, 21 dedupe keys and nothing pending; a republished command_id is
// not fetched again; a content.replicate command gets its fate too;
// SIGTERM exits 0; and the broker refused the worker nothing (its ACL LOG
// has no entry for it). With the full grant line and
// REPLICATOR_FLEET_PACING=on the same holds, with fleet pacing.
func TestWorkerUnderTheProductionACL(t *testing.T) {
	for _, tc := range []struct {
		name  string
		acl   string
		env   []string
		fleet bool
	}{
		{name: "minimal grants", acl: minimalACL},
		{name: "full grants", acl: fullACL, env: []string{"REPLICATOR_FLEET_PACING=on"}, fleet: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			origin := aclOrigin(t)
			srv := testenv.StartRedisACL(t, tc.acl)
			admin := srv.ClientAs(t, testenv.AdminUser, testenv.AdminPassword)
			issuer := srv.ClientAs(t, "watcher", aclPass)
			addr := metricsAddr(t)
			w := startBinary(t, aclWorkerEnv(srv, t.TempDir(), append(tc.env, "REPLICATOR_METRICS_ADDR="+addr)...), "worker")

			for i := range 20 {
				publishAs(t, issuer, fmt.Sprintf("cmd-%02d", i), fmt.Sprintf("%s/doc/%d", origin.URL, i))
			}
			publishAs(t, issuer, "cmd-missing", origin.URL+"/missing")
			// A replicate command, from its own issuer: no alias is
			// provisioned here, so it is refused alias_unknown.
			repl := &envelope.ContentReplicate{SchemaVersion: envelope.SchemaVersion, OccurredAt: time.Now(), CommandID: "repl-1",
				BlobURI: "file:///nowhere/" + strings.Repeat("a", 64) + ".bin", MediaType: "text/plain", Provider: "gcs",
				CredentialsAlias: "none", Destination: "x/y.txt", InfoItemRepSpecID: "s", SourceRevisionID: "r", InfoSourceID: "acl-test"}
			if _, err := publish(context.Background(), admin, streamReplicate, repl); err != nil {
				t.Fatal(err)
			}

			testenv.Eventually(t, 60*time.Second, "21 facts and both dead letters", func() bool {
				if w.exited() {
					t.Fatalf("worker exited %d:\n%s", w.code, tail(w.stderr.String(), 3000))
				}
				return len(readStream(t, admin, streamFacts)) >= 21 && len(readStream(t, admin, streamDLQ)) >= 1 &&
					len(readStream(t, admin, streamReplicateDLQ)) >= 1 && pendingCount(t, admin, streamCommands, "replicator.fetch") == 0
			})
			kinds := map[string]int{}
			for _, e := range readStream(t, admin, streamFacts) {
				kinds[e.FieldValues[envelope.FieldEventType]]++
			}
			if kinds["blob_available"] != 20 || kinds["fetch_failed"] != 1 || len(kinds) != 2 {
				t.Errorf("facts by event_type = %v, want 20 blob_available and 1 fetch_failed", kinds)
			}
			if n := len(readStream(t, admin, streamDLQ)); n != 1 {
				t.Errorf("%d dead letters on %s, want 1", n, streamDLQ)
			}
			// One per completed command: a permanent failure is closed by its
			// dead letter and sets none (docs/streams.md, Fates).
			if n := keysLike(t, admin, "replicator:cmd:fetch:*"); n != 20 {
				t.Errorf("%d dedupe keys, want 20", n)
			}
			if a := readStream(t, admin, streamArtifacts); len(a) != 1 || a[0].FieldValues[envelope.FieldEventType] != "replication_failed" {
				t.Errorf("artifacts = %v, want one replication_failed", a)
			}

			// The same command_id again, as a new entry: acked, not fetched.
			before := origin.Count()
			publishAs(t, issuer, "cmd-03", origin.URL+"/doc/3")
			testenv.Eventually(t, 30*time.Second, "the republished command to be acked", func() bool {
				return pendingCount(t, admin, streamCommands, "replicator.fetch") == 0 && strings.Contains(w.stderr.String(), "skipped an already-handled command")
			})
			if got := origin.Count(); got != before {
				t.Errorf("origin saw %d requests after the republish, want %d: a handled command was fetched again", got, before)
			}
			if got := len(readStream(t, admin, streamFacts)); got != 21 {
				t.Errorf("%d facts after the republish, want 21", got)
			}
			pacing := map[bool]string{false: "local", true: "fleet"}[tc.fleet]
			if !strings.Contains(w.stderr.String(), `"msg":"worker ready"`) || !strings.Contains(w.stderr.String(), `"pacing":"`+pacing+`"`) {
				t.Errorf("no worker ready line saying pacing %s:\n%s", pacing, tail(w.stderr.String(), 3000))
			}
			if tc.fleet {
				if !strings.Contains(w.stderr.String(), "fleet pacing on") {
					t.Errorf("the worker did not pace through Redis:\n%s", tail(w.stderr.String(), 3000))
				}
			} else if !strings.Contains(w.stderr.String(), "fleet pacing off") || keysLike(t, admin, fleet.DefaultKeyPrefix+"*") != 0 {
				t.Errorf("the worker with minimal grants did not pace locally:\n%s", tail(w.stderr.String(), 3000))
			}

			// The health check and the stream gauges read Redis as the
			// worker's user too.
			testenv.Eventually(t, 30*time.Second, "/healthz 200 and the stream gauges filled", func() bool {
				code, _ := httpGet(t, "http://"+addr+"/healthz")
				_, metrics := httpGet(t, "http://"+addr+"/metrics")
				return code == http.StatusOK && strings.Contains(metrics, `replicator_group_pending{group="replicator.fetch",stream="content.fetch"} 0`)
			})
			if _, metrics := httpGet(t, "http://"+addr+"/metrics"); !strings.Contains(metrics, "replicator_stream_state_read_failures_total 0") {
				t.Errorf("the stream gauges failed to read:\n%s", tail(metrics, 2000))
			}

			if code := w.stop(t, 30*time.Second); code != 0 {
				t.Errorf("worker exited %d after SIGTERM, want 0", code)
			}
			noDenials(t, srv, "replicator")
		})
	}
}

// TestWorkerWaitsOutAMissingGrant: the worker's user may not publish
// facts. Its fates cannot be written: it must neither dead-letter the
// commands (NOPERM is transient) nor fetch their origins again, and once an
// operator grants what was missing, live, the fates are written.
func TestWorkerWaitsOutAMissingGrant(t *testing.T) {
	users, err := os.ReadFile(minimalACL)
	if err != nil {
		t.Fatal(err)
	}
	narrowed := strings.Replace(string(users), "(+xadd +xtrim ~content.blobs ", "(+xadd +xtrim ", 1)
	if narrowed == string(users) {
		t.Fatal("the minimal ACL no longer grants XADD on content.blobs as this test expects")
	}
	path := filepath.Join(t.TempDir(), "users.acl")
	if err := os.WriteFile(path, []byte(narrowed), 0o600); err != nil {
		t.Fatal(err)
	}
	origin := aclOrigin(t)
	srv := testenv.StartRedisACL(t, path)
	admin := srv.ClientAs(t, testenv.AdminUser, testenv.AdminPassword)
	w := startBinary(t, aclWorkerEnv(srv, t.TempDir(),
		"REPLICATOR_CLAIM_MIN_IDLE_MS=600", // a reclaim would come back within a second
		"REPLICATOR_ERROR_BACKOFF_BASE_SECONDS=0.1", "REPLICATOR_ERROR_BACKOFF_MAX_SECONDS=0.5",
		"REPLICATOR_MAX_CONSECUTIVE_CYCLE_FAILURES=1000"), "worker")
	for i := range 3 {
		publishAs(t, admin, fmt.Sprintf("cmd-%d", i), fmt.Sprintf("%s/doc/%d", origin.URL, i))
	}
	testenv.Eventually(t, 30*time.Second, "three fetches and a refused fate", func() bool {
		return origin.Count() == 3 && strings.Contains(w.stderr.String(), "could not write a command's fate")
	})
	time.Sleep(3 * time.Second) // several claim times: a reclaim would have fetched again by now
	if got := origin.Count(); got != 3 {
		t.Errorf("origin saw %d requests while the fates were refused, want 3", got)
	}
	if n := len(readStream(t, admin, streamDLQ)); n != 0 {
		t.Errorf("%d dead letters: a refused grant closed a valid command", n)
	}
	if w.exited() {
		t.Fatalf("worker exited %d", w.code)
	}

	grant := admin.B().Arbitrary("ACL", "SETUSER", "replicator").Args("(+xadd ~content.blobs)").Build()
	if err := admin.Do(context.Background(), grant).Error(); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	testenv.Eventually(t, 30*time.Second, "the three facts once granted", func() bool {
		return len(readStream(t, admin, streamFacts)) == 3 && pendingCount(t, admin, streamCommands, "replicator.fetch") == 0
	})
	if got := origin.Count(); got != 3 {
		t.Errorf("origin saw %d requests in all, want 3: each command fetched once", got)
	}
	if code := w.stop(t, 30*time.Second); code != 0 {
		t.Errorf("worker exited %d after SIGTERM, want 0", code)
	}
}

// TestACLDocumented: the ACL files, the fleet pacer's grant, the persist
// grant and docs/operations.md say one thing. The full line is the minimal
// one with fleet.ACLRule appended, and the docs show each part.
func TestACLDocumented(t *testing.T) {
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	workerLine := func(file string) string {
		for _, l := range strings.Split(read(file), "\n") {
			if strings.HasPrefix(l, "user replicator ") {
				return l
			}
		}
		t.Fatalf("%s has no line for the user replicator", file)
		return ""
	}
	minimal, full := workerLine(minimalACL), workerLine(fullACL)
	if want := minimal + " " + fleet.ACLRule; full != want {
		t.Errorf("full.acl's worker line is\n%s\nwant the minimal line and fleet.ACLRule:\n%s", full, want)
	}
	if strings.ReplaceAll(read(minimalACL), minimal, full) != read(fullACL) {
		t.Error("full.acl differs from minimal.acl elsewhere than the worker's line")
	}
	ops := read("../../docs/operations.md")
	persistRule := persistGrant(persist.Capability(new(persist.Handler)))
	if strings.Contains(minimal, "~"+persist.DefaultStream+" ") {
		t.Errorf("minimal.acl grants %s; the persist grant is documented as its own line", persist.DefaultStream)
	}
	for _, want := range []string{minimal, fleet.ACLRule, persistRule} {
		if !strings.Contains(ops, "\n"+want+"\n") {
			t.Errorf("docs/operations.md does not show %q on a line of its own", want)
		}
	}
}
