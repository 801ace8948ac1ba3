package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/envelope"
)

// close gives a handled command its fate, and reports whether it is
// settled: written, left to the consumer that owns the entry now, or with
// nothing to write. A write that fails leaves it unsettled and the cycle
// counts as failed; the handler writes it again (see settle), and what
// was written is not written twice (docs/streams.md, Fates).
func (r *run) close(h *task, f capability.Outcome) bool {
	l := r.l
	if f.Fate == capability.Complete {
		// Fact, then dedupe key, then ack: a crash in between repeats the
		// fact, never loses it. Unlike a failure's fact, this one is not
		// swallowed: no dead letter would stand in for it.
		return r.complete(h, f.Fact)
	}
	ctx, cancel := context.WithTimeout(r.writeCtx, fateTimeout)
	defer cancel()
	switch f.Fate {
	case capability.Close:
		mine, ok := r.stillOwned(ctx, h)
		if !ok || !mine {
			return ok
		}
		return r.closeWith(ctx, h, f.Reason, f.Fact, f.Err)
	case capability.Unclassified:
		if h.attempts == 0 { // counted once, however often the fate is tried
			h.attempts = r.failures.add(h.ID, l.clock.now())
		}
		attempts := h.attempts
		if attempts < l.o.MaxDeliveryAttempts {
			l.o.Logger.LogAttrs(ctx, slog.LevelWarn, "unclassified failure; leaving the command pending for redelivery",
				append(commandAttrs(h), slog.Int("attempts", attempts), slog.Int("max_delivery_attempts", l.o.MaxDeliveryAttempts))...)
			return true
		}
		mine, ok := r.stillOwned(ctx, h)
		if !ok || !mine {
			return ok
		}
		detail, _, _ := strings.Cut(errString(f.Err), "\n") // the stack stays in the log
		reason := string(envelope.ReasonHandlerError)
		if !r.closeWith(ctx, h, reason, l.handler.Failed(h.Command, reason, detail, attempts, l.clock.now()), f.Err) {
			return false
		}
		r.failures.forget(h.ID)
	}
	// Retry, and Park when not requeued: nothing is written; the entry
	// returns through the reclaim.
	return true
}

// closeWith announces a terminal failure (once: a failure to publish it is
// logged and swallowed), then dead-letters the command (once) and acks it.
func (r *run) closeWith(ctx context.Context, h *task, reason string, fact envelope.Model, cause error) bool {
	if fact != nil && !h.published {
		r.announce(ctx, h.ID, h.CommandID, reason, fact)
		h.published = true
	}
	start := r.l.clock.now()
	if !h.deadLettered {
		if err := r.l.b.deadLetter(ctx, h.ID, h.Fields, reason); err != nil {
			r.fateError(ctx, h, "dlq", start, err)
			return false
		}
		h.deadLettered = true
		r.l.o.Metrics.deadLettered(reason)
	}
	if err := r.l.b.ack(ctx, h.ID); err != nil {
		r.fateError(ctx, h, "ack", start, err)
		return false
	}
	r.logDeadLetter(ctx, h.ID, reason, cause, h.Attrs)
	return true
}

// stillOwned is own for one command about to be closed: mine tells
// whether this consumer owns it, ok whether that could be told.
func (r *run) stillOwned(ctx context.Context, h *task) (mine, ok bool) {
	m := r.own(ctx, []*task{h})
	return len(m) == 1 && m[0], m != nil
}

