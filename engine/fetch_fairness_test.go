package engine_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
)

// addMany appends commands in one pipeline and returns their ids.
func (e *wenv) addMany(cmds []*envelope.ContentFetch) []string {
	e.t.Helper()
	batch := make(rueidis.Commands, len(cmds))
	for i, cmd := range cmds {
		fields, err := envelope.ToWire(cmd)
		if err != nil {
			e.t.Fatal(err)
		}
		b := e.client.B().Xadd().Key(e.stream).Id("*").FieldValue()
		for k, v := range fields {
			b = b.FieldValue(k, v)
		}
		batch[i] = b.Build()
	}
	ids := make([]string, len(cmds))
	for i, r := range e.client.DoMulti(e.t.Context(), batch...) {
		id, err := r.ToString()
		if err != nil {
			e.t.Fatalf("XADD: %v", err)
		}
		ids[i] = id
	}
	e.mu.Lock()
	e.lastAdded = ids[len(ids)-1]
	e.mu.Unlock()
	return ids
}

// requests counts the requests the origin saw for host.
func (e *wenv) requests(host string) int {
	n := 0
	for _, s := range e.origin.Requests() {
		if s.Host == host {
			n++
		}
	}
	return n
}

// checkGaps checks the spacing of requests as they went out, from the
// pacer's grants (the origin's arrival times add the network's jitter).
// Each decision lies within its grant's bounds, so two decisions at least
// interval apart have the later grant's after at least interval past the
// earlier one's before.
func checkGaps(t *testing.T, grants []grant, interval time.Duration) {
	t.Helper()
	for i := 1; i < len(grants); i++ {
		if gap := grants[i].after.Sub(grants[i-1].before); gap < interval {
			t.Errorf("requests %d and %d came %v apart, want at least %v", i-1, i, gap, interval)
		}
	}
}

// TestWorkerFairness: with a thousand commands queued for one slow host, a
// command for another host still completes at once.
func TestWorkerFairness(t *testing.T) {
	e := newEnv(t, standalone(t, testenv.StartRedis(t)).client, http.HandlerFunc(okBody))
	cmds := make([]*envelope.ContentFetch, 0, 1001)
	for i := range 1000 {
		cmds = append(cmds, e.command(fmt.Sprintf("c-slow-%04d", i), e.url("slow.test", fmt.Sprintf("/%d", i))))
	}
	cmds = append(cmds, e.command("c-fast", e.url("fast.test", "/now")))
	e.addMany(cmds)

	so := stackOptions{floors: map[string]time.Duration{"slow.test": time.Second}, slots: 16}
	wo := e.workerOptions()
	wo.Loop.ClaimMinIdle = 30 * time.Second // the overflow is not reclaimed during the test
	start := time.Now()
	run := e.start(so, wo)
	var took time.Duration
	testenv.Eventually(t, 10*time.Second, "the fast host's fact", func() bool {
		for _, id := range commandIDs(e.factsNow()) {
			if id == "c-fast" {
				took = time.Since(start)
				return true
			}
		}
		return false
	})
	t.Logf("the other host's command completed %v after the worker started", took)
	if took >= 2*time.Second {
		t.Errorf("the other host's command took %v, want well under 2s", took)
	}
	slow := run.stack.pacer.sent("slow.test")
	checkGaps(t, slow, time.Second)
	if max := int(time.Since(start)/time.Second) + 1; len(slow) > max {
		t.Errorf("the slow host got %d requests in %v, want at most %d", len(slow), time.Since(start), max)
	}
}

// TestWorkerFairnessWhenFull is TestWorkerFairness with the worker's memory
// (MaxHeld) smaller than the slow hosts' backlogs: held commands that wait
// for their host give up their place, so another host's command is still
// read and handled at once. A host whose windows are parked counts as
// waiting at once; one whose windows are slept through inside the Handler
// (each under MaxWait) counts once its first paced command returns, one
// interval later, hence the longer bound.
func TestWorkerFairnessWhenFull(t *testing.T) {
	for _, tc := range []struct {
		name      string
		slots     int
		maxHeld   int           // 0: the default, 16 per slot
		maxWait   time.Duration // the fetcher's MaxWait; 0: 5 s
		slowHosts int
		within    time.Duration
	}{
		{name: "two slots, one slow host", slots: 2, slowHosts: 1, maxWait: 50 * time.Millisecond, within: 2 * time.Second},
		{name: "MaxHeld below one host's backlog", slots: 16, maxHeld: 32, slowHosts: 1, maxWait: 50 * time.Millisecond, within: 2 * time.Second},
		{name: "default MaxHeld, five slow hosts", slots: 16, slowHosts: 5, maxWait: 50 * time.Millisecond, within: 2 * time.Second},
		{name: "five slow hosts sleeping through their windows", slots: 16, slowHosts: 5, within: 4 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, standalone(t, testenv.StartRedis(t)).client, http.HandlerFunc(okBody))
			floors := map[string]time.Duration{}
			cmds := make([]*envelope.ContentFetch, 0, 1001)
			for i := range 1000 {
				host := fmt.Sprintf("h%d.test", i%tc.slowHosts)
				floors[host] = time.Second
				cmds = append(cmds, e.command(fmt.Sprintf("c-slow-%04d", i), e.url(host, fmt.Sprintf("/%d", i))))
			}
			cmds = append(cmds, e.command("c-fast", e.url("fast.test", "/now")))
			e.addMany(cmds)
			wo := e.workerOptions()
			wo.Loop.ClaimMinIdle = 30 * time.Second // the overflow is not reclaimed during the test
			wo.MaxHeld = tc.maxHeld
			start := time.Now()
			run := e.start(stackOptions{floors: floors, slots: tc.slots, maxWait: tc.maxWait}, wo)
			var took time.Duration
			testenv.Eventually(t, 10*time.Second, "the fast host's fact", func() bool {
				if slices.Contains(commandIDs(e.factsNow()), "c-fast") {
					took = time.Since(start)
					return true
				}
				return false
			})
			if took >= tc.within {
				t.Errorf("the other host's command took %v, want under %v", took, tc.within)
			}
			for host := range floors {
				sent := run.stack.pacer.sent(host)
				if len(sent) == 0 {
					t.Errorf("no request went to %s: the backlog never formed", host)
				}
				checkGaps(t, sent, time.Second)
			}
		})
	}
}

