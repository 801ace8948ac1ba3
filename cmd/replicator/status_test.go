package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
)

// gauge returns the value of the series name{labels...} (label pairs) that
// reg exports, and whether it exports it.
func gauge(t *testing.T, reg *prometheus.Registry, name string, labels ...string) (float64, bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if got[labels[i]] != labels[i+1] {
					continue series
				}
			}
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue(), true
			}
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

// fetchGauges are the worker's stream gauges over c, registered on a
// registry of their own.
func fetchGauges(t *testing.T, c rueidis.Client) (*streamGauges, *prometheus.Registry) {
	g := newStreamGauges(c, slog.New(slog.NewTextHandler(io.Discard, nil)),
		consumedStream{streamCommands, "replicator.fetch", streamDLQ},
		consumedStream{streamReplicate, "replicator.replicate", streamReplicateDLQ})
	reg := prometheus.NewRegistry()
	reg.MustRegister(g)
	return g, reg
}

// status runs `replicator status --json` and decodes its document.
func status(t *testing.T, srv *testenv.Redis, args ...string) statusReport {
	t.Helper()
	r := runBinary(t, nil, append([]string{"status", "--json", "--redis-url", srv.URL()}, args...)...)
	if r.code != 0 {
		t.Fatalf("status --json: exit %d\n%s", r.code, r.stderr)
	}
	var rep statusReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("status --json printed no JSON document: %v\n%s", err, r.stdout)
	}
	return rep
}

func fetchGroup(t *testing.T, rep statusReport) statusGroup {
	t.Helper()
	for _, s := range rep.Streams {
		if s.Stream == streamCommands {
			for _, g := range s.Groups {
				if g.Group == "replicator.fetch" {
					return g
				}
			}
		}
	}
	t.Fatalf("status shows no replicator.fetch group: %+v", rep.Streams)
	return statusGroup{}
}

