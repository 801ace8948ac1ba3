package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/internal/testenv"
)

// The production grants (docs/operations.md, Consumer names): the worker's
// has no XGROUP DELCONSUMER; the operator's reads everything.
var (
	workerGrant = []string{"+xread", "+xreadgroup", "+xack", "+xautoclaim", "+xgroup|create", "+xlen", "+xrange", "+xinfo|stream",
		"+exists", "+info", "+ping", "+config|get", "+xadd", "+xtrim", "+set", "+xdel", "+hello", "+client|setname", "+client|tracking"}
	operatorGrant = []string{"+info", "+ping", "+scan", "+exists", "+xlen", "+xrange", "+xinfo", "+xpending", "+config|get",
		"+client|list", "+acl|getuser", "+acl|log", "+hello", "+client|setname"}
)

// aclUser creates user on srv with password pw, every key and grants, and
// returns a redis:// URL that logs in as it.
func aclUser(t *testing.T, srv *testenv.Redis, user string, grants ...string) string {
	t.Helper()
	args := append([]string{"ACL", "SETUSER", user, "reset", "on", ">pw-" + user, "~*"}, grants...)
	if out, err := srv.Do(args...); err != nil || !strings.Contains(out, "OK") {
		t.Fatalf("ACL SETUSER %s: %q %v", user, out, err)
	}
	return "redis://" + user + ":pw-" + user + "@" + srv.Addr + "/0"
}

