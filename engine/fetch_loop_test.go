package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/replicator-go/replicator/engine"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/memory"
)

func okBody(w http.ResponseWriter, r *http.Request) {
	io.WriteString(w, "body of "+r.URL.Path)
}

// commandIDs lists the command_id of each fact.
func commandIDs(facts []envelope.Model) []string {
	out := make([]string, len(facts))
	for i, f := range facts {
		switch f := f.(type) {
		case *envelope.BlobAvailable:
			out[i] = f.CommandID
		case *envelope.FetchFailed:
			out[i] = f.CommandID + "/" + string(f.Reason)
		}
	}
	return out
}

func TestWorkerTransientThenSuccess(t *testing.T) {
	for _, b := range bothBackends(t) {
		t.Run(b.name, func(t *testing.T) {

			t.Run("500 twice then 200", func(t *testing.T) {
				var n atomic.Int32
				e := newEnv(t, b.client, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if n.Add(1) <= 2 {
						w.WriteHeader(http.StatusInternalServerError)
						return
					}
					okBody(w, r)
				}))
				e.start(stackOptions{}, e.workerOptions())
				cmd := e.command("c-flaky", e.url("w.test", "/flaky"))
				e.addModel(cmd)
				facts := e.waitFacts(1, 15*time.Second)
				e.waitSettled(10 * time.Second)
				if diff := cmp.Diff([]string{"c-flaky"}, commandIDs(facts)); diff != "" {
					t.Errorf("facts mismatch (-want +got):\n%s", diff)
				}
				if got := e.origin.Count(); got != 3 {
					t.Errorf("origin saw %d requests, want 3", got)
				}
				if dl := e.dlqNow(); len(dl) != 0 {
					t.Errorf("dead letters = %v, want none", dlqReasons(dl))
				}
			})

			t.Run("connection refused then listening", func(t *testing.T) {
				port, err := testenv.FreePort()
				if err != nil {
					t.Fatal(err)
				}
				e := newEnv(t, b.client, nil)
				e.start(stackOptions{}, e.workerOptions())
				url := "http://w.test:" + strconv.Itoa(port) + "/late"
				e.addModel(e.command("c-late", url))
				testenv.Eventually(t, 10*time.Second, "a transient outcome", func() bool {
					return strings.Contains(e.logs.String(), `"outcome":"transient"`)
				})
				if len(e.factsNow()) != 0 || e.pending() != 1 {
					t.Fatalf("after a refused connection: %d facts, %d pending; want none and 1", len(e.factsNow()), e.pending())
				}
				l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
				if err != nil {
					t.Fatalf("listen on the refused port: %v", err)
				}
				srv := &http.Server{Handler: http.HandlerFunc(okBody)}
				go srv.Serve(l)
				t.Cleanup(func() { srv.Close() })
				facts := e.waitFacts(1, 15*time.Second)
				e.waitSettled(10 * time.Second)
				if diff := cmp.Diff([]string{"c-late"}, commandIDs(facts)); diff != "" {
					t.Errorf("facts mismatch (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// panicSink panics in Put: a bug the Handler recovers as Unclassified.
type panicSink struct{ sink.Sink }

func (panicSink) Put(context.Context, io.Reader, sink.PutOptions) (sink.Blob, error) {
	panic("sink exploded")
}

func TestWorkerUnclassifiedReachesDeliveryCeiling(t *testing.T) {
	e := newEnv(t, standalone(t, testenv.StartRedis(t)).client, http.HandlerFunc(okBody))
	wo := e.workerOptions()
	wo.Loop.MaxDeliveryAttempts = 3
	e.start(stackOptions{sink: panicSink{memory.New(memory.Options{})}}, wo)
	cmd := e.command("c-bug", e.url("w.test", "/bug"))
	id := e.addModel(cmd)

	dl := e.waitDLQ(1, 20*time.Second)
	e.waitSettled(10 * time.Second)
	want := failedFact(cmd, envelope.ReasonHandlerError, 0)
	want.Attempts = new(3)
	facts := e.factsNow()
	if diff := cmp.Diff([]envelope.Model{want}, facts, factOpts); diff != "" {
		t.Errorf("facts mismatch (-want +got):\n%s", diff)
	}
	if len(facts) == 1 {
		detail := *facts[0].(*envelope.FetchFailed).Detail
		if !strings.Contains(detail, "sink exploded") || strings.Contains(detail, "\n") {
			t.Errorf("detail = %q, want the panic's first line only", detail)
		}
	}
	if diff := cmp.Diff([]string{"handler_error"}, dlqReasons(dl)); diff != "" {
		t.Errorf("dead-letter reasons mismatch (-want +got):\n%s", diff)
	}
	if dl[0][envelope.FieldDLQOriginalID] != id {
		t.Errorf("dlq_original_id = %q, want %q", dl[0][envelope.FieldDLQOriginalID], id)
	}
	if got := e.origin.Count(); got != 3 {
		t.Errorf("origin saw %d requests, want one per delivery (3)", got)
	}
}

func TestWorkerTrimmedWhilePending(t *testing.T) {
	for _, b := range bothBackends(t) {
		t.Run(b.name, func(t *testing.T) {

			t.Run("left pending after a transient failure", func(t *testing.T) {
				e := newEnv(t, b.client, testenv.Status(http.StatusServiceUnavailable, nil, "busy"))
				e.start(stackOptions{}, e.workerOptions())
				id := e.addModel(e.command("c-trim", e.url("w.test", "/busy")))
				testenv.Eventually(t, 10*time.Second, "a first attempt", func() bool { return e.origin.Count() >= 1 })
				if err := e.do(e.client.B().Xdel().Key(e.stream).Id(id).Build()).Error(); err != nil {
					t.Fatal(err)
				}
				e.waitSettled(10 * time.Second)
				// XAUTOCLAIM drops a trimmed entry from the pending list before the
				// worker reads its reply, so the line may follow the settling.
				testenv.Eventually(t, 5*time.Second, "a WARN line about the trimmed entry", func() bool {
					return strings.Contains(e.logs.String(), "trimmed from the stream")
				})
				if f, dl := e.factsNow(), e.dlqNow(); len(f) != 0 || len(dl) != 0 {
					t.Errorf("%d facts and %d dead letters, want none", len(f), len(dl))
				}
			})

			// The Retry fate gives the delivery back with an XCLAIM, which
			// would drop an entry trimmed meanwhile from the pending list
			// without a word; it must be left for the reclaim to report.
			t.Run("trimmed in flight, then a transient failure", func(t *testing.T) {
				asked, answer := make(chan struct{}), make(chan struct{})
				var once atomic.Bool
				e := newEnv(t, b.client, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if once.CompareAndSwap(false, true) {
						close(asked)
						<-answer
					}
					w.WriteHeader(http.StatusServiceUnavailable)
				}))
				e.start(stackOptions{}, e.workerOptions())
				id := e.addModel(e.command("c-trim", e.url("w.test", "/busy")))
				<-asked
				if err := e.do(e.client.B().Xdel().Key(e.stream).Id(id).Build()).Error(); err != nil {
					t.Fatal(err)
				}
				close(answer)
				e.waitSettled(10 * time.Second)
				testenv.Eventually(t, 5*time.Second, "a WARN line about the trimmed entry", func() bool {
					return strings.Contains(e.logs.String(), "trimmed from the stream")
				})
				if f, dl := e.factsNow(), e.dlqNow(); len(f) != 0 || len(dl) != 0 {
					t.Errorf("%d facts and %d dead letters, want none", len(f), len(dl))
				}
			})

			t.Run("parked in memory", func(t *testing.T) {
				e := newEnv(t, b.client, http.HandlerFunc(okBody))
				so := stackOptions{floors: map[string]time.Duration{"paced.test": time.Minute}, maxWait: 50 * time.Millisecond}
				e.start(so, e.workerOptions())
				e.addModel(e.command("c-first", e.url("paced.test", "/1")))
				e.waitFacts(1, 10*time.Second)
				id := e.addModel(e.command("c-parked", e.url("paced.test", "/2")))
				testenv.Eventually(t, 10*time.Second, "the second command parked", func() bool {
					return strings.Contains(e.logs.String(), "parked a command")
				})
				if err := e.do(e.client.B().Xdel().Key(e.stream).Id(id).Build()).Error(); err != nil {
					t.Fatal(err)
				}
				e.waitSettled(10 * time.Second)
				// XAUTOCLAIM drops a trimmed entry from the pending list before the
				// worker reads its reply, so the line may follow the settling.
				testenv.Eventually(t, 5*time.Second, "a WARN line about the trimmed entry", func() bool {
					return strings.Contains(e.logs.String(), "trimmed from the stream")
				})
				if f, dl := e.factsNow(), e.dlqNow(); len(f) != 1 || len(dl) != 0 {
					t.Errorf("%d facts and %d dead letters, want 1 and none", len(f), len(dl))
				}
			})
		})
	}
}

// TestWorkerSurvivesRedisRestart takes Redis down mid-fetch (every node of
// the cluster) and brings it back with its data: the worker backs off,
// resumes, and nothing is lost.
func TestWorkerSurvivesRedisRestart(t *testing.T) {
	// Append-only with fsync on every write, so the kill loses nothing.
	persist := testenv.RedisOptions{Args: []string{"--appendonly", "yes", "--appendfsync", "always"}}
	r, err := testenv.NewRedis(persist)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	c := testenv.StartClusterWith(t, persist)
	backends := []struct {
		backend
		start func() error
	}{
		{standalone(t, r), r.Start},
		{cluster(t, c), func() error {
			for _, n := range c.Nodes {
				if err := n.Start(); err != nil {
					return err
				}
			}
			return c.WaitReady(30 * time.Second)
		}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			slowStarted := make(chan struct{})
			var slowOnce atomic.Bool
			e := newEnv(t, b.client, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				if strings.HasPrefix(req.URL.Path, "/slow") && slowOnce.CompareAndSwap(false, true) {
					close(slowStarted)
					time.Sleep(700 * time.Millisecond) // answers while Redis is down
				}
				okBody(w, req)
			}))
			wo := e.workerOptions()
			wo.Loop.MaxConsecutiveFailures = 1000
			wo.Loop.ClaimMinIdle = 300 * time.Millisecond
			run := e.start(stackOptions{}, wo)

			for _, id := range []string{"c1", "c2", "c3"} {
				e.addModel(e.command(id, e.url("w.test", "/ok/"+id)))
			}
			e.waitFacts(3, 10*time.Second)
			e.waitSettled(10 * time.Second)
			e.addModel(e.command("c-slow", e.url("w.test", "/slow")))
			<-slowStarted
			b.stop()
			testenv.Eventually(t, 10*time.Second, "the worker to notice the outage", func() bool {
				logs := e.logs.String()
				return strings.Contains(logs, "consume cycle failed") && strings.Contains(logs, "could not write a command's fate")
			})
			if err := b.start(); err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"c4", "c5", "c6"} {
				e.addModel(e.command(id, e.url("w.test", "/ok/"+id)))
			}
			facts := e.waitFacts(7, 30*time.Second)
			e.waitSettled(10 * time.Second)
			got := commandIDs(facts)
			want := []string{"c1", "c2", "c3", "c4", "c5", "c6", "c-slow"}
			if diff := cmp.Diff(want, got, cmpSorted); diff != "" {
				t.Errorf("facts mismatch (-want +got):\n%s", diff)
			}
			select {
			case <-run.finished:
				t.Fatalf("Run returned during the outage: %v", run.err)
			default:
			}
			testenv.Eventually(t, 10*time.Second, "the worker to be healthy again", run.worker.Healthy)
			testenv.Eventually(t, 5*time.Second, "a log line saying the loop recovered", func() bool {
				return strings.Contains(e.logs.String(), "consume cycle recovered")
			})
		})
	}
}

