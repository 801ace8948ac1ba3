package engine

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replicator-go/replicator/engine/capability"
)

// run is the state of one call to Loop.Run: what it holds, its handler
// goroutines, its reclaim cursor and its batched fates.
type run struct {
	l *Loop

	// handleCtx is the handlers' context, cancelled at the drain timeout
	// or when the broker gives up; writeCtx outlives Run's context so
	// fates are still written while draining, and is cancelled only when
	// the broker gives up.
	handleCtx     context.Context
	cancelHandles context.CancelFunc
	writeCtx      context.Context
	cancelWrites  context.CancelFunc
	wg            sync.WaitGroup // handler goroutines

	// idle hands a command to a handler goroutine that has finished its
	// last one and waits for another; stopped ends the waiting ones. A
	// goroutine kept this way keeps the stack it grew, which one started
	// per command would grow again each time.
	idle    chan *task
	stopped chan struct{}

	// Only the loop's goroutine touches these.
	claimCursor string
	nextReclaim time.Time

	// fates gathers the failed fate writes since the last cycle; a cycle
	// with any counts as failed.
	fates fateFailures

	// commit batches the fate writes of completed commands.
	commit committer

	// failures counts unclassified failures for the delivery ceiling.
	failures *failures
	// unwritten counts handled commands whose fate could not be written
	// yet; while there are any the loop takes no new command.
	unwritten atomic.Int32

	// capacity is signalled whenever a held command is released.
	capacity chan struct{}
	// recallSig wakes recallLoop when recallBatch is set.
	recallSig chan struct{}

	mu        sync.Mutex
	held      map[string]*task // by entry id
	byCommand map[string]*task // by command_id
	stopping  bool
	timer     *time.Timer // wakes the scheduler at its Wake time
	timerAt   time.Time   // when timer fires; zero when it is not armed

	// recallBatch is what the scheduler last recalled, until recallLoop
	// has taken it back.
	recallBatch []string
}

func newRun(l *Loop, base context.Context) *run {
	r := &run{
		l:           l,
		claimCursor: "0-0",
		capacity:    make(chan struct{}, 1),
		recallSig:   make(chan struct{}, 1),
		idle:        make(chan *task),
		stopped:     make(chan struct{}),
		held:        make(map[string]*task),
		byCommand:   make(map[string]*task),
		failures:    newFailures(l.o.ClaimMinIdle),
	}
	r.writeCtx, r.cancelWrites = context.WithCancel(base)
	r.handleCtx, r.cancelHandles = context.WithCancel(base)
	return r
}

// run is Loop.Run's body.
func (r *run) run(ctx context.Context) error {
	l := r.l
	defer r.cancelHandles()
	defer r.cancelWrites()
	refreshCtx, stopRefresh := context.WithCancel(r.writeCtx)
	var bg sync.WaitGroup
	bg.Go(func() { r.refreshLoop(refreshCtx) })

	l.o.Logger.InfoContext(ctx, "consume loop starting", "stream", l.o.Stream, "group", l.o.Group,
		"consumer", l.o.Consumer, "max_held", l.o.MaxHeld, "outage_limit_seconds", l.o.OutageLimit().Seconds())
	recallCtx, stopRecall := context.WithCancel(ctx)
	bg.Go(func() { r.recallLoop(recallCtx) })
	err := r.loop(ctx)
	stopRecall()

	dropped := r.beginStop()
	if err != nil {
		// Redis is gone: nothing a handling or a fate write does now
		// would reach it.
		r.cancelHandles()
		r.cancelWrites()
	}
	r.drain()
	stopRefresh()
	bg.Wait()
	l.o.Logger.InfoContext(r.writeCtx, "consume loop stopped", "stream", l.o.Stream, "consumer", l.o.Consumer, "left_pending", dropped)
	return err
}

// room is how many entries a read or a reclaim may bring in: the free
// places, or, when full, as many as the scheduler could evict.
func (r *run) room() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if free := r.l.o.MaxHeld - len(r.held); free > 0 {
		return free
	}
	return r.l.sched.Evictable()
}

