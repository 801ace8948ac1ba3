package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
)

// noDenials fails the test when Redis's ACL LOG holds an entry for user.
func noDenials(t *testing.T, srv *testenv.Redis, user string) {
	t.Helper()
	denied, err := srv.ACLDenials(user)
	if err != nil {
		t.Fatal(err)
	}
	if len(denied) != 0 {
		t.Errorf("Redis refused %s: %v", user, denied)
	}
}

// addDeadLetter writes a dead content_fetch command for rawURL on
// content.fetch.dlq, ago before now.
func addDeadLetter(t *testing.T, c rueidis.Client, now time.Time, ago time.Duration, reason, rawURL string) {
	t.Helper()
	fields, err := envelope.ToWire(&envelope.ContentFetch{OccurredAt: now, CommandID: "01JACL" + strconv.FormatInt(1e9+int64(ago/time.Second), 10) + "0000000000",
		URL: rawURL, InfoSourceID: "src"})
	if err != nil {
		t.Fatal(err)
	}
	fields[envelope.FieldDLQReason], fields[envelope.FieldDLQOriginalID] = reason, "1-0"
	b := c.B().Xadd().Key(streamDLQ).Id(strconv.FormatInt(now.Add(-ago).UnixMilli(), 10) + "-0").FieldValue()
	for k, v := range fields {
		b = b.FieldValue(k, v)
	}
	if err := c.Do(t.Context(), b.Build()).Error(); err != nil {
		t.Fatal(err)
	}
}

