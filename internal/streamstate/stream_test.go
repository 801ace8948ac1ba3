package streamstate

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"

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
	if g, err := ReadGroups(ctx, c, "s"); err != nil || g != nil {
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

	groups, err := ReadGroups(ctx, c, "cmds", "g")
	if err != nil || len(groups) != 1 {
		t.Fatalf("groups: %+v, %v", groups, err)
	}
	if g := groups[0]; g.Name != "g" || g.Lag != 5 || g.LagCounted || g.Pending != 0 || g.OldestPendingIdle != 0 || len(g.Consumers) != 0 {
		t.Fatalf("published, nothing read: %+v", g)
	}

	// A consumer reads two and dies without acking.
	do(t, c, "XREADGROUP", "GROUP", "g", "dead", "COUNT", "2", "STREAMS", "cmds", ">")
	first, _ := ReadGroups(ctx, c, "cmds", "g")
	time.Sleep(300 * time.Millisecond)
	second, err := ReadGroups(ctx, c, "cmds", "g")
	if err != nil {
		t.Fatal(err)
	}
	g := second[0]
	if g.Lag != 3 || g.Pending != 2 || len(g.Consumers) != 1 || g.Consumers[0].Name != "dead" || g.Consumers[0].Pending != 2 {
		t.Fatalf("after a read left pending: %+v", g)
	}
	if g.OldestPendingIdle < first[0].OldestPendingIdle+250*time.Millisecond {
		t.Errorf("oldest pending idle went from %v to %v over 300ms; want it to grow", first[0].OldestPendingIdle, g.OldestPendingIdle)
	}
	if g.Consumers[0].Idle < 250*time.Millisecond {
		t.Errorf("consumer idle = %v, want ≥ 250ms", g.Consumers[0].Idle)
	}

	all, err := ReadGroups(ctx, c, "cmds")
	if err != nil || len(all) != 2 || all[1].Name != "other" || all[1].Lag != 0 {
		t.Fatalf("every group: %+v, %v", all, err)
	}

	// A deletion past the group's position leaves Redis unable to say the
	// lag: it is counted.
	last, _ := do(t, c, "XADD", "cmds", "*", "a", "1").ToString()
	do(t, c, "XADD", "cmds", "*", "a", "1")
	do(t, c, "XDEL", "cmds", last)
	groups, err = ReadGroups(ctx, c, "cmds", "g")
	if err != nil || groups[0].Lag != 4 || !groups[0].LagCounted {
		t.Fatalf("lag after XDEL: %+v, %v", groups, err)
	}
}

func TestServerTime(t *testing.T) {
	c := client(t, testenv.StartRedis(t).Addr)
	now, err := ServerTime(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(now); d < -time.Minute || d > time.Minute {
		t.Errorf("server time %v is %v from this machine's", now, d)
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
		g, err := ReadGroups(ctx, c, key, "g")
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