// hold takes a triaged command into memory and starts what may start. It
// returns false when the command is not held: the same command_id is
// already held, the scheduler refused it, the loop is full, or it is
// stopping. The entry then stays pending, for the scheduler to recall or
// the reclaim to bring back. evicted names a held command that gave up its
// place, left pending the same way.
func (r *run) hold(h *task) (held bool, why string, evicted *task) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopping {
		return false, "stopping", nil
	}
	if _, dup := r.byCommand[h.CommandID]; dup {
		// Handled one at a time, as the reference would: once the first
		// closes, the dedupe key decides the second.
		return false, "same command_id already held", nil
	}
	now := r.l.clock.now()
	ok, why, evicted := r.l.sched.Admit(h, len(r.held) >= r.l.o.MaxHeld, now)
	if evicted != nil {
		r.forgetLocked(evicted)
	}
	if !ok {
		return false, why, evicted
	}
	h.state = waiting
	r.held[h.ID] = h
	r.byCommand[h.CommandID] = h
	r.startLocked(now)
	return true, "", evicted
}

// startLocked starts every command the scheduler lets start now, and arms
// the wake-up for the next.
func (r *run) startLocked(now time.Time) {
	if r.stopping {
		return
	}
	for _, h := range r.l.sched.Start(now) {
		h.state = active
		select {
		case r.idle <- h:
		default:
			r.wg.Add(1)
			go r.handler(h)
		}
	}
	at := r.l.sched.Wake()
	if at.IsZero() || (!r.timerAt.IsZero() && !r.timerAt.After(at)) {
		return // nothing to wake for, or armed no later already
	}
	if r.timer == nil {
		r.timer = time.AfterFunc(at.Sub(now), r.wake)
	} else {
		r.timer.Reset(at.Sub(now))
	}
	r.timerAt = at
}

// wake runs when the scheduler's Wake time arrives.
func (r *run) wake() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.timerAt = time.Time{}
	r.startLocked(r.l.clock.now())
}

// handler is a handler goroutine: it handles h, then each command handed
// to it while it waits, until the run stops. There are never more than
// the commands handled at once at the busiest moment, at most MaxHeld.
func (r *run) handler(h *task) {
	defer r.wg.Done()
	for {
		r.handle(h)
		select {
		case h = <-r.idle:
		case <-r.stopped:
			return
		}
	}
}

// handle runs one command through the Handler and gives it its fate.
func (r *run) handle(h *task) {
	l := r.l
	l.o.Metrics.handling(1)
	start := l.clock.now()
	out := r.safeHandle(h)
	took := l.clock.now().Sub(start)
	l.o.Metrics.handling(-1)

	r.mu.Lock()
	h.state = closing
	requeue := !r.stopping && !h.lost
	if l.sched.Done(h, out, requeue, l.clock.now()) {
		h.state = waiting
		// Read under the lock: once started again, h is another handler's.
		parks := h.parks
		r.startLocked(l.clock.now())
		r.mu.Unlock()
		l.o.Metrics.count(capability.Park.String(), out.Reason, 1)
		l.o.Logger.LogAttrs(r.writeCtx, slog.LevelDebug, "parked a command until it is due",
			append(commandAttrs(h), slog.String("reason", out.Reason),
				slog.Int64("park_ms", out.Wait.Milliseconds()), slog.Int("parks", parks))...)
		return
	}
	r.startLocked(l.clock.now())
	lost := h.lost
	r.mu.Unlock()
	if out.Fate == capability.Park {
		// Not held for later (its key is full, or the loop is stopping):
		// left pending for the reclaim, as a transient failure is.
		out.Fate = capability.Retry
	}
	if lost {
		// Another consumer owns it now and writes its fate.
		r.release(h)
		return
	}
	r.observe(h, out, took)
	r.settle(h, out)
	r.release(h)
}

// observe writes the one line per handled command and its metrics. The
// line's keys are stable; no header value or credential ever reaches it
// (Command.Attrs, Outcome.Attrs and Outcome.Err carry none).
func (r *run) observe(h *task, out capability.Outcome, took time.Duration) {
	l := r.l
	l.o.Metrics.handled(out, took)
	level := slog.LevelInfo
	switch out.Fate {
	case capability.Complete:
	case capability.Close, capability.Retry, capability.Park:
		level = slog.LevelWarn
	default:
		level = slog.LevelError
	}
	ctx := context.Background()
	handler := l.o.Logger.Handler()
	if !handler.Enabled(ctx, level) {
		return
	}
	// A record made here, without the caller's program counter (which
	// slog.Logger would look up for every line): the line names its
	// command, not its source.
	rec := slog.NewRecord(time.Now(), level, "handled command", 0)
	rec.AddAttrs(slog.String("capability", l.o.Name), slog.String("message_id", h.ID))
	rec.AddAttrs(h.Attrs...)
	rec.AddAttrs(slog.String("outcome", out.Name()), slog.String("reason", out.Reason),
		slog.Int64("duration_ms", took.Milliseconds()))
	rec.AddAttrs(out.Attrs...)
	if h.parks > 0 {
		rec.AddAttrs(slog.Int("parks", h.parks))
	}
	if out.Err != nil {
		rec.AddAttrs(slog.String("error", out.Err.Error()))
	}
	handler.Handle(ctx, rec)
}

