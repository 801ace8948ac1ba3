package consume

import (
	"context"
	_ "embed"
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
	read(ctx context.Context, count int, block time.Duration) ([]Entry, error)
	// autoclaim takes up to count entries idle for the claim threshold,
	// scanning from cursor; deleted names entries trimmed while pending.
	autoclaim(ctx context.Context, cursor string, count int) (next string, entries []Entry, deleted []string, err error)
	// own tells, for each of ids, whether it is pending for this consumer,
	// renewing the claim on each that is (see own.lua).
	own(ctx context.Context, ids []string) ([]ownership, error)
	ack(ctx context.Context, ids ...string) error
	// deliveries reads the times-delivered of an entry pending for this
	// consumer; errNotPending when it is not.
	deliveries(ctx context.Context, id string) (int, error)
	// entry re-reads one entry by id; ok is false when it is gone.
	entry(ctx context.Context, id string) (fields []Field, ok bool, err error)
	deadLetter(ctx context.Context, id string, fields []Field, reason string) error
	// giveBack undoes one delivery of each id still pending here.
	giveBack(ctx context.Context, ids []string) error
	// recall claims again the ids still pending here (see recall.go).
	recall(ctx context.Context, ids []string) (entries []Entry, trimmed []string, err error)
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
var errNoGroup = errors.New("consume: consumer group is gone")

// errNotPending means an entry is not in the group's pending list for this
// consumer.
var errNotPending = errors.New("consume: entry is not pending for this consumer")

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

// maxIDs bounds the ids of one XCLAIM, XACK or give-back.
const maxIDs = 256

// giveBackScript undoes one delivery of each entry it is given. See
// giveback.lua.
//
//go:embed giveback.lua
var giveBackLua string

var giveBackScript = rueidis.NewLuaScript(giveBackLua)

// ownScript checks and renews this consumer's claim on entries. See
// own.lua.
//
//go:embed own.lua
var ownLua string

var ownScript = rueidis.NewLuaScript(ownLua)

// redisBroker is the broker on a rueidis client.
type redisBroker struct {
	client rueidis.Client
	o      *Options
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
		return fmt.Errorf("consume: create group %s on %s: %w", b.o.Group, b.o.Stream, err)
	}
	b.ok()
	return nil
}

func (b *redisBroker) read(ctx context.Context, count int, block time.Duration) ([]Entry, error) {
	cmd := b.client.B().Xreadgroup().Group(b.o.Group, b.o.Consumer).Count(int64(count)).
		Block(max(block.Milliseconds(), 1)).Streams().Key(b.o.Stream).Id(">").Build().UnblockOnCancel()
	res, err := b.client.Do(ctx, cmd).AsXReadSlices()
	switch {
	case err == nil:
	case rueidis.IsRedisNil(err):
		b.ok()
		return nil, nil
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return nil, nil
	default:
		return nil, fmt.Errorf("consume: XREADGROUP %s: %w", b.o.Stream, noGroup(err))
	}
	b.ok()
	return entries(res[b.o.Stream]), nil
}

func (b *redisBroker) autoclaim(ctx context.Context, cursor string, count int) (string, []Entry, []string, error) {
	cmd := b.client.B().Xautoclaim().Key(b.o.Stream).Group(b.o.Group).Consumer(b.o.Consumer).
		MinIdleTime(strconv.FormatInt(b.o.ClaimMinIdle.Milliseconds(), 10)).Start(cursor).
		Count(int64(count)).Build()
	arr, err := b.client.Do(ctx, cmd).ToArray()
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return cursor, nil, nil, nil
		}
		return "", nil, nil, fmt.Errorf("consume: XAUTOCLAIM %s: %w", b.o.Stream, noGroup(err))
	}
	b.ok()
	if len(arr) < 2 {
		return "", nil, nil, fmt.Errorf("consume: XAUTOCLAIM %s: unexpected reply of %d elements", b.o.Stream, len(arr))
	}
	next, err := arr[0].ToString()
	if err != nil {
		return "", nil, nil, fmt.Errorf("consume: XAUTOCLAIM %s: cursor: %w", b.o.Stream, err)
	}
	claimed, err := arr[1].AsXRangeSlices()
	if err != nil {
		return "", nil, nil, fmt.Errorf("consume: XAUTOCLAIM %s: entries: %w", b.o.Stream, err)
	}
	var deleted []string
	if len(arr) > 2 {
		deleted, _ = arr[2].AsStrSlice()
	}
	return next, entries(claimed), deleted, nil
}

func (b *redisBroker) own(ctx context.Context, ids []string) ([]ownership, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	states := make([]ownership, 0, len(ids))
	for chunk := range chunks(ids, maxIDs) {
		args := append([]string{b.o.Group, b.o.Consumer}, chunk...)
		got, err := ownScript.Exec(ctx, b.client, []string{b.o.Stream}, args).AsIntSlice()
		if err != nil {
			return nil, fmt.Errorf("consume: ownership check on %s: %w", b.o.Stream, noGroup(err))
		}
		if len(got) != len(chunk) {
			return nil, fmt.Errorf("consume: ownership check on %s: %d answers for %d entries", b.o.Stream, len(got), len(chunk))
		}
		for _, n := range got {
			states = append(states, ownership(n))
		}
	}
	b.ok()
	return states, nil
}

