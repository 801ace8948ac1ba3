package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/replicator-go/replicator/envelope"
)

// close gives a handled command its fate. A write that fails leaves the
// entry pending: it returns through the reclaim, and the cycle counts as
// failed. Nothing is written for a delivery this consumer no longer owns:
// its owner writes the fate (docs/streams.md, Fates).
func (r *run[C, R]) close(h *Held[C], f Fate) {
	l := r.l
	if f.Kind == Complete {
		// Fact, then dedupe key, then ack: a crash in between repeats the
		// fact, never loses it. Unlike a failure's fact, this one is not
		// swallowed: no dead letter would stand in for it.
		r.complete(h, f.Fact)
		return
	}
	ctx, cancel := context.WithTimeout(r.writeCtx, fateTimeout)
	defer cancel()
	switch f.Kind {
	case Close:
		if !r.stillOwned(ctx, h) {
			return
		}
		if f.Fact != nil {
			r.announce(ctx, h.ID, h.CommandID, f.Reason, f.Fact)
		}
		start := l.clock.now()
		if err := r.deadLetter(ctx, h.ID, h.Fields, f.Reason, f.Err, h.Attrs); err != nil {
			r.fateError(ctx, h, "dlq", start, err)
		}
	case Unclassified:
		attempts, err := l.b.deliveries(ctx, h.ID)
		if errors.Is(err, errNotPending) {
			r.leftToOwner(ctx, []*Held[C]{h})
			return
		}
		if err != nil {
			l.o.Metrics.brokerFailure("pending")
			l.o.Logger.LogAttrs(ctx, slog.LevelWarn, "cannot read the delivery count; leaving the command pending",
				append(commandAttrs(h), slog.String("error", err.Error()))...)
			return
		}
		if attempts < l.o.MaxDeliveryAttempts {
			l.o.Logger.LogAttrs(ctx, slog.LevelWarn, "unclassified failure; leaving the command pending for redelivery",
				append(commandAttrs(h), slog.Int("attempts", attempts), slog.Int("max_delivery_attempts", l.o.MaxDeliveryAttempts))...)
			return
		}
		if !r.stillOwned(ctx, h) {
			return
		}
		detail, _, _ := strings.Cut(errString(f.Err), "\n") // the stack stays in the log
		fact := l.cap.HandlerError(h.Command, attempts, detail, l.clock.now())
		reason := "handler_error"
		r.announce(ctx, h.ID, h.CommandID, reason, fact)
		start := l.clock.now()
		if err := r.deadLetter(ctx, h.ID, h.Fields, reason, f.Err, h.Attrs); err != nil {
			r.fateError(ctx, h, "dlq", start, err)
		}
	case Retry:
		// Nothing is written; the entry returns through the reclaim, and
		// this delivery does not count toward the ceiling.
		r.giveBack(ctx, h.ID)
	}
}

// stillOwned is own for one command about to be closed.
func (r *run[C, R]) stillOwned(ctx context.Context, h *Held[C]) bool {
	mine := r.own(ctx, []*Held[C]{h})
	return len(mine) == 1 && mine[0]
}

// own confirms, right before their fates are written, which of hs this
// consumer still owns, and renews its claim on them: for ClaimMinIdle from
// now no reclaim elsewhere can take them, which covers the writes that
// follow (each fate's writes are bounded well inside it). The check and the
// renewal are one script on the command stream; the fact goes to another
// stream, which in Redis Cluster may live on another node, so they cannot
// be one atomic step with the publish, and a pipeline would not make the
// publish depend on the check. A delivery taken by another consumer (this
// one stalled past ClaimMinIdle, or was cut off that long) is left to it.
// If the check fails, or took ClaimMinIdle itself, none is confirmed and
// the failure is recorded: the commands stay pending.
func (r *run[C, R]) own(ctx context.Context, hs []*Held[C]) (mine []bool) {
	l := r.l
	ids := make([]string, len(hs))
	for i, h := range hs {
		ids[i] = h.ID
	}
	start := l.clock.now()
	states, err := l.b.own(ctx, ids)
	if err == nil && l.clock.now().Sub(start) >= l.o.ClaimMinIdle {
		err = fmt.Errorf("consume: ownership check on %s took longer than the claim's minimum idle time (%s)", l.o.Stream, l.o.ClaimMinIdle)
	}
	if err != nil {
		l.o.Metrics.brokerFailure("own")
		err = &opError{failure{op: "own", since: start, err: err}}
		for _, h := range hs {
			r.fateError(ctx, h, "own", start, err)
		}
		return nil
	}
	mine = make([]bool, len(hs))
	var gone []*Held[C]
	for i, s := range states {
		switch s {
		case owned, trimmed:
			// One trimmed from the stream is still this consumer's to
			// close: no other consumer can be given it again.
			mine[i] = true
		default:
			gone = append(gone, hs[i])
		}
	}
	r.leftToOwner(ctx, gone)
	return mine
}

