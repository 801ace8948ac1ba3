package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/engine"
	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/internal/hosts"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/policy"
	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/memory"
)

// The worker tests run against real Redis (a private server or a private
// three-master cluster) and loopback origins. Each test uses its own
// stream names, so tests sharing a server never see each other's entries.

// secretValue is sent as a header value by many commands; it must never
// appear in a log line.
const secretValue = "secret-7f3a9c"

// workerHosts resolve to the loopback origin, except metadata.test, which
// the guard must refuse. h0.test … h99.test spread load over many hosts.
var workerHosts = func() map[string][]netip.Addr {
	loopback := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	hosts := map[string][]netip.Addr{
		"w.test":        loopback,
		"slow.test":     loopback,
		"fast.test":     loopback,
		"paced.test":    loopback,
		"metadata.test": {netip.MustParseAddr("169.254.169.254")},
	}
	for i := range 100 {
		hosts[fmt.Sprintf("h%d.test", i)] = loopback
	}
	return hosts
}()

// factOpts ignores what varies between runs: times, the free-text detail
// of failures (checked separately where it matters), the blob's expiry.
var factOpts = cmp.Options{
	cmpopts.IgnoreFields(envelope.BlobAvailable{}, "OccurredAt", "FetchedAt", "BlobExpiresAt"),
	cmpopts.IgnoreFields(envelope.FetchFailed{}, "OccurredAt", "Detail"),
}

var discard = slog.New(slog.DiscardHandler)

// backend is one kind of Redis the worker runs against.
type backend struct {
	name   string
	client rueidis.Client
	// stop takes every server of the backend down (an outage for good).
	stop func()
}

func standalone(t *testing.T, r *testenv.Redis) backend {
	t.Helper()
	return backend{name: "standalone", client: newClient(t, []string{r.Addr}), stop: r.Stop}
}

func cluster(t *testing.T, c *testenv.Cluster) backend {
	t.Helper()
	return backend{name: "cluster", client: newClient(t, c.Addrs), stop: func() {
		for _, n := range c.Nodes {
			n.Stop()
		}
	}}
}

// bothBackends starts a private single server and a private three-master
// cluster for the test, for flows that must hold on both.
func bothBackends(t *testing.T) []backend {
	t.Helper()
	return []backend{standalone(t, testenv.StartRedis(t)), cluster(t, testenv.StartCluster(t))}
}

func newClient(t *testing.T, addrs []string) rueidis.Client {
	t.Helper()
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatalf("redis client: %v", err)
	}
	t.Cleanup(client.Close)
	return client
}

// wenv is one test's world: stream names, an origin, a sink, a pacer and
// a captured log.
type wenv struct {
	t      testing.TB
	client rueidis.Client
	origin *testenv.Origin
	logs   *testenv.LogBuffer
	log    *slog.Logger

	stream, group, facts, dlq, prefix string

	mu        sync.Mutex
	lastAdded string
}

var nameSafe = regexp.MustCompile(`[^A-Za-z0-9]+`)

var envSeq atomic.Int64

func newEnv(t *testing.T, client rueidis.Client, h http.Handler) *wenv {
	t.Helper()
	p := fmt.Sprintf("t%d-%s", envSeq.Add(1), nameSafe.ReplaceAllString(t.Name(), "-"))
	e := &wenv{
		t: t, client: client, logs: &testenv.LogBuffer{},
		stream: p + ":content.fetch", group: p + ".fetch", facts: p + ":content.blobs",
		dlq: p + ":content.fetch.dlq", prefix: p + ":cmd:fetch:",
	}
	e.log = slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if h != nil {
		e.origin = testenv.StartOrigin(t, h)
	}
	t.Cleanup(func() {
		if strings.Contains(e.logs.String(), secretValue) {
			t.Errorf("a header value reached the log:\n%s", e.logs.String())
		}
	})
	return e
}

func (e *wenv) url(host, path string) string { return e.origin.URLFor(host, path) }

