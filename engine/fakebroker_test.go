package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/replicator-go/replicator/envelope"
)

// The fake broker: the loop's Redis in memory, and a recorder of the calls
// a loop makes to any broker.

// fakeClock is an injected clock that moves only when slept on or
// advanced.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func (c *fakeClock) sleep(_ context.Context, d time.Duration) error {
	c.advance(max(d, 0))
	return nil
}

// errInjected is the failure a fault makes a fakeBroker method return.
var errInjected = errors.New("injected broker failure")

// fakeBroker is a broker in memory: the command stream and its group's
// pending list, the facts and dead-letter streams and the dedupe keys,
// modelled on the Redis commands the redisBroker sends (XREADGROUP, a
// read of this consumer's own pending list, XAUTOCLAIM, XACK, SET NX…), so a Loop
// runs on it without a redis-server. It serves consumer; other consumers
// appear only as owners of entries taken from it. The group's last
// delivered id starts at 0; createGroup changes nothing.
//
// A fault set for a method (by its name) runs before it: an error it
// returns fails the call, which then changes nothing.
type fakeBroker struct {
	consumer string
	now      func() time.Time // stamps facts, as the redisBroker does

	mu        sync.Mutex
	stream    []fakeEntry // in id order
	delivered string      // the group's last-delivered id
	pel       map[string]*fakePending
	dedupe    map[string]string // command_id → entry id
	facts     []envelope.Model
	dlq       []fakeLetter
	faults    map[string]func(context.Context) error
	grew      chan struct{} // closed when the stream grows
}

type fakeEntry struct {
	entry
	// bare: delivered without its fields (as servers before Redis 7
	// could), though a re-read by id finds them.
	bare bool
}

// fakePending is one entry of the group's pending list.
type fakePending struct {
	consumer   string
	deliveries int
	// idle: idle for the claim's minimum idle time, so XAUTOCLAIM takes
	// it. A read or a claim makes it busy again.
	idle bool
}

type fakeLetter struct {
	id, reason string
	fields     []field
}

var _ broker = (*fakeBroker)(nil)

func newFakeBroker(consumer string, now func() time.Time) *fakeBroker {
	return &fakeBroker{consumer: consumer, now: now, delivered: "0-0", pel: map[string]*fakePending{},
		dedupe: map[string]string{}, faults: map[string]func(context.Context) error{}, grew: make(chan struct{})}
}

// fault makes method run f before it does anything.
func (b *fakeBroker) fault(method string, f func(context.Context) error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.faults[method] = f
}

// fail makes method fail with errInjected.
func (b *fakeBroker) fail(method string) {
	b.fault(method, func(context.Context) error { return errInjected })
}

// failOnce makes method's next call fail with errInjected.
func (b *fakeBroker) failOnce(method string) {
	var once sync.Once
	b.fault(method, func(context.Context) error {
		err := error(nil)
		once.Do(func() { err = errInjected })
		return err
	})
}

func (b *fakeBroker) faulted(ctx context.Context, method string) error {
	b.mu.Lock()
	f := b.faults[method]
	b.mu.Unlock()
	if f == nil {
		return nil
	}
	return f(ctx)
}

// add appends an entry to the command stream (XADD with an explicit id).
func (b *fakeBroker) add(id string, bare bool, fields ...field) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stream = append(b.stream, fakeEntry{entry: entry{ID: id, Fields: fields}, bare: bare})
	close(b.grew)
	b.grew = make(chan struct{})
}

// pend makes id delivered to consumer n times, and idle.
func (b *fakeBroker) pend(id, consumer string, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if idAfter(id, b.delivered) {
		b.delivered = id
	}
	b.pel[id] = &fakePending{consumer: consumer, deliveries: n, idle: true}
}

// take claims id for consumer (XCLAIM … 0 id): one more delivery.
func (b *fakeBroker) take(id, consumer string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p := b.pel[id]; p != nil {
		p.consumer, p.deliveries, p.idle = consumer, p.deliveries+1, false
	}
}

// remove deletes id from the stream (XDEL), leaving the pending list as
// it is.
func (b *fakeBroker) remove(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stream = slices.DeleteFunc(b.stream, func(e fakeEntry) bool { return e.ID == id })
}

func (b *fakeBroker) setDedupe(commandID, entryID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dedupe[commandID] = entryID
}

