package worker

import (
	"cmp"
	"container/heap"
	"slices"
	"time"

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/consume"
	"github.com/replicator-go/replicator/policy"
)

// task is one held content_fetch command with the scheduler's state for it.
type task struct {
	cmd *envelope.ContentFetch
	// parks counts how often it waited in memory for its host's window.
	parks int

	seq    uint64    // arrival order; queues are FIFO by it
	due    time.Time // set while parked for politeness
	q      *hostQueue
	active bool // inside the Handler
}

type held = consume.Held[*task]

// hostQueue holds the commands for one host that are not in the Handler,
// in arrival order. Only its head is ever armed, so a parked backlog wakes
// one command at a time.
type hostQueue struct {
	host    string
	waiting []*held
	parked  int // waiting commands with a due time (parked for politeness)
	active  int // commands of this queue inside the Handler
	// paced is true when the host's last command to leave the Handler had
	// waited for its politeness window: the host's pace, not a free slot,
	// is what its waiting commands wait for.
	paced  bool
	wakeAt time.Time // when the queue's head is due; zero when not armed
	dirty  bool      // may start something at the next Start

	// notes are the host's commands turned away or evicted, still pending
	// for this consumer, in arrival order; recalling counts those of the
	// current Recall batch not yet offered back.
	notes     []note
	recalling int
}

// note is a command left pending that the scheduler means to take back:
// its entry id and its place in the arrival order.
type note struct {
	id  string
	seq uint64
}

func (q *hostQueue) size() int { return len(q.waiting) + q.active }

// backlogged reports whether q's host has commands waiting in the stream
// for room: a new command for it goes behind them.
func (q *hostQueue) backlogged() bool { return len(q.notes) > 0 || q.recalling > 0 }

// insert places h by arrival order: new commands go last, a re-parked one
// returns to its place.
func (q *hostQueue) insert(h *held) {
	t := h.Command
	i := len(q.waiting)
	for i > 0 && q.waiting[i-1].Command.seq > t.seq {
		i--
	}
	q.waiting = append(q.waiting, nil)
	copy(q.waiting[i+1:], q.waiting[i:])
	q.waiting[i] = h
	t.q, t.active = q, false
	if !t.due.IsZero() {
		q.parked++
	}
}

func (q *hostQueue) pop() *held {
	h := q.waiting[0]
	q.waiting[0] = nil
	q.waiting = q.waiting[1:]
	if !h.Command.due.IsZero() {
		q.parked--
	}
	return h
}

func (q *hostQueue) remove(h *held) bool {
	for i, x := range q.waiting {
		if x == h {
			q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
			if !h.Command.due.IsZero() {
				q.parked--
			}
			return true
		}
	}
	return false
}

// scheduler is the content.fetch loop's consume.Scheduler: a FIFO per host,
// at most MaxActivePerHost of a host's commands in the Handler at once (one
// while it has parked commands), a parked command held until its host is
// due, and room made for other hosts when the loop is full. A command over
// its host's bound, or evicted for another host, is noted and recalled once
// its host has room again. It is pure: the loop calls it under its lock with
// the time.
type scheduler struct {
	maxHeldPerHost   int
	maxActivePerHost int
	maxNotes         int
	// parked is told of each command requeued until it is due, and why.
	parked func(h *held, host string, park *contentfetch.ParkedError)

	hosts map[string]*hostQueue
	seq   uint64
	dirty []*hostQueue
	wakes wakeHeap

	noted    map[string]queued   // notes by entry id
	notedBy  map[*hostQueue]bool // queues with notes
	recalled map[string]queued   // the current Recall batch, by entry id
}

// queued is a note with the queue that holds it.
type queued struct {
	note
	q *hostQueue
}

var _ consume.Scheduler[*task, contentfetch.Outcome] = (*scheduler)(nil)