// recordingPacer notes when each reservation was granted, the moment a
// request goes out: the decision happened between grant.before and
// grant.after.
type recordingPacer struct {
	policy.Pacer
	mu     sync.Mutex
	grants map[string][]grant
}

type grant struct{ before, after time.Time }

func (p *recordingPacer) Reserve(ctx context.Context, host string, maxWait time.Duration) (policy.Reservation, error) {
	before := time.Now()
	r, err := p.Pacer.Reserve(ctx, host, maxWait)
	if err == nil && r.OK {
		after := time.Now()
		p.mu.Lock()
		p.grants[host] = append(p.grants[host], grant{before.Add(r.Wait), after.Add(r.Wait)})
		p.mu.Unlock()
	}
	return r, err
}

// sent returns the grants of the requests to host, in order.
func (p *recordingPacer) sent(host string) []grant {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]grant(nil), p.grants[host]...)
}

// stack is what a worker runs on.
type stack struct {
	sink    sink.Sink
	pacer   *recordingPacer
	fetcher *fetch.Fetcher
}

// with is wo running on this stack: its fetcher and sink, and so's
// longest wait slept through as the loop's ReadBlock.
func (s *stack) with(wo fetchOptions, so stackOptions) fetchOptions {
	wo.Fetcher, wo.Sink = s.fetcher, s.sink
	if so.maxWait > 0 {
		wo.Loop.ReadBlock = so.maxWait
	}
	return wo
}

type stackOptions struct {
	interval time.Duration            // default floor for every host
	floors   map[string]time.Duration // per-host floors
	maxWait  time.Duration            // the longest wait slept through: the loop's ReadBlock
	sink     sink.Sink
	maxBody  int64
	slots    int
}

type floorMap map[string]time.Duration

func (f floorMap) Floor(host string) (time.Duration, bool) {
	d, ok := f[host]
	return d, ok
}

// newStack builds the fetcher and sink the way a binary would.
func (e *wenv) newStack(o stackOptions) *stack {
	interval := o.interval
	s := &stack{sink: o.sink}
	if s.sink == nil {
		s.sink = memory.New(memory.Options{TTL: time.Hour})
	}
	s.pacer = &recordingPacer{
		Pacer:  policy.NewLocal(policy.LocalOptions{DefaultInterval: spacing(interval), Floors: floorMap(o.floors)}),
		grants: map[string][]grant{},
	}
	s.fetcher = fetch.New(fetch.Options{
		Guard: guard.New(guard.Options{
			Allow:    []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
			Resolver: hosts.Resolver{Table: workerHosts},
		}),
		Pacer:        s.pacer,
		MaxInFlight:  slotsOr4(o.slots),
		MaxBodyBytes: o.maxBody,
		Logger:       e.log,
	})
	e.t.Cleanup(s.fetcher.Close)
	return s
}

// running is a worker started in the background.
type running struct {
	worker   *engine.Loop
	stack    *stack
	cancel   context.CancelFunc
	finished chan struct{}
	err      error // Run's result, once finished is closed
}

// wait waits for Run to return and gives its result.
func (r *running) wait(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case <-r.finished:
		return r.err
	case <-time.After(timeout):
		t.Fatalf("Run did not return within %v", timeout)
		return nil
	}
}

// stop cancels the worker and returns Run's result.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	return r.wait(t, 30*time.Second)
}

// workerOptions are the test defaults: this env's names, short timings.
func (e *wenv) workerOptions() fetchOptions {
	return fetchOptions{
		Consumer: "w1",
		Loop: engine.Config{
			StartID:      "0",
			ReadBlock:    100 * time.Millisecond,
			ClaimMinIdle: 200 * time.Millisecond,
			BackoffBase:  20 * time.Millisecond,
			BackoffMax:   100 * time.Millisecond,
			Logger:       e.log,
		},
		Stream:       e.stream,
		Group:        e.group,
		FactsStream:  e.facts,
		DLQStream:    e.dlq,
		DedupePrefix: e.prefix,
		DrainTimeout: 5 * time.Second,
	}
}

