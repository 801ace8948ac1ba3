package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
)

// The table of fates (docs/streams.md, Fates): each case runs a Loop on
// commands whose handlings end as it says, and names the broker calls the
// loop makes, in order, what the broker holds afterwards, and the commands
// handled and given their one "handled command" line. TestFates
// runs it on the fake broker; TestRedisFates runs the same table on a
// redis-server, but for the cases only the fake can stage.

// testEntry is one command stream entry of a case: a frame with the key
// (command_id) and payload (plan) fields testCap decodes.
type testEntry struct {
	id, key, plan string
	// pending: delivered to this consumer this many times before the loop
	// starts, and idle past the claim's minimum idle time, so the reclaim
	// brings it back. Pending entries come first.
	pending int
	// trimmed: deleted from the stream before the loop starts.
	trimmed bool
	// bare: delivered without its fields (only the fake can).
	bare bool
	// takeDuring: claimed by consumer "other" while its first handling
	// runs, as a reclaim elsewhere after this worker paused would.
	takeDuring bool
	// trimDuring: deleted from the stream while its first handling runs.
	trimDuring bool
}

type fateCase struct {
	name    string
	entries []testEntry
	// seen are command_ids whose dedupe keys exist (set to 0-0) before the
	// loop starts.
	seen []string
	opts func(*options)
	// limit bounds the handlings at once, Capability.Concurrency (default
	// 16).
	limit int
	// stop: Run is cancelled while the first command is in the handler,
	// which is let go once the loop is stopping.
	stop bool
	// fail names fake broker methods that fail; failOnce, methods whose
	// first call fails.
	fail, failOnce []string
	// fakeOnly says why the case cannot run on Redis.
	fakeOnly string
	// trustOwnFor is the Loop's (zero: every fate checks ownership).
	trustOwnFor time.Duration

	calls []string
	state fateState
	// handled are the command_ids of the handlings, observed those of the
	// "handled command" lines, sorted.
	handled, observed []string
	logs              []string // each in the log
}