// settle writes h's fate until it is settled (see close). A command whose
// fate could not be written stays held, and owned, and its fate is written
// again after a back-off: the outcome was earned once and the origin is
// not asked again. Meanwhile the loop takes no new command, as for any
// failing cycle, and once Redis has kept failing for the outage limit, or
// the drain ends, the command is left pending.
func (r *run) settle(h *task, out capability.Outcome) {
	if r.close(h, out) {
		return
	}
	r.unwritten.Add(1)
	defer r.unwritten.Add(-1)
	for try := 1; ; try++ {
		if r.l.clock.sleep(r.handleCtx, r.l.backoff(try)) != nil {
			r.l.o.Logger.LogAttrs(r.writeCtx, slog.LevelWarn, "gave up writing a command's fate; it stays pending",
				commandAttrs(h)...)
			return
		}
		if r.close(h, out) {
			return
		}
	}
}

// safeHandle calls the Handler, turning a panic into an Unclassified
// outcome. The command's Stop channel is the run's: closed when it begins
// to shut down.
func (r *run) safeHandle(h *task) (out capability.Outcome) {
	defer func() {
		if p := recover(); p != nil {
			out = capability.Outcome{Err: fmt.Errorf("engine: handler panic: %v\n%s", p, debug.Stack())}
		}
	}()
	h.Command.Stop = r.stopped
	h.Command.Parks = h.parks
	return r.l.handler.Handle(r.handleCtx, h.Command)
}

// forgetLocked drops h from the indexes, unless a later delivery of the
// same entry or command has replaced it.
func (r *run) forgetLocked(h *task) {
	if r.held[h.ID] == h {
		delete(r.held, h.ID)
	}
	if r.byCommand[h.CommandID] == h {
		delete(r.byCommand, h.CommandID)
	}
}

// release forgets a command that has its fate (or is left pending).
func (r *run) release(h *task) {
	r.mu.Lock()
	r.forgetLocked(h)
	r.recallLocked()
	r.mu.Unlock()
	r.signal()
}

func (r *run) signal() {
	select {
	case r.capacity <- struct{}{}:
	default:
	}
}

// lose drops held commands this consumer no longer owns. Waiting ones go at
// once; one inside the handler is dropped when it returns, its fate
// unwritten (the new owner writes it). It returns the ids dropped; those
// already writing their fate are left alone.
func (r *run) lose(ids []string) []string {
	r.mu.Lock()
	var dropped []string
	for _, id := range ids {
		h := r.held[id]
		if h == nil || h.lost {
			continue
		}
		h.lost = true
		switch h.state {
		case waiting:
			r.l.sched.Remove(h)
			r.forgetLocked(h)
			dropped = append(dropped, id)
		case active:
			dropped = append(dropped, id)
		}
	}
	if len(dropped) > 0 {
		r.startLocked(r.l.clock.now())
		r.recallLocked()
	}
	r.mu.Unlock()
	if len(dropped) > 0 {
		r.signal()
	}
	return dropped
}

// heldIDs returns the ids whose ownership must be kept fresh.
func (r *run) heldIDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.held))
	for id, h := range r.held {
		if !h.lost {
			ids = append(ids, id)
		}
	}
	return ids
}

func (r *run) isHeld(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.held[id]
	return ok
}

// counts returns the commands held in memory and how many of them are
// parked.
func (r *run) counts() (held, parked int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.held), r.l.sched.Parked()
}

// beginStop stops scheduling: waiting commands are dropped from memory
// (they stay pending) and no handler starts again. It returns how many were
// dropped.
func (r *run) beginStop() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopping = true
	close(r.stopped)
	if r.timer != nil {
		r.timer.Stop()
		r.timerAt = time.Time{}
	}
	dropped := r.l.sched.Drain()
	for _, h := range dropped {
		r.forgetLocked(h)
	}
	return len(dropped)
}

// drain waits for handler goroutines, cancelling their context after
// DrainTimeout.
func (r *run) drain() {
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	t := time.NewTimer(r.l.o.DrainTimeout)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	r.l.o.Logger.Warn("handlings outlived the drain timeout; cancelling them (they stay pending)",
		"stream", r.l.o.Stream, "drain_timeout_ms", r.l.o.DrainTimeout.Milliseconds())
	r.cancelHandles()
	<-done
}