// own confirms, right before their fates are written, which of hs this
// consumer still owns, and renews its claim on them: for ClaimMinIdle from
// now no reclaim elsewhere can take them, which covers the writes that
// follow (each fate's writes are bounded well inside it). The check and the
// renewal are one read of this consumer's pending list on the command
// stream; the fact goes to another stream, which in Redis Cluster may live
// on another node, so they cannot be one atomic step with the publish, and
// a pipeline would not make the publish depend on the check. A delivery
// taken by another consumer (this one stalled past ClaimMinIdle, or was
// cut off that long) is left to it. If the check fails, or took
// ClaimMinIdle itself, none is confirmed and the failure is recorded: the
// commands stay pending.
//
// A command delivered or renewed less than Loop.trustOwnFor ago is not
// checked: its entry has been idle for less than that, so no reclaim (which
// takes entries idle for ClaimMinIdle) can have taken it, nor can one
// before its writes end. That spares the check for all but the commands
// held long, at the cost of trusting every consumer of the group to claim
// with the same ClaimMinIdle.
func (r *run) own(ctx context.Context, hs []*task) (mine []bool) {
	l := r.l
	start := l.clock.now()
	mine = make([]bool, len(hs))
	var (
		ids     []string
		checked []*task
	)
	for i, h := range hs {
		if start.Sub(time.Unix(0, h.renewedAt.Load())) < l.trustOwnFor {
			mine[i] = true // idle too short for any reclaim to have taken it
			continue
		}
		ids = append(ids, h.ID)
		checked = append(checked, h)
	}
	if len(ids) == 0 {
		return mine
	}
	states, err := l.b.own(ctx, ids)
	if err == nil && l.clock.now().Sub(start) >= l.o.ClaimMinIdle {
		err = fmt.Errorf("engine: ownership check on %s took longer than the claim's minimum idle time (%s)", l.o.Stream, l.o.ClaimMinIdle)
	}
	if err != nil {
		l.o.Metrics.brokerFailure("own")
		err = &opError{failure{op: "own", since: start, err: err}}
		for _, h := range hs {
			r.fateError(ctx, h, "own", start, err)
		}
		return nil
	}
	var gone []*task
	k := 0
	for i := range mine {
		if mine[i] {
			continue
		}
		switch h := checked[k]; states[k] {
		case owned, trimmed:
			// One trimmed from the stream is still this consumer's to
			// close: no other consumer can be given it again.
			mine[i] = true
			h.renewedAt.Store(start.UnixNano())
		default:
			gone = append(gone, h)
		}
		k++
	}
	r.leftToOwner(ctx, gone)
	return mine
}

// renewed notes that the claims on ids whose states say owned were renewed
// by a call made at start.
func (r *run) renewed(ids []string, states []ownership, start time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, s := range states {
		if h := r.held[ids[i]]; h != nil && s == owned {
			h.renewedAt.Store(start.UnixNano())
		}
	}
}

// leftToOwner logs handled commands whose fates are left to the consumer
// that owns them now.
func (r *run) leftToOwner(ctx context.Context, hs []*task) {
	for _, h := range hs {
		r.l.o.Logger.LogAttrs(ctx, slog.LevelInfo, "no longer owns a handled command; its fate is left to its owner",
			append(commandAttrs(h), slog.String("stream", r.l.o.Stream))...)
	}
}

// fateError records a failed fate write begun at since; the current cycle
// then counts as failed, so a broker refusing writes ends the loop like one
// refusing reads.
func (r *run) fateError(ctx context.Context, h *task, op string, since time.Time, err error) {
	var oe *opError
	if errors.As(err, &oe) {
		op = oe.op // counted where it failed
	} else {
		r.l.o.Metrics.brokerFailure(op)
	}
	r.fates.add(failure{op: op, since: since, err: err})
	r.l.o.Logger.LogAttrs(ctx, slog.LevelError, "could not write a command's fate; writing it again after a back-off",
		append(commandAttrs(h), slog.String("op", op), slog.String("error", err.Error()))...)
}

// fateFailures gathers failed fate writes between two cycles.
type fateFailures struct {
	mu    sync.Mutex
	n     int
	first failure // the one Redis was due to answer first
}

func (ff *fateFailures) add(f failure) {
	ff.mu.Lock()
	defer ff.mu.Unlock()
	if ff.n == 0 || f.since.Before(ff.first.since) {
		ff.first = f
	}
	ff.n++
}

