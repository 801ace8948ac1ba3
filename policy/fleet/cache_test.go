package fleet

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/policy"
)

// cachingClient is a client with server-assisted client-side caching, as
// the worker makes one.
func cachingClient(t testing.TB, addrs ...string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, CacheSizeEachConn: 1 << 20})
	if err != nil {
		t.Fatalf("rueidis client for %v: %v", addrs, err)
	}
	t.Cleanup(c.Close)
	return c
}

// hlenCalls is how many HLEN commands the server behind admin has run.
func hlenCalls(t *testing.T, admin rueidis.Client) int {
	t.Helper()
	info, err := admin.Do(context.Background(), admin.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`cmdstat_hlen:calls=(\d+)`).FindStringSubmatch(info)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

func unspacedPacer(c rueidis.Client, prefix string) *Pacer {
	return NewPacer(c, PacerOptions{KeyPrefix: prefix, Fallback: policy.NewLocal(policy.LocalOptions{DefaultInterval: policy.None})})
}

// TestCachedUnspacedHost: with a caching client, an unspaced host with no
// fleet state costs Redis one lookup, not one per request; this pacer's
// own refusal binds its next decision at once (Redis sends the
// invalidation after the write's reply, so the pacer does not trust its
// cache for that host meanwhile); another worker's refusal binds it once
// Redis's invalidation arrives.
func TestCachedUnspacedHost(t *testing.T) {
	srv := testenv.StartRedis(t)
	admin := newClient(t, srv.Addr)
	ctx := context.Background()

	t.Run("one lookup for many requests", func(t *testing.T) {
		p := unspacedPacer(cachingClient(t, srv.Addr), "test:cache:many:")
		before := hlenCalls(t, admin)
		for range 20 {
			if r, err := p.Reserve(ctx, "u.test", long); err != nil || !r.OK || r.Wait != 0 {
				t.Fatalf("Reserve = %+v, %v; want an immediate slot", r, err)
			}
		}
		if got := hlenCalls(t, admin) - before; got != 1 {
			t.Errorf("Redis ran %d lookups for 20 decisions, want 1", got)
		}
	})

	t.Run("its own refusal binds at once", func(t *testing.T) {
		p := unspacedPacer(cachingClient(t, srv.Addr), "test:cache:own:")
		if r, err := p.Reserve(ctx, "u.test", long); err != nil || !r.OK {
			t.Fatalf("Reserve = %+v, %v", r, err)
		}
		if got, err := p.Refused(ctx, "u.test", 0); err != nil || got != policy.EscalationFirstStep {
			t.Fatalf("Refused = %v, %v", got, err)
		}
		r, err := p.Reserve(ctx, "u.test", -time.Microsecond)
		if err != nil || r.OK || r.Interval != policy.EscalationFirstStep {
			t.Errorf("Reserve right after its own refusal = %+v, %v; want no slot at the escalated %v", r, err, policy.EscalationFirstStep)
		}
	})

	t.Run("another worker's refusal binds once invalidated", func(t *testing.T) {
		p1 := unspacedPacer(cachingClient(t, srv.Addr), "test:cache:other:")
		p2 := unspacedPacer(newClient(t, srv.Addr), "test:cache:other:")
		if r, err := p1.Reserve(ctx, "u.test", long); err != nil || !r.OK {
			t.Fatalf("Reserve = %+v, %v", r, err)
		}
		if _, err := p2.Refused(ctx, "u.test", 0); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(2 * time.Second)
		for {
			r, err := p1.Reserve(ctx, "u.test", -time.Microsecond)
			if err != nil {
				t.Fatal(err)
			}
			if !r.OK && r.Interval == policy.EscalationFirstStep {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Reserve = %+v 2 s after another pacer escalated the host; want the escalation", r)
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// TestUnspacedLookupIsBounded: the lookup for an unspaced host that must
// go to Redis still gives up after the pacer's Timeout when Redis stalls
// (CLIENT PAUSE), and the decision falls back to the local pacer.
func TestUnspacedLookupIsBounded(t *testing.T) {
	srv := testenv.StartRedis(t)
	admin := newClient(t, srv.Addr)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		client func() rueidis.Client
	}{
		{"caching client", func() rueidis.Client { return cachingClient(t, srv.Addr) }},
		{"plain client", func() rueidis.Client { return newClient(t, srv.Addr) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const timeout = 200 * time.Millisecond
			p := NewPacer(tc.client(), PacerOptions{KeyPrefix: "test:bounded:", Timeout: timeout,
				Fallback: policy.NewLocal(policy.LocalOptions{DefaultInterval: policy.None})})
			// Connected first, so the stall meets a lookup, not a dial.
			if _, err := p.Reserve(ctx, "warm.test", long); err != nil {
				t.Fatal(err)
			}
			const pause = 1500 * time.Millisecond
			if err := admin.Do(ctx, admin.B().ClientPause().Timeout(pause.Milliseconds()).All().Build()).Error(); err != nil {
				t.Fatal(err)
			}
			defer admin.Do(ctx, admin.B().ClientUnpause().Build())
			start := time.Now()
			r, err := p.Reserve(ctx, "stalled.test", long)
			took := time.Since(start)
			if err != nil || !r.OK || r.Wait != 0 {
				t.Errorf("Reserve on a stalled Redis = %+v, %v; want the fallback's grant", r, err)
			}
			// Well before the pause ends, so bounded by the timeout, not
			// by Redis waking up.
			if took >= pause*4/5 {
				t.Errorf("Reserve on a stalled Redis took %v; want about the %v timeout, well under the %v pause", took, timeout, pause)
			}
			if !p.Degraded() {
				t.Error("Degraded() = false after a timed-out lookup")
			}
		})
	}
}