// TestWorkerParkedHostKeepsItsRate: a backlogged host whose interval is
// longer than MaxWait parks its commands in memory, and is still fetched
// at no less than 90% of 1/interval, never closer than its interval.
func TestWorkerParkedHostKeepsItsRate(t *testing.T) {
	const (
		interval = 200 * time.Millisecond
		n        = 20
	)
	e := newEnv(t, standalone(t, testenv.StartRedis(t)).client, http.HandlerFunc(okBody))
	so := stackOptions{floors: map[string]time.Duration{"paced.test": interval}, maxWait: 50 * time.Millisecond}
	wo := e.workerOptions()
	wo.Loop.ReadBlock = 50 * time.Millisecond
	run := e.start(so, wo)
	cmds := make([]*envelope.ContentFetch, n)
	for i := range cmds {
		cmds[i] = e.command(fmt.Sprintf("c-%02d", i), e.url("paced.test", fmt.Sprintf("/%d", i)))
	}
	e.addMany(cmds)
	e.waitFacts(n, 20*time.Second)
	e.waitSettled(10 * time.Second)

	grants := run.stack.pacer.sent("paced.test")
	if len(grants) != n || e.requests("paced.test") != n {
		t.Fatalf("%d requests went out and the origin saw %d, want %d", len(grants), e.requests("paced.test"), n)
	}
	checkGaps(t, grants, interval)
	span := grants[n-1].after.Sub(grants[0].before)
	rate := float64(n-1) / span.Seconds()
	t.Logf("%d requests over %v: %.2f/s (1/interval = %.2f/s)", n, span, rate, 1/interval.Seconds())
	if want := 0.9 / interval.Seconds(); rate < want {
		t.Errorf("rate %.2f/s, want at least %.2f/s", rate, want)
	}
	if !strings.Contains(e.logs.String(), "parked a command") {
		t.Error("no command was parked; the test does not exercise parking")
	}
}

// TestWorkerKeepsParkedCommandsOwned: a command parked in memory longer
// than ClaimMinIdle stays owned by its worker, so another worker in the
// group never reclaims it.
func TestWorkerKeepsParkedCommandsOwned(t *testing.T) {
	const interval = 1500 * time.Millisecond
	e := newEnv(t, standalone(t, testenv.StartRedis(t)).client, http.HandlerFunc(okBody))
	so := stackOptions{floors: map[string]time.Duration{"paced.test": interval}, maxWait: 50 * time.Millisecond}
	wo := e.workerOptions()
	wo.Loop.ReadBlock = 50 * time.Millisecond
	wo.Loop.ClaimMinIdle = 300 * time.Millisecond

	a := wo
	a.Consumer = "a"
	runA := e.start(so, a)
	e.addModel(e.command("c-1", e.url("paced.test", "/1")))
	e.waitFacts(1, 10*time.Second)
	id := e.addModel(e.command("c-2", e.url("paced.test", "/2")))
	testenv.Eventually(t, 10*time.Second, "the second command parked", func() bool {
		return e.parks(id, "politeness") > 0
	})

	// Worker b has its own pacer: had it reclaimed the command it would
	// fetch it at once, too early.
	b := wo
	b.Consumer = "b"
	runB := e.start(so, b)
	watchUntil := time.Now().Add(3 * wo.Loop.ClaimMinIdle)
	for time.Now().Before(watchUntil) {
		if owner := e.owner(id); owner != "a" {
			t.Fatalf("the parked entry is pending for %q, want a", owner)
		}
		time.Sleep(20 * time.Millisecond)
	}
	facts := e.waitFacts(2, 10*time.Second)
	e.waitSettled(10 * time.Second)
	if len(facts) != 2 {
		t.Errorf("%d facts, want 2", len(facts))
	}
	if n := e.requests("paced.test"); n != 2 {
		t.Fatalf("origin saw %d requests, want 2", n)
	}
	if n := len(runB.stack.pacer.sent("paced.test")); n != 0 {
		t.Errorf("worker b sent %d requests, want none", n)
	}
	checkGaps(t, runA.stack.pacer.sent("paced.test"), interval)
}