// take returns how many failed since the last take, and the first.
func (ff *fateFailures) take() (int, failure) {
	ff.mu.Lock()
	defer ff.mu.Unlock()
	n, f := ff.n, ff.first
	ff.n, ff.first = 0, failure{}
	return n, f
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// A completed command's fate is three writes in order: its fact, its
// dedupe key, its ack. Written one command at a time that is three round
// trips each, and at a high command rate Redis spends most of its time on
// the network rather than on the commands. So completions that arrive
// while a batch is being written are written together as the next batch:
// each step is one pipelined round trip for the whole batch, and a
// command's dedupe key is still set only once its fact is written, its ack
// only once its dedupe key is. An idle loop writes a batch of one at once:
// nothing waits for company.

// completion is one Complete command waiting for its fate.
type completion struct {
	h    *task
	fact envelope.Model // nil when there is nothing to announce
	// lead tells the waiting submitter whether it must write the next
	// batch (true) or its fate has been written or has failed (false).
	lead chan bool
	// settled is set by the batch's writer when the fate is written, or
	// left to the entry's owner; the submitter reads it after lead.
	settled bool
}

// committer batches completions. The first submitter to find it idle
// writes the queue; when it is done it hands the turn to the oldest
// submitter still queued, so no handler writes batches for others for
// longer than one batch.
type committer struct {
	mu      sync.Mutex
	queue   []*completion
	writing bool
}

// complete gives a Complete command its fate, batched with any others
// completing at the same time, and reports whether it is settled (see
// close). A failed write is logged and counted, as a single write would be.
func (r *run) complete(h *task, fact envelope.Model) bool {
	c := &completion{h: h, fact: fact, lead: make(chan bool, 1)}
	cm := &r.commit
	cm.mu.Lock()
	cm.queue = append(cm.queue, c)
	if cm.writing {
		cm.mu.Unlock()
		if !<-c.lead {
			return c.settled
		}
		cm.mu.Lock()
	}
	cm.writing = true
	batch := cm.queue
	cm.queue = nil
	cm.mu.Unlock()

	r.writeFates(batch)

	cm.mu.Lock()
	var next *completion
	if len(cm.queue) > 0 {
		next = cm.queue[0]
	} else {
		cm.writing = false
	}
	cm.mu.Unlock()
	for _, b := range batch {
		if b != c {
			b.lead <- false
		}
	}
	if next != nil {
		next.lead <- true
	}
	return c.settled
}

// writeFates confirms that this consumer still owns the batch's
// deliveries, then writes the facts of those it owns, then the dedupe keys
// of those whose fact was written, then acks those whose key was set. A
// step already written for a command (an earlier try of its fate) is not
// written again.
func (r *run) writeFates(batch []*completion) {
	l := r.l
	ctx, cancel := context.WithTimeout(r.writeCtx, fateTimeout)
	defer cancel()

	hs := make([]*task, len(batch))
	for i, c := range batch {
		hs[i] = c.h
	}
	mine := r.own(ctx, hs)
	if mine == nil {
		return // the check failed: nothing is settled
	}
	start := l.clock.now()
	pending := make([]*completion, 0, len(batch))
	var (
		facts  []envelope.Model
		owners []*completion
	)
	for i, c := range batch {
		switch {
		case !mine[i]:
			c.settled = true // left to its owner
		case c.fact == nil || c.h.published:
			pending = append(pending, c)
		default:
			facts = append(facts, c.fact)
			owners = append(owners, c)
		}
	}
	for i, err := range l.b.publishAll(ctx, facts) {
		if err != nil {
			r.fateError(ctx, owners[i].h, "publish", start, err)
			continue
		}
		owners[i].h.published = true
		pending = append(pending, owners[i])
	}

	var cmdIDs, entryIDs []string
	var unset []*completion
	for _, c := range pending {
		if !c.h.remembered {
			cmdIDs, entryIDs = append(cmdIDs, c.h.CommandID), append(entryIDs, c.h.ID)
			unset = append(unset, c)
		}
	}
	start = l.clock.now()
	for i, err := range l.b.rememberAll(ctx, cmdIDs, entryIDs) {
		if err != nil {
			r.fateError(ctx, unset[i].h, "dedupe", start, err)
			continue
		}
		unset[i].h.remembered = true
	}
	ids := make([]string, 0, len(pending))
	remembered := make([]*completion, 0, len(pending))
	for _, c := range pending {
		if c.h.remembered {
			ids = append(ids, c.h.ID)
			remembered = append(remembered, c)
		}
	}
	if len(ids) == 0 {
		return
	}
	start = l.clock.now()
	if err := l.b.ack(ctx, ids...); err != nil {
		for _, c := range remembered {
			r.fateError(ctx, c.h, "ack", start, err)
		}
		return
	}
	for _, c := range remembered {
		c.settled = true
	}
}
