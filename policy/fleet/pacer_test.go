package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/policy"
	"github.com/replicator-go/replicator/policy/internal/pacertest"
)

// newClient connects to a test server or cluster and closes the client when
// the test ends.
func newClient(t testing.TB, addrs ...string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatalf("rueidis client for %v: %v", addrs, err)
	}
	t.Cleanup(c.Close)
	return c
}

// decider plays the decision cases on the fleet pacer; it ignores the
// step's time, since the script reads the server's clock.
type decider struct{ *Pacer }

func (d decider) ReserveAt(_ time.Time, host string, maxWait time.Duration) (policy.Reservation, error) {
	return d.Reserve(context.Background(), host, maxWait)
}

func (d decider) RefusedAt(_ time.Time, host string, retryAfter time.Duration) (time.Duration, error) {
	return d.Refused(context.Background(), host, retryAfter)
}

func (d decider) SentAt(_ time.Time, host string) error { return d.Sent(context.Background(), host) }

const long = time.Hour // a maxWait that never parks

// near allows a wait up to slack short (the calls took time) and a
// millisecond long (the clock mapping's error), as the decision cases do.
func near(got, want, slack time.Duration) bool {
	return got <= want+time.Millisecond && got >= want-slack
}

func testLogger() (*slog.Logger, *testenv.LogBuffer) {
	buf := &testenv.LogBuffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// TestPacer runs the fleet pacer against a single server and against a
// three-master cluster.
func TestPacer(t *testing.T) {
	single := testenv.StartRedis(t)
	cluster := testenv.StartCluster(t)
	backends := []struct {
		name  string
		addrs []string
	}{
		{name: "single", addrs: []string{single.Addr}},
		{name: "cluster", addrs: cluster.Addrs},
	}
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			client := newClient(t, be.addrs...)
			t.Run("decisions match Local", func(t *testing.T) {
				for i, c := range pacertest.Cases {
					if !c.ClockFree() {
						continue
					}
					t.Run(c.Name, func(t *testing.T) {
						pacertest.Run(t, c, 200*time.Millisecond, func(opts policy.LocalOptions) pacertest.Decider {
							return decider{NewPacer(client, PacerOptions{
								Fallback:  policy.NewLocal(opts),
								KeyPrefix: fmt.Sprintf("test:decisions:%d:", i),
							})}
						})
					})
				}
			})
			t.Run("state is shared between pacers", func(t *testing.T) {
				testSharedState(t, client, newClient(t, be.addrs...))
			})
			t.Run("keys expire once they cannot matter", func(t *testing.T) {
				testKeyExpiry(t, client)
			})
			t.Run("an unspaced host writes nothing until escalated", func(t *testing.T) {
				testUnspacedHost(t, client, newClient(t, be.addrs...))
			})
		})
	}
}

// testSharedState checks that two pacers (two workers, two clients) space
// and escalate one host together.
func testSharedState(t *testing.T, c1, c2 rueidis.Client) {
	ctx := context.Background()
	opts := PacerOptions{KeyPrefix: "test:shared:"}
	p1, p2 := NewPacer(c1, opts), NewPacer(c2, opts)

	r, err := p1.Reserve(ctx, "a.test", long)
	if err != nil || !r.OK || r.Wait != 0 {
		t.Fatalf("p1 first Reserve = %+v, %v; want an immediate slot", r, err)
	}
	// Until p1's request reports leaving, p2 gets no slot.
	r, err = p2.Reserve(ctx, "a.test", long)
	if err != nil || r.OK || !near(r.Wait, time.Second, 200*time.Millisecond) {
		t.Fatalf("p2 Reserve before p1's departure = %+v, %v; want no slot, about 1s to wait", r, err)
	}
	if err := p1.Sent(ctx, "a.test"); err != nil {
		t.Fatal(err)
	}
	r, err = p2.Reserve(ctx, "a.test", long)
	if err != nil || !r.OK || !near(r.Wait, time.Second, 200*time.Millisecond) {
		t.Fatalf("p2 Reserve = %+v, %v; want a slot about 1s out", r, err)
	}
	if err := p2.Sent(ctx, "a.test"); err != nil {
		t.Fatal(err)
	}
	if got, err := p1.Refused(ctx, "a.test", 0); err != nil || got != 2*time.Second {
		t.Fatalf("p1 Refused = %v, %v; want 2s", got, err)
	}
	if got, err := p2.Refused(ctx, "a.test", 0); err != nil || got != 4*time.Second {
		t.Fatalf("p2 Refused = %v, %v; want 4s: it compounds p1's escalation", got, err)
	}
	// The last slot taken goes out about 1 s from the start; the next is 4 s
	// after it.
	r, err = p1.Reserve(ctx, "a.test", long)
	if err != nil || !r.OK || r.Interval != 4*time.Second || !near(r.Wait, 5*time.Second, 200*time.Millisecond) {
		t.Fatalf("p1 Reserve after refusals = %+v, %v; want a slot about 5s out at 4s spacing", r, err)
	}
}