var cmpSorted = cmp.Transformer("sorted", func(in []string) []string {
	out := append([]string(nil), in...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
})

func TestWorkerGivesUpWhenRedisIsGone(t *testing.T) {
	for _, b := range bothBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			e := newEnv(t, b.client, http.HandlerFunc(okBody))
			wo := e.workerOptions()
			wo.Loop.BackoffBase = 10 * time.Millisecond
			wo.Loop.BackoffMax = 40 * time.Millisecond
			wo.Loop.MaxConsecutiveFailures = 5
			run := e.start(stackOptions{}, wo)
			testenv.Eventually(t, 10*time.Second, "the worker to be healthy", run.worker.Healthy)
			b.stop()
			err := run.wait(t, 30*time.Second)
			if !errors.Is(err, engine.ErrBrokerUnavailable) {
				t.Fatalf("Run = %v, want ErrBrokerUnavailable", err)
			}
			if run.worker.HealthyAt(time.Now().Add(time.Minute)) {
				t.Error("HealthyAt a minute later = true, want false: Redis has not answered")
			}
		})
	}
}

func TestWorkerShutdown(t *testing.T) {
	for _, b := range bothBackends(t) {
		t.Run(b.name, func(t *testing.T) {

			t.Run("mid-fetch", func(t *testing.T) {
				release := make(chan struct{})
				e := newEnv(t, b.client, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					select {
					case <-release:
					case <-r.Context().Done():
						return
					}
					okBody(w, r)
				}))
				wo := e.workerOptions()
				wo.Consumer = "a"
				wo.DrainTimeout = 300 * time.Millisecond
				run := e.start(stackOptions{}, wo)
				id := e.addModel(e.command("c-slow", e.url("w.test", "/slow")))
				testenv.Eventually(t, 10*time.Second, "the request to reach the origin", func() bool { return e.origin.Count() == 1 })

				start := time.Now()
				if err := run.stop(t); err != nil {
					t.Fatalf("Run = %v, want nil", err)
				}
				if took := time.Since(start); took > wo.DrainTimeout+2*time.Second {
					t.Errorf("Run took %v to return, want about the drain timeout (%v)", took, wo.DrainTimeout)
				}
				if owner := e.owner(id); owner != "a" {
					t.Fatalf("entry owner after shutdown = %q, want it still pending for a", owner)
				}
				if n := len(e.factsNow()); n != 0 {
					t.Fatalf("%d facts after an interrupted fetch, want none", n)
				}

				close(release)
				wo.Consumer = "b"
				e.start(stackOptions{}, wo)
				facts := e.waitFacts(1, 15*time.Second)
				e.waitSettled(10 * time.Second)
				if diff := cmp.Diff([]string{"c-slow"}, commandIDs(facts)); diff != "" {
					t.Errorf("facts mismatch (-want +got):\n%s", diff)
				}
			})

			t.Run("idle, in a long blocking read", func(t *testing.T) {
				e := newEnv(t, b.client, nil)
				wo := e.workerOptions()
				wo.Loop.ReadBlock = 30 * time.Second
				wo.Loop.ClaimMinIdle = time.Minute
				run := e.start(stackOptions{}, wo)
				testenv.Eventually(t, 10*time.Second, "the worker to be healthy", run.worker.Healthy)
				testenv.Eventually(t, 10*time.Second, "the worker to block in a read", func() bool {
					return strings.Contains(clientList(t, e), "cmd=xreadgroup")
				})
				start := time.Now()
				if err := run.stop(t); err != nil {
					t.Fatalf("Run = %v, want nil", err)
				}
				if took := time.Since(start); took > 2*time.Second {
					t.Errorf("Run took %v to return; the blocking read was not interrupted", took)
				}
			})

			t.Run("cuts pacing waits short", func(t *testing.T) {
				e := newEnv(t, b.client, http.HandlerFunc(okBody))
				// The second command sleeps through its host's window (MaxWait is
				// longer) until the worker's context, wired as the Fetcher's Stop,
				// ends.
				so := stackOptions{floors: map[string]time.Duration{"paced.test": 20 * time.Second}, maxWait: 30 * time.Second}
				run := e.start(so, e.workerOptions())
				e.addModel(e.command("c-1", e.url("paced.test", "/1")))
				e.addModel(e.command("c-2", e.url("paced.test", "/2")))
				e.waitFacts(1, 10*time.Second)
				testenv.Eventually(t, 10*time.Second, "the second command to be waiting", func() bool {
					return e.lastDelivered() != "" && e.pending() == 1
				})
				start := time.Now()
				if err := run.stop(t); err != nil {
					t.Fatalf("Run = %v, want nil", err)
				}
				if took := time.Since(start); took > 2*time.Second {
					t.Errorf("Run took %v to return; the pacing wait was not cut short", took)
				}
				if got := e.origin.Count(); got != 1 {
					t.Errorf("origin saw %d requests, want 1: nothing goes out unpaced on the way out", got)
				}
				if got := e.pending(); got != 1 {
					t.Errorf("%d pending after shutdown, want the waiting command", got)
				}
			})
		})
	}
}