// start runs a worker on a fresh stack until the test ends.
func (e *wenv) start(so stackOptions, wo fetchOptions) *running {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st := e.newStack(so)
	w := newFetchLoop(e.client, st.with(wo, so))
	r := &running{worker: w, stack: st, cancel: cancel, finished: make(chan struct{})}
	go func() {
		r.err = w.Run(ctx)
		close(r.finished)
	}()
	e.t.Cleanup(func() {
		cancel()
		select {
		case <-r.finished:
		case <-time.After(30 * time.Second):
			e.t.Error("worker did not stop within 30s")
		}
	})
	return r
}

func (e *wenv) do(cmd rueidis.Completed) rueidis.RedisResult {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return e.client.Do(ctx, cmd)
}

// add appends a raw frame to the command stream and returns its id.
func (e *wenv) add(fields ...string) string {
	e.t.Helper()
	b := e.client.B().Xadd().Key(e.stream).Id("*").FieldValue()
	for i := 0; i+1 < len(fields); i += 2 {
		b = b.FieldValue(fields[i], fields[i+1])
	}
	cmd := b.Build()
	var id string
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; {
		// Retried: a test may add right after restarting Redis.
		if id, err = e.do(cmd.Pin()).ToString(); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		e.t.Fatalf("XADD: %v", err)
	}
	e.mu.Lock()
	e.lastAdded = id
	e.mu.Unlock()
	return id
}

// addModel appends a model encoded by the envelope codec.
func (e *wenv) addModel(m envelope.Model) string {
	e.t.Helper()
	fields, err := envelope.ToWire(m)
	if err != nil {
		e.t.Fatalf("ToWire: %v", err)
	}
	var kv []string
	for k, v := range fields {
		kv = append(kv, k, v)
	}
	return e.add(kv...)
}

// command is a content_fetch carrying a secret header, so every test checks
// that header values stay out of the log.
func (e *wenv) command(id, url string) *envelope.ContentFetch {
	return &envelope.ContentFetch{
		OccurredAt:   time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC),
		CommandID:    id,
		URL:          url,
		InfoSourceID: "source-" + id,
		Headers:      map[string]string{"Authorization": "Bearer " + secretValue},
	}
}

// factsNow decodes every fact published so far.
func (e *wenv) factsNow() []envelope.Model {
	e.t.Helper()
	entries, err := e.do(e.client.B().Xrange().Key(e.facts).Start("-").End("+").Build()).AsXRange()
	if err != nil {
		e.t.Fatalf("XRANGE facts: %v", err)
	}
	var out []envelope.Model
	for _, en := range entries {
		m, err := envelope.FromWire(en.FieldValues)
		if err != nil {
			e.t.Fatalf("a published fact does not decode: %v", err)
		}
		out = append(out, m)
	}
	return out
}

// dlqNow returns every dead letter written so far.
func (e *wenv) dlqNow() []map[string]string {
	e.t.Helper()
	entries, err := e.do(e.client.B().Xrange().Key(e.dlq).Start("-").End("+").Build()).AsXRange()
	if err != nil {
		e.t.Fatalf("XRANGE dlq: %v", err)
	}
	out := make([]map[string]string, 0, len(entries))
	for _, en := range entries {
		out = append(out, en.FieldValues)
	}
	return out
}

// pending returns how many entries of the group are pending.
func (e *wenv) pending() int {
	e.t.Helper()
	arr, err := e.do(e.client.B().Xpending().Key(e.stream).Group(e.group).Build()).ToArray()
	if err != nil {
		e.t.Fatalf("XPENDING: %v", err)
	}
	n, _ := arr[0].AsInt64()
	return int(n)
}

// pendingRow returns an entry's XPENDING row (id, consumer, idle,
// times-delivered), nil when it is not pending.
func (e *wenv) pendingRow(id string) []rueidis.RedisMessage {
	e.t.Helper()
	arr, err := e.do(e.client.B().Xpending().Key(e.stream).Group(e.group).Start(id).End(id).Count(1).Build()).ToArray()
	if err != nil {
		e.t.Fatalf("XPENDING: %v", err)
	}
	if len(arr) == 0 {
		return nil
	}
	row, _ := arr[0].ToArray()
	return row
}