// testUnspacedHost checks that a host with no floor costs no key until a
// refusal escalates it, and that the escalation then binds every pacer.
func testUnspacedHost(t *testing.T, c1, c2 rueidis.Client) {
	ctx := context.Background()
	newPacer := func(c rueidis.Client) *Pacer {
		return NewPacer(c, PacerOptions{KeyPrefix: "test:unspaced:", Fallback: policy.NewLocal(policy.LocalOptions{DefaultInterval: policy.None})})
	}
	p1, p2 := newPacer(c1), newPacer(c2)
	exists := func() int64 {
		t.Helper()
		n, err := c1.Do(ctx, c1.B().Exists().Key(p1.Key("u.test")).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for range 3 {
		r, err := p1.Reserve(ctx, "u.test", long)
		if err != nil || !r.OK || r.Wait != 0 || r.Interval != 0 {
			t.Fatalf("Reserve of an unspaced host = %+v, %v; want an immediate slot", r, err)
		}
		// No Sent: a slot with no interval holds nothing to release.
	}
	if exists() != 0 {
		t.Fatal("an unspaced host with no escalation has a key")
	}
	got, err := p2.Refused(ctx, "u.test", 0)
	if err != nil || got != policy.EscalationFirstStep {
		t.Fatalf("Refused = %v, %v; want the first escalation step %v", got, err, policy.EscalationFirstStep)
	}
	r, err := p1.Reserve(ctx, "u.test", long)
	if err != nil || !r.OK || r.Interval != policy.EscalationFirstStep || !near(r.Wait, policy.EscalationFirstStep, 200*time.Millisecond) {
		t.Fatalf("Reserve after another pacer's refusal = %+v, %v; want a slot %v out", r, err, policy.EscalationFirstStep)
	}
}

// testKeyExpiry checks that a host's key carries a TTL covering its spacing
// and escalation plus the grace, and no more.
func testKeyExpiry(t *testing.T, client rueidis.Client) {
	ctx := context.Background()
	p := NewPacer(client, PacerOptions{KeyPrefix: "test:expiry:"})
	pttl := func(host string) time.Duration {
		t.Helper()
		ms, err := client.Do(ctx, client.B().Pttl().Key(p.Key(host)).Build()).AsInt64()
		if err != nil {
			t.Fatalf("PTTL %s: %v", host, err)
		}
		return time.Duration(ms) * time.Millisecond
	}
	if _, err := p.Reserve(ctx, "a.test", long); err != nil {
		t.Fatal(err)
	}
	if got, want := pttl("a.test"), policy.DefaultLease+keyGrace; got > want || got < want-time.Second {
		t.Errorf("TTL while a request holds the lease = %v; want about %v", got, want)
	}
	if err := p.Sent(ctx, "a.test"); err != nil {
		t.Fatal(err)
	}
	if got, want := pttl("a.test"), time.Second+keyGrace; got > want || got < want-time.Second {
		t.Errorf("TTL after the request left = %v; want about %v", got, want)
	}
	if _, err := p.Refused(ctx, "a.test", 0); err != nil {
		t.Fatal(err)
	}
	if got, want := pttl("a.test"), policy.EscalationReset+keyGrace; got > want || got < want-time.Second {
		t.Errorf("TTL after a refusal = %v; want about %v (the quiet window)", got, want)
	}
}

// TestPacerFallsBackToLocal stops the server under a pacer and starts it
// again: decisions continue from the local fallback, which remembers the
// fleet's last decision, with one WARN on the way down and one INFO on the
// way back.
func TestPacerFallsBackToLocal(t *testing.T) {
	srv := testenv.StartRedis(t)
	client := newClient(t, srv.Addr)
	log, logs := testLogger()
	p := NewPacer(client, PacerOptions{Logger: log, Timeout: 500 * time.Millisecond})
	ctx := context.Background()

	if r, err := p.Reserve(ctx, "a.test", long); err != nil || !r.OK {
		t.Fatalf("Reserve with Redis up = %+v, %v", r, err)
	}
	if p.Degraded() {
		t.Fatal("Degraded() with Redis up")
	}

	srv.Stop()
	r, err := p.Reserve(ctx, "a.test", long)
	if err != nil {
		t.Fatalf("Reserve with Redis down returned an error: %v (must fall back)", err)
	}
	if !r.OK || !near(r.Wait, time.Second, 200*time.Millisecond) {
		t.Errorf("fallback Reserve = %+v; want a slot about 1s out (spaced from the fleet's last decision)", r)
	}
	if got, err := p.Refused(ctx, "b.test", 0); err != nil || got != 2*time.Second {
		t.Errorf("fallback Refused = %v, %v; want 2s", got, err)
	}
	if !p.Degraded() {
		t.Error("Degraded() = false with Redis down")
	}
	if n := logs.Count("level=WARN"); n != 1 {
		t.Errorf("WARN lines while degraded = %d; want exactly 1\n%s", n, logs)
	}

	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	// The client reconnects on demand; a first attempt may still see the old
	// connection fail, so ask until Redis answers.
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; p.Degraded(); i++ {
		if time.Now().After(deadline) {
			t.Fatalf("still degraded 10s after Redis came back\n%s", logs)
		}
		if _, err := p.Reserve(ctx, fmt.Sprintf("probe%d.test", i), long); err != nil {
			t.Fatal(err)
		}
	}
	if n := logs.Count("level=INFO"); n != 1 {
		t.Errorf("INFO lines after recovery = %d; want exactly 1\n%s", n, logs)
	}
	if n := logs.Count("level=WARN"); n != 1 {
		t.Errorf("WARN lines after recovery = %d; want still 1\n%s", n, logs)
	}
	// Decisions come from Redis again: its state was lost, so the first
	// request to a host is free.
	if r, err := p.Reserve(ctx, "c.test", long); err != nil || !r.OK || r.Wait != 0 {
		t.Errorf("Reserve after recovery = %+v, %v", r, err)
	}
}

// TestPacerClusterNodeOutage stops the master owning a host's slot: that
// host falls back to the local pacer, and fleet pacing resumes once the node
// is back.
func TestPacerClusterNodeOutage(t *testing.T) {
	cluster := testenv.StartCluster(t)
	client := newClient(t, cluster.Addrs...)
	log, logs := testLogger()
	p := NewPacer(client, PacerOptions{Logger: log, Timeout: 500 * time.Millisecond})
	ctx := context.Background()

	if _, err := p.Reserve(ctx, "a.test", long); err != nil {
		t.Fatal(err)
	}
	node := ownerOf(t, cluster, p.Key("a.test"))
	node.Stop()
	r, err := p.Reserve(ctx, "a.test", long)
	if err != nil || !r.OK || !near(r.Wait, time.Second, 200*time.Millisecond) {
		t.Fatalf("Reserve with the owning node down = %+v, %v; want the fallback's slot about 1s out", r, err)
	}
	if !p.Degraded() {
		t.Fatal("Degraded() = false with the owning node down")
	}
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitReady(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for p.Degraded() {
		if time.Now().After(deadline) {
			t.Fatalf("still degraded 30s after the node came back\n%s", logs)
		}
		if _, err := p.Reserve(ctx, "a.test", long); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // the client refreshes its slot map between attempts
	}
	if n := logs.Count("level=WARN"); n != 1 {
		t.Errorf("WARN lines = %d; want 1\n%s", n, logs)
	}
}

// ownerOf returns the cluster node that serves key.
func ownerOf(t *testing.T, c *testenv.Cluster, key string) *testenv.Redis {
	t.Helper()
	for _, n := range c.Nodes {
		got, err := n.Do("GET", key)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(got, "-MOVED") {
			return n
		}
	}
	t.Fatalf("no node owns %s", key)
	return nil
}
