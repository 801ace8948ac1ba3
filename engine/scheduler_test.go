package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/replicator-go/replicator/engine/capability"
)

// The scheduler is pure: these tests drive it with explicit times and
// never start a redis-server.

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// sim drives a scheduler as the loop does: it admits commands, starts what
// the scheduler lets start, and returns commands from the "Handler". The
// keys of the tests below are hosts, as content.fetch's are.
type sim struct {
	t      *testing.T
	s      *scheduler
	byID   map[string]*task
	held   int // admitted and not yet done
	max    int // the loop's MaxHeld
	active int // started and not yet done, all keys
	// most is the most commands active at once so far.
	most int
}

// newSim is a scheduler of hosts with no bound on the handlings at once
// but each host's.
func newSim(t *testing.T, maxHeld, perHost, activePerHost int) *sim {
	return newSimBound(t, maxHeld, perHost, activePerHost, 1<<20)
}

// newSimBound is a scheduler that runs at most concurrency commands at
// once, all keys together.
func newSimBound(t *testing.T, maxHeld, perKey, activePerKey, concurrency int) *sim {
	return &sim{t: t, byID: map[string]*task{}, max: maxHeld,
		s: newScheduler(perKey, activePerKey, concurrency, 1<<20)}
}

// admit offers command id for host at now and returns what started.
func (x *sim) admit(id, host string, now time.Time) (ok bool, why, evicted string, started []string) {
	ok, why, evicted = x.put(id, host, now)
	return ok, why, evicted, x.start(now)
}

// put offers command id for host at now, starting nothing.
func (x *sim) put(id, host string, now time.Time) (ok bool, why, evicted string) {
	h := &task{entry: entry{ID: id}, CommandID: id, Key: host}
	ok, why, ev := x.s.Admit(h, x.held >= x.max, now)
	if ev != nil {
		evicted = ev.ID
		x.held--
	}
	if ok {
		x.byID[id] = h
		x.held++
	}
	return ok, why, evicted
}

func (x *sim) start(now time.Time) []string {
	ids := x.startInOrder(now)
	slices.Sort(ids)
	return ids
}

// startInOrder is start, the commands in the order Start returns them.
func (x *sim) startInOrder(now time.Time) []string {
	var ids []string
	for _, h := range x.s.Start(now) {
		if !h.inHandler {
			x.t.Errorf("Start returned %s, not marked inside the Handler", h.ID)
		}
		ids = append(ids, h.ID)
		x.active++
		x.most = max(x.most, x.active)
	}
	return ids
}

// done returns id from the Handler with out; it reports whether it was
// requeued, and what started.
func (x *sim) done(id string, out capability.Outcome, now time.Time) (bool, []string) {
	requeued := x.finish(id, out, now)
	return requeued, x.start(now)
}

// finish returns id from the Handler with out, starting nothing; it
// reports whether it was requeued.
func (x *sim) finish(id string, out capability.Outcome, now time.Time) bool {
	h := x.byID[id]
	if !h.inHandler {
		x.t.Fatalf("%s returned from the Handler without being in it", id)
	}
	x.active--
	requeued := x.s.Done(h, out, true, now)
	if !requeued {
		x.held--
	}
	return requeued
}

func stored() capability.Outcome {
	return capability.Outcome{Fate: capability.Complete, Label: "stored"}
}

// parked is the Outcome of a command that waits for host's window (or, with
// host empty, its own key's) for wait.
func parked(host string, wait time.Duration) capability.Outcome {
	return capability.Outcome{Fate: capability.Park, Reason: "politeness", Key: host, Wait: wait}
}

func TestSchedulerBoundsActivePerHost(t *testing.T) {
	tests := []struct {
		name          string
		activePerHost int
		hosts         []string // one command each, in arrival order
		wantStarted   []string
	}{
		{name: "one host, four at once", activePerHost: 4, hosts: []string{"a", "a", "a", "a", "a", "a"}, wantStarted: []string{"c0", "c1", "c2", "c3"}},
		{name: "one at a time", activePerHost: 1, hosts: []string{"a", "a", "b"}, wantStarted: []string{"c0", "c2"}},
		{name: "hosts do not share the bound", activePerHost: 2, hosts: []string{"a", "a", "a", "b", "b", "b"}, wantStarted: []string{"c0", "c1", "c3", "c4"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newSim(t, 100, 64, tt.activePerHost)
			var started []string
			for i, host := range tt.hosts {
				ok, why, _, s := x.admit(cid(i), host, t0)
				if !ok {
					t.Fatalf("admit %s: refused (%s)", cid(i), why)
				}
				started = append(started, s...)
			}
			slices.Sort(started)
			if diff := cmp.Diff(tt.wantStarted, started); diff != "" {
				t.Errorf("started (-want +got):\n%s", diff)
			}
		})
	}
}

