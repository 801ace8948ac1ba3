package engine

import (
	"context"
	"fmt"
	"log/slog"
)

// A read delivers every entry up to its count, whatever its key. Those the
// scheduler turns away (their key's backlog is full, or the loop is) stay
// pending for this consumer, and the reclaim would bring them back only
// after ClaimMinIdle: a backlogged host would then drain at the pace of the
// reclaim rather than its own. So the scheduler notes them, and as soon as
// their key has room again the loop takes them back by id, reading them
// again from this consumer's pending list (redeliver): memory stays
// bounded, reads go on for the other keys, and a backlog waits for nothing
// but room.

func (b *redisBroker) recall(ctx context.Context, ids []string) ([]entry, []string, error) {
	got, err := b.redeliver(ctx, ids)
	if err != nil {
		return nil, nil, fmt.Errorf("engine: recall on %s: %w", b.o.Stream, err)
	}
	var (
		entries    []entry
		trimmedIDs []string
	)
	for i, e := range got {
		switch e.state {
		case owned:
			entries = append(entries, entry{ID: ids[i], Fields: e.fields})
		case trimmed:
			trimmedIDs = append(trimmedIDs, ids[i])
		}
	}
	return entries, trimmedIDs, nil
}

// recallLocked asks the scheduler what it would take back now, up to the
// free places, and hands it to recallLoop. It is called under r.mu
// wherever a place is freed; nothing is asked while a batch is out.
func (r *run) recallLocked() {
	free := r.l.o.MaxHeld - len(r.held)
	if r.recallBatch != nil || r.stopping || free <= 0 || r.unwritten.Load() > 0 {
		return
	}
	if ids := r.l.sched.Recall(free, r.l.clock.now()); len(ids) > 0 {
		r.recallBatch = ids
		select {
		case r.recallSig <- struct{}{}:
		default:
		}
	}
}

// recallLoop takes back each batch recallLocked hands it. A batch whose
// claim fails is tried again, as it is, after BackoffBase.
func (r *run) recallLoop(ctx context.Context) {
	l := r.l
	r.mu.Lock()
	r.recallLocked() // notes left from an earlier Run
	r.mu.Unlock()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.recallSig:
		}
		r.mu.Lock()
		ids := r.recallBatch
		r.mu.Unlock()
		for len(ids) > 0 && ctx.Err() == nil {
			err := r.recall(ctx, ids)
			if err == nil {
				failing = false
				r.mu.Lock()
				r.recallBatch = nil
				r.recallLocked()
				ids = r.recallBatch
				r.mu.Unlock()
				continue
			}
			if ctx.Err() != nil {
				return
			}
			l.o.Metrics.brokerFailure("recall")
			level := slog.LevelDebug
			if !failing {
				level = slog.LevelWarn
			}
			l.o.Logger.Log(ctx, level, "could not take back commands left pending; trying again", "stream", l.o.Stream,
				"count", len(ids), "error", err)
			failing = true
			if l.clock.sleep(ctx, l.o.BackoffBase) != nil {
				return
			}
		}
	}
}

// recall claims ids again and triages what is still pending here as a read
// would. Only a failed claim is an error: the batch may be tried again. A
// failure during triage leaves the rest pending for the reclaim, as it does
// for a read.
func (r *run) recall(ctx context.Context, ids []string) error {
	l := r.l
	start := l.clock.now()
	got, trimmed, err := l.b.recall(ctx, ids)
	if err != nil {
		return err
	}
	if len(trimmed) > 0 {
		if err := r.dropTrimmed(ctx, trimmed); err != nil {
			l.o.Logger.WarnContext(ctx, "could not ack trimmed entries", "stream", l.o.Stream, "error", err)
		}
	}
	if len(got) == 0 {
		return nil
	}
	l.o.Logger.DebugContext(ctx, "took back commands left pending", "stream", l.o.Stream, "count", len(got))
	if err := r.accept(ctx, got, start); err != nil {
		l.o.Logger.WarnContext(ctx, "could not triage commands taken back; they stay pending", "stream", l.o.Stream,
			"error", err)
	}
	return nil
}