func (b *redisBroker) ack(ctx context.Context, ids ...string) error {
	for chunk := range chunks(ids, maxIDs) {
		cmd := b.client.B().Xack().Key(b.o.Stream).Group(b.o.Group).Id(chunk...).Build()
		if err := b.client.Do(ctx, cmd).Error(); err != nil {
			return fmt.Errorf("consume: XACK %s: %w", b.o.Stream, err)
		}
	}
	b.ok()
	return nil
}

func (b *redisBroker) deliveries(ctx context.Context, id string) (int, error) {
	cmd := b.client.B().Xpending().Key(b.o.Stream).Group(b.o.Group).Start(id).End(id).Count(1).Consumer(b.o.Consumer).Build()
	arr, err := b.client.Do(ctx, cmd).ToArray()
	if err != nil {
		return 0, fmt.Errorf("consume: XPENDING %s %s: %w", b.o.Stream, id, err)
	}
	if len(arr) == 0 {
		b.ok()
		return 0, fmt.Errorf("%w: %s", errNotPending, id)
	}
	e, err := arr[0].ToArray()
	if err != nil || len(e) < 4 {
		return 0, fmt.Errorf("consume: XPENDING %s %s: unexpected reply", b.o.Stream, id)
	}
	n, err := e[3].AsInt64()
	if err != nil {
		return 0, fmt.Errorf("consume: XPENDING %s %s: times-delivered: %w", b.o.Stream, id, err)
	}
	b.ok()
	return int(n), nil
}

func (b *redisBroker) entry(ctx context.Context, id string) ([]Field, bool, error) {
	cmd := b.client.B().Xrange().Key(b.o.Stream).Start(id).End(id).Build()
	got, err := b.client.Do(ctx, cmd).AsXRangeSlices()
	if err != nil {
		return nil, false, fmt.Errorf("consume: XRANGE %s %s: %w", b.o.Stream, id, err)
	}
	if len(got) == 0 || len(got[0].FieldValues) == 0 {
		return nil, false, nil
	}
	return fields(got[0].FieldValues), true, nil
}

// deadLetter appends the frame's fields (without any earlier dlq_* fields,
// so a replayed dead letter carries one reason), then dlq_reason and
// dlq_original_id.
func (b *redisBroker) deadLetter(ctx context.Context, id string, fields []Field, reason string) error {
	x := b.client.B().Xadd().Key(b.o.DLQStream).Id("*").FieldValue()
	for _, f := range fields {
		if f.Name == envelope.FieldDLQReason || f.Name == envelope.FieldDLQOriginalID {
			continue
		}
		x = x.FieldValue(f.Name, f.Value)
	}
	x = x.FieldValue(envelope.FieldDLQReason, reason).FieldValue(envelope.FieldDLQOriginalID, id)
	if err := b.client.Do(ctx, x.Build()).Error(); err != nil {
		return fmt.Errorf("consume: XADD %s: %w", b.o.DLQStream, err)
	}
	b.ok()
	return nil
}

func (b *redisBroker) giveBack(ctx context.Context, ids []string) error {
	for chunk := range chunks(ids, maxIDs) {
		args := append([]string{b.o.Group, b.o.Consumer}, chunk...)
		if err := giveBackScript.Exec(ctx, b.client, []string{b.o.Stream}, args).Error(); err != nil {
			return fmt.Errorf("consume: give back on %s: %w", b.o.Stream, err)
		}
	}
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
			errs[i] = fmt.Errorf("consume: EXISTS dedupe key: %w", err)
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
		return fmt.Errorf("consume: XADD %s: %w", b.o.FactsStream, err)
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
			errs[owners[k]] = fmt.Errorf("consume: XADD %s: %w", b.o.FactsStream, err)
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
			errs[i] = fmt.Errorf("consume: SET dedupe key: %w", err)
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
		return rueidis.Completed{}, fmt.Errorf("consume: encode fact: %w", err)
	}
	x := b.client.B().Xadd().Key(b.o.FactsStream).Id("*").FieldValue()
	for i, name := range envelope.FrameFields() {
		x = x.FieldValue(name, frame[i])
	}
	return x.Build(), nil
}

func entries(in []rueidis.XRangeSlice) []Entry {
	out := make([]Entry, len(in))
	for i, e := range in {
		out[i] = Entry{ID: e.ID, Fields: fields(e.FieldValues)}
	}
	return out
}

func fields(in []rueidis.XRangeFieldValue) []Field {
	out := make([]Field, len(in))
	for i, f := range in {
		out[i] = Field{Name: f.Field, Value: f.Value}
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