// newScheduler returns a scheduler that notes at most maxNotes commands;
// one turned away beyond that returns through the reclaim.
func newScheduler(maxHeldPerHost, maxActivePerHost, maxNotes int, parked func(*held, string, *contentfetch.ParkedError)) *scheduler {
	return &scheduler{
		maxHeldPerHost:   maxHeldPerHost,
		maxActivePerHost: maxActivePerHost,
		maxNotes:         maxNotes,
		parked:           parked,
		hosts:            make(map[string]*hostQueue),
		noted:            make(map[string]queued),
		notedBy:          make(map[*hostQueue]bool),
		recalled:         make(map[string]queued),
	}
}

// queue returns host's queue, creating it.
func (s *scheduler) queue(host string) *hostQueue {
	q := s.hosts[host]
	if q == nil {
		q = &hostQueue{host: host}
		s.hosts[host] = q
	}
	return q
}

// forgetIfIdle drops an empty queue so the map holds only hosts with held
// or noted commands.
func (s *scheduler) forgetIfIdle(q *hostQueue) {
	if q.size() == 0 && q.wakeAt.IsZero() && !q.backlogged() && s.hosts[q.host] == q {
		delete(s.hosts, q.host)
	}
}

func (s *scheduler) markDirty(q *hostQueue) {
	if !q.dirty {
		q.dirty = true
		s.dirty = append(s.dirty, q)
	}
}

// Admit takes a command into its host's queue. It refuses one whose host
// already holds maxHeldPerHost, and a new one whose host has noted commands
// (it is noted behind them); when the loop is full, it
// admits one only by making room (makeRoom). A command refused or evicted
// is noted for Recall; one noted before (recalled, or back through the
// reclaim) keeps its place in the arrival order.
func (s *scheduler) Admit(h *held, full bool, _ time.Time) (bool, string, *held) {
	q := s.queue(h.Key)
	seq := s.unnote(h.ID, q)
	if seq == 0 && q.backlogged() && len(s.noted) < s.maxNotes {
		s.note(q, h.ID, 0)
		return false, "host backlog in the stream", nil
	}
	if q.size() >= s.maxHeldPerHost {
		s.note(q, h.ID, seq)
		return false, "host backlog full", nil
	}
	var evicted *held
	if full {
		if evicted = s.makeRoom(q); evicted == nil {
			s.note(q, h.ID, seq)
			return false, "worker full", nil
		}
		s.note(evicted.Command.q, evicted.ID, evicted.Command.seq)
	}
	if seq == 0 {
		s.seq++
		seq = s.seq
	}
	h.Command.seq = seq
	q.insert(h)
	s.markDirty(q)
	return true, "", evicted
}

// note remembers entry id, pending for this consumer, as q's to recall, at
// seq in the arrival order (a new place when seq is 0). Nothing is noted
// past maxNotes: that command returns through the reclaim.
func (s *scheduler) note(q *hostQueue, id string, seq uint64) {
	if _, ok := s.noted[id]; ok || len(s.noted) >= s.maxNotes {
		s.forgetIfIdle(q)
		return
	}
	if seq == 0 {
		s.seq++
		seq = s.seq
	}
	n := note{id: id, seq: seq}
	i, _ := slices.BinarySearchFunc(q.notes, seq, bySeq)
	q.notes = slices.Insert(q.notes, i, n)
	s.noted[id] = queued{note: n, q: q}
	s.notedBy[q] = true
}

// unnote forgets id's note, or its place in the current Recall batch, as
// it is offered to queue to, and returns its place in the arrival order; 0
// when it was not noted.
func (s *scheduler) unnote(id string, to *hostQueue) uint64 {
	var from *hostQueue
	var seq uint64
	if r, ok := s.recalled[id]; ok {
		delete(s.recalled, id)
		from, seq = r.q, r.seq
		from.recalling--
	} else if n, ok := s.noted[id]; ok {
		delete(s.noted, id)
		from, seq = n.q, n.seq
		i, _ := slices.BinarySearchFunc(from.notes, seq, bySeq)
		from.notes = slices.Delete(from.notes, i, i+1)
		if len(from.notes) == 0 {
			delete(s.notedBy, from)
		}
	} else {
		return 0
	}
	if from != to {
		s.forgetIfIdle(from)
	}
	return seq
}

