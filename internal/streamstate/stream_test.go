package streamstate

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/internal/redisclock"
	"github.com/replicator-go/replicator/internal/testenv"
)

func client(t *testing.T, addrs ...string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func do(t *testing.T, c rueidis.Client, args ...string) rueidis.RedisResult {
	t.Helper()
	r := c.Do(context.Background(), c.B().Arbitrary(args[0]).Keys(args[1]).Args(args[2:]...).Build())
	if err := r.Error(); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return r
}

func TestReadStreamAbsentAndPresent(t *testing.T) {
	c := client(t, testenv.StartRedis(t).Addr)
	ctx := context.Background()
	s, err := ReadStream(ctx, c, "s")
	if err != nil || s.Exists || s.Length != 0 || !s.Oldest.IsZero() {
		t.Fatalf("absent stream: %+v, %v", s, err)
	}
	if g, err := ReadGroups(ctx, c, "s", time.Now()); err != nil || g != nil {
		t.Fatalf("groups of an absent stream: %+v, %v", g, err)
	}
	do(t, c, "XADD", "s", "1000-0", "a", "1")
	do(t, c, "XADD", "s", "5000-0", "a", "1")
	s, err = ReadStream(ctx, c, "s")
	if err != nil || !s.Exists || s.Length != 2 || s.Oldest.UnixMilli() != 1000 || s.Newest.UnixMilli() != 5000 {
		t.Fatalf("stream: %+v, %v", s, err)
	}
	do(t, c, "SET", "str", "x")
	if _, err := ReadStream(ctx, c, "str"); err == nil {
		t.Fatal("a string key read as a stream")
	}
}

func TestReadGroupsLagPendingAndIdle(t *testing.T) {
	c := client(t, testenv.StartRedis(t).Addr)
	ctx := context.Background()
	for range 5 {
		do(t, c, "XADD", "cmds", "*", "a", "1")
	}
	do(t, c, "XGROUP", "CREATE", "cmds", "g", "0")
	do(t, c, "XGROUP", "CREATE", "cmds", "other", "$")

	now, err := redisclock.Now(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := ReadGroups(ctx, c, "cmds", now, "g")
	if err != nil || len(groups) != 1 {
		t.Fatalf("groups: %+v, %v", groups, err)
	}
	if g := groups[0]; g.Name != "g" || g.Lag != 5 || g.LagCounted || g.Pending != 0 || g.OldestPendingIdle != 0 || len(g.Consumers) != 0 {
		t.Fatalf("published, nothing read: %+v", g)
	}

	// A consumer reads two and dies without acking.
	do(t, c, "XREADGROUP", "GROUP", "g", "dead", "COUNT", "2", "STREAMS", "cmds", ">")
	if now, err = redisclock.Now(ctx, c); err != nil {
		t.Fatal(err)
	}
	first, _ := ReadGroups(ctx, c, "cmds", now, "g")
	// Idle times are measured from the clock given: 300 ms later, each is
	// 300 ms longer.
	second, err := ReadGroups(ctx, c, "cmds", now.Add(300*time.Millisecond), "g")
	if err != nil {
		t.Fatal(err)
	}
	g := second[0]
	if g.Lag != 3 || g.Pending != 2 || len(g.Consumers) != 1 || g.Consumers[0].Name != "dead" || g.Consumers[0].Pending != 2 {
		t.Fatalf("after a read left pending: %+v", g)
	}
	if d := g.OldestPendingIdle - first[0].OldestPendingIdle; d != 300*time.Millisecond {
		t.Errorf("oldest pending idle went from %v to %v over 300ms", first[0].OldestPendingIdle, g.OldestPendingIdle)
	}
	if d := g.Consumers[0].Idle - first[0].Consumers[0].Idle; d != 300*time.Millisecond {
		t.Errorf("consumer idle went from %v to %v over 300ms", first[0].Consumers[0].Idle, g.Consumers[0].Idle)
	}
	if first[0].OldestPendingIdle > time.Minute || first[0].Consumers[0].Idle > time.Minute {
		t.Errorf("idle times read at once: %+v", first[0])
	}

	all, err := ReadGroups(ctx, c, "cmds", now)
	if err != nil || len(all) != 2 || all[1].Name != "other" || all[1].Lag != 0 {
		t.Fatalf("every group: %+v, %v", all, err)
	}

	// A deletion past the group's position leaves Redis unable to say the
	// lag: it is counted.
	last, _ := do(t, c, "XADD", "cmds", "*", "a", "1").ToString()
	do(t, c, "XADD", "cmds", "*", "a", "1")
	do(t, c, "XDEL", "cmds", last)
	groups, err = ReadGroups(ctx, c, "cmds", now, "g")
	if err != nil || groups[0].Lag != 4 || !groups[0].LagCounted {
		t.Fatalf("lag after XDEL: %+v, %v", groups, err)
	}
}

// TestPendingBeyondTheSample leaves more entries pending than XINFO
// STREAM FULL lists: the counts are the whole lists'.
func TestPendingBeyondTheSample(t *testing.T) {
	c := client(t, testenv.StartRedis(t).Addr)
	ctx := context.Background()
	for i := range PendingSample + 50 {
		do(t, c, "XADD", "cmds", strconv.Itoa(1000+i)+"-0", "a", "1")
	}
	do(t, c, "XGROUP", "CREATE", "cmds", "g", "0")
	do(t, c, "XREADGROUP", "GROUP", "g", "w1", "COUNT", strconv.Itoa(PendingSample), "STREAMS", "cmds", ">")
	do(t, c, "XREADGROUP", "GROUP", "g", "w2", "COUNT", "50", "STREAMS", "cmds", ">")
	now, err := redisclock.Now(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := ReadGroups(ctx, c, "cmds", now, "g")
	if err != nil || len(groups) != 1 {
		t.Fatalf("groups: %+v, %v", groups, err)
	}
	g := groups[0]
	if g.Pending != PendingSample+50 || g.Lag != 0 || len(g.Consumers) != 2 || g.Consumers[0].Pending != PendingSample || g.Consumers[1].Pending != 50 {
		t.Errorf("group: %+v", g)
	}
	if g.OldestPendingIdle > time.Minute {
		t.Errorf("oldest pending idle %v, read at once", g.OldestPendingIdle)
	}
}

func TestIDTime(t *testing.T) {
	for id, want := range map[string]int64{"1796003228003-0": 1796003228003, "5": 5, "x-1": -1, "-1-0": -1, "": -1} {
		got, ok := IDTime(id)
		if (want < 0) == ok || (ok && got.UnixMilli() != want) {
			t.Errorf("IDTime(%q) = %v, %v; want %d", id, got, ok, want)
		}
	}
}

func FuzzIDTime(f *testing.F) {
	for _, s := range []string{"1796003228003-0", "0-0", "", "-", "99999999999999999999-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if at, ok := IDTime(id); ok && at.UnixMilli() < 0 {
			t.Fatalf("IDTime(%q) = %v, before the epoch", id, at)
		}
	})
}

// TestOnACluster reads streams whose keys live on different nodes, and
// trims one, through a cluster client: one key per command.
func TestOnACluster(t *testing.T) {
	cl := testenv.StartCluster(t)
	c := client(t, cl.Addrs...)
	ctx := context.Background()
	for _, key := range []string{"content.fetch", "content.replicate", "content.fetch.dlq"} {
		do(t, c, "XADD", key, "*", "dlq_reason", "http_status")
		do(t, c, "XGROUP", "CREATE", key, "g", "0")
		s, err := ReadStream(ctx, c, key)
		if err != nil || s.Length != 1 {
			t.Fatalf("%s: %+v, %v", key, s, err)
		}
		g, err := ReadGroups(ctx, c, key, time.Now(), "g")
		if err != nil || len(g) != 1 || g[0].Lag != 1 {
			t.Fatalf("%s groups: %+v, %v", key, g, err)
		}
	}
	st, err := CountDeadLetters(ctx, c, "content.fetch.dlq", Filter{}, 0)
	if err != nil || st.All.Count != 1 {
		t.Fatalf("stats: %+v, %v", st, err)
	}
	if n, err := TrimDeadLetters(ctx, c, "content.fetch.dlq", time.Now().Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("trim: %d, %v", n, err)
	}
}

func testenvRedis(t *testing.T) string { return testenv.StartRedis(t).Addr }

// TestUnderTheBrokersACL reads as the production broker's users: the
// worker's what the stream gauges read, the operators' what status and dlq
// read and trim. Redis refuses them nothing.
func TestUnderTheBrokersACL(t *testing.T) {
	srv := testenv.StartRedisACL(t, "../../deploy/redis-acl/minimal.acl")
	as := func(user string) rueidis.Client { return srv.ClientAs(t, user, "PASSWORD") }
	for _, args := range [][]string{
		{"XADD", "content.fetch", "1000-0", "a", "1"},
		{"XADD", "content.fetch", "2000-0", "a", "1"},
		{"XGROUP", "CREATE", "content.fetch", "replicator.fetch", "0"},
		{"XREADGROUP", "GROUP", "replicator.fetch", "w1", "COUNT", "1", "STREAMS", "content.fetch", ">"},
		{"XADD", "content.fetch.dlq", "3000-0", "dlq_reason", "http_status"},
		{"XADD", "content.fetch.dlq", "4000-0", "dlq_reason", "malformed_frame"},
	} {
		if _, err := srv.Do(args...); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	ctx := context.Background()
	for _, user := range []string{"replicator", "brokeradmin"} {
		c := as(user)
		now, err := redisclock.Now(ctx, c)
		if err != nil {
			t.Fatalf("%s: %v", user, err)
		}
		for _, key := range []string{"content.fetch", "content.replicate", "content.fetch.dlq"} {
			if _, err := ReadStream(ctx, c, key); err != nil {
				t.Errorf("%s: %v", user, err)
			}
		}
		g, err := ReadGroups(ctx, c, "content.fetch", now, "replicator.fetch")
		if err != nil || len(g) != 1 || g[0].Lag != 1 || g[0].Pending != 1 || len(g[0].Consumers) != 1 {
			t.Errorf("%s: groups %+v, %v", user, g, err)
		}
		if g, err := ReadGroups(ctx, c, "content.replicate", now); err != nil || len(g) != 0 {
			t.Errorf("%s: groups of an absent stream %+v, %v", user, g, err)
		}
	}
	c := as("brokeradmin")
	if got, err := NewestDeadLetters(ctx, c, "content.fetch.dlq", Filter{}, 1); err != nil || len(got) != 1 || got[0].Reason != "malformed_frame" {
		t.Errorf("newest: %+v, %v", got, err)
	}
	if st, err := CountDeadLetters(ctx, c, "content.fetch.dlq", Filter{}, 0); err != nil || st.All.Count != 2 {
		t.Errorf("stats: %+v, %v", st, err)
	}
	if n, err := TrimDeadLetters(ctx, c, "content.fetch.dlq", time.UnixMilli(4000)); err != nil || n != 1 {
		t.Errorf("trim: %d, %v", n, err)
	}
	for _, user := range []string{"replicator", "brokeradmin"} {
		if denied, err := srv.ACLDenials(user); err != nil || len(denied) != 0 {
			t.Errorf("Redis refused %s: %v, %v", user, denied, err)
		}
	}
}