func (b *fakeBroker) find(id string) (fakeEntry, bool) {
	for _, e := range b.stream {
		if e.ID == id {
			return e, true
		}
	}
	return fakeEntry{}, false
}

func (b *fakeBroker) createGroup(ctx context.Context, _ string) error {
	return b.faulted(ctx, "createGroup")
}

// read delivers up to count entries after the last delivered; with none,
// it waits until the stream grows or ctx ends (then nil, as a blocking
// XREADGROUP whose block ended).
func (b *fakeBroker) read(ctx context.Context, count int, _ time.Duration) ([]entry, error) {
	if err := b.faulted(ctx, "read"); err != nil {
		return nil, err
	}
	for {
		b.mu.Lock()
		var out []entry
		for _, e := range b.stream {
			if len(out) == count {
				break
			}
			if !idAfter(e.ID, b.delivered) {
				continue
			}
			b.delivered = e.ID
			b.pel[e.ID] = &fakePending{consumer: b.consumer, deliveries: 1}
			if e.bare {
				e.Fields = nil
			}
			out = append(out, e.entry)
		}
		grew := b.grew
		b.mu.Unlock()
		if len(out) > 0 {
			return out, nil
		}
		select {
		case <-grew:
		case <-ctx.Done():
			return nil, nil
		}
	}
}

// autoclaim claims every idle pending entry for this consumer (one more
// delivery each) and drops from the pending list, reporting them deleted,
// the idle ones gone from the stream. It scans everything at once.
func (b *fakeBroker) autoclaim(ctx context.Context, _ string, count int) (string, []entry, []string, error) {
	if err := b.faulted(ctx, "autoclaim"); err != nil {
		return "", nil, nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var (
		claimed []entry
		deleted []string
	)
	for _, id := range b.pendingIDs() {
		p := b.pel[id]
		if !p.idle || len(claimed) == count {
			continue
		}
		e, ok := b.find(id)
		if !ok {
			delete(b.pel, id)
			deleted = append(deleted, id)
			continue
		}
		p.consumer, p.deliveries, p.idle = b.consumer, p.deliveries+1, false
		claimed = append(claimed, e.entry)
	}
	return "0-0", claimed, deleted, nil
}

// recall reads each id again from this consumer's pending list: one still
// pending here is delivered again (one more delivery) and returned, or
// named trimmed when the stream lost it; one pending elsewhere, or acked,
// is left alone.
func (b *fakeBroker) recall(ctx context.Context, ids []string) ([]entry, []string, error) {
	if err := b.faulted(ctx, "recall"); err != nil {
		return nil, nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var (
		got     []entry
		trimmed []string
	)
	for _, id := range ids {
		p := b.pel[id]
		if p == nil || p.consumer != b.consumer {
			continue
		}
		e, ok := b.find(id)
		if !ok {
			trimmed = append(trimmed, id)
			continue
		}
		p.deliveries, p.idle = p.deliveries+1, false
		got = append(got, e.entry)
	}
	return got, trimmed, nil
}

// pendingIDs lists the pending list's ids in stream order.
func (b *fakeBroker) pendingIDs() []string {
	ids := make([]string, 0, len(b.pel))
	for id := range b.pel {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(x, y string) int {
		switch {
		case idAfter(x, y):
			return 1
		case idAfter(y, x):
			return -1
		}
		return 0
	})
	return ids
}

// own reads each id again from this consumer's pending list: owned (busy
// again, one more delivery) when pending here; trimmed when pending here
// but gone from the stream; taken otherwise.
func (b *fakeBroker) own(ctx context.Context, ids []string) ([]ownership, error) {
	if err := b.faulted(ctx, "own"); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]ownership, len(ids))
	for i, id := range ids {
		p := b.pel[id]
		switch _, ok := b.find(id); {
		case p == nil || p.consumer != b.consumer:
			out[i] = taken
		case !ok:
			out[i] = trimmed
		default:
			p.deliveries, p.idle = p.deliveries+1, false
			out[i] = owned
		}
	}
	return out, nil
}

// ack drops ids from the pending list, whoever holds them.
func (b *fakeBroker) ack(ctx context.Context, ids ...string) error {
	if err := b.faulted(ctx, "ack"); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, id := range ids {
		delete(b.pel, id)
	}
	return nil
}

