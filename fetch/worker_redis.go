package fetch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/envelope"
)

// Every command here names exactly one key (the command stream, the facts
// stream, the DLQ stream or one dedupe key), so each lands on one Cluster
// slot; nothing spans keys.

// errNotPending means an entry is no longer in the group's pending list.
var errNotPending = errors.New("fetch: entry is not pending")

// maxClaimIDs bounds the ids of one XCLAIM or XACK.
const maxClaimIDs = 256

func isRedisErr(err error, prefix string) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && strings.HasPrefix(re.Error(), prefix)
}

// createGroup creates the consumer group (and the stream); an existing group
// is fine.
func (w *Worker) createGroup(ctx context.Context) error {
	cmd := w.client.B().XgroupCreate().Key(w.o.Stream).Group(w.o.Group).Id(w.o.StartID).Mkstream().Build()
	err := w.client.Do(ctx, cmd).Error()
	if err != nil && !isRedisErr(err, "BUSYGROUP") {
		w.brokerFailure("group")
		return fmt.Errorf("fetch: create group %s on %s: %w", w.o.Group, w.o.Stream, err)
	}
	w.markOK()
	if !w.groupReady.Swap(true) {
		w.log.InfoContext(ctx, "consumer group ready", "stream", w.o.Stream, "group", w.o.Group, "start_id", w.o.StartID)
	}
	return nil
}

// groupLost handles NOGROUP (Redis restarted without its data): the group
// is recreated at once; the error stands if that fails.
func (w *Worker) groupLost(ctx context.Context, err error) error {
	if !isRedisErr(err, "NOGROUP") {
		return err
	}
	w.groupReady.Store(false)
	w.log.WarnContext(ctx, "consumer group is gone; recreating it", "stream", w.o.Stream, "group", w.o.Group)
	if cerr := w.createGroup(ctx); cerr != nil {
		return cerr
	}
	return nil
}

// read reads up to count new entries, blocking up to block.
func (w *Worker) read(ctx context.Context, count int, block time.Duration) ([]rueidis.XRangeSlice, error) {
	cmd := w.client.B().Xreadgroup().Group(w.o.Group, w.o.Consumer).Count(int64(count)).
		Block(max(block.Milliseconds(), 1)).Streams().Key(w.o.Stream).Id(">").Build().UnblockOnCancel()
	res, err := w.client.Do(ctx, cmd).AsXReadSlices()
	switch {
	case err == nil:
	case rueidis.IsRedisNil(err):
		w.markOK()
		return nil, nil
	case ctx.Err() != nil:
		return nil, nil
	default:
		if err = w.groupLost(ctx, err); err == nil {
			return nil, nil
		}
		w.brokerFailure("read")
		return nil, fmt.Errorf("fetch: XREADGROUP %s: %w", w.o.Stream, err)
	}
	w.markOK()
	return res[w.o.Stream], nil
}

// reclaim takes over entries idle for ClaimMinIdle (this worker's transient
// failures, or work abandoned by a dead worker), continuing the scan where
// the previous call stopped. Entries trimmed from the stream while pending
// are logged and acked away.
func (w *Worker) reclaim(ctx context.Context) error {
	for range 4 {
		free := w.room()
		if free <= 0 {
			return nil
		}
		cmd := w.client.B().Xautoclaim().Key(w.o.Stream).Group(w.o.Group).Consumer(w.o.Consumer).
			MinIdleTime(strconv.FormatInt(w.o.ClaimMinIdle.Milliseconds(), 10)).Start(w.claimCursor).
			Count(int64(min(free, 1000))).Build()
		arr, err := w.client.Do(ctx, cmd).ToArray()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if err = w.groupLost(ctx, err); err == nil {
				return nil
			}
			w.brokerFailure("claim")
			return fmt.Errorf("fetch: XAUTOCLAIM %s: %w", w.o.Stream, err)
		}
		w.markOK()
		if len(arr) < 2 {
			return fmt.Errorf("fetch: XAUTOCLAIM %s: unexpected reply of %d elements", w.o.Stream, len(arr))
		}
		next, err := arr[0].ToString()
		if err != nil {
			return fmt.Errorf("fetch: XAUTOCLAIM %s: cursor: %w", w.o.Stream, err)
		}
		entries, err := arr[1].AsXRangeSlices()
		if err != nil {
			return fmt.Errorf("fetch: XAUTOCLAIM %s: entries: %w", w.o.Stream, err)
		}
		var deleted []string
		if len(arr) > 2 {
			deleted, _ = arr[2].AsStrSlice()
		}
		w.claimCursor = next
		if len(deleted) > 0 {
			w.lose(deleted)
			if err := w.dropTrimmed(ctx, deleted); err != nil {
				return err
			}
		}
		if len(entries) > 0 {
			w.m.reclaims.Add(float64(len(entries)))
			if err := w.accept(ctx, entries); err != nil {
				return err
			}
		}
		if next == "0-0" || len(entries) == 0 {
			return nil
		}
	}
	return nil
}