func cid(i int) string { return "c" + string(rune('0'+i)) }

func TestSchedulerStartsTheNextWhenOneIsDone(t *testing.T) {
	x := newSim(t, 100, 64, 1)
	x.admit("c0", "a", t0)
	x.admit("c1", "a", t0)
	x.admit("c2", "a", t0)
	requeued, started := x.done("c0", stored(), t0)
	if requeued || !slices.Equal(started, []string{"c1"}) {
		t.Errorf("done(c0) = requeued %v, started %v; want not requeued, c1 started", requeued, started)
	}
}

func TestSchedulerParksUntilTheHostIsDue(t *testing.T) {
	x := newSim(t, 100, 64, 4)
	x.admit("c0", "a", t0)
	x.admit("c1", "a", t0) // both start: the host has room for 4
	requeued, started := x.done("c0", parked("a", 3*time.Second), t0)
	if !requeued || len(started) != 0 {
		t.Fatalf("done(c0, parked) = requeued %v, started %v; want requeued, nothing started", requeued, started)
	}
	if n := x.s.Parked(); n != 1 {
		t.Errorf("Parked = %d, want 1", n)
	}
	// A host with parked commands runs one at a time: while c1 holds that
	// place nothing is armed.
	if got := x.s.Wake(); !got.IsZero() {
		t.Errorf("Wake = %v while c1 runs, want zero", got)
	}
	if _, s := x.done("c1", stored(), t0.Add(time.Second)); len(s) != 0 {
		t.Errorf("started %v before the host was due", s)
	}
	if got, want := x.s.Wake(), t0.Add(3*time.Second); !got.Equal(want) {
		t.Errorf("Wake = %v, want %v", got, want)
	}
	if s := x.start(t0.Add(2999 * time.Millisecond)); len(s) != 0 {
		t.Errorf("started %v before the host was due", s)
	}
	if s := x.start(t0.Add(3 * time.Second)); !slices.Equal(s, []string{"c0"}) {
		t.Errorf("at the due time started %v, want c0", s)
	}
	if n := x.s.Parked(); n != 0 {
		t.Errorf("Parked = %d after c0 started, want 0", n)
	}
	if got := x.s.Wake(); !got.IsZero() {
		t.Errorf("Wake = %v with nothing waiting, want zero", got)
	}
	if n := x.byID["c0"].parks; n != 1 {
		t.Errorf("c0 parked %d times, want 1", n)
	}
}

func TestSchedulerKeepsArrivalOrderAcrossParks(t *testing.T) {
	x := newSim(t, 100, 64, 1)
	for i := range 3 {
		x.admit(cid(i), "a", t0)
	}
	// c0 parks: it returns to its place at the head, before c1 and c2.
	x.done("c0", parked("a", time.Second), t0)
	q := x.s.keys["a"]
	var order []string
	for _, h := range q.waiting {
		order = append(order, h.ID)
	}
	if diff := cmp.Diff([]string{"c0", "c1", "c2"}, order); diff != "" {
		t.Errorf("queue order (-want +got):\n%s", diff)
	}
	if s := x.start(t0.Add(time.Second)); !slices.Equal(s, []string{"c0"}) {
		t.Errorf("at the due time started %v, want c0 alone", s)
	}
}

func TestSchedulerRequeuesOnTheRedirectsHost(t *testing.T) {
	x := newSim(t, 100, 64, 4)
	x.admit("c0", "a", t0)
	requeued, _ := x.done("c0", parked("b.test", time.Second), t0)
	if !requeued {
		t.Fatal("not requeued")
	}
	h := x.byID["c0"]
	if h.Key != "b.test" || h.q != x.s.keys["b.test"] {
		t.Errorf("requeued under %q, want the redirect's host b.test", h.Key)
	}
	if _, ok := x.s.keys["a"]; ok {
		t.Error("the idle queue of a is kept")
	}
}