// owner returns the consumer an entry is pending for, "" if none.
func (e *wenv) owner(id string) string {
	row := e.pendingRow(id)
	if row == nil {
		return ""
	}
	name, _ := row[1].ToString()
	return name
}

func (e *wenv) deduped(commandID string) bool {
	e.t.Helper()
	n, err := e.do(e.client.B().Exists().Key(e.prefix + commandID).Build()).AsInt64()
	if err != nil {
		e.t.Fatalf("EXISTS: %v", err)
	}
	return n == 1
}

func (e *wenv) waitFacts(n int, timeout time.Duration) []envelope.Model {
	e.t.Helper()
	var facts []envelope.Model
	testenv.Eventually(e.t, timeout, fmt.Sprintf("%d facts", n), func() bool {
		facts = e.factsNow()
		return len(facts) >= n
	})
	return facts
}

func (e *wenv) waitDLQ(n int, timeout time.Duration) []map[string]string {
	e.t.Helper()
	var dl []map[string]string
	testenv.Eventually(e.t, timeout, fmt.Sprintf("%d dead letters", n), func() bool {
		dl = e.dlqNow()
		return len(dl) >= n
	})
	return dl
}

// lastDelivered is the group's last-delivered-id, "" before the group exists.
func (e *wenv) lastDelivered() string {
	e.t.Helper()
	groups, err := e.do(e.client.B().XinfoGroups().Key(e.stream).Build()).ToArray()
	if err != nil {
		return ""
	}
	for _, g := range groups {
		m, err := g.AsMap()
		if err != nil {
			e.t.Fatalf("XINFO GROUPS: %v", err)
		}
		name, id := m["name"], m["last-delivered-id"]
		if n, _ := name.ToString(); n == e.group {
			s, _ := id.ToString()
			return s
		}
	}
	return ""
}

// waitSettled waits until every entry added so far was delivered and none
// is pending.
func (e *wenv) waitSettled(timeout time.Duration) {
	e.t.Helper()
	e.mu.Lock()
	last := e.lastAdded
	e.mu.Unlock()
	testenv.Eventually(e.t, timeout, "every entry delivered and none pending", func() bool {
		return e.lastDelivered() == last && e.pending() == 0
	})
}