// dropTrimmed logs and acks away pending entries that are no longer in the
// stream: there is nothing left to handle, dead-letter or announce.
func (w *Worker) dropTrimmed(ctx context.Context, ids []string) error {
	for _, id := range ids {
		w.log.WarnContext(ctx, "pending entry was trimmed from the stream; acking it away", "message_id", id, "stream", w.o.Stream)
	}
	w.m.commands.WithLabelValues("trimmed", "").Add(float64(len(ids)))
	if err := w.ack(ctx, ids...); err != nil {
		w.brokerFailure("ack")
		return err
	}
	return nil
}

// refreshLoop keeps every held command owned by this consumer.
func (w *Worker) refreshLoop(ctx context.Context) {
	t := time.NewTicker(w.refreshEvery())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.refresh(ctx)
		}
	}
}

// refresh resets the idle time of every held command (XCLAIM … JUSTID does
// not count a delivery), so no other worker reclaims it. XCLAIM would also
// take an entry from another consumer, so ownership is checked first: an
// entry no longer pending for this consumer was taken (after an outage long
// enough for a reclaim) or acked elsewhere, and is dropped from memory. One
// XCLAIM does not return was trimmed from the stream.
func (w *Worker) refresh(ctx context.Context) {
	ids := w.heldIDs()
	if len(ids) == 0 {
		return
	}
	checks := make(rueidis.Commands, len(ids))
	for i, id := range ids {
		checks[i] = w.client.B().Xpending().Key(w.o.Stream).Group(w.o.Group).Start(id).End(id).Count(1).Consumer(w.o.Consumer).Build()
	}
	var mine, gone []string
	for i, r := range w.client.DoMulti(ctx, checks...) {
		arr, err := r.ToArray()
		if err != nil {
			w.brokerFailure("refresh")
			w.log.WarnContext(ctx, "could not refresh held commands", "error", err)
			return
		}
		if len(arr) == 0 {
			gone = append(gone, ids[i])
		} else {
			mine = append(mine, ids[i])
		}
	}
	claimed := make(map[string]bool, len(mine))
	for chunk := range chunks(mine, maxClaimIDs) {
		cmd := w.client.B().Xclaim().Key(w.o.Stream).Group(w.o.Group).Consumer(w.o.Consumer).MinIdleTime("0").Id(chunk...).Justid().Build()
		got, err := w.client.Do(ctx, cmd).AsStrSlice()
		if err != nil {
			w.brokerFailure("refresh")
			w.log.WarnContext(ctx, "could not refresh held commands", "error", err)
			return
		}
		for _, id := range got {
			claimed[id] = true
		}
	}
	w.markOK()
	if dropped := w.lose(gone); len(dropped) > 0 {
		w.log.InfoContext(ctx, "dropped held commands no longer pending for this consumer",
			"count", len(dropped), "message_ids", dropped)
	}
	var missing []string
	for _, id := range mine {
		if !claimed[id] {
			missing = append(missing, id)
		}
	}
	// Not claimed: trimmed from the stream (XCLAIM then drops it from the
	// pending list), or acked here since the check. Only the first deserve
	// the warning.
	var trimmed []string
	for _, id := range missing {
		if _, ok, err := w.xrange(ctx, id); err == nil && !ok {
			trimmed = append(trimmed, id)
		}
	}
	if len(trimmed) > 0 {
		w.lose(trimmed)
		if err := w.dropTrimmed(ctx, trimmed); err != nil {
			w.log.WarnContext(ctx, "could not ack trimmed entries", "error", err)
		}
	}
}

func chunks(ids []string, n int) func(func([]string) bool) {
	return func(yield func([]string) bool) {
		for len(ids) > 0 {
			k := min(n, len(ids))
			if !yield(ids[:k]) {
				return
			}
			ids = ids[k:]
		}
	}
}