func TestSchedulerRequeuesOnItsOwnKeyWhenTheParkNamesNone(t *testing.T) {
	x := newSim(t, 100, 64, 4)
	x.admit("c0", "a", t0)
	requeued, _ := x.done("c0", parked("", time.Second), t0)
	h := x.byID["c0"]
	if !requeued || h.Key != "a" || h.q != x.s.keys["a"] {
		t.Errorf("done(c0, parked on no key) = requeued %v under %q; want requeued under its own a", requeued, h.Key)
	}
	if got, want := x.s.Wake(), t0.Add(time.Second); !got.Equal(want) {
		t.Errorf("Wake = %v, want %v", got, want)
	}
}

func TestSchedulerDoesNotRequeue(t *testing.T) {
	tests := []struct {
		name    string
		out     capability.Outcome
		requeue bool
		perHost int
	}{
		{name: "stopping or lost", out: parked("a", time.Second), requeue: false, perHost: 64},
		{name: "not parked", out: capability.Outcome{Fate: capability.Retry}, requeue: true, perHost: 64},
		{name: "the host it waits for is full", out: parked("full", time.Second), requeue: true, perHost: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newSim(t, 100, tt.perHost, 4)
			x.admit("c0", "a", t0)
			x.admit("f0", "full", t0)
			if x.s.Done(x.byID["c0"], tt.out, tt.requeue, t0) {
				t.Error("requeued")
			}
		})
	}
}

func TestSchedulerAdmit(t *testing.T) {
	tests := []struct {
		name string
		// before are admitted first, in order; parkedHosts then have their
		// first command parked for a minute.
		before      []string
		parkedHosts []string
		maxHeld     int
		host        string
		wantOK      bool
		wantWhy     string
		wantEvicted string
	}{
		{name: "room", before: []string{"a"}, maxHeld: 10, host: "b", wantOK: true},
		{name: "host backlog full", before: []string{"a", "a", "a"}, maxHeld: 10, host: "a", wantWhy: "key backlog full"},
		{name: "full and nobody waits for a window", before: []string{"a", "b"}, maxHeld: 2, host: "c", wantWhy: "worker full"},
		{
			name: "full: the newest of the longest parked backlog makes room", maxHeld: 5,
			before: []string{"a", "a", "b", "b", "b"}, parkedHosts: []string{"a", "b"},
			host: "c", wantOK: true, wantEvicted: "c4",
		},
		{
			name: "full: no room for a host that itself waits", maxHeld: 4,
			before: []string{"a", "a", "b", "b"}, parkedHosts: []string{"a", "b"},
			host: "a", wantWhy: "worker full",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newSim(t, tt.maxHeld, 3, 1)
			for i, host := range tt.before {
				if ok, why, _, _ := x.admit(cid(i), host, t0); !ok {
					t.Fatalf("admit %s: %s", cid(i), why)
				}
			}
			for _, host := range tt.parkedHosts {
				for _, h := range x.byID {
					if h.Key == host && h.inHandler {
						x.done(h.ID, parked(host, time.Minute), t0)
						break
					}
				}
			}
			ok, why, evicted, _ := x.admit("new", tt.host, t0)
			if ok != tt.wantOK || why != tt.wantWhy || evicted != tt.wantEvicted {
				t.Errorf("Admit = %v, %q, evicted %q; want %v, %q, evicted %q", ok, why, evicted, tt.wantOK, tt.wantWhy, tt.wantEvicted)
			}
		})
	}
}

func TestSchedulerEvictable(t *testing.T) {
	x := newSim(t, 100, 64, 1)
	for i, host := range []string{"a", "a", "a", "b", "b"} {
		x.admit(cid(i), host, t0)
	}
	if n := x.s.Evictable(); n != 0 {
		t.Fatalf("Evictable = %d before any host waits for its window, want 0", n)
	}
	x.done("c0", parked("a", time.Minute), t0) // a: c0 parked, c1 and c2 waiting
	if n := x.s.Evictable(); n != 3 {
		t.Errorf("Evictable = %d, want a's 3 waiting commands", n)
	}
}

