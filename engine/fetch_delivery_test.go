package engine_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/sink/memory"
)

// deliveries returns an entry's times-delivered, -1 when it is not pending.
func (e *wenv) deliveries(id string) int {
	row := e.pendingRow(id)
	if row == nil {
		return -1
	}
	n, _ := row[3].AsInt64()
	return int(n)
}

// TestTransientDoesNotCountTowardTheCeiling: three 500s, then a handler
// failure on every attempt, with MaxDeliveryAttempts 3. The failure must be
// seen three times before the command is dead-lettered (six requests in
// all), and the fact's attempts counts only those (docs/streams.md, Fates: transient
// failures never count toward the delivery ceiling).
func TestTransientDoesNotCountTowardTheCeiling(t *testing.T) {
	var n atomic.Int32
	e := newEnv(t, standalone(t, testenv.StartRedis(t)).client, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 3 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		okBody(w, r)
	}))
	wo := e.workerOptions()
	wo.Loop.MaxDeliveryAttempts = 3
	e.start(stackOptions{sink: panicSink{memory.New(memory.Options{})}}, wo)
	e.addModel(e.command("c-mixed", e.url("w.test", "/mixed")))
	e.waitDLQ(1, 30*time.Second)
	e.waitSettled(10 * time.Second)

	if got := e.origin.Count(); got != 6 {
		t.Errorf("origin saw %d requests, want 3 transient + 3 failed handlings = 6", got)
	}
	facts := e.factsNow()
	if len(facts) != 1 {
		t.Fatalf("facts = %v, want one handler_error", facts)
	}
	f, ok := facts[0].(*envelope.FetchFailed)
	if !ok || f.Reason != envelope.ReasonHandlerError || f.Attempts == nil || *f.Attempts != 3 {
		t.Errorf("fact = %+v, want handler_error with attempts 3", facts[0])
	}
}

// TestUnhandledDeliveriesDoNotCount: a command left pending because its
// host's backlog is full returns through every reclaim without being
// handled; with a ceiling of one failed handling, none of those deliveries
// may close it (docs/streams.md, Unclassified: the ceiling counts failed
// handlings, not deliveries).
func TestUnhandledDeliveriesDoNotCount(t *testing.T) {
	e := newEnv(t, standalone(t, testenv.StartRedis(t)).client, http.HandlerFunc(okBody))
	wo := e.workerOptions()
	wo.MaxHeldPerHost = 1
	wo.Loop.MaxDeliveryAttempts = 1
	e.start(stackOptions{floors: map[string]time.Duration{"paced.test": time.Hour}, maxWait: 50 * time.Millisecond}, wo)
	e.addModel(e.command("c-first", e.url("paced.test", "/1")))  // goes out at once
	e.addModel(e.command("c-second", e.url("paced.test", "/2"))) // parked for an hour, held
	third := e.addModel(e.command("c-third", e.url("paced.test", "/3")))
	// ClaimMinIdle is 200 ms: the third is reclaimed and left pending again
	// several times a second.
	testenv.Eventually(t, 10*time.Second, "the unhandled command to be delivered several times", func() bool {
		return e.deliveries(third) >= 3
	})
	if dl := e.dlqNow(); len(dl) != 0 {
		t.Errorf("dead letters = %v, want none: the command was never handled", dl)
	}
	if got := e.origin.Count(); got != 1 {
		t.Errorf("origin saw %d requests, want 1", got)
	}
}