// leavePending adds n entries to stream and delivers them to consumer in
// group (created at 0 if absent), leaving them pending; with n 0 it only
// registers consumer.
func leavePending(t *testing.T, c rueidis.Client, stream, group, consumer string, n int) {
	t.Helper()
	ctx := t.Context()
	err := c.Do(ctx, c.B().XgroupCreate().Key(stream).Group(group).Id("0").Mkstream().Build()).Error()
	if err != nil && !strings.Contains(err.Error(), "BUSYGROUP") {
		t.Fatal(err)
	}
	if n == 0 {
		if err := c.Do(ctx, c.B().XgroupCreateconsumer().Key(stream).Group(group).Consumer(consumer).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		return
	}
	for range n {
		if err := c.Do(ctx, c.B().Xadd().Key(stream).Id("*").FieldValue().FieldValue("not", "a frame").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Do(ctx, c.B().Xreadgroup().Group(group, consumer).Count(int64(n)).Streams().Key(stream).Id(">").Build()).Error(); err != nil {
		t.Fatal(err)
	}
}

// consumerOf returns group's consumer name on stream, and whether it exists.
func consumerOf(t *testing.T, c rueidis.Client, stream, group, name string) (consumerInfo, bool) {
	t.Helper()
	cs, _, err := groupConsumers(t.Context(), c, stream, group)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range cs {
		if x.Name == name {
			return x, true
		}
	}
	return consumerInfo{}, false
}

func pinOldName(t *testing.T, name string) {
	saved := oldConsumerName
	oldConsumerName = func() string { return name }
	t.Cleanup(func() { oldConsumerName = saved })
}

// TestTakeOverUnderTheWorkersGrant: with the production grant the old
// consumer's entries are left to the reclaim, and once its list is empty
// it is named for the operator, once, since the grant cannot delete it.
func TestTakeOverUnderTheWorkersGrant(t *testing.T) {
	srv := testenv.StartRedis(t)
	admin := redisClient(t, srv)
	pinOldName(t, "replicator@old-host")
	leavePending(t, admin, streamCommands, "replicator.fetch", "replicator@old-host", 2)

	client, err := newRedisClient(aclUser(t, srv, "replicator", workerGrant...))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var logs bytes.Buffer
	cfg, _ := loadConfig(env(nil))
	tk := takeOver{client: client, log: slog.New(slog.NewJSONHandler(&logs, nil)), active: time.Minute, interval: time.Millisecond,
		now: func() time.Time { return time.Now().Add(time.Hour) }}
	olds := oldConsumers(cfg)
	if len(olds) != 2 {
		t.Fatalf("looking for %d old consumers, want one per group", len(olds))
	}
	fetchOld := olds[0]
	for range 2 {
		if tk.step(t.Context(), fetchOld) {
			t.Fatal("settled while entries are pending under the old name")
		}
	}
	if n := strings.Count(logs.String(), "pending under the old consumer name"); n != 1 {
		t.Errorf("the pending entries were logged %d times, want once:\n%s", n, logs.String())
	}
	if !tk.step(t.Context(), olds[1]) {
		t.Error("a group without the old consumer is not settled")
	}
	// The ordinary reclaim takes them (as the consume loop's XAUTOCLAIM
	// does), and the worker handles them.
	entries, err := admin.Do(t.Context(), admin.B().Xautoclaim().Key(streamCommands).Group("replicator.fetch").Consumer(cfg.ConsumerName).
		MinIdleTime("0").Start("0").Build()).ToArray()
	if err != nil || len(entries) < 2 {
		t.Fatalf("XAUTOCLAIM: %v %v", entries, err)
	}
	if !tk.step(t.Context(), fetchOld) {
		t.Fatal("not settled once the old list is empty")
	}
	if !strings.Contains(logs.String(), "XGROUP DELCONSUMER content.fetch replicator.fetch replicator@old-host") {
		t.Errorf("the operator is not told what to delete:\n%s", logs.String())
	}
	if _, ok := consumerOf(t, admin, streamCommands, "replicator.fetch", "replicator@old-host"); !ok {
		t.Error("the old consumer is gone, yet the grant cannot delete it")
	}
	if got, _ := consumerOf(t, admin, streamCommands, "replicator.fetch", cfg.ConsumerName); got.Pending != 2 {
		t.Errorf("the worker's consumer holds %d, want the 2 taken over", got.Pending)
	}
}

// TestTakeOverDeletesWhereGranted: an empty, idle old consumer is deleted;
// one still read under is not.
func TestTakeOverDeletesWhereGranted(t *testing.T) {
	srv := testenv.StartRedis(t)
	admin := redisClient(t, srv)
	pinOldName(t, "replicator@old-host")
	leavePending(t, admin, streamReplicate, "replicator.replicate", "replicator@old-host", 0)
	client, err := newRedisClient(aclUser(t, srv, "replicator", append(workerGrant, "+xgroup|delconsumer")...))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var logs bytes.Buffer
	cfg, _ := loadConfig(env(nil))
	now := time.Now()
	tk := takeOver{client: client, log: slog.New(slog.NewJSONHandler(&logs, nil)), active: time.Minute, interval: time.Millisecond,
		now: func() time.Time { return now }}
	old := oldConsumers(cfg)[1]
	if tk.step(t.Context(), old) {
		t.Fatal("deleted a consumer read under just now")
	}
	now = now.Add(2 * time.Minute)
	tk.run(t.Context(), oldConsumers(cfg))
	if _, ok := consumerOf(t, admin, streamReplicate, "replicator.replicate", "replicator@old-host"); ok {
		t.Errorf("the old consumer is still there:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "deleted the old consumer") {
		t.Errorf("no line says so:\n%s", logs.String())
	}
}

// TestWorkerTakesOverTheOldConsumer runs the worker over a group whose
// pending list is held under replicator@<hostname>: the entries are
// handled and the old consumer is gone.
func TestWorkerTakesOverTheOldConsumer(t *testing.T) {
	srv := testenv.StartRedis(t)
	admin := redisClient(t, srv)
	host, _ := os.Hostname()
	old := "replicator@" + host
	leavePending(t, admin, streamCommands, "replicator.fetch", old, 3)
	w := startBinary(t, []string{"REPLICATOR_REDIS_URL=" + srv.URL(), "REPLICATOR_BLOB_DIR=" + t.TempDir(),
		"REPLICATOR_CLAIM_MIN_IDLE_MS=200", "REPLICATOR_READ_BLOCK_MS=50"}, "worker")
	testenv.Eventually(t, 30*time.Second, "the old consumer's list handled and the consumer gone", func() bool {
		if w.exited() {
			t.Fatalf("worker exited %d", w.code)
		}
		_, there := consumerOf(t, admin, streamCommands, "replicator.fetch", old)
		n, _ := admin.Do(context.Background(), admin.B().Xlen().Key(streamDLQ).Build()).AsInt64()
		return !there && n == 3
	})
	if code := w.stop(t, 30*time.Second); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
	for _, want := range []string{`"msg":"worker ready"`, `"consumer":"replicator-fetch-1"`, `"replicate_consumer":"replicator-replicate-1"`,
		"pending under the old consumer name", "deleted the old consumer"} {
		if !strings.Contains(w.stderr.String(), want) {
			t.Errorf("stderr lacks %s", want)
		}
	}
}