func TestSchedulerPacedHostIsHostBound(t *testing.T) {
	x := newSim(t, 3, 64, 1)
	x.admit("c0", "a", t0)
	x.admit("c1", "a", t0)
	// c0 waited for its window before it was fetched: a's pace, not a
	// slot, is what c1 waits for, once a's one place is taken again.
	x.done("c0", capability.Outcome{Fate: capability.Complete, Paced: 500 * time.Millisecond}, t0)
	if n := x.s.Evictable(); n != 0 {
		t.Fatalf("Evictable = %d while c1 runs, want 0", n)
	}
	x.admit("c2", "a", t0)
	if n := x.s.Evictable(); n != 1 {
		t.Errorf("Evictable = %d, want 1 (c2 waits behind paced c1)", n)
	}
}

func TestSchedulerRemoveAndDrain(t *testing.T) {
	x := newSim(t, 100, 64, 1)
	x.admit("c0", "a", t0) // active
	x.admit("c1", "a", t0)
	x.admit("c2", "b", t0) // active
	x.admit("c3", "b", t0)
	if x.s.Remove(x.byID["c0"]) {
		t.Error("removed an active command")
	}
	if !x.s.Remove(x.byID["c1"]) {
		t.Error("did not remove a waiting command")
	}
	var drained []string
	for _, h := range x.s.Drain() {
		drained = append(drained, h.ID)
	}
	if diff := cmp.Diff([]string{"c3"}, drained); diff != "" {
		t.Errorf("Drain (-want +got):\n%s", diff)
	}
	if s := x.start(t0.Add(time.Hour)); len(s) != 0 {
		t.Errorf("started %v after the drain", s)
	}
}

func TestSchedulerWakeFollowsTheEarliestDueHost(t *testing.T) {
	x := newSim(t, 100, 64, 1)
	x.admit("c0", "a", t0)
	x.done("c0", parked("a", time.Minute), t0)
	x.admit("c1", "b", t0)
	x.done("c1", parked("b", time.Second), t0)
	if got := x.s.Wake(); !got.Equal(t0.Add(time.Second)) {
		t.Errorf("Wake = %v, want b's, 1 s", got)
	}
	if s := x.start(t0.Add(time.Second)); !slices.Equal(s, []string{"c1"}) {
		t.Errorf("started %v, want c1", s)
	}
	if got := x.s.Wake(); !got.Equal(t0.Add(time.Minute)) {
		t.Errorf("Wake = %v, want a's, 1 min", got)
	}
}

func TestSchedulerWakeSkipsSupersededWakeUps(t *testing.T) {
	x := newSim(t, 100, 64, 2)
	x.admit("c0", "a", t0)
	x.admit("c1", "a", t0)
	x.done("c1", parked("a", time.Minute), t0) // a is armed for a minute
	x.done("c0", parked("a", time.Second), t0) // c0 goes back ahead of c1: armed for a second
	if got := x.s.Wake(); !got.Equal(t0.Add(time.Second)) {
		t.Errorf("Wake = %v, want 1 s", got)
	}
	if s := x.start(t0.Add(time.Second)); !slices.Equal(s, []string{"c0"}) {
		t.Errorf("started %v, want c0 (one at a time while a has parked commands)", s)
	}
	// The minute's wake-up was superseded; c1 is armed again once c0 is
	// done.
	if got := x.s.Wake(); !got.IsZero() {
		t.Errorf("Wake = %v while c0 runs, want zero", got)
	}
	x.done("c0", stored(), t0.Add(time.Second))
	if got := x.s.Wake(); !got.Equal(t0.Add(time.Minute)) {
		t.Errorf("Wake = %v after c0, want c1's minute", got)
	}
}

// backlog admits ids c0…c<n-1> for host a, in order, and returns those
// refused.
func (x *sim) backlog(n int) []string {
	var refused []string
	for i := range n {
		id := fmt.Sprintf("c%d", i)
		if ok, _, _, _ := x.admit(id, "a", t0); !ok {
			refused = append(refused, id)
		}
	}
	return refused
}

// waiting lists host's waiting commands in queue order.
func (x *sim) waiting(host string) []string {
	var ids []string
	if q := x.s.keys[host]; q != nil {
		for _, h := range q.waiting {
			ids = append(ids, h.ID)
		}
	}
	return ids
}