var fateCases = []fateCase{
	// Complete: the fact, then the dedupe key, then the ack.
	{
		name:    "stored",
		entries: []testEntry{{id: "1-1", key: "a", plan: planStored}},
		calls: []string{"read 1-1", "seen a → no", "own 1-1 → owned", "publishAll a:stored",
			"rememberAll a=1-1", "ack 1-1"},
		state:   fateState{Facts: []string{"a:stored"}, Dedupe: []string{"a=1-1"}},
		handled: []string{"a"}, observed: []string{"a"},
	},
	{
		name:    "not_modified",
		entries: []testEntry{{id: "1-1", key: "a", plan: planNotModified}},
		calls: []string{"read 1-1", "seen a → no", "own 1-1 → owned", "publishAll a:not_modified",
			"rememberAll a=1-1", "ack 1-1"},
		state:   fateState{Facts: []string{"a:not_modified"}, Dedupe: []string{"a=1-1"}},
		handled: []string{"a"}, observed: []string{"a"},
	},
	{
		name:    "complete with nothing to announce",
		entries: []testEntry{{id: "1-1", key: "a", plan: planNoFact}},
		calls:   []string{"read 1-1", "seen a → no", "own 1-1 → owned", "rememberAll a=1-1", "ack 1-1"},
		state:   fateState{Dedupe: []string{"a=1-1"}},
		handled: []string{"a"}, observed: []string{"a"},
	},
	{
		name:        "stored soon after its delivery: no ownership check",
		entries:     []testEntry{{id: "1-1", key: "a", plan: planStored}},
		trustOwnFor: 20 * time.Second,
		calls:       []string{"read 1-1", "seen a → no", "publishAll a:stored", "rememberAll a=1-1", "ack 1-1"},
		state:       fateState{Facts: []string{"a:stored"}, Dedupe: []string{"a=1-1"}},
		handled:     []string{"a"}, observed: []string{"a"},
	},
	{
		name:        "stored after a hold longer than the trust: checked",
		entries:     []testEntry{{id: "1-1", key: "a", plan: planPark + "," + planStored}},
		trustOwnFor: parkFor / 2,
		calls: []string{"read 1-1", "seen a → no", "own 1-1 → owned", "publishAll a:stored",
			"rememberAll a=1-1", "ack 1-1"},
		state:   fateState{Facts: []string{"a:stored"}, Dedupe: []string{"a=1-1"}},
		handled: []string{"a", "a"}, observed: []string{"a"},
	},
	// Close: the terminal fact, then the dead letter and its ack.
	{
		name:    "permanent",
		entries: []testEntry{{id: "1-1", key: "a", plan: planPermanent}},
		calls: []string{"read 1-1", "seen a → no", "own 1-1 → owned", "publish a:http_status",
			"deadLetter 1-1 http_status", "ack 1-1"},
		state:   fateState{Facts: []string{"a:http_status"}, DLQ: []string{"1-1 http_status"}},
		handled: []string{"a"}, observed: []string{"a"},
	},
	// Retry: nothing written.
	{
		name:    "transient",
		entries: []testEntry{{id: "1-1", key: "a", plan: planTransient}},
		calls:   []string{"read 1-1", "seen a → no"},
		state:   fateState{Pending: []string{"1-1 c 1"}},
		handled: []string{"a"}, observed: []string{"a"},
	},
	{
		name:    "transient after a reclaim",
		entries: []testEntry{{id: "1-1", key: "a", plan: planTransient, pending: 3}},
		calls:   []string{"autoclaim 1-1", "seen a → no"},
		state:   fateState{Pending: []string{"1-1 c 4"}},
		handled: []string{"a"}, observed: []string{"a"},
	},
	// Unclassified: pending until the delivery ceiling, then the
	// handler_error fact and the dead letter. The ceiling counts failed
	// handlings (ceiling.go), not Redis's deliveries.
	{
		name:    "unclassified below the delivery ceiling",
		entries: []testEntry{{id: "1-1", key: "a", plan: planUnclassified}},
		calls:   []string{"read 1-1", "seen a → no"},
		state:   fateState{Pending: []string{"1-1 c 1"}},
		handled: []string{"a"}, observed: []string{"a"},
		logs: []string{"unclassified failure; leaving the command pending for redelivery"},
	},
	{
		name:    "unclassified, delivered often but failed once",
		entries: []testEntry{{id: "1-1", key: "a", plan: planUnclassified, pending: 4}},
		calls:   []string{"autoclaim 1-1", "seen a → no"},
		state:   fateState{Pending: []string{"1-1 c 5"}},
		handled: []string{"a"}, observed: []string{"a"},
		logs: []string{`"attempts":1`},
	},
	{
		name:    "unclassified at the delivery ceiling",
		entries: []testEntry{{id: "1-1", key: "a", plan: planUnclassified, pending: 4}},
		opts:    func(o *options) { o.MaxDeliveryAttempts = 1 },
		calls: []string{"autoclaim 1-1", "seen a → no", "own 1-1 → owned",
			"publish a:handler_error", "deadLetter 1-1 handler_error", "ack 1-1"},
		state:   fateState{Facts: []string{"a:handler_error"}, DLQ: []string{"1-1 handler_error"}},
		handled: []string{"a"}, observed: []string{"a"},
	},
	{
		name:    "handler panic at the delivery ceiling",
		entries: []testEntry{{id: "1-1", key: "a", plan: planPanic}},
		opts:    func(o *options) { o.MaxDeliveryAttempts = 1 },
		calls: []string{"read 1-1", "seen a → no", "own 1-1 → owned",
			"publish a:handler_error", "deadLetter 1-1 handler_error", "ack 1-1"},
		state:   fateState{Facts: []string{"a:handler_error"}, DLQ: []string{"1-1 handler_error"}},
		handled: []string{"a"}, observed: []string{"a"},
		logs: []string{"handler panic: a bug"},
	},
	// Triage, before any handling.
	{
		name:    "duplicate",
		entries: []testEntry{{id: "1-1", key: "a", plan: planStored}},
		seen:    []string{"a"},
		calls:   []string{"read 1-1", "seen a → yes", "ack 1-1"},
		state:   fateState{Dedupe: []string{"a=0-0"}},
		logs:    []string{"skipped an already-handled command"},
	},
	{
		name:    "refused: malformed_frame",
		entries: []testEntry{{id: "1-1", key: "a", plan: envelope.DLQMalformedFrame}},
		calls:   []string{"read 1-1", "deadLetter 1-1 malformed_frame", "ack 1-1"},
		state:   fateState{DLQ: []string{"1-1 malformed_frame"}},
	},
	{
		name:    "refused: foreign_payload",
		entries: []testEntry{{id: "1-1", key: "a", plan: envelope.DLQForeignPayload}},
		calls:   []string{"read 1-1", "deadLetter 1-1 foreign_payload", "ack 1-1"},
		state:   fateState{DLQ: []string{"1-1 foreign_payload"}},
	},
	{
		name:    "refused: unsupported_schema_version, announced",
		entries: []testEntry{{id: "1-1", key: "a", plan: string(envelope.ReasonUnsupportedSchemaVersion)}},
		calls: []string{"read 1-1", "publish a:unsupported_schema_version",
			"deadLetter 1-1 unsupported_schema_version", "ack 1-1"},
		state: fateState{Facts: []string{"a:unsupported_schema_version"}, DLQ: []string{"1-1 unsupported_schema_version"}},
	},
	{
		name:    "refused: unsupported_schema_version without a command_id, not announced",
		entries: []testEntry{{id: "1-1", key: " ", plan: string(envelope.ReasonUnsupportedSchemaVersion)}},
		calls:   []string{"read 1-1", "deadLetter 1-1 unsupported_schema_version", "ack 1-1"},
		state:   fateState{DLQ: []string{"1-1 unsupported_schema_version"}},
		logs:    []string{"cannot announce this failure: the command carries no command_id"},
	},
	{
		name:    "refused: blank command_id",
		entries: []testEntry{{id: "1-1", key: " ", plan: planStored}},
		calls:   []string{"read 1-1", "deadLetter 1-1 blank_command_id", "ack 1-1"},
		state:   fateState{DLQ: []string{"1-1 blank_command_id"}},
	},
	{
		name:     "refused: delivered without fields",
		entries:  []testEntry{{id: "1-1", key: "a", plan: planStored, bare: true}},
		fakeOnly: "Redis 7 always delivers an entry's fields",
		calls:    []string{"read 1-1", "entry 1-1 → found", "deadLetter 1-1 malformed_frame", "ack 1-1"},
		state:    fateState{DLQ: []string{"1-1 malformed_frame"}},
	},
	{
		name: "triage in stream order",
		entries: []testEntry{
			{id: "1-1", key: "x", plan: envelope.DLQMalformedFrame},
			{id: "1-2", key: "b", plan: planStored},
			{id: "1-3", key: "c", plan: planStored},
		},
		seen: []string{"b"},
		calls: []string{"read 1-1 1-2 1-3", "deadLetter 1-1 malformed_frame", "ack 1-1", "seen b c → yes no",
			"ack 1-2", "own 1-3 → owned", "publishAll c:stored", "rememberAll c=1-3", "ack 1-3"},
		state: fateState{Facts: []string{"c:stored"}, DLQ: []string{"1-1 malformed_frame"},
			Dedupe: []string{"b=0-0", "c=1-3"}},
		handled: []string{"c"}, observed: []string{"c"},
	},
	// Held back by the loop or its scheduler.
	{
		name: "deferred: the same command_id is already held",
		entries: []testEntry{
			{id: "1-1", key: "a", plan: planStored},
			{id: "1-2", key: "a", plan: planStored},
		},
		calls: []string{"read 1-1 1-2", "seen a a → no no", "own 1-1 → owned",
			"publishAll a:stored", "rememberAll a=1-1", "ack 1-1"},
		state:   fateState{Facts: []string{"a:stored"}, Dedupe: []string{"a=1-1"}, Pending: []string{"1-2 c 1"}},
		handled: []string{"a"}, observed: []string{"a"},
	},
	{
		name:    "parked, then stored",
		entries: []testEntry{{id: "1-1", key: "a", plan: planPark + "," + planStored}},
		calls: []string{"read 1-1", "seen a → no", "own 1-1 → owned", "publishAll a:stored",
			"rememberAll a=1-1", "ack 1-1"},
		state:   fateState{Facts: []string{"a:stored"}, Dedupe: []string{"a=1-1"}},
		handled: []string{"a", "a"}, observed: []string{"a"},
	},
	// Trimmed from the stream while pending.
	{
		name:    "trimmed while pending",
		entries: []testEntry{{id: "1-1", key: "a", plan: planStored, pending: 1, trimmed: true}},
		calls:   []string{"autoclaim deleted 1-1", "ack 1-1"},
		logs:    []string{"pending entry was trimmed from the stream; acking it away"},
	},
	{
		name:    "trimmed while handled: still this consumer's to close",
		entries: []testEntry{{id: "1-1", key: "a", plan: planStored, trimDuring: true}},
		calls: []string{"read 1-1", "seen a → no", "own 1-1 → trimmed", "publishAll a:stored",
			"rememberAll a=1-1", "ack 1-1"},
		state:   fateState{Facts: []string{"a:stored"}, Dedupe: []string{"a=1-1"}},
		handled: []string{"a"}, observed: []string{"a"},
	},
	// Taken by another consumer while handled: its fate is the owner's.
	{
		name:    "taken elsewhere: stored",
		entries: []testEntry{{id: "1-1", key: "a", plan: planStored, takeDuring: true}},
		calls:   []string{"read 1-1", "seen a → no", "own 1-1 → taken"},
		state:   fateState{Pending: []string{"1-1 other 2"}},
		handled: []string{"a"}, observed: []string{"a"},
		logs: []string{"no longer owns a handled command; its fate is left to its owner"},
	},
	{
		name:    "taken elsewhere: permanent",
		entries: []testEntry{{id: "1-1", key: "a", plan: planPermanent, takeDuring: true}},
		calls:   []string{"read 1-1", "seen a → no", "own 1-1 → taken"},
		state:   fateState{Pending: []string{"1-1 other 2"}},
		handled: []string{"a"}, observed: []string{"a"},
		logs: []string{"no longer owns a handled command; its fate is left to its owner"},
	},
	{
		name:    "taken elsewhere: unclassified",
		entries: []testEntry{{id: "1-1", key: "a", plan: planUnclassified, takeDuring: true}},
		calls:   []string{"read 1-1", "seen a → no"},
		state:   fateState{Pending: []string{"1-1 other 2"}},
		handled: []string{"a"}, observed: []string{"a"},
		logs: []string{"unclassified failure; leaving the command pending for redelivery"},
	},
	{
		name:    "taken elsewhere: transient",
		entries: []testEntry{{id: "1-1", key: "a", plan: planTransient, takeDuring: true}},
		calls:   []string{"read 1-1", "seen a → no"},
		state:   fateState{Pending: []string{"1-1 other 2"}},
		handled: []string{"a"}, observed: []string{"a"},
	},
	// Shutting down.
	{
		name: "drain: waiting commands stay pending, the handled one finishes",
		entries: []testEntry{
			{id: "1-1", key: "a", plan: planStored},
			{id: "1-2", key: "b", plan: planStored},
		},
		limit: 1,
		// Room to read on while 1-2 waits (the default is two per
		// handling): each handling waits for the next read to begin.
		opts: func(o *options) { o.MaxHeld = 3 },
		stop: true,
		calls: []string{"read 1-1 1-2", "seen a b → no no", "own 1-1 → owned", "publishAll a:stored",
			"rememberAll a=1-1", "ack 1-1"},
		state:   fateState{Facts: []string{"a:stored"}, Dedupe: []string{"a=1-1"}, Pending: []string{"1-2 c 1"}},
		handled: []string{"a"}, observed: []string{"a"},
		logs: []string{`"left_pending":1`},
	},
	{
		name:    "drain timeout: the handling is cancelled and stays pending",
		entries: []testEntry{{id: "1-1", key: "a", plan: planWait}},
		opts:    func(o *options) { o.DrainTimeout = time.Millisecond },
		stop:    true,
		calls:   []string{"read 1-1", "seen a → no"},
		state:   fateState{Pending: []string{"1-1 c 1"}},
		handled: []string{"a"}, observed: []string{"a"},
		logs: []string{"handlings outlived the drain timeout"},
	},
	{
		name:    "drain: a handling that parks is not requeued",
		entries: []testEntry{{id: "1-1", key: "a", plan: planPark + "," + planStored}},
		stop:    true,
		calls:   []string{"read 1-1", "seen a → no"},
		state:   fateState{Pending: []string{"1-1 c 1"}},
		handled: []string{"a"}, observed: []string{"a"},
	},
	// A failed write stops the fate there; the handler writes it again
	// after a back-off (settle), each step once, and the command is not
	// handled again.
	{
		name:     "dedupe check fails",
		entries:  []testEntry{{id: "1-1", key: "a", plan: planStored}},
		fail:     []string{"seen"},
		fakeOnly: "it injects a failure",
		calls:    []string{"read 1-1", "seen a → failed"},
		state:    fateState{Pending: []string{"1-1 c 1"}},
	},
	{
		name:     "ownership check fails",
		entries:  []testEntry{{id: "1-1", key: "a", plan: planStored}},
		failOnce: []string{"own"},
		fakeOnly: "it injects a failure",
		calls: []string{"read 1-1", "seen a → no", "own 1-1 → failed", "own 1-1 → owned", "publishAll a:stored",
			"rememberAll a=1-1", "ack 1-1"},
		state:   fateState{Facts: []string{"a:stored"}, Dedupe: []string{"a=1-1"}},
		handled: []string{"a"}, observed: []string{"a"},
		logs: []string{"could not write a command's fate; writing it again after a back-off"},
	},
	{
		name:     "stored, the fact not written",
		entries:  []testEntry{{id: "1-1", key: "a", plan: planStored}},
		failOnce: []string{"publishAll"},
		fakeOnly: "it injects a failure",
		calls: []string{"read 1-1", "seen a → no", "own 1-1 → owned", "publishAll a:stored → failed",
			"own 1-1 → owned", "publishAll a:stored", "rememberAll a=1-1", "ack 1-1"},
		state:   fateState{Facts: []string{"a:stored"}, Dedupe: []string{"a=1-1"}},
		handled: []string{"a"}, observed: []string{"a"},
	},
	{
		name:     "stored, the dedupe key not set",
		entries:  []testEntry{{id: "1-1", key: "a", plan: planStored}},
		failOnce: []string{"rememberAll"},
		fakeOnly: "it injects a failure",
		calls: []string{"read 1-1", "seen a → no", "own 1-1 → owned", "publishAll a:stored",
			"rememberAll a=1-1 → failed", "own 1-1 → owned", "rememberAll a=1-1", "ack 1-1"},
		state:   fateState{Facts: []string{"a:stored"}, Dedupe: []string{"a=1-1"}},
		handled: []string{"a"}, observed: []string{"a"},
	},
	{
		name:     "stored, the ack not written",
		entries:  []testEntry{{id: "1-1", key: "a", plan: planStored}},
		failOnce: []string{"ack"},
		fakeOnly: "it injects a failure",
		calls: []string{"read 1-1", "seen a → no", "own 1-1 → owned", "publishAll a:stored",
			"rememberAll a=1-1", "ack 1-1 → failed", "own 1-1 → owned", "ack 1-1"},
		state:   fateState{Facts: []string{"a:stored"}, Dedupe: []string{"a=1-1"}},
		handled: []string{"a"}, observed: []string{"a"},
	},
	{
		name:     "permanent, the fact not written: dead-lettered anyway",
		entries:  []testEntry{{id: "1-1", key: "a", plan: planPermanent}},
		fail:     []string{"publish"},
		fakeOnly: "it injects a failure",
		calls: []string{"read 1-1", "seen a → no", "own 1-1 → owned", "publish a:http_status → failed",
			"deadLetter 1-1 http_status", "ack 1-1"},
		state:   fateState{DLQ: []string{"1-1 http_status"}},
		handled: []string{"a"}, observed: []string{"a"},
		logs: []string{"could not publish the failure fact; dead-lettering anyway"},
	},
	{
		name:     "permanent, the dead letter not written",
		entries:  []testEntry{{id: "1-1", key: "a", plan: planPermanent}},
		failOnce: []string{"deadLetter"},
		fakeOnly: "it injects a failure",
		calls: []string{"read 1-1", "seen a → no", "own 1-1 → owned", "publish a:http_status",
			"deadLetter 1-1 http_status → failed", "own 1-1 → owned", "deadLetter 1-1 http_status", "ack 1-1"},
		state:   fateState{Facts: []string{"a:http_status"}, DLQ: []string{"1-1 http_status"}},
		handled: []string{"a"}, observed: []string{"a"},
	},
	{
		name:     "unclassified at the ceiling, the dead letter not written",
		entries:  []testEntry{{id: "1-1", key: "a", plan: planUnclassified}},
		opts:     func(o *options) { o.MaxDeliveryAttempts = 1 },
		failOnce: []string{"deadLetter"},
		fakeOnly: "it injects a failure",
		calls: []string{"read 1-1", "seen a → no", "own 1-1 → owned", "publish a:handler_error",
			"deadLetter 1-1 handler_error → failed", "own 1-1 → owned", "deadLetter 1-1 handler_error", "ack 1-1"},
		state:   fateState{Facts: []string{"a:handler_error"}, DLQ: []string{"1-1 handler_error"}},
		handled: []string{"a"}, observed: []string{"a"},
	},
}

