package fetch

import (
	"net/url"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/policy"
)

// itemState is where a held command is.
type itemState int

const (
	// waiting: in its host's queue, not in the Handler (parked when due is set).
	stWaiting itemState = iota
	// active: inside the Handler.
	stActive
	// closing: handled, its fate being written.
	stClosing
)

// item is one command held in memory, from the read that delivered it to
// its fate (or until it is dropped and left pending).
type item struct {
	id     string
	fields []rueidis.XRangeFieldValue
	cmd    *envelope.ContentFetch
	host   string // the host queue it belongs to
	seq    uint64 // arrival order; queues are FIFO by it
	due    time.Time
	q      *hostQueue
	state  itemState
	lost   bool // another consumer took it, or it was trimmed
	parks  int
}

// hostQueue holds the commands for one host that are not in the Handler,
// in arrival order. Only its head is ever armed, so a parked backlog wakes
// one command at a time.
type hostQueue struct {
	host    string
	waiting []*item
	parked  int // waiting items with a due time (parked for politeness)
	active  int // items of this queue inside the Handler
	// paced is true when the host's last command to leave the Handler had
	// waited for its politeness window: the host's pace, not a free slot,
	// is what its waiting commands wait for.
	paced   bool
	timer   *time.Timer
	timerAt time.Time
	gen     uint64
}

func (q *hostQueue) size() int { return len(q.waiting) + q.active }

// insert places it by arrival order: new commands go last, a re-parked one
// returns to its place.
func (q *hostQueue) insert(it *item) {
	i := len(q.waiting)
	for i > 0 && q.waiting[i-1].seq > it.seq {
		i--
	}
	q.waiting = append(q.waiting, nil)
	copy(q.waiting[i+1:], q.waiting[i:])
	q.waiting[i] = it
	it.q, it.state = q, stWaiting
	if !it.due.IsZero() {
		q.parked++
	}
}

func (q *hostQueue) pop() *item {
	it := q.waiting[0]
	q.waiting[0] = nil
	q.waiting = q.waiting[1:]
	if !it.due.IsZero() {
		q.parked--
	}
	return it
}

func (q *hostQueue) remove(it *item) bool {
	for i, x := range q.waiting {
		if x == it {
			q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
			if !it.due.IsZero() {
				q.parked--
			}
			return true
		}
	}
	return false
}

func (q *hostQueue) stopTimer() {
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
		q.gen++
	}
}

// hostOf is the queue key of a command: its URL's host as the pacer keys
// it (policy.HostKey), so every spelling of one host shares one queue. An
// unparseable URL gets "", and the Handler refuses it at once.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return policy.HostKey(u.Hostname())
}

// queueLocked returns host's queue, creating it.
func (w *Worker) queueLocked(host string) *hostQueue {
	q := w.hosts[host]
	if q == nil {
		q = &hostQueue{host: host}
		w.hosts[host] = q
	}
	return q
}

// forgetIfIdleLocked drops an empty queue so the map holds only hosts with
// held commands.
func (w *Worker) forgetIfIdleLocked(q *hostQueue) {
	if q.size() == 0 && q.timer == nil && w.hosts[q.host] == q {
		delete(w.hosts, q.host)
	}
}

// route takes a triaged command into memory and starts it when its host
// allows. It returns false when the command is not held: the host already
// holds MaxHeldPerHost, the same command_id is already held, the worker is
// full, or it is stopping. The entry then stays pending and returns through
// the reclaim after ClaimMinIdle. evicted names a held command that gave up
// its place to this one (makeRoomLocked), left pending the same way.
func (w *Worker) route(it *item) (held bool, why string, evicted string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopping {
		return false, "stopping", ""
	}
	if _, dup := w.byCommand[it.cmd.CommandID]; dup {
		// Handled one at a time, as the reference would: once the first
		// closes, the dedupe key decides the second.
		return false, "same command_id already held", ""
	}
	q := w.queueLocked(it.host)
	if q.size() >= w.o.MaxHeldPerHost {
		w.forgetIfIdleLocked(q)
		return false, "host backlog full", ""
	}
	if len(w.held) >= w.o.MaxHeld {
		if evicted = w.makeRoomLocked(q); evicted == "" {
			w.forgetIfIdleLocked(q)
			return false, "worker full", ""
		}
	}
	w.seq++
	it.seq = w.seq
	w.held[it.id] = it
	w.byCommand[it.cmd.CommandID] = it
	q.insert(it)
	w.dispatchLocked(q)
	return true, "", evicted
}