func bySeq(n note, seq uint64) int { return cmp.Compare(n.seq, seq) }

// Recall names up to n noted commands to take back: for each host with
// notes whose queue is down to half its bound, its oldest notes, up to the
// bound. It first ends the previous batch; what of it was not offered back
// is no longer pending here (acked, trimmed or taken over) or was already
// held again, and is forgotten.
func (s *scheduler) Recall(n int, _ time.Time) []string {
	for id, r := range s.recalled {
		delete(s.recalled, id)
		r.q.recalling--
		s.forgetIfIdle(r.q)
	}
	var ids []string
	for q := range s.notedBy {
		if len(ids) >= n {
			break
		}
		if q.size() > s.maxHeldPerHost/2 {
			continue
		}
		k := min(s.maxHeldPerHost-q.size(), len(q.notes), n-len(ids))
		for _, nt := range q.notes[:k] {
			ids = append(ids, nt.id)
			delete(s.noted, nt.id)
			s.recalled[nt.id] = queued{note: nt, q: q}
		}
		q.notes = slices.Delete(q.notes, 0, k)
		q.recalling += k
		if len(q.notes) == 0 {
			delete(s.notedBy, q)
		}
	}
	return ids
}

// hostBound reports whether q's waiting commands wait for their host's
// politeness window rather than for a free request slot: the queue has
// parked commands, or its host's share of the Handler is taken by commands
// that wait for their windows. Only such commands may give up their place
// in memory; they could not start soon anyway.
func (s *scheduler) hostBound(q *hostQueue) bool {
	return len(q.waiting) > 0 && (q.parked > 0 || q.paced && q.active >= s.maxActivePerHost)
}

// Evictable counts the held commands makeRoom could drop.
func (s *scheduler) Evictable() int {
	n := 0
	for _, q := range s.hosts {
		if s.hostBound(q) {
			n += len(q.waiting)
		}
	}
	return n
}

// makeRoom drops one waiting command to make room for a command of another
// host and returns it (nil when none may go): the newest waiting command of
// the longest host-bound queue. The loop leaves it pending; Admit notes
// it, to recall once there is room. Without this, a few backlogged hosts would fill the
// loop and hold up every other host until they drain (docs/politeness.md:
// waiting for one host never holds up commands for other hosts). A command
// whose own host is host-bound gets no room: it would only wait in memory
// instead of in the stream.
func (s *scheduler) makeRoom(asker *hostQueue) *held {
	if s.hostBound(asker) {
		return nil
	}
	var victim *hostQueue
	for _, q := range s.hosts {
		if q != asker && s.hostBound(q) && (victim == nil || len(q.waiting) > len(victim.waiting)) {
			victim = q
		}
	}
	if victim == nil {
		return nil
	}
	h := victim.waiting[len(victim.waiting)-1]
	victim.remove(h)
	s.markDirty(victim)
	return h
}

// Start starts the commands that may run now: for each queue touched since
// the last call, or whose head has come due, its head while it is due and
// the host has room. A host with parked commands runs one at a time; a head
// not yet due arms the queue's wake-up.
func (s *scheduler) Start(now time.Time) []*held {
	for len(s.wakes) > 0 && !s.wakes[0].at.After(now) {
		w := heap.Pop(&s.wakes).(wake)
		if w.q.wakeAt.Equal(w.at) {
			w.q.wakeAt = time.Time{}
			s.markDirty(w.q)
		}
	}
	var started []*held
	for _, q := range s.dirty {
		q.dirty = false
		started = s.dispatch(q, now, started)
	}
	clear(s.dirty)
	s.dirty = s.dirty[:0]
	return started
}