func TestSchedulerRecallsABacklogAsItsHostDrains(t *testing.T) {
	x := newSim(t, 100, 4, 1)
	refused := x.backlog(10)
	if diff := cmp.Diff([]string{"c4", "c5", "c6", "c7", "c8", "c9"}, refused); diff != "" {
		t.Fatalf("refused (-want +got):\n%s", diff)
	}
	if ids := x.s.Recall(100, t0); len(ids) != 0 {
		t.Errorf("Recall = %v while the host holds its bound, want nothing", ids)
	}
	// Another host is not held up by a's backlog.
	if ok, why, _, started := x.admit("b0", "b", t0); !ok || !slices.Equal(started, []string{"b0"}) {
		t.Errorf("admit b0 = %v (%s), started %v; want admitted and started", ok, why, started)
	}
	// A new command for a goes behind a's commands in the stream.
	if ok, why, _, _ := x.admit("n0", "a", t0); ok || why != "key backlog in the stream" {
		t.Errorf("admit n0 = %v (%q), want refused: a has a backlog in the stream", ok, why)
	}

	x.done("c0", stored(), t0)
	if ids := x.s.Recall(100, t0); len(ids) != 0 {
		t.Errorf("Recall = %v with a at 3 of 4, want nothing before it is down to half", ids)
	}
	x.done("c1", stored(), t0) // a holds c2 (active) and c3
	ids := x.s.Recall(100, t0)
	if diff := cmp.Diff([]string{"c4", "c5"}, ids); diff != "" {
		t.Fatalf("Recall (-want +got):\n%s", diff)
	}
	// Until they are offered back, a new command still waits behind them.
	if ok, _, _, _ := x.admit("n1", "a", t0); ok {
		t.Error("admitted n1 ahead of the recalled commands")
	}
	for _, id := range ids {
		if ok, why, _, _ := x.admit(id, "a", t0); !ok {
			t.Fatalf("admit recalled %s: refused (%s)", id, why)
		}
	}
	if diff := cmp.Diff([]string{"c3", "c4", "c5"}, x.waiting("a")); diff != "" {
		t.Errorf("a's queue (-want +got):\n%s", diff)
	}

	// The rest comes back in arrival order, the late ones last.
	var order []string
	for range 20 {
		for id, h := range x.byID {
			if h.Key == "a" && h.inHandler {
				x.done(id, stored(), t0)
				delete(x.byID, id)
				break
			}
		}
		for _, id := range x.s.Recall(100, t0) {
			order = append(order, id)
			if ok, why, _, _ := x.admit(id, "a", t0); !ok {
				t.Fatalf("admit recalled %s: refused (%s)", id, why)
			}
		}
	}
	if diff := cmp.Diff([]string{"c6", "c7", "c8", "c9", "n0", "n1"}, order); diff != "" {
		t.Errorf("recalled (-want +got):\n%s", diff)
	}
	if len(x.s.noted) != 0 || len(x.s.notedBy) != 0 || len(x.s.recalled) != 0 {
		t.Errorf("notes left: %v, %v, %v", x.s.noted, x.s.notedBy, x.s.recalled)
	}
}

func TestSchedulerRecallBounds(t *testing.T) {
	x := newSim(t, 100, 4, 4)
	x.s.maxNotes = 3
	refused := x.backlog(10)
	if len(refused) != 6 {
		t.Fatalf("refused %v, want 6", refused)
	}
	// Admitted again while its host is full, a noted command is not noted
	// twice.
	if ok, _, _, _ := x.admit("c4", "a", t0); ok {
		t.Fatal("admitted c4 to a full host")
	}
	for _, id := range []string{"c0", "c1", "c2", "c3"} {
		x.done(id, stored(), t0)
	}
	if ids := x.s.Recall(2, t0); !slices.Equal(ids, []string{"c4", "c5"}) {
		t.Errorf("Recall(2) = %v, want c4 c5: at most n", ids)
	}
	// The next call ends the batch: c4 and c5 were not offered back.
	if ids := x.s.Recall(100, t0); !slices.Equal(ids, []string{"c6"}) {
		t.Errorf("Recall = %v, want c6: only three were noted", ids)
	}
	if ids := x.s.Recall(100, t0); len(ids) != 0 {
		t.Errorf("Recall = %v, want nothing left", ids)
	}
	if _, ok := x.s.keys["a"]; ok {
		t.Error("the idle queue of a is kept")
	}
	// c5 comes back through the reclaim after its batch ended: a command
	// like any other.
	if ok, why, _, _ := x.admit("c5", "a", t0); !ok {
		t.Errorf("admit c5: refused (%s)", why)
	}
}