// clientList returns CLIENT LIST: what each connection is doing.
func clientList(t *testing.T, e *wenv) string {
	t.Helper()
	s, err := e.do(e.client.B().ClientList().Build()).ToString()
	if err != nil {
		t.Fatalf("CLIENT LIST: %v", err)
	}
	return s
}

// TestWorkerLogLines checks the one line per handled command: stable keys,
// the URL's password redacted, and no header value anywhere (newEnv's
// cleanup also greps every test's log for the secret).
func TestWorkerLogLines(t *testing.T) {
	e := newEnv(t, standalone(t, testenv.StartRedis(t)).client, taxonomyOrigin())
	e.start(stackOptions{}, e.workerOptions())
	ok := e.command("c-ok", strings.Replace(e.url("w.test", "/ok/x"), "http://", "http://user:pa55word@", 1))
	ok.Headers["Cookie"] = "session=" + secretValue
	e.addModel(ok)
	e.addModel(e.command("c-404", e.url("w.test", "/missing")))
	bad := e.command("c-bad", e.url("w.test", "/ok/y"))
	bad.Headers["X-Bad"] = secretValue + "\x00"
	e.addModel(bad)
	e.waitFacts(3, 10*time.Second)
	e.waitSettled(10 * time.Second)

	logs := e.logs.String()
	if strings.Contains(logs, "pa55word") {
		t.Error("a URL password reached the log")
	}
	keys := []string{"command_id", "url", "host", "outcome", "reason", "status_code", "duration_ms", "paced_ms", "size_bytes"}
	seen := map[string]bool{}
	for line := range strings.SplitSeq(strings.TrimSpace(logs), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if rec["msg"] != "handled command" {
			continue
		}
		for _, k := range keys {
			if _, ok := rec[k]; !ok {
				t.Errorf("handled-command line lacks %q: %s", k, line)
			}
		}
		seen[rec["command_id"].(string)+"/"+rec["outcome"].(string)] = true
	}
	for _, want := range []string{"c-ok/stored", "c-404/permanent", "c-bad/permanent"} {
		if !seen[want] {
			t.Errorf("no handled-command line for %s; saw %v", want, seen)
		}
	}
}

