package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/envelope"
)

// broker is every Redis call a loop makes. Each names exactly one key (the
// command stream, the facts stream, the dead-letter stream or one dedupe
// key), so each lands on one Cluster slot.
type broker interface {
	// createGroup creates the group (and the stream) at id; an existing
	// group is fine.
	createGroup(ctx context.Context, id string) error
	// read reads up to count new entries, blocking up to block. A
	// cancelled ctx ends it with no entries and no error.
	read(ctx context.Context, count int, block time.Duration) ([]entry, error)
	// autoclaim takes up to count entries idle for the claim threshold,
	// scanning from cursor; deleted names entries trimmed while pending.
	autoclaim(ctx context.Context, cursor string, count int) (next string, entries []entry, deleted []string, err error)
	// own tells, for each of ids, whether it is pending for this consumer,
	// renewing the claim on each that is (see redeliver).
	own(ctx context.Context, ids []string) ([]ownership, error)
	ack(ctx context.Context, ids ...string) error
	// entry re-reads one entry by id; ok is false when it is gone.
	entry(ctx context.Context, id string) (fields []field, ok bool, err error)
	deadLetter(ctx context.Context, id string, fields []field, reason string) error
	// recall delivers again the ids still pending here (see recall.go).
	recall(ctx context.Context, ids []string) (entries []entry, trimmed []string, err error)
	// seen reports, per command_id, whether its dedupe key exists.
	seen(ctx context.Context, commandIDs []string) ([]bool, []error)
	publish(ctx context.Context, fact envelope.Model) error
	// publishAll appends facts in one pipeline; errs[i] is facts[i]'s.
	publishAll(ctx context.Context, facts []envelope.Model) []error
	// rememberAll sets the dedupe key of each command_id (to its entry id)
	// in one pipeline, never extending a window already open.
	rememberAll(ctx context.Context, commandIDs, entryIDs []string) []error
}

// errNoGroup means the consumer group is gone (Redis restarted without its
// data); the loop recreates it.
var errNoGroup = errors.New("engine: consumer group is gone")

// ownership is what own found of one entry.
type ownership int

const (
	// taken: not pending for this consumer (another took it, or it was
	// acked).
	taken ownership = 0
	// owned: pending for this consumer, its claim renewed.
	owned ownership = 1
	// trimmed: was pending for this consumer, but is gone from the stream
	// (and now from the pending list too).
	trimmed ownership = -1
)

// maxIDs bounds the ids of one XACK, and the reads of one pipeline.
const maxIDs = 256

// redisBroker is the broker on a rueidis client.
type redisBroker struct {
	client rueidis.Client
	o      *options
	now    func() time.Time
	// ok is called after every round trip Redis answered.
	ok func()
}

func isRedisErr(err error, prefix string) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && strings.HasPrefix(re.Error(), prefix)
}

// noGroup marks a NOGROUP reply with errNoGroup.
func noGroup(err error) error {
	if isRedisErr(err, "NOGROUP") {
		return fmt.Errorf("%w: %w", errNoGroup, err)
	}
	return err
}

func (b *redisBroker) createGroup(ctx context.Context, id string) error {
	cmd := b.client.B().XgroupCreate().Key(b.o.Stream).Group(b.o.Group).Id(id).Mkstream().Build()
	if err := b.client.Do(ctx, cmd).Error(); err != nil && !isRedisErr(err, "BUSYGROUP") {
		return fmt.Errorf("engine: create group %s on %s: %w", b.o.Group, b.o.Stream, err)
	}
	b.ok()
	return nil
}

// read is a blocking XREADGROUP. Cancelling ctx (shutdown) returns at
// once and leaves the read to end with its block: cutting it short would
// take CLIENT UNBLOCK, which a broker's worker user is not granted
// (docs/operations.md, Redis ACL), or a new connection for the next read.
// Entries it delivers then stay pending, as a waiting command does at
// shutdown. ctx's deadline bounds the read itself (a silent network).
func (b *redisBroker) read(ctx context.Context, count int, block time.Duration) ([]entry, error) {
	cmd := b.client.B().Xreadgroup().Group(b.o.Group, b.o.Consumer).Count(int64(count)).
		Block(max(block.Milliseconds(), 1)).Streams().Key(b.o.Stream).Id(">").Build()
	rctx, cancel := context.WithoutCancel(ctx), context.CancelFunc(func() {})
	if deadline, ok := ctx.Deadline(); ok {
		rctx, cancel = context.WithDeadline(rctx, deadline)
	}
	done := make(chan rueidis.RedisResult, 1)
	go func() {
		defer cancel()
		done <- b.client.Do(rctx, cmd)
	}()
	var reply rueidis.RedisResult
	select {
	case reply = <-done:
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.Canceled) {
			return nil, nil
		}
		reply = <-done // the deadline: the read ends with it
	}
	res, err := reply.AsXReadSlices()
	switch {
	case err == nil:
	case rueidis.IsRedisNil(err):
		b.ok()
		return nil, nil
	default:
		return nil, fmt.Errorf("engine: XREADGROUP %s: %w", b.o.Stream, noGroup(err))
	}
	b.ok()
	return entries(res[b.o.Stream]), nil
}