// TestOperatorToolsAsBrokerAdmin runs status, dlq, dlq stats and dlq trim
// as the operators' user of the production broker, on a fleet with a
// backlog, a dead consumer, dead letters and a floor, and checks what they
// show and that Redis refused them nothing.
func TestOperatorToolsAsBrokerAdmin(t *testing.T) {
	srv := testenv.StartRedisACL(t, minimalACL)
	admin := srv.ClientAs(t, testenv.AdminUser, testenv.AdminPassword)
	ctx := t.Context()
	if err := admin.Do(ctx, admin.B().XgroupCreate().Key(streamCommands).Group("replicator.fetch").Id("$").Mkstream().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	publishCommands(t, admin, 3)
	if err := admin.Do(ctx, admin.B().Xreadgroup().Group("replicator.fetch", "replicator@dead").Count(2).Streams().Key(streamCommands).Id(">").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	addDeadLetter(t, admin, now, 3*time.Hour, "http_status", "https://a.example/old")
	addDeadLetter(t, admin, now, time.Hour, "destination_refused", "https://b.example/x")
	addDeadLetter(t, admin, now, 0, "http_status", "https://a.example/new")
	floor := &envelope.FetchPolicyState{OccurredAt: now, Host: "floor.example", MinIntervalSeconds: new(5.0)}
	if _, err := publish(ctx, admin, streamPolicy, floor); err != nil {
		t.Fatal(err)
	}
	env := []string{"REPLICATOR_REDIS_URL=" + srv.URLAs("brokeradmin", "PASSWORD")}
	run := func(args ...string) result {
		t.Helper()
		r := runBinary(t, env, args...)
		if r.code != 0 {
			t.Fatalf("%v as brokeradmin: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		return r
	}

	var rep statusReport
	if r := run("status", "--json", "--claim-min-idle", "1ms"); json.Unmarshal([]byte(r.stdout), &rep) != nil {
		t.Fatalf("status --json printed no JSON document:\n%s", r.stdout)
	}
	g := fetchGroup(t, rep)
	if g.Lag != 1 || g.Pending != 2 || len(g.Consumers) != 1 || g.Consumers[0].Name != "replicator@dead" || g.Consumers[0].Pending != 2 ||
		!g.Consumers[0].LikelyDead || g.OldestPendingSeconds < 0 || g.OldestPendingSeconds > 60 {
		t.Errorf("status --json: fetch group %+v", g)
	}
	if at := time.Since(rep.At); at < -time.Minute || at > time.Minute {
		t.Errorf("status --json: at %v is not now", rep.At)
	}
	if d := rep.DeadLetters[0]; d.Length != 3 || len(d.Reasons) != 2 || d.Reasons[0].Reason != "http_status" || d.Reasons[0].Count != 2 {
		t.Errorf("status --json: dead letters %+v", d)
	}
	if len(rep.Floors) != 1 || rep.Floors[0].Host != "floor.example" || len(rep.HeldBack) != 0 || rep.HeldBackDenied != "" {
		t.Errorf("status --json: floors %+v, held back %+v %q", rep.Floors, rep.HeldBack, rep.HeldBackDenied)
	}
	r := run("status")
	for _, want := range []string{"consumer replicator@dead", "http_status", "floor.example  5s", "HELD BACK BEYOND THEIR FLOOR (429/503 escalation, fleet pacer)\n  none"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status screen lacks %q:\n%s", want, r.stdout)
		}
	}

	if r := run("dlq"); strings.Count(r.stdout, "\n") != 3 || !strings.Contains(r.stdout, "url=https://a.example/old") {
		t.Errorf("dlq:\n%s", r.stdout)
	}
	if r := run("dlq", "--count", "1", "--reason", "http_status"); strings.TrimSpace(r.stdout) == "" ||
		strings.Count(r.stdout, "\n") != 1 || !strings.Contains(r.stdout, "url=https://a.example/new") {
		t.Errorf("dlq --count 1 --reason http_status:\n%s", r.stdout)
	}
	if r := run("dlq", "--since", "2h", "--host", "b.example"); strings.Count(r.stdout, "\n") != 1 || !strings.Contains(r.stdout, "url=https://b.example/x") {
		t.Errorf("dlq --since 2h --host b.example:\n%s", r.stdout)
	}
	if r := run("dlq", "stats"); !strings.Contains(r.stdout, "content.fetch.dlq: 3 dead letters") || !strings.Contains(r.stdout, "a.example  2") {
		t.Errorf("dlq stats:\n%s", r.stdout)
	}
	if r := run("dlq", "trim", "--older-than", "2h"); !strings.Contains(r.stdout, "removed 1 dead letters") {
		t.Errorf("dlq trim:\n%s", r.stdout)
	}
	if n := len(readStream(t, admin, streamDLQ)); n != 2 {
		t.Errorf("after trim, %d dead letters, want 2", n)
	}
	noDenials(t, srv, "brokeradmin")
}

// TestIssuerToolsAsWatcher runs seed (with and without --watch) and policy
// set and revoke as the issuers' user of the production broker, and as
// users granted XADD on their stream and nothing else (with --watch, XREAD
// on the fact stream too): Redis refuses them nothing. (Those users have
// PING as well, as every user of the broker does: the client sends it
// when it closes a connection.)
func TestIssuerToolsAsWatcher(t *testing.T) {
	srv := testenv.StartRedisACL(t, minimalACL)
	admin := srv.ClientAs(t, testenv.AdminUser, testenv.AdminPassword)
	for _, rule := range [][]string{
		{"ACL", "SETUSER", "seeder", "on", ">pw", "resetchannels", "~content.fetch", "+xadd", "+ping"},
		{"ACL", "SETUSER", "seedwatcher", "on", ">pw", "resetchannels", "~content.fetch", "~content.blobs", "+xadd", "+xread", "+ping"},
		{"ACL", "SETUSER", "floors", "on", ">pw", "resetchannels", "~content.fetch-policy", "+xadd", "+ping"},
	} {
		if _, err := srv.Do(rule...); err != nil {
			t.Fatal(err)
		}
	}
	as := func(user, password string) []string {
		return []string{"REPLICATOR_REDIS_URL=" + srv.URLAs(user, password)}
	}
	published := 0
	seed := func(env []string, args ...string) result {
		t.Helper()
		r := runBinary(t, env, append([]string{"seed", "--production", "--info-source-id", "src-acl"}, args...)...)
		published++
		if got := len(readStream(t, admin, streamCommands)); got != published {
			t.Errorf("content.fetch holds %d commands, want %d", got, published)
		}
		return r
	}

	for _, user := range []struct{ name, password string }{{"watcher", "PASSWORD"}, {"seeder", "pw"}} {
		if r := seed(as(user.name, user.password), "https://a.example/"); r.code != 0 || len(publishedIDs(t, r.stdout)) != 1 {
			t.Errorf("seed as %s: exit %d\n%s%s", user.name, r.code, r.stdout, r.stderr)
		}
		noDenials(t, srv, user.name)
	}

	// --watch: a stand-in worker answers on content.blobs.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cursor, err := lastID(ctx, admin, streamCommands)
	if err != nil {
		t.Fatal(err)
	}
	go answerCommands(ctx, admin, cursor)
	for _, user := range []struct{ name, password string }{{"watcher", "PASSWORD"}, {"seedwatcher", "pw"}} {
		r := seed(as(user.name, user.password), "--watch", "--watch-timeout", "20s", "https://ok.example/")
		if r.code != 0 || !strings.Contains(r.stdout, "[1/1] blob_available command_id=") {
			t.Errorf("seed --watch as %s: exit %d\n%s%s", user.name, r.code, r.stdout, r.stderr)
		}
		noDenials(t, srv, user.name)
	}
	cancel()

	for _, user := range []struct{ name, password string }{{"watcher", "PASSWORD"}, {"floors", "pw"}} {
		for _, args := range [][]string{{"set", "floor.example", "2"}, {"revoke", "floor.example"}} {
			if r := runBinary(t, as(user.name, user.password), append([]string{"policy"}, args...)...); r.code != 0 ||
				!strings.HasPrefix(r.stdout, "published fetch_policy_state host=floor.example") {
				t.Errorf("policy %v as %s: exit %d\n%s%s", args, user.name, r.code, r.stdout, r.stderr)
			}
		}
		noDenials(t, srv, user.name)
	}
	if n := len(readStream(t, admin, streamPolicy)); n != 4 {
		t.Errorf("%s holds %d frames, want 4", streamPolicy, n)
	}
}

// TestStreamGaugesAsReplicator reads the stream gauges as the worker's
// user of the production broker, which is granted XINFO STREAM, XRANGE
// and INFO but not XINFO GROUPS, XINFO CONSUMERS, XPENDING, TYPE or TIME.
func TestStreamGaugesAsReplicator(t *testing.T) {
	srv := testenv.StartRedisACL(t, minimalACL)
	admin := srv.ClientAs(t, testenv.AdminUser, testenv.AdminPassword)
	ctx := context.Background()
	if err := admin.Do(ctx, admin.B().XgroupCreate().Key(streamCommands).Group("replicator.fetch").Id("$").Mkstream().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	publishCommands(t, admin, 3)
	if err := admin.Do(ctx, admin.B().Xreadgroup().Group("replicator.fetch", "replicator@dead").Count(2).Streams().Key(streamCommands).Id(">").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	addDeadLetter(t, admin, time.Now(), time.Minute, "http_status", "https://a.example/")

	g, reg := fetchGauges(t, srv.ClientAs(t, "replicator", "PASSWORD"))
	g.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	g.refresh(ctx)
	labels := []string{"stream", streamCommands, "group", "replicator.fetch"}
	for _, want := range []struct {
		name   string
		labels []string
		min    float64
		max    float64
	}{
		{"replicator_stream_state_read_failures_total", nil, 0, 0},
		{"replicator_stream_length", []string{"stream", streamCommands}, 3, 3},
		{"replicator_group_lag", labels, 1, 1},
		{"replicator_group_pending", labels, 2, 2},
		{"replicator_group_consumers", labels, 1, 1},
		{"replicator_group_oldest_pending_seconds", labels, 0, 60},
		{"replicator_stream_length", []string{"stream", streamReplicate}, 0, 0},
		{"replicator_dead_letters", []string{"stream", streamDLQ}, 1, 1},
		{"replicator_dead_letter_newest_age_seconds", []string{"stream", streamDLQ}, 59, 120},
		{"replicator_dead_letters", []string{"stream", streamReplicateDLQ}, 0, 0},
	} {
		v, ok := gauge(t, reg, want.name, want.labels...)
		if !ok || v < want.min || v > want.max {
			t.Errorf("%s%v = %v (exported %t), want %v to %v", want.name, want.labels, v, ok, want.min, want.max)
		}
	}
	noDenials(t, srv, "replicator")
}

// TestToolsSayWhichGrantIsMissing runs the tools as users the broker does
// not grant what they need: each says in one line which command on which
// key, and the grant, and exits 1. status still shows what it could read
// when only the pacing keys are refused.
func TestToolsSayWhichGrantIsMissing(t *testing.T) {
	srv := testenv.StartRedisACL(t, minimalACL)
	as := func(user string) []string { return []string{"REPLICATOR_REDIS_URL=" + srv.URLAs(user, "PASSWORD")} }
	for _, tt := range []struct {
		user string
		args []string
		want string
	}{
		{"watcher", []string{"dlq", "trim", "--older-than", "1h"},
			"replicator dlq: Redis user watcher may not run XTRIM on content.fetch.dlq: grant it with `(+xtrim ~content.fetch.dlq)` (docs/operations.md, Redis ACL)"},
		{"watcher", []string{"dlq"},
			"replicator dlq: Redis user watcher may not run XINFO STREAM on content.fetch.dlq: grant it with `(+xinfo|stream ~content.fetch.dlq)` (docs/operations.md, Redis ACL)"},
		{"watcher", []string{"status"},
			"replicator status: Redis user watcher may not run XINFO STREAM on content.replicate: grant it with `(+xinfo|stream ~content.replicate)` (docs/operations.md, Redis ACL)"},
		{"brokeradmin", []string{"seed", "--production", "--info-source-id", "src", "https://a.example/"},
			"replicator seed: Redis user brokeradmin may not run XADD on content.fetch: grant it with `(+xadd ~content.fetch)` (docs/operations.md, Redis ACL)"},
		{"replicator", []string{"policy", "set", "a.example", "1"},
			"replicator policy: Redis user replicator may not run XADD on content.fetch-policy: grant it with `(+xadd ~content.fetch-policy)` (docs/operations.md, Redis ACL)"},
	} {
		r := runBinary(t, as(tt.user), tt.args...)
		if r.code != 1 || r.stderr != tt.want+"\n" {
			t.Errorf("%v as %s: exit %d, stderr:\n%s\nwant exit 1 and\n%s", tt.args, tt.user, r.code, r.stderr, tt.want)
		}
	}

	// A fleet with pacing keys, which the operators' user may find but not
	// read.
	if _, err := srv.Do("HSET", "replicator:pace:{held.example}", "esc", "4000000", "esc_at", strconv.FormatInt(time.Now().UnixMicro(), 10)); err != nil {
		t.Fatal(err)
	}
	want := "Redis user brokeradmin may not run HMGET on replicator:pace:{held.example}: grant it with `(+hmget ~replicator:pace:*)` (docs/operations.md, Redis ACL)"
	r := runBinary(t, as("brokeradmin"), "status")
	if r.code != 1 || r.stderr != "replicator status: "+want+"\n" {
		t.Errorf("status with pacing keys: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "HELD BACK BEYOND THEIR FLOOR (429/503 escalation, fleet pacer)\n  not read: "+want+"\n") ||
		!strings.Contains(r.stdout, "DEAD LETTERS") || strings.Contains(r.stdout, "Nothing yet") {
		t.Errorf("status with pacing keys shows:\n%s", r.stdout)
	}
	r = runBinary(t, as("brokeradmin"), "status", "--json")
	var rep statusReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 1 || rep.HeldBackDenied != want || len(rep.Streams) != 2 {
		t.Errorf("status --json with pacing keys: exit %d, %v\n%s", r.code, err, r.stdout)
	}
}