// fateEnv is a broker a case runs on, with the means to stage the case and
// to read what the broker holds afterwards. The Loop's keys are the
// stream "cmds" (group "g", consumer "c"), "facts", "dlq" and "k:".
type fateEnv interface {
	// broker is the broker under test for l.
	broker(l *Loop) broker
	// client is the Redis client the Loop is built on, if any.
	client() rueidis.Client
	add(e testEntry)
	// pend delivers id to consumer c n times, and makes it idle.
	pend(id string, n int)
	trim(id string)
	remember(commandID string)
	// take claims id for consumer "other".
	take(id string)
	fail(method string)
	failOnce(method string)
	state() fateState
}

var fateT0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// parkFor is how long a parked command waits, on the loop's clock.
const parkFor = time.Millisecond

// TestFates runs the table of fates on the fake broker: no redis-server
// needed.
func TestFates(t *testing.T) {
	for _, tc := range fateCases {
		t.Run(tc.name, func(t *testing.T) {
			clk := &fakeClock{t: fateT0}
			runFateCase(t, tc, &fakeEnv{fb: newFakeBroker("c", clk.now)}, clk)
		})
	}
}

// TestRedisFates runs the table of fates on a redis-server, but for the
// cases only the fake can stage (fakeOnly).
func TestRedisFates(t *testing.T) {
	r := testenv.StartRedis(t)
	client := dial(t, r.Addr)
	for _, tc := range fateCases {
		if tc.fakeOnly != "" {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			runFateCase(t, tc, newRedisEnv(t, client), &fakeClock{t: fateT0})
		})
	}
}