// leftToOwner logs handled commands whose fates are left to the consumer
// that owns them now.
func (r *run[C, R]) leftToOwner(ctx context.Context, hs []*Held[C]) {
	for _, h := range hs {
		r.l.o.Logger.LogAttrs(ctx, slog.LevelInfo, "no longer owns a handled command; its fate is left to its owner",
			append(commandAttrs(h), slog.String("stream", r.l.o.Stream))...)
	}
}

// fateError records a failed fate write begun at since; the current cycle
// then counts as failed, so a broker refusing writes ends the loop like one
// refusing reads.
func (r *run[C, R]) fateError(ctx context.Context, h *Held[C], op string, since time.Time, err error) {
	var oe *opError
	if errors.As(err, &oe) {
		op = oe.op // counted where it failed
	} else {
		r.l.o.Metrics.brokerFailure(op)
	}
	r.fates.add(failure{op: op, since: since, err: err})
	r.l.o.Logger.LogAttrs(ctx, slog.LevelError, "could not record a command's fate; it stays pending",
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
type completion[C any] struct {
	h    *Held[C]
	fact envelope.Model // nil when there is nothing to announce
	// lead tells the waiting submitter whether it must write the next
	// batch (true) or its fate has been written or has failed (false).
	lead chan bool
}

// committer batches completions. The first submitter to find it idle
// writes the queue; when it is done it hands the turn to the oldest
// submitter still queued, so no handler writes batches for others for
// longer than one batch.
type committer[C any] struct {
	mu      sync.Mutex
	queue   []*completion[C]
	writing bool
}

// complete gives a Complete command its fate, batched with any others
// completing at the same time. A failed write is logged and counted, and
// leaves the command pending, as a single write would.
func (r *run[C, R]) complete(h *Held[C], fact envelope.Model) {
	c := &completion[C]{h: h, fact: fact, lead: make(chan bool, 1)}
	cm := &r.commit
	cm.mu.Lock()
	cm.queue = append(cm.queue, c)
	if cm.writing {
		cm.mu.Unlock()
		if !<-c.lead {
			return
		}
		cm.mu.Lock()
	}
	cm.writing = true
	batch := cm.queue
	cm.queue = nil
	cm.mu.Unlock()

	r.writeFates(batch)

	cm.mu.Lock()
	var next *completion[C]
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
}

// writeFates confirms that this consumer still owns the batch's
// deliveries, then writes the facts of those it owns, then the dedupe keys
// of those whose fact was written, then acks those whose key was set.
func (r *run[C, R]) writeFates(batch []*completion[C]) {
	l := r.l
	ctx, cancel := context.WithTimeout(r.writeCtx, fateTimeout)
	defer cancel()

	hs := make([]*Held[C], len(batch))
	for i, c := range batch {
		hs[i] = c.h
	}
	mine := r.own(ctx, hs)
	start := l.clock.now()
	pending := make([]*completion[C], 0, len(batch))
	var (
		facts  []envelope.Model
		owners []*completion[C]
	)
	for i, c := range batch {
		switch {
		case mine == nil || !mine[i]:
		case c.fact == nil:
			pending = append(pending, c)
		default:
			facts = append(facts, c.fact)
			owners = append(owners, c)
		}
	}
	if len(facts) == 0 && len(pending) == 0 {
		return // nothing owned here any more
	}
	for i, err := range l.b.publishAll(ctx, facts) {
		if err != nil {
			r.fateError(ctx, owners[i].h, "publish", start, err)
			continue
		}
		pending = append(pending, owners[i])
	}

	cmdIDs := make([]string, len(pending))
	entryIDs := make([]string, len(pending))
	for i, c := range pending {
		cmdIDs[i], entryIDs[i] = c.h.CommandID, c.h.ID
	}
	ids := make([]string, 0, len(pending))
	remembered := make([]*completion[C], 0, len(pending))
	start = l.clock.now()
	for i, err := range l.b.rememberAll(ctx, cmdIDs, entryIDs) {
		if err != nil {
			r.fateError(ctx, pending[i].h, "dedupe", start, err)
			continue
		}
		ids = append(ids, pending[i].h.ID)
		remembered = append(remembered, pending[i])
	}
	if len(ids) == 0 {
		return
	}
	start = l.clock.now()
	if err := l.b.ack(ctx, ids...); err != nil {
		for _, c := range remembered {
			r.fateError(ctx, c.h, "ack", start, err)
		}
	}
}
