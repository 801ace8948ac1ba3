package engine

import (
	"cmp"
	"container/heap"
	"slices"
	"time"

	"github.com/replicator-go/replicator/engine/capability"
)

// keyQueue holds the commands of one key (content.fetch: one key) that
// are not in the Handler, in arrival order. Only its head is ever armed, so
// a parked backlog wakes one command at a time.
type keyQueue struct {
	key     string
	waiting []*task
	parked  int // waiting commands with a due time
	active  int // commands of this queue inside the Handler
	// paced is true when the key's last command to leave the Handler had
	// waited for its key's window: the key's pace, not a free slot, is what
	// its waiting commands wait for.
	paced  bool
	wakeAt time.Time // when the queue's head is due; zero when not armed
	dirty  bool      // may start something at the next Start

	// notes are the key's commands turned away or evicted, still pending
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

func (q *keyQueue) size() int { return len(q.waiting) + q.active }

// backlogged reports whether q's key has commands waiting in the stream
// for room: a new command for it goes behind them.
func (q *keyQueue) backlogged() bool { return len(q.notes) > 0 || q.recalling > 0 }

// insert places h by arrival order: new commands go last, a re-parked one
// returns to its place.
func (q *keyQueue) insert(h *task) {
	i := len(q.waiting)
	for i > 0 && q.waiting[i-1].seq > h.seq {
		i--
	}
	q.waiting = append(q.waiting, nil)
	copy(q.waiting[i+1:], q.waiting[i:])
	q.waiting[i] = h
	h.q, h.inHandler = q, false
	if !h.due.IsZero() {
		q.parked++
	}
}

func (q *keyQueue) pop() *task {
	h := q.waiting[0]
	q.waiting[0] = nil
	q.waiting = q.waiting[1:]
	if !h.due.IsZero() {
		q.parked--
	}
	return h
}

func (q *keyQueue) remove(h *task) bool {
	for i, x := range q.waiting {
		if x == h {
			q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
			if !h.due.IsZero() {
				q.parked--
			}
			return true
		}
	}
	return false
}

// scheduler decides which held commands run when: a FIFO per key, at most
// maxActivePerKey of a key's commands in the Handler at once (one while it
// has parked commands) and at most concurrency in all, a parked command
// held until it is due, and room made for other keys when the loop is
// full. A command over its key's bound, or evicted for another key, is
// noted and recalled once its key has room again. Waiting and parked
// commands cost no goroutine: the loop starts a handling only for what
// Start returns. It is pure: the loop calls it under its lock with the
// time, and it never sees a Redis type.
type scheduler struct {
	maxHeldPerKey   int
	maxActivePerKey int
	concurrency     int
	maxNotes        int

	keys   map[string]*keyQueue
	seq    uint64
	active int // commands inside the Handler, all keys
	dirty  []*keyQueue
	wakes  wakeHeap

	noted    map[string]queued  // notes by entry id
	notedBy  map[*keyQueue]bool // queues with notes
	recalled map[string]queued  // the current Recall batch, by entry id
}

// queued is a note with the queue that holds it.
type queued struct {
	note
	q *keyQueue
}

// newScheduler returns a scheduler that notes at most maxNotes commands;
// one turned away beyond that returns through the reclaim.
func newScheduler(maxHeldPerKey, maxActivePerKey, concurrency, maxNotes int) *scheduler {
	return &scheduler{
		maxHeldPerKey:   maxHeldPerKey,
		maxActivePerKey: maxActivePerKey,
		concurrency:     max(concurrency, 1),
		maxNotes:        maxNotes,
		keys:            make(map[string]*keyQueue),
		noted:           make(map[string]queued),
		notedBy:         make(map[*keyQueue]bool),
		recalled:        make(map[string]queued),
	}
}

// queue returns key's queue, creating it.
func (s *scheduler) queue(key string) *keyQueue {
	q := s.keys[key]
	if q == nil {
		q = &keyQueue{key: key}
		s.keys[key] = q
	}
	return q
}

// forgetIfIdle drops an empty queue so the map holds only keys with held
// or noted commands.
func (s *scheduler) forgetIfIdle(q *keyQueue) {
	if q.size() == 0 && q.wakeAt.IsZero() && !q.backlogged() && s.keys[q.key] == q {
		delete(s.keys, q.key)
	}
}

func (s *scheduler) markDirty(q *keyQueue) {
	if !q.dirty {
		q.dirty = true
		s.dirty = append(s.dirty, q)
	}
}

// Admit takes a command into its key's queue. It refuses one whose key
// already holds maxHeldPerKey, and a new one whose key has noted commands
// (it is noted behind them); when the loop is full, it
// admits one only by making room (makeRoom). A command refused or evicted
// is noted for Recall; one noted before (recalled, or back through the
// reclaim) keeps its place in the arrival order.
func (s *scheduler) Admit(h *task, full bool, _ time.Time) (bool, string, *task) {
	q := s.queue(h.Key)
	seq := s.unnote(h.ID, q)
	if seq == 0 && q.backlogged() && len(s.noted) < s.maxNotes {
		s.note(q, h.ID, 0)
		return false, "key backlog in the stream", nil
	}
	if q.size() >= s.maxHeldPerKey {
		s.note(q, h.ID, seq)
		return false, "key backlog full", nil
	}
	var evicted *task
	if full {
		if evicted = s.makeRoom(q); evicted == nil {
			s.note(q, h.ID, seq)
			return false, "worker full", nil
		}
		s.note(evicted.q, evicted.ID, evicted.seq)
	}
	if seq == 0 {
		s.seq++
		seq = s.seq
	}
	h.seq = seq
	q.insert(h)
	s.markDirty(q)
	return true, "", evicted
}

// note remembers entry id, pending for this consumer, as q's to recall, at
// seq in the arrival order (a new place when seq is 0). Nothing is noted
// past maxNotes: that command returns through the reclaim.
func (s *scheduler) note(q *keyQueue, id string, seq uint64) {
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
func (s *scheduler) unnote(id string, to *keyQueue) uint64 {
	var from *keyQueue
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

// Recall names up to n noted commands to take back: for each key with
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
		if q.size() > s.maxHeldPerKey/2 {
			continue
		}
		k := min(s.maxHeldPerKey-q.size(), len(q.notes), n-len(ids))
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

// keyBound reports whether q's waiting commands wait for their key's
// politeness window rather than for a free request slot: the queue has
// parked commands, or its key's share of the Handler is taken by commands
// that wait for their windows. Only such commands may give up their place
// in memory; they could not start soon anyway.
func (s *scheduler) keyBound(q *keyQueue) bool {
	return len(q.waiting) > 0 && (q.parked > 0 || q.paced && q.active >= s.maxActivePerKey)
}

// Evictable counts the held commands makeRoom could drop.
func (s *scheduler) Evictable() int {
	n := 0
	for _, q := range s.keys {
		if s.keyBound(q) {
			n += len(q.waiting)
		}
	}
	return n
}

// makeRoom drops one waiting command to make room for a command of another
// key and returns it (nil when none may go): the newest waiting command of
// the longest key-bound queue. The loop leaves it pending; Admit notes
// it, to recall once there is room. Without this, a few backlogged keys would fill the
// loop and hold up every other key until they drain (docs/politeness.md:
// waiting for one key never holds up commands for other keys). A command
// whose own key is key-bound gets no room: it would only wait in memory
// instead of in the stream.
func (s *scheduler) makeRoom(asker *keyQueue) *task {
	if s.keyBound(asker) {
		return nil
	}
	var victim *keyQueue
	for _, q := range s.keys {
		if q != asker && s.keyBound(q) && (victim == nil || len(q.waiting) > len(victim.waiting)) {
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
// the key has room. A key with parked commands runs one at a time; a head
// not yet due arms the queue's wake-up.
func (s *scheduler) Start(now time.Time) []*task {
	for len(s.wakes) > 0 && !s.wakes[0].at.After(now) {
		w := heap.Pop(&s.wakes).(wake)
		if w.q.wakeAt.Equal(w.at) {
			w.q.wakeAt = time.Time{}
			s.markDirty(w.q)
		}
	}
	var started []*task
	i := 0
	for ; i < len(s.dirty) && s.active < s.concurrency; i++ {
		q := s.dirty[i]
		q.dirty = false
		started = s.dispatch(q, now, started)
		if q.dirty {
			// Stopped by the concurrency bound: its turn comes first
			// next time.
			break
		}
	}
	rest := copy(s.dirty, s.dirty[i:])
	clear(s.dirty[rest:])
	s.dirty = s.dirty[:rest]
	return started
}

// dispatch starts what q may start now, appending it to started.
func (s *scheduler) dispatch(q *keyQueue, now time.Time, started []*task) []*task {
	for len(q.waiting) > 0 {
		limit := s.maxActivePerKey
		if q.parked > 0 {
			limit = 1
		}
		if q.active >= limit {
			break
		}
		if s.active >= s.concurrency {
			q.dirty = true // still has something to start
			return started
		}
		head := q.waiting[0]
		if head.due.After(now) {
			s.arm(q, head.due)
			break
		}
		h := q.pop()
		h.due = time.Time{}
		h.inHandler = true
		q.active++
		s.active++
		started = append(started, h)
	}
	s.forgetIfIdle(q)
	return started
}

// arm makes sure q is dispatched at the latest at at.
func (s *scheduler) arm(q *keyQueue, at time.Time) {
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

// Done takes a command out of the Handler. One parked (capability.Park)
// goes back to the queue of the key it waits for (a redirect's host,
// perhaps), in its arrival place, unless that key is full or requeue is
// false; then Done returns true and the command stays held. Every queue
// that may start something now is marked, as the concurrency bound may
// have held it back.
func (s *scheduler) Done(h *task, out capability.Outcome, requeue bool, now time.Time) bool {
	q := h.q
	q.active--
	s.active--
	h.inHandler = false
	q.paced = out.Paced > 0 || out.Fate == capability.Park
	s.markDirty(q)
	if !requeue || out.Fate != capability.Park {
		return false
	}
	key := cmp.Or(out.Key, h.Key)
	nq := s.queue(key)
	if nq.size() >= s.maxHeldPerKey {
		s.forgetIfIdle(nq)
		return false
	}
	h.Key = key
	h.due = now.Add(max(out.Wait, 0))
	h.parks++
	nq.insert(h)
	s.markDirty(nq)
	return true
}

// Remove drops a waiting command.
func (s *scheduler) Remove(h *task) bool {
	if h.inHandler || h.q == nil || !h.q.remove(h) {
		return false
	}
	s.markDirty(h.q)
	return true
}

// Drain drops every waiting command and returns them. Notes stay: their
// entries stay pending here, for a later Run to recall.
func (s *scheduler) Drain() []*task {
	var dropped []*task
	for key, q := range s.keys {
		dropped = append(dropped, q.waiting...)
		q.waiting, q.parked, q.wakeAt = nil, 0, time.Time{}
		if q.active == 0 && !q.backlogged() {
			delete(s.keys, key)
		}
	}
	s.wakes = s.wakes[:0]
	return dropped
}

// Parked counts the commands parked until their key is due.
func (s *scheduler) Parked() int {
	n := 0
	for _, q := range s.keys {
		n += q.parked
	}
	return n
}

// wake is one armed wake-up of a queue.
type wake struct {
	at time.Time
	q  *keyQueue
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
