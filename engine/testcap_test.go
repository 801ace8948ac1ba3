package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/replicator-go/replicator/envelope"
)

// The capability and the Scheduler the package's tests run a Loop with.

// tcmd is a test command: its command_id and its plan. Decoded from a
// frame's key and payload fields, the plan is the fate of each handling in
// turn, comma-separated, the last repeating: "stored", "park,stored". A
// plan naming a refusal (malformed_frame, foreign_payload,
// unsupported_schema_version) makes Decode refuse the frame. Handle
// returns the tcmd with the step it took as its plan.
type tcmd struct{ id, fate string }

// The steps of a plan, and the fate each ends in.
const (
	planStored       = "stored"       // Complete: a blob_available fact
	planNotModified  = "not_modified" // Complete: a fetch_failed fact, not_modified
	planNoFact       = "no_fact"      // Complete with nothing to announce
	planPermanent    = "permanent"    // Close: a fetch_failed fact, http_status
	planTransient    = "transient"    // Retry
	planUnclassified = "unclassified" // Unclassified
	planPanic        = "panic"        // the handler panics
	planWait         = "wait"         // the handler waits for its context to end, then transient
	planPark         = "park"         // the Scheduler requeues the command (parkSched)
)

// testCap is the test capability. hold, when set, runs inside Handle
// first. It counts the handlings and observations of each command_id.
type testCap struct {
	hold func(tcmd)

	mu       sync.Mutex
	n        map[string]int // handlings by command_id
	handled  []string       // command_ids, one per handling
	observed []string       // command_ids, one per Observe
}

func (c *testCap) Decode(f map[string]string) Decoded[tcmd] {
	id, plan := f["key"], f["payload"]
	d := Decoded[tcmd]{Command: tcmd{id: id, fate: plan}, CommandID: id,
		Attrs: []slog.Attr{slog.String("command_id", id)}}
	var err error
	switch plan {
	case envelope.DLQMalformedFrame:
		err = fmt.Errorf("%w: payload is not JSON", envelope.ErrMalformedFrame)
	case envelope.DLQForeignPayload:
		err = fmt.Errorf("%w: event_type blob_available", envelope.ErrForeignPayload)
	case string(envelope.ReasonUnsupportedSchemaVersion):
		err = fmt.Errorf("%w: schema_version=2", envelope.ErrUnsupportedVersion)
	}
	d.Refuse(err, true, func() envelope.Model { return testFact(id, envelope.ReasonUnsupportedSchemaVersion) })
	return d
}

func (c *testCap) Handle(ctx context.Context, cmd tcmd) tcmd {
	c.mu.Lock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[cmd.id]++
	n := c.n[cmd.id]
	c.handled = append(c.handled, cmd.id)
	c.mu.Unlock()
	if c.hold != nil {
		c.hold(cmd)
	}
	steps := strings.Split(cmd.fate, ",")
	step := steps[min(n, len(steps))-1]
	switch step {
	case planPanic:
		panic("a bug")
	case planWait:
		<-ctx.Done()
		step = planTransient
	}
	return tcmd{id: cmd.id, fate: step}
}

func (c *testCap) Fate(r tcmd) Fate {
	switch r.fate {
	case planStored:
		return Fate{Kind: Complete, Fact: storedFact(r.id), Outcome: "stored"}
	case planNoFact:
		return Fate{Kind: Complete, Outcome: "complete"}
	case planPermanent:
		return Fate{Kind: Close, Fact: testFact(r.id, envelope.ReasonHTTPStatus), Outcome: "permanent",
			Reason: string(envelope.ReasonHTTPStatus), Err: errors.New("410")}
	case planTransient, planPark:
		return Fate{Kind: Retry, Outcome: "transient", Reason: "timeout", Err: errors.New("timed out")}
	case planUnclassified:
		return Fate{Kind: Unclassified, Outcome: "unclassified", Err: errors.New("a bug")}
	default:
		return Fate{Kind: Complete, Fact: testFact(r.id, envelope.ReasonNotModified), Outcome: "not_modified"}
	}
}

func (c *testCap) HandlerError(cmd tcmd, _ int, _ string, _ time.Time) envelope.Model {
	return testFact(cmd.id, envelope.ReasonHandlerError)
}

func (c *testCap) Observe(h *task[tcmd], _ tcmd) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observed = append(c.observed, h.CommandID)
}

// handlings counts the handlings of a command_id so far.
func (c *testCap) handlings(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}

// counts returns the command_ids handled and observed so far, sorted.
func (c *testCap) counts() (handled, observed []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	handled, observed = slices.Clone(c.handled), slices.Clone(c.observed)
	slices.Sort(handled)
	slices.Sort(observed)
	return handled, observed
}

func testFact(id string, reason envelope.Reason) envelope.Model {
	return &envelope.FetchFailed{CommandID: id, URL: "http://t.test/" + id, InfoSourceID: "test", Reason: reason, Terminal: true}
}

func storedFact(id string) envelope.Model {
	return &envelope.BlobAvailable{ContentFingerprint: strings.Repeat("ab", 32), BlobURI: "file:///blobs/" + id,
		SizeBytes: 1, MediaType: "text/plain", URL: "http://t.test/" + id, CommandID: id, InfoSourceID: "test"}
}

// factName names a fact by its command_id and what it says:
// "a:stored", "a:http_status".
func factName(m envelope.Model) string {
	switch f := m.(type) {
	case *envelope.BlobAvailable:
		return f.CommandID + ":stored"
	case *envelope.FetchFailed:
		return f.CommandID + ":" + string(f.Reason)
	}
	return fmt.Sprintf("%T", m)
}

// parkSched is a FIFO that parks: a handling that ends in the park step is
// requeued, due parkFor later on the loop's clock, as the content.fetch
// Scheduler holds a command back until its host is due.
type parkSched struct {
	*FIFO[tcmd, tcmd]
	parkFor time.Duration
	parked  map[*task[tcmd]]time.Time // due times
}

func newParkSched(limit int, parkFor time.Duration) *parkSched {
	return &parkSched{FIFO: NewFIFO[tcmd, tcmd](limit), parkFor: parkFor, parked: map[*task[tcmd]]time.Time{}}
}

func (s *parkSched) Done(h *task[tcmd], r tcmd, requeue bool, now time.Time) bool {
	s.FIFO.Done(h, r, requeue, now)
	if r.fate != planPark || !requeue {
		return false
	}
	s.parked[h] = now.Add(s.parkFor)
	return true
}

func (s *parkSched) Start(now time.Time) []*task[tcmd] {
	var due []*task[tcmd]
	for h, at := range s.parked {
		if !now.Before(at) {
			delete(s.parked, h)
			s.FIFO.active++
			due = append(due, h)
		}
	}
	return append(due, s.FIFO.Start(now)...)
}

func (s *parkSched) Wake() time.Time {
	var first time.Time
	for _, at := range s.parked {
		if first.IsZero() || at.Before(first) {
			first = at
		}
	}
	return first
}

func (s *parkSched) Remove(h *task[tcmd]) bool {
	if _, ok := s.parked[h]; ok {
		delete(s.parked, h)
		return true
	}
	return s.FIFO.Remove(h)
}

func (s *parkSched) Drain() []*task[tcmd] {
	d := s.FIFO.Drain()
	for h := range s.parked {
		d = append(d, h)
	}
	clear(s.parked)
	return d
}

func (s *parkSched) Parked() int { return len(s.parked) }