func TestWorkerMetrics(t *testing.T) {
	e := newEnv(t, standalone(t, testenv.StartRedis(t)).client, taxonomyOrigin())
	reg := prometheus.NewRegistry()
	wo := e.workerOptions()
	wo.Loop.Registerer = reg
	e.start(stackOptions{}, wo)
	e.addModel(e.command("c-ok", e.url("w.test", "/ok/m")))
	e.addModel(e.command("c-404", e.url("w.test", "/missing")))
	e.add("not", "a frame")
	e.waitDLQ(2, 10*time.Second)
	e.waitFacts(2, 10*time.Second)
	e.waitSettled(10 * time.Second)

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			got[f.GetName()+labelString(m)] = metricValue(m)
		}
	}
	// replicator_requests_in_flight is the Fetcher's, registered by the
	// binary beside the loop's (cmd/replicator).
	want := map[string]float64{
		`replicator_commands_total{outcome="stored",reason=""}`:                 1,
		`replicator_commands_total{outcome="permanent",reason="http_status"}`:   1,
		`replicator_commands_total{outcome="refused",reason="malformed_frame"}`: 1,
		`replicator_dlq_writes_total{reason="http_status"}`:                     1,
		`replicator_dlq_writes_total{reason="malformed_frame"}`:                 1,
		`replicator_stored_bytes_total`:                                         float64(len("body of /ok/m")),
		`replicator_handlers_busy`:                                              0,
		`replicator_held_commands`:                                              0,
		`replicator_parked_commands`:                                            0,
		`replicator_fetch_duration_seconds{outcome="stored"}`:                   1, // sample count
		`replicator_pacing_wait_seconds`:                                        2, // sample count
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

func labelString(m *dto.Metric) string {
	if len(m.GetLabel()) == 0 {
		return ""
	}
	var parts []string
	for _, l := range m.GetLabel() {
		parts = append(parts, l.GetName()+`="`+l.GetValue()+`"`)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}