func (b *fakeBroker) entry(ctx context.Context, id string) ([]field, bool, error) {
	if err := b.faulted(ctx, "entry"); err != nil {
		return nil, false, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.find(id)
	return e.Fields, ok, nil
}

func (b *fakeBroker) deadLetter(ctx context.Context, id string, fields []field, reason string) error {
	if err := b.faulted(ctx, "deadLetter"); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dlq = append(b.dlq, fakeLetter{id: id, reason: reason, fields: slices.Clone(fields)})
	return nil
}

func (b *fakeBroker) seen(ctx context.Context, commandIDs []string) ([]bool, []error) {
	seen, errs := make([]bool, len(commandIDs)), make([]error, len(commandIDs))
	if err := b.faulted(ctx, "seen"); err != nil {
		return seen, fill(len(commandIDs), err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, id := range commandIDs {
		_, seen[i] = b.dedupe[id]
	}
	return seen, errs
}

func (b *fakeBroker) publish(ctx context.Context, fact envelope.Model) error {
	if err := b.faulted(ctx, "publish"); err != nil {
		return err
	}
	return b.append([]envelope.Model{fact})[0]
}

func (b *fakeBroker) publishAll(ctx context.Context, facts []envelope.Model) []error {
	if err := b.faulted(ctx, "publishAll"); err != nil {
		return fill(len(facts), err)
	}
	return b.append(facts)
}

// append stamps and encodes each fact as the redisBroker does, so a fact
// Redis would not be given fails here too, and appends it.
func (b *fakeBroker) append(facts []envelope.Model) []error {
	errs := make([]error, len(facts))
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, f := range facts {
		envelope.Stamp(f, b.now().UTC())
		if _, err := envelope.ToFrame(f); err != nil {
			errs[i] = err
			continue
		}
		b.facts = append(b.facts, f)
	}
	return errs
}

// fill is n times err.
func fill(n int, err error) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// rememberAll sets each dedupe key unless it exists (SET NX).
func (b *fakeBroker) rememberAll(ctx context.Context, commandIDs, entryIDs []string) []error {
	if err := b.faulted(ctx, "rememberAll"); err != nil {
		return fill(len(commandIDs), err)
	}
	errs := make([]error, len(commandIDs))
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, id := range commandIDs {
		if _, ok := b.dedupe[id]; !ok {
			b.dedupe[id] = entryIDs[i]
		}
	}
	return errs
}

// state is what the broker holds, as fateState names it.
func (b *fakeBroker) state() fateState {
	b.mu.Lock()
	defer b.mu.Unlock()
	var s fateState
	for _, f := range b.facts {
		s.Facts = append(s.Facts, factName(f))
	}
	for _, d := range b.dlq {
		s.DLQ = append(s.DLQ, d.id+" "+d.reason)
	}
	for cmd, entry := range b.dedupe {
		s.Dedupe = append(s.Dedupe, cmd+"="+entry)
	}
	slices.Sort(s.Dedupe)
	for _, id := range b.pendingIDs() {
		p := b.pel[id]
		s.Pending = append(s.Pending, fmt.Sprintf("%s %s %d", id, p.consumer, p.deliveries))
	}
	return s
}

// fateState is what a broker holds after a loop has run: the facts
// published ("a:stored"), the dead letters ("1-1 http_status"), the dedupe
// keys ("a=1-1") and the pending list ("1-1 c 1": entry, consumer,
// deliveries), each in stream order but the dedupe keys, sorted.
type fateState struct {
	Facts, DLQ, Dedupe, Pending []string
}

// recorder is a broker that records the calls made to the broker it
// wraps, in the order they return, each with what it answered when that
// matters: "own 1-1 → owned", "publishAll a:stored", "ack 1-1 → failed".
// It leaves out createGroup, reads and claims that brought nothing and
// did not fail (the loop polling), and batches of nothing (publishAll or
// rememberAll of none, which send Redis nothing).
type recorder struct {
	broker

	mu    sync.Mutex
	calls []string
	// reading is closed while a read is under way.
	reading chan struct{}
}

func newRecorder(b broker) *recorder { return &recorder{broker: b, reading: make(chan struct{})} }

func (r *recorder) log(call string, failed bool) {
	if failed {
		call += " → failed"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call)
}

// record returns the calls recorded so far.
func (r *recorder) record() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// inRead tells whether a read is under way.
func (r *recorder) inRead() bool {
	select {
	case <-r.readStarted():
		return true
	default:
		return false
	}
}

// readStarted is closed once a read is under way: the one now, or the
// next.
func (r *recorder) readStarted() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reading
}

func (r *recorder) read(ctx context.Context, count int, block time.Duration) ([]entry, error) {
	r.mu.Lock()
	close(r.reading)
	r.mu.Unlock()
	entries, err := r.broker.read(ctx, count, block)
	r.mu.Lock()
	r.reading = make(chan struct{})
	r.mu.Unlock()
	if len(entries) > 0 || err != nil {
		r.log(join("read", entryIDs(entries)...), err != nil)
	}
	return entries, err
}

func (r *recorder) autoclaim(ctx context.Context, cursor string, count int) (string, []entry, []string, error) {
	next, entries, deleted, err := r.broker.autoclaim(ctx, cursor, count)
	if len(entries) > 0 || len(deleted) > 0 || err != nil {
		call := join("autoclaim", entryIDs(entries)...)
		if len(deleted) > 0 {
			call = join(call+" deleted", deleted...)
		}
		r.log(call, err != nil)
	}
	return next, entries, deleted, err
}

func (r *recorder) own(ctx context.Context, ids []string) ([]ownership, error) {
	states, err := r.broker.own(ctx, ids)
	call := join("own", ids...)
	if err == nil {
		names := map[ownership]string{owned: "owned", taken: "taken", trimmed: "trimmed"}
		answers := make([]string, len(states))
		for i, s := range states {
			answers[i] = names[s]
		}
		call = join(call+" →", answers...)
	}
	r.log(call, err != nil)
	return states, err
}

func (r *recorder) recall(ctx context.Context, ids []string) ([]entry, []string, error) {
	entries, trimmed, err := r.broker.recall(ctx, ids)
	r.log(join("recall", ids...), err != nil)
	return entries, trimmed, err
}

func (r *recorder) ack(ctx context.Context, ids ...string) error {
	err := r.broker.ack(ctx, ids...)
	r.log(join("ack", ids...), err != nil)
	return err
}

func (r *recorder) entry(ctx context.Context, id string) ([]field, bool, error) {
	fields, ok, err := r.broker.entry(ctx, id)
	call := "entry " + id
	switch {
	case err != nil:
	case ok:
		call += " → found"
	default:
		call += " → gone"
	}
	r.log(call, err != nil)
	return fields, ok, err
}

func (r *recorder) deadLetter(ctx context.Context, id string, fields []field, reason string) error {
	err := r.broker.deadLetter(ctx, id, fields, reason)
	r.log("deadLetter "+id+" "+reason, err != nil)
	return err
}

func (r *recorder) seen(ctx context.Context, commandIDs []string) ([]bool, []error) {
	seen, errs := r.broker.seen(ctx, commandIDs)
	answers := make([]string, len(seen))
	for i := range seen {
		answers[i] = map[bool]string{true: "yes", false: "no"}[seen[i]]
		if errs[i] != nil {
			answers[i] = "failed"
		}
	}
	r.log(join(join("seen", commandIDs...)+" →", answers...), false)
	return seen, errs
}

func (r *recorder) publish(ctx context.Context, fact envelope.Model) error {
	err := r.broker.publish(ctx, fact)
	r.log("publish "+factName(fact), err != nil)
	return err
}

func (r *recorder) publishAll(ctx context.Context, facts []envelope.Model) []error {
	errs := r.broker.publishAll(ctx, facts)
	if len(facts) == 0 {
		return errs
	}
	names := make([]string, len(facts))
	for i, f := range facts {
		names[i] = factName(f)
	}
	r.log(join("publishAll", names...), slices.ContainsFunc(errs, func(err error) bool { return err != nil }))
	return errs
}

func (r *recorder) rememberAll(ctx context.Context, commandIDs, entryIDs []string) []error {
	errs := r.broker.rememberAll(ctx, commandIDs, entryIDs)
	if len(commandIDs) == 0 {
		return errs
	}
	pairs := make([]string, len(commandIDs))
	for i := range commandIDs {
		pairs[i] = commandIDs[i] + "=" + entryIDs[i]
	}
	r.log(join("rememberAll", pairs...), slices.ContainsFunc(errs, func(err error) bool { return err != nil }))
	return errs
}

func join(call string, args ...string) string {
	return strings.Join(append([]string{call}, args...), " ")
}

func entryIDs(entries []entry) []string {
	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = e.ID
	}
	return ids
}