// hostBoundLocked reports whether q's waiting commands wait for their
// host's politeness window rather than for a free request slot: the queue
// has parked commands, or its host's share of the Handler is taken by
// commands that wait for their windows. Only such commands may give up
// their place in memory; they could not start soon anyway.
func (w *Worker) hostBoundLocked(q *hostQueue) bool {
	return len(q.waiting) > 0 && (q.parked > 0 || q.paced && q.active >= w.o.MaxActivePerHost)
}

// evictableLocked counts the held commands that makeRoomLocked could drop.
func (w *Worker) evictableLocked() int {
	n := 0
	for _, q := range w.hosts {
		if w.hostBoundLocked(q) {
			n += len(q.waiting)
		}
	}
	return n
}

// makeRoomLocked drops one held command to make room for a command of
// another host, when the worker is full, and returns its entry id ("" when
// none may go): the newest waiting command of the longest host-bound
// queue. It stays pending and returns through the reclaim, as one left
// pending for a full host backlog does. Without this, a
// few backlogged hosts would fill MaxHeld and hold up every other host
// until they drain (SPEC 7: waiting for one host never holds up commands
// for other hosts). A command whose own host is host-bound gets no room: it
// would only wait in memory instead of in the stream.
func (w *Worker) makeRoomLocked(asker *hostQueue) (evicted string) {
	if w.hostBoundLocked(asker) {
		return ""
	}
	var victim *hostQueue
	for _, q := range w.hosts {
		if q != asker && w.hostBoundLocked(q) && (victim == nil || len(q.waiting) > len(victim.waiting)) {
			victim = q
		}
	}
	if victim == nil {
		return ""
	}
	it := victim.waiting[len(victim.waiting)-1]
	victim.remove(it)
	w.forgetLocked(it)
	w.m.commands.WithLabelValues("deferred", "").Inc()
	w.log.Debug("left a command pending to make room for another host", "message_id", it.id,
		"command_id", it.cmd.CommandID, "host", victim.host, "backlog", len(victim.waiting))
	w.forgetIfIdleLocked(victim)
	return it.id
}

// dispatchLocked starts the commands q may run now: the head while it is
// due and the host has room. A host with parked commands runs one at a
// time; a head not yet due arms the queue's one timer.
func (w *Worker) dispatchLocked(q *hostQueue) {
	now := w.now()
	for len(q.waiting) > 0 && !w.stopping {
		limit := w.o.MaxActivePerHost
		if q.parked > 0 {
			limit = 1
		}
		if q.active >= limit {
			break
		}
		head := q.waiting[0]
		if head.due.After(now) {
			w.armLocked(q, head.due)
			break
		}
		q.pop()
		head.due = time.Time{}
		q.active++
		head.q, head.state = q, stActive
		w.wg.Add(1)
		go w.handle(head)
	}
	w.forgetIfIdleLocked(q)
}

// armLocked makes sure q is woken at the latest at at.
func (w *Worker) armLocked(q *hostQueue, at time.Time) {
	if q.timer != nil {
		if !q.timerAt.After(at) {
			return
		}
		q.timer.Stop()
	}
	q.gen++
	gen := q.gen
	q.timerAt = at
	q.timer = time.AfterFunc(at.Sub(w.now()), func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if q.gen != gen {
			return
		}
		q.timer = nil
		w.dispatchLocked(q)
	})
}

