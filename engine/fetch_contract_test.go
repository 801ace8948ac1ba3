package engine_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/engine"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/memory"
)

// These tests pin rules of the consume path (docs/streams.md) that the flow and
// taxonomy tests leave unasserted: the storage ceiling's place in the
// order of refusals, the fates of a permanent failure whose fact cannot be
// written and of an unclassified one whose delivery count cannot be read,
// the dedupe key's TTL and what it is keyed on, non-finite timeouts on the
// wire, and the order of the writes that close a failed command.

// specFullSink is a sink over its storage ceiling for as long as full is set.
type specFullSink struct {
	sink.Sink
	full *atomic.Bool
}

func (s specFullSink) Room(int64) error {
	if s.full.Load() {
		return fmt.Errorf("spec: %w: over the ceiling", sink.ErrNoRoom)
	}
	return nil
}

var _ sink.Room = specFullSink{}

// specOutcomes lists the outcome of every "handled command" log line about
// commandID, in order.
func (e *wenv) specOutcomes(commandID string) []string {
	e.t.Helper()
	var out []string
	for line := range strings.Lines(e.logs.String()) {
		var rec struct {
			Msg       string `json:"msg"`
			CommandID string `json:"command_id"`
			Outcome   string `json:"outcome"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		if rec.Msg == "handled command" && rec.CommandID == commandID {
			out = append(out, rec.Outcome)
		}
	}
	return out
}

// specAddEdited appends cmd encoded by the envelope codec after edit has
// altered its wire fields.
func (e *wenv) specAddEdited(cmd *envelope.ContentFetch, edit func(map[string]string)) string {
	e.t.Helper()
	fields, err := envelope.ToWire(cmd)
	if err != nil {
		e.t.Fatalf("ToWire: %v", err)
	}
	edit(fields)
	var kv []string
	for k, v := range fields {
		kv = append(kv, k, v)
	}
	return e.add(kv...)
}

// TestWorkerSpecStorageCeiling: a sink over its ceiling parks a command
// before anything reaches the origin: no fact, the entry stays pending,
// held by this worker, which asks the sink again each time it comes due
// (docs/taxonomy.md, Handling one command). The refusals that
// come before the ceiling still close their commands at once (docs/taxonomy.md, Handling one command:
// request options, URL and destination guard are checked first, "so a bad
// command never parks"). Once space is freed the parked command is stored.
func TestWorkerSpecStorageCeiling(t *testing.T) {
	for _, b := range bothBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			e := newEnv(t, b.client, taxonomyOrigin())
			var full atomic.Bool
			full.Store(true)
			// The sink is asked again every MaxWait.
			e.start(stackOptions{sink: specFullSink{memory.New(memory.Options{}), &full}, maxWait: 200 * time.Millisecond}, e.workerOptions())

			parked := e.command("c-full", e.url("w.test", "/ok/c-full"))
			parkedID := e.addModel(parked)
			opts := e.command("c-opts", e.url("w.test", "/ok/c-opts"))
			opts.Headers["Connection"] = "close"
			ftp := e.command("c-ftp", "ftp://w.test/file")
			meta := e.command("c-meta", e.url("metadata.test", "/latest"))
			closed := map[string]string{} // message id → dlq_reason
			closed[e.addModel(opts)] = string(envelope.ReasonInvalidRequestOptions)
			closed[e.addModel(ftp)] = string(envelope.ReasonNotFetchable)
			closed[e.addModel(meta)] = string(envelope.ReasonDestinationRefused)

			e.waitDLQ(3, 15*time.Second)
			e.waitFacts(3, 15*time.Second)
			// Parked, due again and parked again: the sink is asked each
			// time, and the command is never handed back to the stream.
			testenv.Eventually(t, 15*time.Second, "c-full parked twice", func() bool {
				return e.parks(parkedID, "storage_full") >= 2
			})
			testenv.Eventually(t, 15*time.Second, "only c-full pending", func() bool { return e.pending() == 1 })

			if got := e.specOutcomes("c-full"); len(got) != 0 {
				t.Errorf("c-full outcomes = %v, want none while it is parked", got)
			}
			if got := e.origin.Count(); got != 0 {
				t.Errorf("origin saw %d requests, want 0 while the sink is full", got)
			}
			if got := e.owner(parkedID); got == "" {
				t.Errorf("c-full is not pending; a full sink must leave it pending")
			}
			want := []envelope.Model{
				failedFact(opts, envelope.ReasonInvalidRequestOptions, 0),
				failedFact(ftp, envelope.ReasonNotFetchable, 0),
				failedFact(meta, envelope.ReasonDestinationRefused, 0),
			}
			byID := cmpopts.SortSlices(func(a, b envelope.Model) bool {
				return commandIDs([]envelope.Model{a})[0] < commandIDs([]envelope.Model{b})[0]
			})
			if diff := cmp.Diff(want, e.factsNow(), factOpts, byID); diff != "" {
				t.Errorf("facts mismatch (-want +got):\n%s", diff)
			}
			dl := e.dlqNow()
			got := map[string]string{}
			for _, d := range dl {
				got[d[envelope.FieldDLQOriginalID]] = d[envelope.FieldDLQReason]
			}
			if diff := cmp.Diff(closed, got); diff != "" {
				t.Errorf("dead letters (original id → reason) mismatch (-want +got):\n%s", diff)
			}
			checkDLQCopies(t, e, dl)
			if e.deduped("c-full") {
				t.Errorf("c-full has a dedupe key although it was never fetched")
			}

			// A sweep frees space: the parked command completes.
			full.Store(false)
			facts := e.waitFacts(4, 15*time.Second)
			e.waitSettled(15 * time.Second)
			if diff := cmp.Diff(blobFact(parked, "/ok/c-full"), facts[3], factOpts); diff != "" {
				t.Errorf("fact once space is freed mismatch (-want +got):\n%s", diff)
			}
			if got := e.origin.Count(); got != 1 {
				t.Errorf("origin saw %d requests, want 1", got)
			}
		})
	}
}

// TestWorkerSpecUnpublishableFailureStillDeadLettered: the facts stream
// refuses every write (it holds a string), and a command ends permanent
// (404). docs/streams.md, Permanent: "A failure to publish this fact is logged and
// swallowed; the DLQ still happens" — the command is dead-lettered and
// acked, and no dedupe key is set.
func TestWorkerSpecUnpublishableFailureStillDeadLettered(t *testing.T) {
	for _, b := range bothBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			e := newEnv(t, b.client, taxonomyOrigin())
			if err := e.do(e.client.B().Set().Key(e.facts).Value("not a stream").Build()).Error(); err != nil {
				t.Fatalf("SET: %v", err)
			}
			e.start(stackOptions{}, e.workerOptions())
			cmd := e.command("c-404", e.url("w.test", "/missing"))
			id := e.addModel(cmd)

			dl := e.waitDLQ(1, 15*time.Second)
			e.waitSettled(15 * time.Second)
			checkOneDeadLetter(t, e, dl, envelope.ReasonHTTPStatus, id)
			if got := e.origin.Count(); got != 1 {
				t.Errorf("origin saw %d requests, want 1", got)
			}
			if e.deduped(cmd.CommandID) {
				t.Errorf("dedupe key set for a permanent failure")
			}
			if typ, err := e.do(e.client.B().Type().Key(e.facts).Build()).ToString(); err != nil || typ != "string" {
				t.Errorf("TYPE facts = %q, %v; want the string left in place", typ, err)
			}
			if !strings.Contains(e.logs.String(), "could not publish the failure fact") {
				t.Errorf("the refused fact was not logged:\n%s", e.logs.String())
			}
		})
	}
}

// TestWorkerSpecCeilingWithoutXPENDING: a command whose handling panics,
// handled by a Redis user that may run neither XPENDING nor XCLAIM nor a
// script, as the production broker's worker user. docs/streams.md,
// Unclassified: the ceiling counts failed handlings, so it still closes the
// command, with handler_error and attempts, after MaxDeliveryAttempts
// handlings, and then the dead letter.
func TestWorkerSpecCeilingWithoutXPENDING(t *testing.T) {
	r := testenv.StartRedis(t)
	admin := newClient(t, []string{r.Addr})
	acl := admin.B().Arbitrary("ACL", "SETUSER", "nopending").Args("on", ">pw", "~*", "&*", "+@all", "-xpending", "-xclaim", "-@scripting").Build()
	if err := admin.Do(t.Context(), acl).Error(); err != nil {
		t.Fatalf("ACL SETUSER: %v", err)
	}
	limited, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr}, Username: "nopending", Password: "pw", DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(limited.Close)

	e := newEnv(t, limited, http.HandlerFunc(okBody))
	wo := e.workerOptions()
	wo.Loop.MaxDeliveryAttempts = 2
	run := e.start(stackOptions{sink: panicSink{memory.New(memory.Options{})}, slots: 16}, wo)
	// The worker keeps the limited client; the test reads as the admin.
	e.client = admin
	e.addModel(e.command("c-bug", e.url("w.test", "/bug")))
	e.waitDLQ(1, 20*time.Second)

	facts := e.factsNow()
	if len(facts) != 1 {
		t.Fatalf("facts = %v, want one handler_error", facts)
	}
	if f, ok := facts[0].(*envelope.FetchFailed); !ok || f.Reason != envelope.ReasonHandlerError || f.Attempts == nil || *f.Attempts != 2 {
		t.Errorf("fact = %+v, want handler_error with attempts 2", facts[0])
	}
	if got := e.origin.Count(); got != 2 {
		t.Errorf("origin saw %d requests, want 2 failed handlings", got)
	}
	denied, err := r.ACLDenials("nopending")
	if err != nil {
		t.Fatal(err)
	}
	if len(denied) != 0 {
		t.Errorf("the worker was refused %v; it must send only what it is granted", denied)
	}
	select {
	case <-run.finished:
		t.Errorf("Run returned %v", run.err)
	default:
	}
}

// TestWorkerSpecHandlerErrorAtDefaultCeiling: a command whose handling
// panics every time, with the default REPLICATOR_MAX_DELIVERY_ATTEMPTS (5)
// and a fetcher of 4 request slots. docs/streams.md, Unclassified: "leave pending;
// once the entry's delivery count … reaches
// REPLICATOR_MAX_DELIVERY_ATTEMPTS, publish handler_error with attempts,
// then DLQ". Every handling must therefore still reach the origin after
// more panics than there are request slots.
func TestWorkerSpecHandlerErrorAtDefaultCeiling(t *testing.T) {
	e := newEnv(t, standalone(t, testenv.StartRedis(t)).client, http.HandlerFunc(okBody))
	wo := e.workerOptions()
	wo.Loop.MaxDeliveryAttempts = engine.DefaultMaxDeliveryAttempts
	e.start(stackOptions{sink: panicSink{memory.New(memory.Options{})}, slots: 4}, wo)
	cmd := e.command("c-bug", e.url("w.test", "/ok/c-bug"))
	id := e.addModel(cmd)

	var dl []map[string]string
	for deadline := time.Now().Add(10 * time.Second); len(dl) == 0; dl = e.dlqNow() {
		if time.Now().After(deadline) {
			t.Fatalf("no dead letter after 10s: the origin saw %d requests, the entry was delivered %d times; "+
				"want handler_error after %d handlings", e.origin.Count(), e.deliveries(id), engine.DefaultMaxDeliveryAttempts)
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.waitSettled(10 * time.Second)
	want := failedFact(cmd, envelope.ReasonHandlerError, 0)
	want.Attempts = new(engine.DefaultMaxDeliveryAttempts)
	if diff := cmp.Diff([]envelope.Model{want}, e.factsNow(), factOpts); diff != "" {
		t.Errorf("facts mismatch (-want +got):\n%s", diff)
	}
	checkOneDeadLetter(t, e, dl, envelope.ReasonHandlerError, id)
	if got := e.origin.Count(); got != engine.DefaultMaxDeliveryAttempts {
		t.Errorf("origin saw %d requests, want one per delivery (%d)", got, engine.DefaultMaxDeliveryAttempts)
	}
}

// TestWorkerSpecDedupeTTL: a stored command's dedupe key lives for
// WorkerOptions.DedupeTTL (docs/streams.md, Success: "set the dedupe key (TTL
// REPLICATOR_DEDUPE_TTL_SECONDS)").
func TestWorkerSpecDedupeTTL(t *testing.T) {
	const ttl = 3*time.Hour + 17*time.Minute
	for _, b := range bothBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			e := newEnv(t, b.client, taxonomyOrigin())
			wo := e.workerOptions()
			wo.Loop.DedupeTTL = ttl
			e.start(stackOptions{}, wo)
			e.addModel(e.command("c-ttl", e.url("w.test", "/ok/c-ttl")))
			e.waitFacts(1, 15*time.Second)
			e.waitSettled(15 * time.Second)
			testenv.Eventually(t, 5*time.Second, "dedupe key of c-ttl", func() bool { return e.deduped("c-ttl") })

			ms, err := e.do(e.client.B().Pttl().Key(e.prefix + "c-ttl").Build()).AsInt64()
			if err != nil {
				t.Fatalf("PTTL: %v", err)
			}
			// The key was set moments ago; 30 s covers a slow machine.
			if got := time.Duration(ms) * time.Millisecond; got > ttl || got < ttl-30*time.Second {
				t.Errorf("dedupe key TTL = %v, want %v (less at most the seconds since it was set)", got, ttl)
			}
		})
	}
}

// TestWorkerSpecDedupesOnCommandID: the worker dedupes on the payload's
// command_id, never on the frame's key (docs/streams.md, Keys: the key is
// operational, never the dedupe key; and Triage).
func TestWorkerSpecDedupesOnCommandID(t *testing.T) {
	setKey := func(key string) func(map[string]string) {
		return func(f map[string]string) { f[envelope.FieldKey] = key }
	}
	for _, b := range bothBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			t.Run("same command_id, different keys", func(t *testing.T) {
				e := newEnv(t, b.client, taxonomyOrigin())
				e.start(stackOptions{}, e.workerOptions())
				cmd := e.command("c-same", e.url("w.test", "/ok/c-same"))
				e.specAddEdited(cmd, setKey("key-one"))
				e.waitFacts(1, 15*time.Second)
				e.waitSettled(15 * time.Second)
				e.specAddEdited(cmd, setKey("key-two"))
				e.waitSettled(15 * time.Second)

				if diff := cmp.Diff([]envelope.Model{blobFact(cmd, "/ok/c-same")}, e.factsNow(), factOpts); diff != "" {
					t.Errorf("facts mismatch (-want +got):\n%s", diff)
				}
				if got := e.origin.Count(); got != 1 {
					t.Errorf("origin saw %d requests, want 1: the second frame repeats a handled command_id", got)
				}
				if dl := e.dlqNow(); len(dl) != 0 {
					t.Errorf("dead letters = %v, want none", dl)
				}
			})
			t.Run("same key, different command_ids", func(t *testing.T) {
				e := newEnv(t, b.client, taxonomyOrigin())
				e.start(stackOptions{}, e.workerOptions())
				first := e.command("c-first", e.url("w.test", "/ok/c-first"))
				second := e.command("c-second", e.url("w.test", "/ok/c-second"))
				e.specAddEdited(first, setKey("shared-key"))
				e.waitFacts(1, 15*time.Second)
				e.waitSettled(15 * time.Second)
				e.specAddEdited(second, setKey("shared-key"))
				e.waitFacts(2, 15*time.Second)
				e.waitSettled(15 * time.Second)

				want := []envelope.Model{blobFact(first, "/ok/c-first"), blobFact(second, "/ok/c-second")}
				if diff := cmp.Diff(want, e.factsNow(), factOpts); diff != "" {
					t.Errorf("facts mismatch (-want +got):\n%s", diff)
				}
				if got := e.origin.Count(); got != 2 {
					t.Errorf("origin saw %d requests, want 2: the commands differ", got)
				}
				for _, id := range []string{"c-first", "c-second"} {
					if !e.deduped(id) {
						t.Errorf("no dedupe key for %s", id)
					}
				}
				if e.deduped("shared-key") {
					t.Errorf("a dedupe key was set for the frame key")
				}
			})
		})
	}
}

// TestWorkerSpecNonFiniteTimeout: a payload carrying Python's NaN,
// Infinity or -Infinity as timeout_seconds decodes, and is refused by the
// request-options sanitizer (docs/streams.md, Decoding: "A payload carrying Python's
// NaN/Infinity JSON tokens there must be refused this way, not
// dead-lettered as malformed"; docs/security.md, Request options): a fetch_failed
// invalid_request_options fact and a dead letter with that reason, and no
// request reaches the origin.
func TestWorkerSpecNonFiniteTimeout(t *testing.T) {
	backends := bothBackends(t)
	for _, token := range []string{"NaN", "Infinity", "-Infinity"} {
		for _, b := range backends {
			t.Run(token+"/"+b.name, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, b.client, taxonomyOrigin())
				e.start(stackOptions{}, e.workerOptions())
				cmd := e.command("c-timeout", e.url("w.test", "/ok/c-timeout"))
				cmd.TimeoutSeconds = new(30.0)
				id := e.specAddEdited(cmd, func(f map[string]string) {
					const finite = `"timeout_seconds":30.0`
					if !strings.Contains(f[envelope.FieldPayload], finite) {
						t.Fatalf("payload %s does not hold %s", f[envelope.FieldPayload], finite)
					}
					f[envelope.FieldPayload] = strings.Replace(f[envelope.FieldPayload], finite, `"timeout_seconds":`+token, 1)
				})

				dl := e.waitDLQ(1, 15*time.Second)
				facts := e.waitFacts(1, 15*time.Second)
				e.waitSettled(15 * time.Second)
				want := []envelope.Model{failedFact(cmd, envelope.ReasonInvalidRequestOptions, 0)}
				if diff := cmp.Diff(want, facts, factOpts); diff != "" {
					t.Errorf("facts mismatch (-want +got):\n%s", diff)
				}
				checkOneDeadLetter(t, e, dl, envelope.ReasonInvalidRequestOptions, id)
				if got := e.origin.Count(); got != 0 {
					t.Errorf("origin saw %d requests, want 0", got)
				}
			})
		}
	}
}

// specMonitor records the commands a Redis server executes, in the order it
// executes them (MONITOR), so a test can check the order of writes to
// different keys.
type specMonitor struct {
	mu    sync.Mutex
	lines []string
}

// specStartMonitor opens a MONITOR connection to addr for the rest of the test.
func specStartMonitor(t *testing.T, addr string) *specMonitor {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		conn.Close()
		<-done
	})
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatalf("MONITOR: %v", err)
	}
	br := bufio.NewReader(conn)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, err := br.ReadString('\n'); err != nil || line != "+OK\r\n" {
		t.Fatalf("MONITOR answered %q, %v", line, err)
	}
	conn.SetReadDeadline(time.Time{})
	m := &specMonitor{}
	go func() {
		defer close(done)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			m.mu.Lock()
			m.lines = append(m.lines, line)
			m.mu.Unlock()
		}
	}()
	return m
}

var (
	specMonitorLine = regexp.MustCompile(`^\+[0-9.]+ \[[^\]]*\] (.*)\r?\n?$`)
	specMonitorArg  = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)
)

// commands returns the argument vectors seen so far, in execution order.
// Arguments keep MONITOR's escapes; the names this test looks for have
// none.
func (m *specMonitor) commands() [][]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out [][]string
	for _, line := range m.lines {
		sub := specMonitorLine.FindStringSubmatch(line)
		if sub == nil {
			continue
		}
		var args []string
		for _, a := range specMonitorArg.FindAllStringSubmatch(sub[1], -1) {
			args = append(args, a[1])
		}
		if len(args) > 0 {
			args[0] = strings.ToUpper(args[0])
		}
		out = append(out, args)
	}
	return out
}

// specArgAfter returns the value following name in args, "" if none.
func specArgAfter(args []string, name string) string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == name {
			return args[i+1]
		}
	}
	return ""
}

// TestWorkerSpecFactBeforeDeadLetter: a command closed as a failure gets
// its fetch_failed fact first, then its dead letter, then its ack
// (docs/streams.md: Triage, an unsupported schema version is announced
// then dead-lettered; Permanent, the terminal fetch_failed then the dead
// letter; Unclassified, at the ceiling handler_error with attempts then the
// dead letter; Dead letters, the entry is written, then the original is
// acked). The server's own MONITOR feed gives the order the writes ran
// in; the streams live on one server, so this runs standalone only.
func TestWorkerSpecFactBeforeDeadLetter(t *testing.T) {
	r := testenv.StartRedis(t)
	e := newEnv(t, standalone(t, r).client, taxonomyOrigin())
	mon := specStartMonitor(t, r.Addr)
	wo := e.workerOptions()
	wo.Loop.MaxDeliveryAttempts = 1
	// The sink panics on every Put: a 2xx ends unclassified, at the
	// ceiling on its first delivery. The other commands never reach it.
	e.start(stackOptions{sink: panicSink{memory.New(memory.Options{})}}, wo)

	v2 := e.command("c-v2", e.url("w.test", "/ok/c-v2"))
	v2.SchemaVersion = 2
	opts := e.command("c-opts", e.url("w.test", "/ok/c-opts"))
	opts.Headers["Host"] = "elsewhere.test"
	cmds := map[string]string{ // message id → command_id
		e.addModel(v2):   "c-v2",
		e.addModel(opts): "c-opts",
		e.addModel(e.command("c-ftp", "ftp://w.test/file")):                "c-ftp",
		e.addModel(e.command("c-404", e.url("w.test", "/missing"))):        "c-404",
		e.addModel(e.command("c-panic", e.url("w.test", "/ok/c-panic"))):   "c-panic",
		e.addModel(e.command("c-meta", e.url("metadata.test", "/latest"))): "c-meta",
	}
	e.waitDLQ(len(cmds), 15*time.Second)
	e.waitFacts(len(cmds), 15*time.Second)
	e.waitSettled(15 * time.Second)

	type steps struct{ fact, dlq, ack int }
	seen := map[string]*steps{}
	for id := range cmds {
		seen[id] = &steps{-1, -1, -1}
	}
	testenv.Eventually(t, 10*time.Second, "MONITOR to show every fact, dead letter and ack", func() bool {
		for _, s := range seen {
			*s = steps{-1, -1, -1}
		}
		for i, args := range mon.commands() {
			if len(args) < 2 {
				continue
			}
			switch {
			case args[0] == "XADD" && args[1] == e.facts:
				key := specArgAfter(args[2:], envelope.FieldKey)
				for id, cid := range cmds {
					if strings.HasPrefix(key, cid+":") && seen[id].fact < 0 {
						seen[id].fact = i
					}
				}
			case args[0] == "XADD" && args[1] == e.dlq:
				if s, ok := seen[specArgAfter(args[2:], envelope.FieldDLQOriginalID)]; ok && s.dlq < 0 {
					s.dlq = i
				}
			case args[0] == "XACK" && args[1] == e.stream && len(args) > 3:
				for _, id := range args[3:] {
					if s, ok := seen[id]; ok && s.ack < 0 {
						s.ack = i
					}
				}
			}
		}
		for _, s := range seen {
			if s.fact < 0 || s.dlq < 0 || s.ack < 0 {
				return false
			}
		}
		return true
	})
	for id, s := range seen {
		if !(s.fact < s.dlq && s.dlq < s.ack) {
			t.Errorf("%s: fact, dead letter and ack ran as commands #%d, #%d, #%d; want that order", cmds[id], s.fact, s.dlq, s.ack)
		}
	}
}

// checkOneDeadLetter checks that dl is one dead letter, of entry id, with
// reason, and a copy of the original frame.
func checkOneDeadLetter(t *testing.T, e *wenv, dl []map[string]string, reason envelope.Reason, id string) {
	t.Helper()
	if diff := cmp.Diff([]string{string(reason)}, dlqReasons(dl)); diff != "" {
		t.Errorf("dead-letter reasons mismatch (-want +got):\n%s", diff)
	}
	if len(dl) > 0 && dl[0][envelope.FieldDLQOriginalID] != id {
		t.Errorf("dlq_original_id = %q, want %q", dl[0][envelope.FieldDLQOriginalID], id)
	}
	checkDLQCopies(t, e, dl)
}