func (b *redisBroker) autoclaim(ctx context.Context, cursor string, count int) (string, []entry, []string, error) {
	cmd := b.client.B().Xautoclaim().Key(b.o.Stream).Group(b.o.Group).Consumer(b.o.Consumer).
		MinIdleTime(strconv.FormatInt(b.o.ClaimMinIdle.Milliseconds(), 10)).Start(cursor).
		Count(int64(count)).Build()
	arr, err := b.client.Do(ctx, cmd).ToArray()
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return cursor, nil, nil, nil
		}
		return "", nil, nil, fmt.Errorf("engine: XAUTOCLAIM %s: %w", b.o.Stream, noGroup(err))
	}
	b.ok()
	if len(arr) < 2 {
		return "", nil, nil, fmt.Errorf("engine: XAUTOCLAIM %s: unexpected reply of %d elements", b.o.Stream, len(arr))
	}
	next, err := arr[0].ToString()
	if err != nil {
		return "", nil, nil, fmt.Errorf("engine: XAUTOCLAIM %s: cursor: %w", b.o.Stream, err)
	}
	claimed, err := arr[1].AsXRangeSlices()
	if err != nil {
		return "", nil, nil, fmt.Errorf("engine: XAUTOCLAIM %s: entries: %w", b.o.Stream, err)
	}
	var deleted []string
	if len(arr) > 2 {
		deleted, _ = arr[2].AsStrSlice()
	}
	return next, entries(claimed), deleted, nil
}

func (b *redisBroker) own(ctx context.Context, ids []string) ([]ownership, error) {
	got, err := b.redeliver(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("engine: ownership check on %s: %w", b.o.Stream, err)
	}
	states := make([]ownership, len(got))
	for i, e := range got {
		states[i] = e.state
	}
	return states, nil
}

// redelivery is what redeliver found of one id.
type redelivery struct {
	state  ownership
	fields []field // the entry's fields, when owned
}

// redeliver reads each of ids again from this consumer's own pending list
// (XREADGROUP … STREAMS <stream> <the id before it> COUNT 1), all in one
// pipeline. A read of the pending list delivers the entry again: its idle
// time starts over, so no reclaim elsewhere can take it for
// ClaimMinIdle, and it is only ever this consumer's own pending entry that
// the read returns, never another consumer's. So one granted command both
// tells whether the entry is still pending here and renews the claim on
// it, in one step on the server (docs/streams.md, Holding commands). An
// entry pending here but trimmed from the stream comes back without
// fields; one acked, or taken by another consumer, does not come back (the
// read returns the next entry pending here, or none).
func (b *redisBroker) redeliver(ctx context.Context, ids []string) ([]redelivery, error) {
	out := make([]redelivery, 0, len(ids))
	for chunk := range chunks(ids, maxIDs) {
		cmds := make(rueidis.Commands, len(chunk))
		for i, id := range chunk {
			cmds[i] = b.client.B().Xreadgroup().Group(b.o.Group, b.o.Consumer).Count(1).
				Streams().Key(b.o.Stream).Id(idBefore(id)).Build()
		}
		for i, r := range b.client.DoMulti(ctx, cmds...) {
			got, err := r.AsXReadSlices()
			if err != nil && !rueidis.IsRedisNil(err) {
				return nil, noGroup(err)
			}
			e := redelivery{state: taken}
			if es := got[b.o.Stream]; len(es) > 0 && es[0].ID == chunk[i] {
				e.state = trimmed
				if es[0].FieldValues != nil {
					e.state, e.fields = owned, fields(es[0].FieldValues)
				}
			}
			out = append(out, e)
		}
	}
	b.ok()
	return out, nil
}

// idBefore is the stream id just before id ("ms-seq"), so that a read
// "after" it starts at id.
func idBefore(id string) string {
	ms, seq := splitID(id)
	switch {
	case seq > 0:
		return fmt.Sprintf("%d-%d", ms, seq-1)
	case ms > 0:
		return fmt.Sprintf("%d-%d", ms-1, uint64(math.MaxUint64))
	}
	return "0-0"
}

func (b *redisBroker) ack(ctx context.Context, ids ...string) error {
	for chunk := range chunks(ids, maxIDs) {
		cmd := b.client.B().Xack().Key(b.o.Stream).Group(b.o.Group).Id(chunk...).Build()
		if err := b.client.Do(ctx, cmd).Error(); err != nil {
			return fmt.Errorf("engine: XACK %s: %w", b.o.Stream, err)
		}
	}
	b.ok()
	return nil
}

func (b *redisBroker) entry(ctx context.Context, id string) ([]field, bool, error) {
	cmd := b.client.B().Xrange().Key(b.o.Stream).Start(id).End(id).Build()
	got, err := b.client.Do(ctx, cmd).AsXRangeSlices()
	if err != nil {
		return nil, false, fmt.Errorf("engine: XRANGE %s %s: %w", b.o.Stream, id, err)
	}
	if len(got) == 0 || len(got[0].FieldValues) == 0 {
		return nil, false, nil
	}
	return fields(got[0].FieldValues), true, nil
}