// handle runs one command through the Handler and gives it its fate.
func (w *Worker) handle(it *item) {
	defer w.wg.Done()
	w.m.busy.Inc()
	out := w.handler.Handle(w.handleCtx, it.cmd)
	w.m.busy.Dec()
	if w.requeue(it, out) {
		return
	}
	if it.lost {
		w.release(it)
		return
	}
	w.logOutcome(it, out)
	w.m.observe(out)
	w.close(it, out)
	w.release(it)
}

// requeue takes the command out of the Handler. A command parked for
// politeness goes back to the queue of the host it waits for, in its
// arrival place, unless that host is full or the worker is stopping; then
// requeue returns true and the command stays in memory.
func (w *Worker) requeue(it *item, out Outcome) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := it.q
	q.active--
	it.state = stClosing
	switch {
	case out.Park != nil:
		q.paced = true
	case out.Result != nil:
		q.paced = out.Result.Paced > 0
	}
	if out.Kind == Transient && out.Park != nil && !w.stopping && !it.lost {
		host := policy.HostKey(out.Park.Host)
		if host == "" {
			host = it.host
		}
		nq := w.queueLocked(host)
		if nq.size() < w.o.MaxHeldPerHost {
			it.host = host
			it.due = w.now().Add(max(out.Park.Wait, 0))
			it.parks++
			nq.insert(it)
			w.dispatchLocked(nq)
			if nq != q {
				w.dispatchLocked(q)
			}
			w.m.commands.WithLabelValues("parked", "").Inc()
			w.log.Debug("parked a command until its host is due", "message_id", it.id,
				"command_id", it.cmd.CommandID, "host", host, "park_ms", out.Park.Wait.Milliseconds(), "parks", it.parks)
			return true
		}
		w.forgetIfIdleLocked(nq)
	}
	w.dispatchLocked(q)
	return false
}

// forgetLocked drops it from the worker's indexes (not from its queue),
// unless a later delivery of the same entry or command has replaced it.
func (w *Worker) forgetLocked(it *item) {
	if w.held[it.id] == it {
		delete(w.held, it.id)
	}
	if w.byCommand[it.cmd.CommandID] == it {
		delete(w.byCommand, it.cmd.CommandID)
	}
}

// release forgets a command that has its fate (or is left pending).
func (w *Worker) release(it *item) {
	w.mu.Lock()
	w.forgetLocked(it)
	w.mu.Unlock()
	select {
	case w.capacity <- struct{}{}:
	default:
	}
}

// lose drops held commands this consumer no longer owns. Waiting ones go at
// once; one inside the Handler is dropped when it returns, its fate
// unwritten (the new owner writes it). It returns the ids dropped; those
// already writing their fate are left alone.
func (w *Worker) lose(ids []string) []string {
	w.mu.Lock()
	var dropped []string
	for _, id := range ids {
		it := w.held[id]
		if it == nil || it.lost {
			continue
		}
		it.lost = true
		switch it.state {
		case stWaiting:
			q := it.q
			q.remove(it)
			w.forgetLocked(it)
			w.dispatchLocked(q)
			dropped = append(dropped, id)
		case stActive:
			dropped = append(dropped, id)
		}
	}
	w.mu.Unlock()
	if len(dropped) > 0 {
		select {
		case w.capacity <- struct{}{}:
		default:
		}
	}
	return dropped
}

// heldIDs returns the ids whose ownership must be kept fresh.
func (w *Worker) heldIDs() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]string, 0, len(w.held))
	for id, it := range w.held {
		if !it.lost {
			ids = append(ids, id)
		}
	}
	return ids
}

func (w *Worker) isHeld(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.held[id]
	return ok
}

// heldCounts returns the commands held in memory and how many of them are
// parked: what the gauges show, counted when they are read.
func (w *Worker) heldCounts() (held, parked int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, q := range w.hosts {
		parked += q.parked
	}
	return len(w.held), parked
}
