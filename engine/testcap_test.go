package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
)

// The capability.Handler the package's tests run a Loop with.

// tcmd is a test command, a Command's Value: its command_id and its plan.
// Decoded from a frame's key and payload fields, the plan is the step of
// each handling in turn, comma-separated, the last repeating: "stored",
// "park,stored". A plan naming a refusal (malformed_frame,
// foreign_payload, unsupported_schema_version) makes Decode refuse the
// frame.
type tcmd struct{ id, plan string }

// The steps of a plan, and the Outcome each ends in.
const (
	planStored       = "stored"       // Complete: a blob_available fact
	planNotModified  = "not_modified" // Complete: a fetch_failed fact, not_modified
	planNoFact       = "no_fact"      // Complete with nothing to announce
	planPermanent    = "permanent"    // Close: a fetch_failed fact, http_status
	planTransient    = "transient"    // Retry
	planUnclassified = "unclassified" // Unclassified
	planPanic        = "panic"        // the handler panics
	planWait         = "wait"         // the handler waits for its context to end, then Retry
	planPark         = "park"         // Park for parkFor, on the command's own key
)

// testCap is the test capability.Handler. Every command has the one key
// "" (one queue, as a capability without keys has). hold, when set, runs
// inside Handle first. It counts the handlings of each command_id.
type testCap struct {
	hold func(tcmd)

	mu      sync.Mutex
	n       map[string]int // handlings by command_id
	handled []string       // command_ids, one per handling
}

var _ capability.Handler = (*testCap)(nil)

// Decode reads a frame's key (command_id) and payload (plan). A refused
// frame still comes with its command, as a decoder that could read it
// would return it: the engine, not the Handler, decides whether a refusal
// is announced.
func (c *testCap) Decode(f map[string]string) (*capability.Command, error) {
	id, plan := f["key"], f["payload"]
	cmd := &capability.Command{ID: id, Attrs: []slog.Attr{slog.String("command_id", id)}, Value: tcmd{id: id, plan: plan}}
	switch plan {
	case envelope.DLQMalformedFrame:
		return cmd, fmt.Errorf("%w: payload is not JSON", envelope.ErrMalformedFrame)
	case envelope.DLQForeignPayload:
		return cmd, fmt.Errorf("%w: event_type blob_available", envelope.ErrForeignPayload)
	case string(envelope.ReasonUnsupportedSchemaVersion):
		return cmd, fmt.Errorf("%w: schema_version=2", envelope.ErrUnsupportedVersion)
	}
	return cmd, nil
}

// Handle takes the plan's next step and returns its Outcome.
func (c *testCap) Handle(ctx context.Context, cmd *capability.Command) capability.Outcome {
	tc := cmd.Value.(tcmd)
	c.mu.Lock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[tc.id]++
	n := c.n[tc.id]
	c.handled = append(c.handled, tc.id)
	c.mu.Unlock()
	if c.hold != nil {
		c.hold(tc)
	}
	steps := strings.Split(tc.plan, ",")
	step := steps[min(n, len(steps))-1]
	switch step {
	case planPanic:
		panic("a bug")
	case planWait:
		<-ctx.Done()
		step = planTransient
	}
	return stepOutcome(tc.id, step)
}

// stepOutcome is the Outcome of a handling of command id that took step.
func stepOutcome(id, step string) capability.Outcome {
	switch step {
	case planStored:
		return capability.Outcome{Fate: capability.Complete, Label: "stored", Fact: storedFact(id)}
	case planNoFact:
		return capability.Outcome{Fate: capability.Complete}
	case planPermanent:
		return capability.Outcome{Fate: capability.Close, Fact: testFact(id, envelope.ReasonHTTPStatus),
			Reason: string(envelope.ReasonHTTPStatus), Err: errors.New("410")}
	case planTransient:
		return capability.Outcome{Fate: capability.Retry, Reason: "timeout", Err: errors.New("timed out")}
	case planPark:
		return capability.Outcome{Fate: capability.Park, Reason: "politeness", Wait: parkFor,
			Err: errors.New("not due")}
	case planUnclassified:
		return capability.Outcome{Err: errors.New("a bug")}
	default:
		return capability.Outcome{Fate: capability.Complete, Label: "not_modified",
			Fact: testFact(id, envelope.ReasonNotModified)}
	}
}

// Failed is the fetch_failed fact of cmd for reason.
func (c *testCap) Failed(cmd *capability.Command, reason, _ string, _ int, _ time.Time) envelope.Model {
	return testFact(cmd.ID, envelope.Reason(reason))
}

// handlings counts the handlings of a command_id so far.
func (c *testCap) handlings(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}

// handledIDs returns the command_ids handled so far, one per handling,
// sorted.
func (c *testCap) handledIDs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	handled := slices.Clone(c.handled)
	slices.Sort(handled)
	return handled
}

// observedIn returns the command_id of every "handled command" line, the
// one line the engine writes per handling it gives a fate, in JSON logs,
// sorted.
func observedIn(logs string) []string {
	var ids []string
	for line := range strings.Lines(logs) {
		var rec struct {
			Msg       string `json:"msg"`
			CommandID string `json:"command_id"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "handled command" {
			ids = append(ids, rec.CommandID)
		}
	}
	slices.Sort(ids)
	return ids
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

// testOptions are a loop's options for the tests: testCap on the streams
// "cmds" (group "g", consumer "c"), "facts" and "dlq", dedupe keys "k:",
// logging to logs in JSON (nowhere when nil).
func testOptions(c capability.Handler, logs *testenv.LogBuffer) options {
	log := slog.New(slog.DiscardHandler)
	if logs != nil {
		log = slog.New(slog.NewJSONHandler(logs, nil))
	}
	return options{
		Config: Config{Logger: log},
		Capability: capability.Capability{Name: "test", Handler: c, Consumer: "c",
			Stream: "cmds", Group: "g", FactsStream: "facts", DLQStream: "dlq", DedupePrefix: "k:"},
	}
}

// newLoop is New with o's Config and Capability.
func newLoop(client rueidis.Client, o options) *Loop { return New(client, o.Config, o.Capability) }