func runFateCase(t *testing.T, tc fateCase, env fateEnv, clk *fakeClock) {
	t.Helper()
	byCommand := map[string]testEntry{}
	for i, e := range tc.entries {
		if e.pending > 0 && i > 0 && tc.entries[i-1].pending == 0 {
			t.Fatalf("pending entry %s follows a new one", e.id)
		}
		if _, ok := byCommand[e.key]; !ok {
			byCommand[e.key] = e
		}
	}
	for _, id := range tc.seen {
		env.remember(id)
	}
	for _, e := range tc.entries {
		env.add(e)
		if e.pending > 0 {
			env.pend(e.id, e.pending)
		}
		if e.trimmed {
			env.trim(e.id)
		}
	}
	for _, m := range tc.fail {
		env.fail(m)
	}
	for _, m := range tc.failOnce {
		env.failOnce(m)
	}

	logs := &testenv.LogBuffer{}
	c := &testCap{}
	o := testOptions(c, logs)
	o.Concurrency = cmp.Or(tc.limit, 16)
	if tc.opts != nil {
		tc.opts(&o)
	}
	l := newLoop(env.client(), o)
	rec := newRecorder(env.broker(l))
	l.b, l.clock = rec, clock{now: clk.now, sleep: clk.sleep}
	// Check ownership at every fate, as after a long hold, unless the case
	// says otherwise: the table is about what the check decides.
	l.trustOwnFor = tc.trustOwnFor

	entered := make(chan struct{}, 16)
	release := make(chan struct{})
	c.hold = func(cmd tcmd) {
		// Let the loop finish triaging the batch that brought this
		// command (it reads next), so the calls come in one order.
		select {
		case <-rec.readStarted():
		case <-time.After(10 * time.Second):
		}
		if c.handlings(cmd.id) == 1 {
			e := byCommand[cmd.id]
			if e.takeDuring {
				env.take(e.id)
			}
			if e.trimDuring {
				env.trim(e.id)
			}
		}
		entered <- struct{}{}
		if tc.stop {
			<-release
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	released := false
	defer func() {
		cancel()
		if !released {
			close(release)
		}
	}()

	if tc.stop {
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatal("no command reached the handler")
		}
		cancel()
		testenv.Eventually(t, 10*time.Second, "the loop to stop", func() bool {
			r := l.cur.Load()
			if r == nil {
				return true
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			return r.stopping
		})
		close(release)
		released = true
	} else {
		// Wait for the calls named (or give up and show the difference),
		// then for the loop to be idle, so any call past them shows too.
		// A parked command is due once the loop's clock moves on.
		deadline := time.Now().Add(10 * time.Second)
		for !slices.Equal(rec.record(), tc.calls) && time.Now().Before(deadline) {
			if _, parked := l.counts(); parked > 0 {
				clk.advance(parkFor)
			}
			time.Sleep(time.Millisecond)
		}
		testenv.Eventually(t, 10*time.Second, "the loop to be idle", func() bool {
			held, _ := l.counts()
			return held == 0 && rec.inRead()
		})
		cancel()
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10 s of being stopped")
	}

	if diff := gocmp.Diff(tc.calls, rec.record(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("broker calls (-want +got):\n%s", diff)
	}
	if diff := gocmp.Diff(tc.state, env.state(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("broker state (-want +got):\n%s", diff)
	}
	if diff := gocmp.Diff(tc.handled, c.handledIDs(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("handled (-want +got):\n%s", diff)
	}
	if diff := gocmp.Diff(tc.observed, observedIn(logs.String()), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("\"handled command\" lines (-want +got):\n%s", diff)
	}
	for _, want := range tc.logs {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no log line with %q in:\n%s", want, logs)
		}
	}
}

// fakeEnv stages cases on a fakeBroker.
type fakeEnv struct{ fb *fakeBroker }

func (e *fakeEnv) broker(*Loop) broker    { return e.fb }
func (e *fakeEnv) client() rueidis.Client { return nil }
func (e *fakeEnv) add(x testEntry) {
	e.fb.add(x.id, x.bare, field{Name: "key", Value: x.key}, field{Name: "payload", Value: x.plan})
}
func (e *fakeEnv) pend(id string, n int)     { e.fb.pend(id, "c", n) }
func (e *fakeEnv) trim(id string)            { e.fb.remove(id) }
func (e *fakeEnv) remember(commandID string) { e.fb.setDedupe(commandID, "0-0") }
func (e *fakeEnv) take(id string)            { e.fb.take(id, "other") }
func (e *fakeEnv) fail(method string)        { e.fb.fail(method) }
func (e *fakeEnv) failOnce(method string)    { e.fb.failOnce(method) }
func (e *fakeEnv) state() fateState          { return e.fb.state() }

// redisEnv stages cases on a redis-server, emptied for each.
type redisEnv struct {
	t *testing.T
	c rueidis.Client
}

func newRedisEnv(t *testing.T, c rueidis.Client) *redisEnv {
	e := &redisEnv{t: t, c: c}
	e.do("FLUSHALL")
	e.do("XGROUP", "CREATE", "cmds", "g", "0", "MKSTREAM")
	return e
}

// do sends one command; a failure fails the test.
func (e *redisEnv) do(args ...string) rueidis.RedisResult {
	res := e.c.Do(context.Background(), e.c.B().Arbitrary(args...).Build())
	if err := res.Error(); err != nil && !rueidis.IsRedisNil(err) {
		e.t.Errorf("%s: %v", strings.Join(args, " "), err)
	}
	return res
}

func (e *redisEnv) broker(l *Loop) broker  { return l.b }
func (e *redisEnv) client() rueidis.Client { return e.c }
func (e *redisEnv) add(x testEntry) {
	if x.bare {
		e.t.Fatalf("entry %s: Redis cannot deliver an entry without its fields", x.id)
	}
	e.do("XADD", "cmds", x.id, "key", x.key, "payload", x.plan)
}

func (e *redisEnv) pend(id string, n int) {
	e.do("XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "cmds", ">")
	e.do("XCLAIM", "cmds", "g", "c", "0", id, "IDLE", strconv.Itoa(int(time.Hour.Milliseconds())),
		"RETRYCOUNT", strconv.Itoa(n), "JUSTID")
}

func (e *redisEnv) trim(id string)            { e.do("XDEL", "cmds", id) }
func (e *redisEnv) remember(commandID string) { e.do("SET", "k:"+commandID, "0-0") }
func (e *redisEnv) take(id string)            { e.do("XCLAIM", "cmds", "g", "other", "0", id) }
func (e *redisEnv) fail(method string)        { e.t.Fatalf("cannot make Redis fail %s", method) }
func (e *redisEnv) failOnce(method string)    { e.fail(method) }

func (e *redisEnv) state() fateState {
	var s fateState
	facts, _ := e.do("XRANGE", "facts", "-", "+").AsXRangeSlices()
	for _, f := range facts {
		fields := map[string]string{}
		for _, fv := range f.FieldValues {
			fields[fv.Field] = fv.Value
		}
		m, err := envelope.FromWire(fields)
		if err != nil {
			e.t.Errorf("fact %s: %v", f.ID, err)
			continue
		}
		s.Facts = append(s.Facts, factName(m))
	}
	letters, _ := e.do("XRANGE", "dlq", "-", "+").AsXRangeSlices()
	for _, d := range letters {
		fields := map[string]string{}
		for _, fv := range d.FieldValues {
			fields[fv.Field] = fv.Value
		}
		s.DLQ = append(s.DLQ, fields[envelope.FieldDLQOriginalID]+" "+fields[envelope.FieldDLQReason])
	}
	keys, _ := e.do("KEYS", "k:*").AsStrSlice()
	for _, k := range keys {
		v, _ := e.do("GET", k).ToString()
		s.Dedupe = append(s.Dedupe, strings.TrimPrefix(k, "k:")+"="+v)
	}
	slices.Sort(s.Dedupe)
	pending, _ := e.do("XPENDING", "cmds", "g", "-", "+", "100").ToArray()
	for _, p := range pending {
		f, _ := p.ToArray()
		id, _ := f[0].ToString()
		consumer, _ := f[1].ToString()
		n, _ := f[3].AsInt64()
		s.Pending = append(s.Pending, fmt.Sprintf("%s %s %d", id, consumer, n))
	}
	return s
}