// deadLetter appends the frame's fields (without any earlier dlq_* fields,
// so a replayed dead letter carries one reason), then dlq_reason and
// dlq_original_id.
func (b *redisBroker) deadLetter(ctx context.Context, id string, fields []field, reason string) error {
	x := b.client.B().Xadd().Key(b.o.DLQStream).Id("*").FieldValue()
	for _, f := range fields {
		if f.Name == envelope.FieldDLQReason || f.Name == envelope.FieldDLQOriginalID {
			continue
		}
		x = x.FieldValue(f.Name, f.Value)
	}
	x = x.FieldValue(envelope.FieldDLQReason, reason).FieldValue(envelope.FieldDLQOriginalID, id)
	if err := b.client.Do(ctx, x.Build()).Error(); err != nil {
		return fmt.Errorf("engine: XADD %s: %w", b.o.DLQStream, err)
	}
	b.ok()
	return nil
}

func (b *redisBroker) seen(ctx context.Context, commandIDs []string) ([]bool, []error) {
	cmds := make(rueidis.Commands, len(commandIDs))
	for i, id := range commandIDs {
		cmds[i] = b.client.B().Exists().Key(b.o.DedupePrefix + id).Build()
	}
	seen := make([]bool, len(commandIDs))
	errs := make([]error, len(commandIDs))
	answered := false
	for i, r := range b.client.DoMulti(ctx, cmds...) {
		n, err := r.AsInt64()
		if err != nil {
			errs[i] = fmt.Errorf("engine: EXISTS dedupe key: %w", err)
			continue
		}
		seen[i], answered = n > 0, true
	}
	if answered {
		b.ok()
	}
	return seen, errs
}

func (b *redisBroker) publish(ctx context.Context, fact envelope.Model) error {
	cmd, err := b.factCommand(fact)
	if err != nil {
		return err
	}
	if err := b.client.Do(ctx, cmd).Error(); err != nil {
		return fmt.Errorf("engine: XADD %s: %w", b.o.FactsStream, err)
	}
	b.ok()
	return nil
}

func (b *redisBroker) publishAll(ctx context.Context, facts []envelope.Model) []error {
	errs := make([]error, len(facts))
	cmds := make(rueidis.Commands, 0, len(facts))
	owners := make([]int, 0, len(facts))
	for i, f := range facts {
		cmd, err := b.factCommand(f)
		if err != nil {
			errs[i] = err
			continue
		}
		cmds = append(cmds, cmd)
		owners = append(owners, i)
	}
	for k, r := range b.doMulti(ctx, cmds) {
		if err := r.Error(); err != nil {
			errs[owners[k]] = fmt.Errorf("engine: XADD %s: %w", b.o.FactsStream, err)
		}
	}
	return errs
}

func (b *redisBroker) rememberAll(ctx context.Context, commandIDs, entryIDs []string) []error {
	ttl := max(int64(math.Ceil(b.o.DedupeTTL.Seconds())), 1)
	cmds := make(rueidis.Commands, len(commandIDs))
	for i, id := range commandIDs {
		// NX: a redelivery never extends the window the first completion
		// opened.
		cmds[i] = b.client.B().Set().Key(b.o.DedupePrefix + id).Value(entryIDs[i]).Nx().ExSeconds(ttl).Build()
	}
	errs := make([]error, len(commandIDs))
	for i, r := range b.doMulti(ctx, cmds) {
		if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
			errs[i] = fmt.Errorf("engine: SET dedupe key: %w", err)
		}
	}
	return errs
}

// doMulti sends cmds in one pipeline; none is a no-op.
func (b *redisBroker) doMulti(ctx context.Context, cmds rueidis.Commands) []rueidis.RedisResult {
	if len(cmds) == 0 {
		return nil
	}
	res := b.client.DoMulti(ctx, cmds...)
	for _, r := range res {
		if r.Error() == nil {
			b.ok()
			break
		}
	}
	return res
}

// factCommand stamps a fact's occurred_at with the publish time and builds
// the XADD that appends it to the facts stream, its fields in the order
// the envelope gives.
func (b *redisBroker) factCommand(fact envelope.Model) (rueidis.Completed, error) {
	envelope.Stamp(fact, b.now().UTC())
	frame, err := envelope.ToFrame(fact)
	if err != nil {
		return rueidis.Completed{}, fmt.Errorf("engine: encode fact: %w", err)
	}
	x := b.client.B().Xadd().Key(b.o.FactsStream).Id("*").FieldValue()
	for i, name := range envelope.FrameFields() {
		x = x.FieldValue(name, frame[i])
	}
	return x.Build(), nil
}

func entries(in []rueidis.XRangeSlice) []entry {
	out := make([]entry, len(in))
	for i, e := range in {
		out[i] = entry{ID: e.ID, Fields: fields(e.FieldValues)}
	}
	return out
}

func fields(in []rueidis.XRangeFieldValue) []field {
	out := make([]field, len(in))
	for i, f := range in {
		out[i] = field{Name: f.Field, Value: f.Value}
	}
	return out
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