func publishCommands(t *testing.T, c rueidis.Client, n int) {
	t.Helper()
	for i := range n {
		cmd := &envelope.ContentFetch{OccurredAt: time.Now(), CommandID: "01JOPS" + strconv.Itoa(100000000+i) + "0000000000",
			URL: "https://ops.example/" + strconv.Itoa(i), InfoSourceID: "src-ops"}
		if _, err := publish(t.Context(), c, streamCommands, cmd); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOperatorsSeeTheBacklog walks a fleet's troubles on a real Redis and
// checks that the gauges and status --json both report them: commands
// published with no worker running (lag), a worker that died holding
// entries (pending, an oldest pending age that grows, a likely dead
// consumer), then a dead letter (depth and reason).
func TestOperatorsSeeTheBacklog(t *testing.T) {
	srv := testenv.StartRedis(t)
	c := redisClient(t, srv)
	ctx := context.Background()
	g, reg := fetchGauges(t, c)
	fetchLabels := []string{"stream", streamCommands, "group", "replicator.fetch"}

	// The group a worker made before it stopped, then three commands.
	if err := c.Do(ctx, c.B().XgroupCreate().Key(streamCommands).Group("replicator.fetch").Id("$").Mkstream().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	publishCommands(t, c, 3)
	g.refresh(ctx)
	if v, ok := gauge(t, reg, "replicator_group_lag", fetchLabels...); !ok || v != 3 {
		t.Errorf("replicator_group_lag = %v (exported %t), want 3", v, ok)
	}
	if v, _ := gauge(t, reg, "replicator_stream_length", "stream", streamCommands); v != 3 {
		t.Errorf("replicator_stream_length = %v, want 3", v)
	}
	if v, ok := gauge(t, reg, "replicator_dead_letters", "stream", streamDLQ); !ok || v != 0 {
		t.Errorf("replicator_dead_letters = %v (exported %t), want 0 for an absent stream", v, ok)
	}
	if _, ok := gauge(t, reg, "replicator_group_lag", "stream", streamReplicate); ok {
		t.Error("a group of an absent stream is exported")
	}
	if grp := fetchGroup(t, status(t, srv)); grp.Lag != 3 || grp.Pending != 0 {
		t.Errorf("status: lag %d pending %d, want 3 and 0", grp.Lag, grp.Pending)
	}

	// A worker reads two and is killed before acking either.
	if err := c.Do(ctx, c.B().Xreadgroup().Group("replicator.fetch", "replicator@dead").Count(2).Streams().Key(streamCommands).Id(">").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	g.refresh(ctx)
	first, _ := gauge(t, reg, "replicator_group_oldest_pending_seconds", fetchLabels...)
	time.Sleep(300 * time.Millisecond)
	g.refresh(ctx)
	if v, _ := gauge(t, reg, "replicator_group_pending", fetchLabels...); v != 2 {
		t.Errorf("replicator_group_pending = %v, want 2", v)
	}
	if v, _ := gauge(t, reg, "replicator_group_lag", fetchLabels...); v != 1 {
		t.Errorf("replicator_group_lag = %v, want 1", v)
	}
	if second, _ := gauge(t, reg, "replicator_group_oldest_pending_seconds", fetchLabels...); second < first+0.25 {
		t.Errorf("oldest pending went from %vs to %vs over 300ms; want it to grow", first, second)
	}
	if v, _ := gauge(t, reg, "replicator_group_consumers", fetchLabels...); v != 1 {
		t.Errorf("replicator_group_consumers = %v, want 1", v)
	}
	grp := fetchGroup(t, status(t, srv, "--claim-min-idle", "50ms"))
	if grp.Pending != 2 || grp.OldestPendingSeconds < 0.3 || len(grp.Consumers) != 1 {
		t.Fatalf("status after the kill: %+v", grp)
	}
	if cs := grp.Consumers[0]; cs.Name != "replicator@dead" || cs.Pending != 2 || !cs.LikelyDead {
		t.Errorf("status consumer: %+v, want replicator@dead holding 2, likely dead", cs)
	}
	if cs := fetchGroup(t, status(t, srv)).Consumers[0]; cs.LikelyDead {
		t.Errorf("a consumer idle %vs is likely dead against a 60 s claim time", cs.IdleSeconds)
	}

	// A dead letter.
	fields, _ := envelope.ToWire(&envelope.ContentFetch{OccurredAt: time.Now(), CommandID: "01JOPSDEAD0000000000000000",
		URL: "https://ops.example/gone", InfoSourceID: "src-ops"})
	fields[envelope.FieldDLQReason], fields[envelope.FieldDLQOriginalID] = "http_status", "1-0"
	if _, err := xadd(ctx, c, streamDLQ, fields); err != nil {
		t.Fatal(err)
	}
	g.refresh(ctx)
	if v, _ := gauge(t, reg, "replicator_dead_letters", "stream", streamDLQ); v != 1 {
		t.Errorf("replicator_dead_letters = %v, want 1", v)
	}
	if v, ok := gauge(t, reg, "replicator_dead_letter_newest_age_seconds", "stream", streamDLQ); !ok || v < 0 || v > 60 {
		t.Errorf("replicator_dead_letter_newest_age_seconds = %v (exported %t)", v, ok)
	}
	rep := status(t, srv)
	d := rep.DeadLetters[0]
	if d.Stream != streamDLQ || d.Length != 1 || len(d.Reasons) != 1 || d.Reasons[0].Reason != "http_status" || d.Reasons[0].Count != 1 {
		t.Errorf("status dead letters: %+v", d)
	}
	if rep.NothingYet {
		t.Error("status says nothing yet")
	}

	// The screen shows the same.
	r := runBinary(t, nil, "status", "--redis-url", srv.URL(), "--claim-min-idle", "50ms")
	for _, want := range []string{"replicator.fetch", "consumer replicator@dead", "LIKELY DEAD", "http_status", "content.fetch.dlq"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status screen lacks %q:\n%s", want, r.stdout)
		}
	}

	// A failed read keeps the last values and is counted.
	srv.Stop()
	g.refresh(ctx)
	if v, _ := gauge(t, reg, "replicator_stream_state_read_failures_total"); v != 1 {
		t.Errorf("read failures = %v, want 1", v)
	}
	if v, _ := gauge(t, reg, "replicator_group_pending", fetchLabels...); v != 2 {
		t.Errorf("after a failed read, replicator_group_pending = %v, want the last value 2", v)
	}
}

// TestStatusShowsFloorsAndHeldBackHosts publishes a floor and escalates a
// host in the fleet pacer's key, as a worker's 429 would.
func TestStatusShowsFloorsAndHeldBackHosts(t *testing.T) {
	srv := testenv.StartRedis(t)
	c := redisClient(t, srv)
	if r := runBinary(t, nil, "policy", "--redis-url", srv.URL(), "set", "floor.example", "5"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	now := time.Now()
	esc := func(host string, interval time.Duration) {
		at := strconv.FormatInt(now.UnixMicro(), 10)
		if err := c.Do(t.Context(), c.B().Hset().Key("replicator:pace:{"+host+"}").FieldValue().
			FieldValue("last", at).FieldValue("esc", strconv.FormatInt(interval.Microseconds(), 10)).FieldValue("esc_at", at).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	esc("held.example", 4*time.Second)
	esc("floor.example", 3*time.Second) // under its floor: not held beyond it
	rep := status(t, srv)
	if len(rep.Floors) != 1 || rep.Floors[0].Host != "floor.example" || rep.Floors[0].MinIntervalSeconds != 5 {
		t.Errorf("floors: %+v", rep.Floors)
	}
	if len(rep.HeldBack) != 1 || rep.HeldBack[0].Host != "held.example" || rep.HeldBack[0].IntervalSeconds != 4 ||
		rep.HeldBack[0].FloorSeconds != nil || rep.HeldBack[0].Until.Sub(now) < 29*time.Minute {
		t.Errorf("held back: %+v", rep.HeldBack)
	}
	r := runBinary(t, nil, "status", "--redis-url", srv.URL())
	if !strings.Contains(r.stdout, "held.example") || !strings.Contains(r.stdout, "floor.example  5s") {
		t.Errorf("status screen:\n%s", r.stdout)
	}
}

func TestStatusOnAFreshRedis(t *testing.T) {
	srv := testenv.StartRedis(t)
	r := runBinary(t, nil, "status", "--redis-url", srv.URL())
	if r.code != 0 || !strings.Contains(r.stdout, "Nothing yet") {
		t.Errorf("status on a fresh Redis: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if rep := status(t, srv); !rep.NothingYet || len(rep.Streams) != 2 || rep.Streams[0].Exists {
		t.Errorf("status --json on a fresh Redis: %+v", rep)
	}
}

func TestStatusUnreachableRedis(t *testing.T) {
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for _, args := range [][]string{{"status"}, {"status", "--json"}, {"status", "--watch"}} {
		r := runBinary(t, []string{"REPLICATOR_REDIS_URL=redis://:hunter2@" + addr + "/0"}, args...)
		if r.code != 1 {
			t.Errorf("%v: exit %d, want 1", args, r.code)
		}
		if lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n"); len(lines) != 1 || !strings.Contains(lines[0], addr) {
			t.Errorf("%v: stderr is not one line naming %s:\n%s", args, addr, r.stderr)
		}
		if strings.Contains(r.stderr, "hunter2") || r.stdout != "" {
			t.Errorf("%v: printed the password or a screen:\n%s%s", args, r.stdout, r.stderr)
		}
	}
}

// TestStreamGaugesDocumented checks that docs/operations.md names every
// series the stream gauges export, and no other replicator_stream_,
// replicator_group_ or replicator_dead_letter series.
func TestStreamGaugesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan *prometheus.Desc, 32)
	g, _ := fetchGauges(t, nil)
	g.Describe(ch)
	close(ch)
	exported := map[string]bool{}
	for d := range ch {
		name := regexp.MustCompile(`fqName: "([a-z_]+)"`).FindStringSubmatch(d.String())[1]
		exported[name] = true
		if !strings.Contains(string(doc), "`"+name) {
			t.Errorf("docs/operations.md does not document %s", name)
		}
	}
	for _, name := range regexp.MustCompile(`replicator_(?:stream|group|dead_letter)[a-z_]*`).FindAllString(string(doc), -1) {
		if !exported[name] {
			t.Errorf("docs/operations.md names %s, which the stream gauges do not export", name)
		}
	}
}

// TestStatusOnACluster reads every part of the status from a Redis
// Cluster named by one URL, keys spread over its nodes.
func TestStatusOnACluster(t *testing.T) {
	cluster := testenv.StartCluster(t)
	redisURL := "redis://" + cluster.Addrs[0] + "/0?addr=" + cluster.Addrs[1] + "&addr=" + cluster.Addrs[2]
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: cluster.Addrs, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Do(t.Context(), c.B().XgroupCreate().Key(streamCommands).Group("replicator.fetch").Id("$").Mkstream().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	publishCommands(t, c, 2)
	if _, err := xadd(t.Context(), c, streamReplicateDLQ, map[string]string{"dlq_reason": "alias_unknown"}); err != nil {
		t.Fatal(err)
	}
	if r := runBinary(t, nil, "policy", "--redis-url", redisURL, "set", "floor.example", "2"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	r := runBinary(t, nil, "status", "--json", "--redis-url", redisURL)
	var rep statusReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); r.code != 0 || err != nil {
		t.Fatalf("status --json on a cluster: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if g := fetchGroup(t, rep); g.Lag != 2 {
		t.Errorf("lag on a cluster = %d, want 2", g.Lag)
	}
	if d := rep.DeadLetters[1]; d.Length != 1 || len(d.Reasons) != 1 || d.Reasons[0].Reason != "alias_unknown" {
		t.Errorf("replicate dead letters on a cluster: %+v", d)
	}
	if len(rep.Floors) != 1 || rep.Floors[0].Host != "floor.example" {
		t.Errorf("floors on a cluster: %+v", rep.Floors)
	}
}