func TestSchedulerRecallsEvictedCommands(t *testing.T) {
	x := newSim(t, 5, 4, 1)
	for i, host := range []string{"a", "a", "b", "b", "b"} {
		x.admit(cid(i), host, t0)
	}
	x.done("c0", parked("a", time.Minute), t0)
	x.done("c2", parked("b", time.Minute), t0)
	ok, _, evicted, _ := x.admit("new", "c", t0)
	if !ok || evicted != "c4" {
		t.Fatalf("admit new = %v, evicted %q; want admitted, c4 evicted", ok, evicted)
	}
	if ids := x.s.Recall(0, t0); len(ids) != 0 {
		t.Errorf("Recall(0) = %v, want nothing without room", ids)
	}
	x.done("new", stored(), t0) // a place is free again
	ids := x.s.Recall(1, t0)
	if !slices.Equal(ids, []string{"c4"}) {
		t.Fatalf("Recall = %v, want the evicted c4", ids)
	}
	if ok, why, _, _ := x.admit("c4", "b", t0); !ok {
		t.Fatalf("admit c4: refused (%s)", why)
	}
	if diff := cmp.Diff([]string{"c2", "c3", "c4"}, x.waiting("b")); diff != "" {
		t.Errorf("b's queue (-want +got):\n%s", diff)
	}
}

// A capability with one queue (content.replicate) gives every command the
// key "" and MaxActivePerKey = Concurrency, MaxHeldPerKey = MaxHeld
// (newOptions): the scheduler is then a FIFO.
func newSingleKey(t *testing.T, concurrency, maxHeld int) *sim {
	return newSimBound(t, maxHeld, maxHeld, concurrency, concurrency)
}

// TestSchedulerSingleKeyIsAFIFO: one queue starts its commands in arrival
// order, at most concurrency at once, and requeues none of them, whatever
// fate a handling ends in (a capability with one queue never parks).
func TestSchedulerSingleKeyIsAFIFO(t *testing.T) {
	fates := []capability.Outcome{
		{Fate: capability.Complete},
		{Fate: capability.Close, Reason: "http_status"},
		{Fate: capability.Retry, Reason: "timeout"},
		{}, // Unclassified
	}
	x := newSingleKey(t, 2, 8)
	var order []string
	for i := range 6 {
		if ok, why, ev := x.put(cid(i), "", t0); !ok || ev != "" {
			t.Fatalf("admit %s = %v (%q), evicted %q; want admitted", cid(i), ok, why, ev)
		}
		order = append(order, x.startInOrder(t0)...)
	}
	if diff := cmp.Diff([]string{"c0", "c1"}, order); diff != "" {
		t.Fatalf("started on arrival (-want +got):\n%s", diff)
	}
	if s := x.startInOrder(t0); len(s) != 0 {
		t.Errorf("Start = %v while two run, want none", s)
	}
	if n := x.s.Evictable(); n != 0 {
		t.Errorf("Evictable = %d, want 0: nothing waits for a time", n)
	}
	for i := 0; len(order) < 6 || x.active > 0; i++ {
		oldest := order[i]
		if x.finish(oldest, fates[i%len(fates)], t0) {
			t.Fatalf("%s requeued after a %v handling", oldest, fates[i%len(fates)].Fate)
		}
		order = append(order, x.startInOrder(t0)...)
		if x.active > 2 {
			t.Fatalf("%d handlings at once, want at most 2", x.active)
		}
	}
	if diff := cmp.Diff([]string{"c0", "c1", "c2", "c3", "c4", "c5"}, order); diff != "" {
		t.Errorf("start order (-want +got):\n%s", diff)
	}
	if x.most != 2 || x.s.active != 0 {
		t.Errorf("at most %d at once, %d left active; want 2, then 0", x.most, x.s.active)
	}
	if x.s.Parked() != 0 || !x.s.Wake().IsZero() || len(x.s.keys) != 0 {
		t.Errorf("Parked %d, Wake %v, %d queues kept; want nothing left", x.s.Parked(), x.s.Wake(), len(x.s.keys))
	}
}

