package fetch

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/envelope"
)

// A completed command's fate is three writes in order: its fact, its
// dedupe key, its ack. Written one command at a time that is three round
// trips each, and at a high command rate Redis spends most of its time on
// the network rather than on the commands. So completions that arrive
// while a batch is being written are written together as the next batch:
// each step is one pipelined round trip for the whole batch, and a
// command's dedupe key is still set only once its fact is written, its ack
// only once its dedupe key is. An idle worker writes a batch of one at
// once: nothing waits for company.

// completion is one Stored or NotModified command waiting for its fate.
type completion struct {
	it   *item
	fact envelope.Model // nil when there is nothing to announce
	// lead tells the waiting submitter whether it must write the next
	// batch (true) or its fate has been written or has failed (false).
	lead chan bool
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

// complete gives a Stored or NotModified command its fate, batched with any
// others completing at the same time. A failed write is logged and counted,
// and leaves the command pending, as a single write would.
func (w *Worker) complete(it *item, fact envelope.Model) {
	c := &completion{it: it, fact: fact, lead: make(chan bool, 1)}
	cm := &w.commit
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

	w.writeFates(batch)

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
}

// writeFates writes a batch's facts, then the dedupe keys of those whose
// fact was written, then acks those whose key was set.
func (w *Worker) writeFates(batch []*completion) {
	ctx, cancel := context.WithTimeout(w.writeCtx, fateTimeout)
	defer cancel()

	var (
		pending = batch[:0:0]
		cmds    rueidis.Commands
		owners  []*completion
	)
	for _, c := range batch {
		if c.fact == nil {
			pending = append(pending, c)
			continue
		}
		cmd, err := w.factCommand(c.fact)
		if err != nil {
			w.fateError(ctx, c.it, "publish", err)
			continue
		}
		cmds = append(cmds, cmd)
		owners = append(owners, c)
	}
	for i, r := range w.doMulti(ctx, cmds) {
		if err := r.Error(); err != nil {
			w.fateError(ctx, owners[i].it, "publish", fmt.Errorf("fetch: XADD %s: %w", w.o.FactsStream, err))
			continue
		}
		pending = append(pending, owners[i])
	}

	ttl := max(int64(math.Ceil(w.o.DedupeTTL.Seconds())), 1)
	cmds = cmds[:0]
	for _, c := range pending {
		// NX: a redelivery never extends the window the first completion
		// opened.
		cmds = append(cmds, w.client.B().Set().Key(w.dedupeKey(c.it.cmd.CommandID)).Value(c.it.id).Nx().ExSeconds(ttl).Build())
	}
	ids := make([]string, 0, len(pending))
	remembered := pending[:0:0]
	for i, r := range w.doMulti(ctx, cmds) {
		if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
			w.fateError(ctx, pending[i].it, "dedupe", fmt.Errorf("fetch: SET dedupe key: %w", err))
			continue
		}
		ids = append(ids, pending[i].it.id)
		remembered = append(remembered, pending[i])
	}
	if len(ids) == 0 {
		return
	}
	if err := w.ack(ctx, ids...); err != nil {
		for _, c := range remembered {
			w.fateError(ctx, c.it, "ack", err)
		}
	}
}

// doMulti sends cmds in one pipeline; none is a no-op.
func (w *Worker) doMulti(ctx context.Context, cmds rueidis.Commands) []rueidis.RedisResult {
	if len(cmds) == 0 {
		return nil
	}
	res := w.client.DoMulti(ctx, cmds...)
	for _, r := range res {
		if r.Error() == nil {
			w.markOK()
			break
		}
	}
	return res
}