// parks counts the lines saying entry id was parked until it is due, for
// reason: politeness or storage_full.
func (e *wenv) parks(id, reason string) int {
	n := 0
	for line := range strings.Lines(e.logs.String()) {
		var rec struct {
			Msg       string `json:"msg"`
			MessageID string `json:"message_id"`
			Reason    string `json:"reason"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "parked a command until it is due" &&
			rec.MessageID == id && rec.Reason == reason {
			n++
		}
	}
	return n
}

// dlqReasons lists the dlq_reason of each dead letter, with its original id.
func dlqReasons(dl []map[string]string) []string {
	out := make([]string, len(dl))
	for i, d := range dl {
		out[i] = d[envelope.FieldDLQReason]
	}
	return out
}

// TestWorkerOptionsDefaults: a content.fetch loop built with nothing set
// but its Fetcher and Sink has the documented defaults (docs/settings.md).
func TestWorkerOptionsDefaults(t *testing.T) {
	f := fetch.New(fetch.Options{MaxInFlight: 7, MaxFetchTime: 30 * time.Second})
	defer f.Close()
	blobs := memory.New(memory.Options{})
	h := contentfetch.NewHandler(contentfetch.HandlerOptions{Fetcher: f, Sink: blobs, Logger: discard})
	c := contentfetch.Capability(h)
	c.Consumer = "c"
	l := engine.New(nil, engine.Config{Logger: discard}, c)
	wantConfig := engine.Config{
		StartID:                "$",
		ReadBlock:              5 * time.Second,
		ClaimMinIdle:           60 * time.Second,
		MaxDeliveryAttempts:    5,
		BackoffBase:            time.Second,
		BackoffMax:             30 * time.Second,
		MaxConsecutiveFailures: 20,
		DedupeTTL:              86400 * time.Second,
		Logger:                 discard,
	}
	if diff := cmp.Diff(wantConfig, l.Config(), cmpopts.EquateComparable(slog.Logger{})); diff != "" {
		t.Errorf("config defaults mismatch (-want +got):\n%s", diff)
	}
	want := capability.Capability{
		Name:            "fetch",
		MetricsPrefix:   "replicator_",
		Handler:         h,
		Stream:          "content.fetch",
		Group:           "replicator.fetch",
		FactsStream:     "content.blobs",
		DLQStream:       "content.fetch.dlq",
		DedupePrefix:    "replicator:cmd:fetch:",
		Consumer:        "c",
		Concurrency:     7 + contentfetch.SpareHandlings, // the Fetcher's MaxInFlight, and the spares
		MaxHeld:         256,                             // the floor: 2 × 7 is less
		MaxHeldPerKey:   64,
		MaxActivePerKey: 4,
		DrainTimeout:    40 * time.Second,
	}
	if diff := cmp.Diff(want, l.Capability(), cmpopts.EquateComparable(h)); diff != "" {
		t.Errorf("capability defaults mismatch (-want +got):\n%s", diff)
	}
	for concurrency, want := range map[int]int{1: 256, 16: 256, 128: 256, 129: 258, 1024: 2048, 10000: 20000} {
		if got := contentfetch.DefaultMaxHeld(concurrency); got != want {
			t.Errorf("DefaultMaxHeld(%d) = %d, want %d", concurrency, got, want)
		}
	}
	// With no consumer named, the group's first slot.
	if got := engine.New(nil, engine.Config{Logger: discard}, contentfetch.Capability(h)).Capability().Consumer; got != "replicator-fetch-1" {
		t.Errorf("default consumer = %q, want replicator-fetch-1", got)
	}
}

// slotsOr4 is a stack's requests in flight: 4 unless the test says.
func slotsOr4(n int) int {
	if n <= 0 {
		return 4
	}
	return n
}

// spacing is d as a policy.LocalOptions.DefaultInterval: None when d is
// zero, so a zero interval means no spacing as the tests intend.
func spacing(d time.Duration) time.Duration {
	if d == 0 {
		return policy.None
	}
	return d
}

func TestOpenFiles(t *testing.T) {
	// A connection and a store per request in flight, the idle pool, and
	// the spare.
	if got, want := contentfetch.OpenFiles(10000), 20000+idleConns()+256; got != want {
		t.Errorf("OpenFiles(10000) = %d, want %d", got, want)
	}
	if d := contentfetch.OpenFiles(101) - contentfetch.OpenFiles(100); d != 2 {
		t.Errorf("each request in flight adds %d files, want 2", d)
	}
	// Fitted, a connection per request in flight is all that grows.
	if d := contentfetch.MinOpenFiles(101) - contentfetch.MinOpenFiles(100); d != 1 {
		t.Errorf("each request in flight adds %d files to the least, want 1", d)
	}
	// At the least, the fetcher still has a body streaming and an idle
	// connection.
	for _, c := range []int{1, 16, 16384} {
		storing, idle := fetch.Options{MaxInFlight: c, MaxOpenFiles: contentfetch.FetcherOpenFiles(uint64(contentfetch.MinOpenFiles(c)))}.OpenFiles()
		if storing < 1 || idle < 1 {
			t.Errorf("at %d in flight, the least open files leave %d bodies storing and %d idle connections", c, storing, idle)
		}
	}
	for limit, want := range map[uint64]int{0: 0, 1: 1, 20000: 20000 - 256, 1 << 40: math.MaxInt32 - 256} {
		if got := contentfetch.FetcherOpenFiles(limit); got != want {
			t.Errorf("FetcherOpenFiles(%d) = %d, want %d", limit, got, want)
		}
	}
}

// idleConns is the idle-connection pool of a Fetcher left unbounded.
func idleConns() int {
	_, idle := fetch.Options{}.OpenFiles()
	return idle
}