// TestSchedulerSingleKeyKeepsArrivalOrderWhenFull: a full queue turns a
// command away and makes no room (nothing waits for a time), a later one
// waits behind it in the stream, and both come back in arrival order once
// the queue is down to half its bound.
func TestSchedulerSingleKeyKeepsArrivalOrderWhenFull(t *testing.T) {
	x := newSingleKey(t, 2, 4)
	for i := range 4 {
		if ok, why, _ := x.put(cid(i), "", t0); !ok {
			t.Fatalf("admit %s: refused (%s)", cid(i), why)
		}
	}
	if got := x.startInOrder(t0); !slices.Equal(got, []string{"c0", "c1"}) {
		t.Fatalf("started %v, want c0 c1", got)
	}
	if ok, why, ev := x.put("c4", "", t0); ok || ev != "" || why != "key backlog full" {
		t.Errorf("admit c4 to a full loop = %v (%q), evicted %q; want refused, key backlog full, nothing evicted", ok, why, ev)
	}
	x.finish("c0", stored(), t0)
	if got := x.startInOrder(t0); !slices.Equal(got, []string{"c2"}) {
		t.Errorf("started %v after c0, want c2", got)
	}
	if ok, why, _ := x.put("c5", "", t0); ok || why != "key backlog in the stream" {
		t.Errorf("admit c5 = %v (%q); want refused behind c4", ok, why)
	}
	if ids := x.s.Recall(4, t0); len(ids) != 0 {
		t.Errorf("Recall = %v with the queue at 3 of 4, want nothing", ids)
	}
	x.finish("c1", stored(), t0)
	order := x.startInOrder(t0)
	ids := x.s.Recall(4, t0)
	if !slices.Equal(ids, []string{"c4", "c5"}) {
		t.Fatalf("Recall = %v, want c4 c5", ids)
	}
	for _, id := range ids {
		if ok, why, _ := x.put(id, "", t0); !ok {
			t.Fatalf("admit recalled %s: refused (%s)", id, why)
		}
	}
	for _, id := range []string{"c2", "c3"} {
		x.finish(id, stored(), t0)
		order = append(order, x.startInOrder(t0)...)
	}
	if diff := cmp.Diff([]string{"c3", "c4", "c5"}, order); diff != "" {
		t.Errorf("start order (-want +got):\n%s", diff)
	}
}

// TestSchedulerBoundsHandlingsAcrossKeys: at most concurrency commands run
// at once, all keys together; a queue held back by that bound starts
// first when a place frees, before queues that became ready after it,
// the queue of the command just done included.
func TestSchedulerBoundsHandlingsAcrossKeys(t *testing.T) {
	x := newSimBound(t, 100, 64, 4, 3)
	var started []string
	for _, c := range []struct{ id, key string }{{"a0", "a"}, {"a1", "a"}, {"b0", "b"}, {"b1", "b"}, {"b2", "b"}, {"c0", "c"}, {"a2", "a"}} {
		_, _, _, s := x.admit(c.id, c.key, t0)
		started = append(started, s...)
	}
	if diff := cmp.Diff([]string{"a0", "a1", "b0"}, started); diff != "" {
		t.Fatalf("started (-want +got):\n%s", diff)
	}
	if s := x.startInOrder(t0); len(s) != 0 {
		t.Errorf("Start = %v with three running, want none", s)
	}
	if n := x.s.Evictable(); n != 0 {
		t.Errorf("Evictable = %d, want 0: commands waiting for a place are not key-bound", n)
	}
	steps := []struct {
		done string
		want []string
	}{
		{done: "a0", want: []string{"b1"}}, // b was held back first: ahead of a, whose command is done
		{done: "a1", want: []string{"b2"}},
		{done: "b0", want: []string{"c0"}},
		{done: "b1", want: []string{"a2"}},
		{done: "b2", want: nil},
	}
	for _, st := range steps {
		x.finish(st.done, stored(), t0)
		if got := x.startInOrder(t0); !slices.Equal(got, st.want) {
			t.Errorf("after %s: started %v, want %v", st.done, got, st.want)
		}
	}
	if x.most != 3 {
		t.Errorf("at most %d at once, want 3", x.most)
	}
}

