package engine_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
)

// Completed commands have their fates written in batches (docs/streams.md, Fates: the order
// per command: fact, dedupe key, ack). These tests make one step fail for
// every command of a busy worker and check that no later step was taken
// for any of them, then that the commands complete once the step works.

// startLoaded queues n commands spread over 20 hosts and starts a worker
// with 16 requests in flight that does not give up on a failing broker.
func (e *wenv) startLoaded(n int) []*envelope.ContentFetch {
	cmds := make([]*envelope.ContentFetch, n)
	for i := range cmds {
		cmds[i] = e.command(fmt.Sprintf("c%03d", i), e.url(fmt.Sprintf("h%d.test", i%20), fmt.Sprintf("/%d", i)))
	}
	e.addMany(cmds)
	wo := e.workerOptions()
	wo.Loop.MaxConsecutiveFailures = 1000
	e.start(stackOptions{slots: 16}, wo)
	return cmds
}

// storedOnce checks every command ended with blob_available, and returns
// how many facts beyond one per command were published.
func (e *wenv) storedOnce(cmds []*envelope.ContentFetch) (repeats int) {
	e.t.Helper()
	seen := map[string]int{}
	for _, f := range e.factsNow() {
		ba, ok := f.(*envelope.BlobAvailable)
		if !ok {
			e.t.Fatalf("unexpected fact %#v", f)
		}
		seen[ba.CommandID]++
	}
	for _, c := range cmds {
		switch n := seen[c.CommandID]; {
		case n == 0:
			e.t.Errorf("%s: no blob_available", c.CommandID)
		case !e.deduped(c.CommandID):
			e.t.Errorf("%s: no dedupe key", c.CommandID)
		default:
			repeats += n - 1
		}
	}
	return repeats
}

// fateFailures counts the commands whose fate write op failed.
func (e *wenv) fateFailures(op string) int {
	seen := map[string]bool{}
	for line := range strings.Lines(e.logs.String()) {
		var rec struct {
			Msg       string `json:"msg"`
			CommandID string `json:"command_id"`
			Op        string `json:"op"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Op == op &&
			strings.HasPrefix(rec.Msg, "could not write a command's fate") {
			seen[rec.CommandID] = true
		}
	}
	return len(seen)
}

func TestWorkerFactFailureTakesNoLaterStep(t *testing.T) {
	for _, be := range bothBackends(t) {
		t.Run(be.name, func(t *testing.T) {
			e := newEnv(t, be.client, http.HandlerFunc(okBody))
			// A string where the facts stream should be: every XADD fails.
			e.do(e.client.B().Set().Key(e.facts).Value("not a stream").Build())
			const n = 60
			cmds := e.startLoaded(n)
			testenv.Eventually(t, 20*time.Second, "every command fetched and its fact refused", func() bool {
				return e.origin.Count() >= n && strings.Count(e.logs.String(), `"op":"publish"`) >= n
			})
			for _, c := range cmds {
				if e.deduped(c.CommandID) {
					t.Fatalf("%s: dedupe key set although its fact was not written", c.CommandID)
				}
			}
			if got := e.pending(); got != n {
				t.Fatalf("pending = %d, want %d: a command was acked without its fact", got, n)
			}
			e.do(e.client.B().Del().Key(e.facts).Build())
			e.waitSettled(20 * time.Second)
			if r := e.storedOnce(cmds); r != 0 {
				t.Errorf("%d repeated facts; none was written before the facts stream worked", r)
			}
		})
	}
}

func TestWorkerDedupeFailureLeavesCommandPending(t *testing.T) {
	r := testenv.StartRedis(t)
	admin := newClient(t, []string{r.Addr})
	// A user that may do everything but SET: facts are written, dedupe
	// keys are not.
	setUser := func(rules ...string) {
		t.Helper()
		cmd := admin.B().Arbitrary("ACL", "SETUSER", "limited").Args(rules...).Build()
		if err := admin.Do(t.Context(), cmd).Error(); err != nil {
			t.Fatalf("ACL SETUSER: %v", err)
		}
	}
	setUser("on", ">pw", "~*", "&*", "+@all", "-set")
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr}, Username: "limited", Password: "pw", DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)

	e := newEnv(t, client, http.HandlerFunc(okBody))
	const n = 60
	cmds := e.startLoaded(n)
	// A command's write is tried again after a back-off, so lines are
	// counted once per command.
	testenv.Eventually(t, 20*time.Second, "every command's dedupe key refused", func() bool {
		return e.fateFailures("dedupe") >= n
	})
	if got := e.pending(); got != n {
		t.Fatalf("pending = %d, want %d: a command was acked without its dedupe key", got, n)
	}
	if got := len(e.factsNow()); got < n {
		t.Fatalf("%d facts, want at least %d: the fact comes before the dedupe key", got, n)
	}
	setUser("+set")
	e.waitSettled(20 * time.Second)
	// Facts repeat for commands retried before SET worked: the contract
	// repeats a fact rather than lose one.
	e.storedOnce(cmds)
}