// ack acknowledges ids on the command stream.
func (w *Worker) ack(ctx context.Context, ids ...string) error {
	for chunk := range chunks(ids, maxClaimIDs) {
		cmd := w.client.B().Xack().Key(w.o.Stream).Group(w.o.Group).Id(chunk...).Build()
		if err := w.client.Do(ctx, cmd).Error(); err != nil {
			return fmt.Errorf("fetch: XACK %s: %w", w.o.Stream, err)
		}
	}
	w.markOK()
	return nil
}

// deliveryCount reads an entry's times-delivered from the pending list.
func (w *Worker) deliveryCount(ctx context.Context, id string) (int, error) {
	cmd := w.client.B().Xpending().Key(w.o.Stream).Group(w.o.Group).Start(id).End(id).Count(1).Build()
	arr, err := w.client.Do(ctx, cmd).ToArray()
	if err != nil {
		return 0, fmt.Errorf("fetch: XPENDING %s %s: %w", w.o.Stream, id, err)
	}
	if len(arr) == 0 {
		return 0, fmt.Errorf("%w: %s", errNotPending, id)
	}
	e, err := arr[0].ToArray()
	if err != nil || len(e) < 4 {
		return 0, fmt.Errorf("fetch: XPENDING %s %s: unexpected reply", w.o.Stream, id)
	}
	n, err := e[3].AsInt64()
	if err != nil {
		return 0, fmt.Errorf("fetch: XPENDING %s %s: times-delivered: %w", w.o.Stream, id, err)
	}
	w.markOK()
	return int(n), nil
}

// dedupeKey is where a handled command_id is remembered.
func (w *Worker) dedupeKey(commandID string) string { return w.o.DedupePrefix + commandID }

// publish appends a fact to the facts stream.
func (w *Worker) publish(ctx context.Context, fact envelope.Model) error {
	cmd, err := w.factCommand(fact)
	if err != nil {
		return err
	}
	if err := w.client.Do(ctx, cmd).Error(); err != nil {
		return fmt.Errorf("fetch: XADD %s: %w", w.o.FactsStream, err)
	}
	w.markOK()
	return nil
}

// factCommand stamps a fact's occurred_at with the publish time and builds
// the XADD that appends it to the facts stream.
func (w *Worker) factCommand(fact envelope.Model) (rueidis.Completed, error) {
	now := w.now().UTC()
	switch f := fact.(type) {
	case *envelope.BlobAvailable:
		f.OccurredAt = now
	case *envelope.FetchFailed:
		f.OccurredAt = now
	}
	fields, err := envelope.ToWire(fact)
	if err != nil {
		return rueidis.Completed{}, fmt.Errorf("fetch: encode fact: %w", err)
	}
	b := w.client.B().Xadd().Key(w.o.FactsStream).Id("*").FieldValue()
	for _, name := range frameFields {
		b = b.FieldValue(name, fields[name])
	}
	return b.Build(), nil
}

// frameFields is the order facts are written in.
var frameFields = []string{
	envelope.FieldKey, envelope.FieldPayload, envelope.FieldEventType,
	envelope.FieldSchemaVersion, envelope.FieldOccurredAt, envelope.FieldContentType,
}

// xrange re-reads one entry by id; ok is false when it is gone.
func (w *Worker) xrange(ctx context.Context, id string) (fields []rueidis.XRangeFieldValue, ok bool, err error) {
	cmd := w.client.B().Xrange().Key(w.o.Stream).Start(id).End(id).Build()
	entries, err := w.client.Do(ctx, cmd).AsXRangeSlices()
	if err != nil {
		return nil, false, fmt.Errorf("fetch: XRANGE %s %s: %w", w.o.Stream, id, err)
	}
	if len(entries) == 0 || len(entries[0].FieldValues) == 0 {
		return nil, false, nil
	}
	return entries[0].FieldValues, true, nil
}

// addDeadLetter appends a dead letter: the frame's fields (without any
// earlier dlq_* fields, so a replayed dead letter carries one reason), then
// dlq_reason and dlq_original_id.
func (w *Worker) addDeadLetter(ctx context.Context, id string, fields []rueidis.XRangeFieldValue, reason string) error {
	b := w.client.B().Xadd().Key(w.o.DLQStream).Id("*").FieldValue()
	for _, f := range fields {
		if f.Field == FieldDLQReason || f.Field == FieldDLQOriginalID {
			continue
		}
		b = b.FieldValue(f.Field, f.Value)
	}
	b = b.FieldValue(FieldDLQReason, reason).FieldValue(FieldDLQOriginalID, id)
	if err := w.client.Do(ctx, b.Build()).Error(); err != nil {
		return fmt.Errorf("fetch: XADD %s: %w", w.o.DLQStream, err)
	}
	return nil
}