// TestSchedulerBoundHoldsADueCommand: a parked command that comes due
// while the bound is reached waits for a place, then starts; one whose
// place frees before it is due starts when it is due.
func TestSchedulerBoundHoldsADueCommand(t *testing.T) {
	tests := []struct {
		name string
		// bDone is when b0, holding the one place, is done; atBDone what
		// starts then, wantAtDue what starts at a0's due time after.
		bDone     time.Duration
		atBDone   []string
		wantAtDue []string
	}{
		{name: "due while the place is taken", bDone: 2 * time.Second, atBDone: []string{"a0"}},
		{name: "the place frees first", bDone: 500 * time.Millisecond, wantAtDue: []string{"a0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newSimBound(t, 100, 64, 4, 1)
			x.admit("a0", "a", t0)
			x.admit("b0", "b", t0)
			requeued, started := x.done("a0", parked("", time.Second), t0)
			if !requeued || !slices.Equal(started, []string{"b0"}) {
				t.Fatalf("done(a0, parked) = requeued %v, started %v; want requeued, b0 started", requeued, started)
			}
			if tt.bDone > time.Second {
				if s := x.start(t0.Add(time.Second)); len(s) != 0 {
					t.Errorf("at a0's due time started %v while b0 holds the one place, want none", s)
				}
			}
			if _, s := x.done("b0", stored(), t0.Add(tt.bDone)); !slices.Equal(s, tt.atBDone) {
				t.Errorf("when b0 is done started %v, want %v", s, tt.atBDone)
			}
			if tt.wantAtDue == nil {
				return
			}
			if got, want := x.s.Wake(), t0.Add(time.Second); !got.Equal(want) {
				t.Errorf("Wake = %v, want a0's due time %v", got, want)
			}
			if s := x.start(t0.Add(time.Second)); !slices.Equal(s, tt.wantAtDue) {
				t.Errorf("at a0's due time started %v, want %v", s, tt.wantAtDue)
			}
		})
	}
}

// TestSchedulerBoundUnderChurn admits, parks and finishes commands of many
// keys at random (a fixed seed) and checks after every step what the
// bounds promise: never more than concurrency commands at once, nor more
// than maxActivePerKey of one key; no place left idle while a command could
// start; and each key's commands first started in arrival order.
func TestSchedulerBoundUnderChurn(t *testing.T) {
	const (
		concurrency  = 4
		activePerKey = 2
		keys         = 5
	)
	rng := rand.New(rand.NewPCG(1, 2))
	x := newSimBound(t, 1<<20, 1<<20, activePerKey, concurrency)
	now := t0
	var (
		running  []string
		admitted = map[string][]string{} // by key, in arrival order
		first    = map[string][]string{} // by key, in order of first start
		seen     = map[string]bool{}
	)
	note := func(ids []string) {
		for _, id := range ids {
			running = append(running, id)
			if !seen[id] {
				seen[id] = true
				k := x.byID[id].Key
				first[k] = append(first[k], id)
			}
		}
	}
	for step := range 5000 {
		switch r := rng.IntN(10); {
		case r < 4:
			id := fmt.Sprintf("k%d-%d", rng.IntN(keys), step)
			k := id[:2]
			if ok, why, _ := x.put(id, k, now); !ok {
				t.Fatalf("step %d: admit %s refused (%s)", step, id, why)
			}
			admitted[k] = append(admitted[k], id)
		case r < 8 && len(running) > 0:
			i := rng.IntN(len(running))
			id := running[i]
			running = slices.Delete(running, i, i+1)
			out := stored()
			if rng.IntN(3) == 0 {
				out = parked("", time.Duration(rng.IntN(3000))*time.Millisecond)
			}
			x.finish(id, out, now)
		default:
			now = now.Add(time.Duration(rng.IntN(1500)) * time.Millisecond)
		}
		note(x.startInOrder(now))
		if x.active > concurrency || x.s.active != x.active {
			t.Fatalf("step %d: %d handlings at once (the scheduler counts %d), want at most %d", step, x.active, x.s.active, concurrency)
		}
		for k, q := range x.s.keys {
			limit := activePerKey
			if q.parked > 0 {
				limit = 1
			}
			if q.active > activePerKey {
				t.Fatalf("step %d: key %s has %d at once, want at most %d", step, k, q.active, activePerKey)
			}
			if x.active < concurrency && len(q.waiting) > 0 && q.active < limit && !q.waiting[0].due.After(now) {
				t.Fatalf("step %d: %s could start (key %s has %d of %d, %d of %d in all) but did not",
					step, q.waiting[0].ID, k, q.active, limit, x.active, concurrency)
			}
		}
	}
	for k, ids := range first {
		if want := admitted[k][:len(ids)]; !slices.Equal(ids, want) {
			t.Errorf("key %s first started %v, want arrival order %v", k, ids, want)
		}
	}
	if x.most != concurrency {
		t.Errorf("at most %d at once, want the bound %d reached", x.most, concurrency)
	}
}