// dispatch starts what q may start now, appending it to started.
func (s *scheduler) dispatch(q *hostQueue, now time.Time, started []*held) []*held {
	for len(q.waiting) > 0 {
		limit := s.maxActivePerHost
		if q.parked > 0 {
			limit = 1
		}
		if q.active >= limit {
			break
		}
		head := q.waiting[0].Command
		if head.due.After(now) {
			s.arm(q, head.due)
			break
		}
		h := q.pop()
		head.due = time.Time{}
		head.active = true
		q.active++
		started = append(started, h)
	}
	s.forgetIfIdle(q)
	return started
}

// arm makes sure q is dispatched at the latest at at.
func (s *scheduler) arm(q *hostQueue, at time.Time) {
	if !q.wakeAt.IsZero() && !q.wakeAt.After(at) {
		return
	}
	q.wakeAt = at
	heap.Push(&s.wakes, wake{at: at, q: q})
}

// Wake is the earliest armed wake-up, zero when none.
func (s *scheduler) Wake() time.Time {
	for len(s.wakes) > 0 {
		w := s.wakes[0]
		if w.q.wakeAt.Equal(w.at) {
			return w.at
		}
		heap.Pop(&s.wakes) // superseded by an earlier wake-up of its queue
	}
	return time.Time{}
}

// Done takes a command out of the Handler. One parked for politeness goes
// back to the queue of the host it waits for (a redirect's, perhaps), in
// its arrival place, unless that host is full or requeue is false; then
// Done returns true and the command stays held.
func (s *scheduler) Done(h *held, out contentfetch.Outcome, requeue bool, now time.Time) bool {
	t := h.Command
	q := t.q
	q.active--
	t.active = false
	switch {
	case out.Park != nil:
		q.paced = true
	case out.Result != nil:
		q.paced = out.Result.Paced > 0
	}
	s.markDirty(q)
	if !requeue || out.Kind != contentfetch.Transient || out.Park == nil {
		return false
	}
	host := policy.HostKey(out.Park.Host)
	if host == "" {
		host = h.Key
	}
	nq := s.queue(host)
	if nq.size() >= s.maxHeldPerHost {
		s.forgetIfIdle(nq)
		return false
	}
	h.Key = host
	t.due = now.Add(max(out.Park.Wait, 0))
	t.parks++
	nq.insert(h)
	s.markDirty(nq)
	if s.parked != nil {
		s.parked(h, host, out.Park)
	}
	return true
}

// Remove drops a waiting command.
func (s *scheduler) Remove(h *held) bool {
	t := h.Command
	if t.active || t.q == nil || !t.q.remove(h) {
		return false
	}
	s.markDirty(t.q)
	return true
}

// Drain drops every waiting command and returns them. Notes stay: their
// entries stay pending here, for a later Run to recall.
func (s *scheduler) Drain() []*held {
	var dropped []*held
	for host, q := range s.hosts {
		dropped = append(dropped, q.waiting...)
		q.waiting, q.parked, q.wakeAt = nil, 0, time.Time{}
		if q.active == 0 && !q.backlogged() {
			delete(s.hosts, host)
		}
	}
	s.wakes = s.wakes[:0]
	return dropped
}

// Parked counts the commands parked until their host is due.
func (s *scheduler) Parked() int {
	n := 0
	for _, q := range s.hosts {
		n += q.parked
	}
	return n
}

// wake is one armed wake-up of a queue.
type wake struct {
	at time.Time
	q  *hostQueue
}

// wakeHeap orders wake-ups, earliest first. A queue armed earlier again
// leaves its later entry behind; it is skipped when it surfaces.
type wakeHeap []wake

func (w wakeHeap) Len() int           { return len(w) }
func (w wakeHeap) Less(i, j int) bool { return w[i].at.Before(w[j].at) }
func (w wakeHeap) Swap(i, j int)      { w[i], w[j] = w[j], w[i] }
func (w *wakeHeap) Push(x any)        { *w = append(*w, x.(wake)) }
func (w *wakeHeap) Pop() any {
	old := *w
	x := old[len(old)-1]
	*w = old[:len(old)-1]
	return x
}
