package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
)

// factCount reads the length of the facts stream.
func (e *wenv) factCount() int {
	e.t.Helper()
	n, err := e.do(e.client.B().Xlen().Key(e.facts).Build()).AsInt64()
	if err != nil {
		e.t.Fatalf("XLEN facts: %v", err)
	}
	return int(n)
}

// drainRate waits until the facts stream holds want facts and returns the
// rate at which the facts from the one after from onwards arrived: the
// count between the first and the last of them over the time between. It
// fails the test when no fact arrives for stall.
func (e *wenv) drainRate(from, want int, stall time.Duration) float64 {
	e.t.Helper()
	var first, last time.Time
	n, progress := e.factCount(), time.Now()
	for n < want {
		time.Sleep(5 * time.Millisecond)
		got := e.factCount()
		now := time.Now()
		if got == n {
			if now.Sub(progress) > stall {
				e.t.Fatalf("%d of %d facts, none for %v", got-from, want-from, stall)
			}
			continue
		}
		if first.IsZero() && got > from {
			first = now
		}
		n, progress, last = got, now, now
	}
	return float64(n-from-1) / last.Sub(first).Seconds()
}

// TestWorkerBacklogDrainsAfterOutage: a backlog of one host's commands that
// forms during a Redis outage drains, once Redis is back, at the rate the
// worker fetched that host before the outage (spacing 0), not at the pace
// of the reclaim. ClaimMinIdle is far longer than the test, so nothing
// returns through XAUTOCLAIM: only commands the worker keeps track of can
// come back.
//
// Before the outage the test keeps a few dozen commands outstanding, well
// under what one host may hold, so the worker is never behind: the rate is
// the worker's own. The outage is the test's redis-server killed and
// restarted on the same port with its append-only file (stream and group
// survive). The issuers' backlog is published as soon as Redis is back.
func TestWorkerBacklogDrainsAfterOutage(t *testing.T) {
	const (
		host        = "w.test"
		steady      = 400
		outstanding = 32
		backlog     = 2000
		outage      = 15 * time.Second
		answer      = 40 * time.Millisecond
		stall       = 20 * time.Second
	)
	// An append-only file survives the kill of the process: every write
	// Redis answered is in it (the fsync policy only matters to a crash of
	// the machine).
	persist := testenv.RedisOptions{Args: []string{"--appendonly", "yes", "--appendfsync", "no"}}
	r, err := testenv.NewRedis(persist)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	// The origin takes a while to answer, so the host's rate is its own
	// (requests in flight per host over the answer's time), the same
	// before and after, and not the test's machine's.
	e := newEnv(t, standalone(t, r).client, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		time.Sleep(answer)
		okBody(w, req)
	}))
	wo := e.workerOptions()
	wo.Loop.ClaimMinIdle = 10 * time.Minute // nothing is reclaimed during the test
	wo.Loop.MaxConsecutiveFailures = 1000
	wo.Loop.BackoffMax = 500 * time.Millisecond
	e.start(stackOptions{slots: 16}, wo)

	cmd := func(i int) *envelope.ContentFetch {
		return e.command(fmt.Sprintf("c-%05d", i), e.url(host, fmt.Sprintf("/%d", i)))
	}

	// Before: at most outstanding commands published and not yet answered.
	var first, last time.Time
	published, done := 0, 0
	for done < steady {
		if k := min(outstanding-(published-done), steady-published); k > 0 {
			batch := make([]*envelope.ContentFetch, k)
			for i := range batch {
				batch[i] = cmd(published + i)
			}
			e.addMany(batch)
			published += k
		}
		time.Sleep(2 * time.Millisecond)
		if n := e.factCount(); n > done {
			if done == 0 {
				first = time.Now()
			}
			done, last = n, time.Now()
		}
	}
	before := float64(steady-1) / last.Sub(first).Seconds()
	t.Logf("before the outage: %.1f commands/s", before)
	e.waitSettled(20 * time.Second)

	r.Stop()
	testenv.Eventually(t, 10*time.Second, "the worker to notice the outage", func() bool {
		return strings.Contains(e.logs.String(), "consume cycle failed")
	})
	time.Sleep(outage) // the outage itself
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "the test's client to reconnect", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return e.client.Do(ctx, e.client.B().Ping().Build()).Error() == nil
	})
	batch := make([]*envelope.ContentFetch, backlog)
	for i := range batch {
		batch[i] = cmd(steady + i)
	}
	e.addMany(batch)
	after := e.drainRate(steady, steady+backlog, stall)
	e.waitSettled(20 * time.Second)

	t.Logf("the backlog after it: %.1f commands/s (%.0f%% of the rate before)", after, 100*after/before)
	if after < 0.8*before {
		t.Errorf("the backlog drained at %.1f commands/s, want at least 80%% of %.1f", after, before)
	}
	ids := map[string]bool{}
	for _, id := range commandIDs(e.factsNow()) {
		if ids[id] {
			t.Errorf("two facts for %s", id)
		}
		ids[id] = true
	}
	if len(ids) != steady+backlog {
		t.Errorf("%d commands have a fact, want %d", len(ids), steady+backlog)
	}
}

// TestWorkerTakesBackOnlyWhatIsStillItsOwn: commands over their host's
// bound are left pending and taken back once the host has room, except one
// another consumer has taken over meanwhile (it is left to that consumer)
// and one trimmed from the stream (acked away with a warning).
func TestWorkerTakesBackOnlyWhatIsStillItsOwn(t *testing.T) {
	for _, b := range bothBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			release := make(chan struct{})
			e := newEnv(t, b.client, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				select {
				case <-release:
				case <-req.Context().Done():
					return
				}
				okBody(w, req)
			}))
			wo := e.workerOptions()
			wo.Loop.ClaimMinIdle = 10 * time.Minute // nothing is reclaimed during the test
			wo.MaxHeldPerHost = 2
			e.start(stackOptions{}, wo)
			cmds := make([]*envelope.ContentFetch, 6)
			for i := range cmds {
				cmds[i] = e.command(fmt.Sprintf("c%d", i), e.url("w.test", fmt.Sprintf("/%d", i)))
			}
			ids := e.addMany(cmds)
			testenv.Eventually(t, 10*time.Second, "four commands left pending", func() bool {
				return strings.Count(e.logs.String(), `"msg":"left a command pending"`) == 4 && e.lastDelivered() == ids[5]
			})
			// c3 is reclaimed by another worker; c4 is trimmed from the stream.
			if err := e.do(e.client.B().Xclaim().Key(e.stream).Group(e.group).Consumer("other").MinIdleTime("0").Id(ids[3]).Justid().Build()).Error(); err != nil {
				t.Fatal(err)
			}
			if err := e.do(e.client.B().Xdel().Key(e.stream).Id(ids[4]).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			close(release)

			facts := e.waitFacts(4, 10*time.Second)
			testenv.Eventually(t, 10*time.Second, "only the other consumer's entry pending", func() bool { return e.pending() == 1 })
			if diff := cmp.Diff([]string{"c0", "c1", "c2", "c5"}, commandIDs(facts), cmpSorted); diff != "" {
				t.Errorf("facts (-want +got):\n%s", diff)
			}
			if owner := e.owner(ids[3]); owner != "other" {
				t.Errorf("c3 is pending for %q, want other", owner)
			}
			if !strings.Contains(e.logs.String(), `"msg":"pending entry was trimmed from the stream; acking it away","message_id":"`+ids[4]) {
				t.Error("no warning for the trimmed entry")
			}
			if n := e.requests("w.test"); n != 4 {
				t.Errorf("the origin saw %d requests, want 4", n)
			}
		})
	}
}
