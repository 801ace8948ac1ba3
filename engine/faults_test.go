package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
)

// Faults against a real Redis: a group that vanishes, a delivery taken by
// another consumer while its handling runs, and a Redis that falls silent
// (docs/streams.md, Group, Fates and Broker trouble).

// lenv is one test's loop on a private Redis: its keys, its client and its
// log.
type lenv struct {
	t      *testing.T
	redis  *testenv.Redis
	client rueidis.Client
	logs   *testenv.LogBuffer
	o      options
}

func newLEnv(t *testing.T) *lenv {
	t.Helper()
	r := testenv.StartRedis(t)
	e := &lenv{t: t, redis: r, client: dial(t, r.Addr), logs: &testenv.LogBuffer{}}
	e.o = testOptions(nil, e.logs)
	e.o.ReadBlock, e.o.Concurrency = 100*time.Millisecond, 16
	return e
}

func dial(t *testing.T, addr string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		t.Fatalf("redis client: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// running is a Loop whose Run is under way.
type running struct {
	loop *Loop
	stop context.CancelFunc
	done chan error
}

// start builds a loop on client and runs it until the test ends; adjust,
// when set, changes it before it runs.
func (e *lenv) start(client rueidis.Client, c *testCap, adjust func(*Loop)) *running {
	e.t.Helper()
	o := e.o
	o.Handler = c
	l := newLoop(client, o)
	if adjust != nil {
		adjust(l)
	}
	ctx, stop := context.WithCancel(context.Background())
	r := &running{loop: l, stop: stop, done: make(chan error, 1)}
	go func() { r.done <- l.Run(ctx) }()
	e.t.Cleanup(func() {
		stop()
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			e.t.Error("Run did not return within 10 s of being stopped")
		}
	})
	testenv.Eventually(e.t, 10*time.Second, "the consumer group", l.Healthy)
	return r
}

// add publishes a command, retrying while Redis comes back, and returns
// its entry id.
func (e *lenv) add(id, fate string) string {
	e.t.Helper()
	var err error
	for range 100 {
		var entry string
		cmd := e.client.B().Xadd().Key(e.o.Stream).Id("*").FieldValue().FieldValue("key", id).FieldValue("payload", fate).Build()
		if entry, err = e.client.Do(context.Background(), cmd).ToString(); err == nil {
			return entry
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.t.Fatalf("XADD %s: %v", id, err)
	return ""
}

// facts lists the command_id of every fact published.
func (e *lenv) facts() []string {
	e.t.Helper()
	got, err := e.client.Do(context.Background(), e.client.B().Xrange().Key(e.o.FactsStream).Start("-").End("+").Build()).AsXRangeSlices()
	if err != nil {
		e.t.Fatalf("XRANGE facts: %v", err)
	}
	ids := make([]string, 0, len(got))
	for _, x := range got {
		fields := map[string]string{}
		for _, f := range x.FieldValues {
			fields[f.Field] = f.Value
		}
		m, err := envelope.FromWire(fields)
		if err != nil {
			e.t.Fatalf("fact %s: %v", x.ID, err)
		}
		ids = append(ids, m.(*envelope.FetchFailed).CommandID)
	}
	return ids
}

func (e *lenv) xlen(key string) int64 {
	e.t.Helper()
	n, err := e.client.Do(context.Background(), e.client.B().Xlen().Key(key).Build()).AsInt64()
	if err != nil {
		e.t.Fatalf("XLEN %s: %v", key, err)
	}
	return n
}

// pendingFor names the consumer an entry is pending for ("" if none).
func (e *lenv) pendingFor(id string) string {
	e.t.Helper()
	cmd := e.client.B().Xpending().Key(e.o.Stream).Group(e.o.Group).Start(id).End(id).Count(1).Build()
	got, err := e.client.Do(context.Background(), cmd).ToArray()
	if err != nil {
		e.t.Fatalf("XPENDING: %v", err)
	}
	if len(got) == 0 {
		return ""
	}
	entry, _ := got[0].ToArray()
	name, _ := entry[1].ToString()
	return name
}

// gate holds the loop's first back-off until opened, so a test can act
// while the loop knows only that Redis failed once.
type gate struct {
	entered chan struct{}
	open    chan struct{}
	once    sync.Once
}

func newGate() *gate { return &gate{entered: make(chan struct{}), open: make(chan struct{})} }

func (g *gate) sleep(ctx context.Context, d time.Duration) error {
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.entered)
		select {
		case <-g.open:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return sleep(ctx, d)
}

func TestLoopRecreatesVanishedGroupWhereItLeftOff(t *testing.T) {
	tests := []struct {
		name string
		// before is how many commands the loop reads before the fault.
		before int
		// fault empties the stream while the loop runs.
		fault func(e *lenv)
	}{
		{name: "Redis restarted empty", before: 3, fault: func(e *lenv) {
			e.redis.Stop()
			if err := e.redis.Start(); err != nil {
				e.t.Fatal(err)
			}
		}},
		{name: "stream deleted", before: 3, fault: func(e *lenv) {
			e.client.Do(context.Background(), e.client.B().Del().Key(e.o.Stream).Build())
		}},
		{name: "Redis restarted empty before anything was read", before: 0, fault: func(e *lenv) {
			e.redis.Stop()
			if err := e.redis.Start(); err != nil {
				e.t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newLEnv(t)
			g := newGate()
			// The group is created at "$", as on a first deployment.
			e.start(e.client, &testCap{}, func(l *Loop) { l.clock.sleep = g.sleep })
			var want []string
			for i := range tt.before {
				want = append(want, fmt.Sprintf("before-%d", i))
				e.add(want[i], planNotModified)
			}
			testenv.Eventually(t, 10*time.Second, "the facts of the first commands", func() bool { return len(e.facts()) == tt.before })

			tt.fault(e)
			select {
			case <-g.entered:
			case <-time.After(10 * time.Second):
				t.Fatal("the loop did not notice the fault")
			}
			// Published before the loop finds its group gone.
			var after []string
			for i := range 5 {
				after = append(after, fmt.Sprintf("after-%d", i))
				e.add(after[i], planNotModified)
			}
			close(g.open)
			testenv.Eventually(t, 10*time.Second, "a fact for every command published after the fault", func() bool {
				got := e.facts()
				for _, id := range after {
					if !slices.Contains(got, id) {
						return false
					}
				}
				return true
			})
			if got := e.xlen(e.o.DLQStream); got != 0 {
				t.Errorf("%d dead letters, want none", got)
			}
			if !strings.Contains(e.logs.String(), "consumer group is gone; recreating it where this worker left off") {
				t.Error("no log line about the vanished group")
			}
		})
	}
}

func TestLoopIDAfter(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"1-0", "", true},
		{"", "", false},
		{"1-1", "1-0", true},
		{"1-0", "1-1", false},
		{"10-0", "9-99", true},
		{"9-99", "10-0", false},
		{"1796171801214-0", "1796171801213-7", true},
	}
	for _, tt := range tests {
		if got := idAfter(tt.a, tt.b); got != tt.want {
			t.Errorf("idAfter(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestLoopWritesNoFateForADeliveryTakenElsewhere takes each command's
// delivery to another consumer while its handling is held (as a reclaim
// after this worker paused would), 20 times per fate: no fact, no dedupe
// key, no ack and no dead letter may follow from this worker.
func TestLoopWritesNoFateForADeliveryTakenElsewhere(t *testing.T) {
	for _, fate := range []string{planNotModified, planPermanent, planUnclassified} {
		t.Run(fate, func(t *testing.T) {
			e := newLEnv(t)
			e.o.MaxDeliveryAttempts = 1 // an unclassified failure closes its command, if this worker owns it
			entered := make(chan string)
			release := make(chan struct{})
			// The claim below stands for a reclaim after this worker paused
			// past ClaimMinIdle: long after any delivery it could trust.
			run := e.start(e.client, &testCap{hold: func(c tcmd) {
				entered <- c.id
				<-release
			}}, func(l *Loop) { l.trustOwnFor = 0 })
			for i := range 20 {
				id := fmt.Sprintf("%s-%d", fate, i)
				entry := e.add(id, fate)
				if got := <-entered; got != id {
					t.Fatalf("handling %s, want %s", got, id)
				}
				claim := e.client.B().Xclaim().Key(e.o.Stream).Group(e.o.Group).Consumer("other").MinIdleTime("0").Id(entry).Build()
				if err := e.client.Do(context.Background(), claim).Error(); err != nil {
					t.Fatalf("XCLAIM: %v", err)
				}
				release <- struct{}{}
				testenv.Eventually(t, 10*time.Second, "the handling to end", func() bool { held, _ := run.loop.counts(); return held == 0 })

				if got := e.facts(); len(got) != 0 {
					t.Fatalf("run %d: facts %v, want none: another consumer owns the delivery", i, got)
				}
				if got := e.xlen(e.o.DLQStream); got != 0 {
					t.Fatalf("run %d: %d dead letters, want none", i, got)
				}
				if got := e.pendingFor(entry); got != "other" {
					t.Fatalf("run %d: entry pending for %q, want other: this worker acked it", i, got)
				}
				n, err := e.client.Do(context.Background(), e.client.B().Exists().Key(e.o.DedupePrefix+id).Build()).AsInt64()
				if err != nil || n != 0 {
					t.Fatalf("run %d: dedupe key exists (%d, %v), want none", i, n, err)
				}
			}
			if got := strings.Count(e.logs.String(), "no longer owns a handled command"); got != 20 {
				t.Errorf("%d log lines about a command no longer owned, want 20", got)
			}
		})
	}
}

// TestLoopStillWritesTheFatesItOwns is the other side: the check lets
// every owned delivery through, in batches.
func TestLoopStillWritesTheFatesItOwns(t *testing.T) {
	e := newLEnv(t)
	e.start(e.client, &testCap{}, nil)
	var want []string
	for i := range 200 {
		want = append(want, fmt.Sprintf("c%03d", i))
		e.add(want[i], planNotModified)
	}
	testenv.Eventually(t, 20*time.Second, "200 facts", func() bool { return len(e.facts()) == 200 })
	got := e.facts()
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("facts mismatch (-want +got):\n%s", diff)
	}
	testenv.Eventually(t, 10*time.Second, "every entry acked", func() bool {
		n, err := e.client.Do(context.Background(), e.client.B().Xpending().Key(e.o.Stream).Group(e.o.Group).Build()).ToArray()
		if err != nil || len(n) == 0 {
			return false
		}
		c, _ := n[0].AsInt64()
		return c == 0
	})
}

// silentProxy forwards TCP to a Redis until silenced; from then on it
// accepts connections and reads what is sent, and answers nothing, as a
// network that drops packets would look to the client.
type silentProxy struct {
	ln     net.Listener
	target string
	silent atomic.Bool
	// onSend, when set, sees each chunk a client sends while forwarding.
	onSend atomic.Pointer[func([]byte)]
}

func startSilentProxy(t *testing.T, target string) *silentProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &silentProxy{ln: ln, target: target}
	// The accept loop is in the group too: a connection accepted as the
	// listener closes is then added while the count is above zero, never
	// alongside Wait.
	var conns sync.WaitGroup
	t.Cleanup(func() { ln.Close(); conns.Wait() })
	conns.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Go(func() { p.serve(c) })
		}
	})
	return p
}

func (p *silentProxy) Addr() string { return p.ln.Addr().String() }

func (p *silentProxy) serve(c net.Conn) {
	defer c.Close()
	if p.silent.Load() {
		io.Copy(io.Discard, c)
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer up.Close()
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := up.Read(buf)
			if err != nil {
				c.Close()
				return
			}
			if !p.silent.Load() {
				c.Write(buf[:n])
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return
		}
		if p.silent.Load() {
			continue
		}
		if f := p.onSend.Load(); f != nil {
			(*f)(buf[:n])
		}
		up.Write(buf[:n])
	}
}

// silentOptions make a short outage limit: the back-offs of 5 failed
// cycles, 250 + 500 + 1000 + 1000 ms.
func silentOptions(o Config) Config {
	o.BackoffBase, o.BackoffMax, o.MaxConsecutiveFailures = 250*time.Millisecond, time.Second, 5
	return o
}

const silentLimit = 2750 * time.Millisecond

func TestLoopOutageLimit(t *testing.T) {
	tests := []struct {
		name string
		c    Config
		want time.Duration
	}{
		{name: "defaults", want: 451 * time.Second},
		{name: "short", c: silentOptions(Config{}), want: silentLimit},
		{name: "one failure", c: Config{MaxConsecutiveFailures: 1}, want: 0},
		{name: "base at the max", c: Config{BackoffBase: 2 * time.Second, BackoffMax: 2 * time.Second, MaxConsecutiveFailures: 15}, want: 28 * time.Second},
		{name: "saturates", c: Config{BackoffMax: 1 << 62, MaxConsecutiveFailures: 1 << 40}, want: 1<<63 - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.OutageLimit(); got != tt.want {
				t.Errorf("OutageLimit() = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestLoopGivesUpOnSilentRedis silences Redis (a peer that accepts and
// never answers) under an idle loop: Run must return within the outage
// limit ± 20 %, naming the stream and the operation.
func TestLoopGivesUpOnSilentRedis(t *testing.T) {
	e := newLEnv(t)
	e.o.Config = silentOptions(e.o.Config)
	proxy := startSilentProxy(t, e.redis.Addr)
	run := e.start(dial(t, proxy.Addr()), &testCap{}, nil)
	time.Sleep(300 * time.Millisecond) // a few idle reads

	silenced := time.Now()
	proxy.silent.Store(true)
	var err error
	select {
	case err = <-run.done:
	case <-time.After(3 * silentLimit):
		t.Fatalf("Run has not returned %v after Redis fell silent; the outage limit is %v", 3*silentLimit, silentLimit)
	}
	took := time.Since(silenced)
	t.Logf("Run returned %v after Redis fell silent (outage limit %v)", took, silentLimit)
	run.done <- err // for the cleanup
	if !errors.Is(err, ErrBrokerUnavailable) {
		t.Fatalf("Run = %v, want ErrBrokerUnavailable", err)
	}
	if took < silentLimit*8/10 || took > silentLimit*12/10 {
		t.Errorf("Run returned %v after Redis fell silent, want %v ± 20 %%", took, silentLimit)
	}
	for _, want := range []string{e.o.Stream + ":", `op "read"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	line := lastLine(e.logs.String(), "giving up")
	for _, want := range []string{`"stream":"cmds"`, `"op":"read"`, `"outage_limit_seconds":2.75`} {
		if !strings.Contains(line, want) {
			t.Errorf("giving-up line %s lacks %s", line, want)
		}
	}
	if start := lastLine(e.logs.String(), "consume loop starting"); !strings.Contains(start, `"outage_limit_seconds":2.75`) {
		t.Errorf("start-up line %s does not state the outage limit", start)
	}
}

// TestLoopsGiveUpNamingTheFirstFailure runs a busy loop and an idle one on
// one silenced Redis, as the worker does: the busy loop's write, due just
// after the silence, began the outage, not the read the idle loop had
// under way, so the busy loop gives up first and its error is the one a
// supervisor sees.
func TestLoopsGiveUpNamingTheFirstFailure(t *testing.T) {
	e := newLEnv(t)
	e.o.Config = silentOptions(e.o.Config)
	proxy := startSilentProxy(t, e.redis.Addr)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{proxy.Addr()}, DisableCache: true,
		ConnWriteTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)

	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	busy := e.start(client, &testCap{hold: func(tcmd) {
		entered <- struct{}{}
		<-release
	}}, nil)
	idleEnv := *e
	idleEnv.o.Stream, idleEnv.o.Group, idleEnv.o.ReadBlock = "idle-cmds", "idle-g", time.Second
	idle := idleEnv.start(client, &testCap{}, nil)

	e.add("c1", planNotModified)
	<-entered
	// Silence Redis just after the idle loop sends a read, so the read
	// was due a whole block (1 s) after the silence began.
	reads := make(chan struct{}, 1)
	onSend := func(b []byte) {
		if strings.Contains(string(b), "idle-cmds") && strings.Contains(string(b), "XREADGROUP") {
			select {
			case reads <- struct{}{}:
			default:
			}
		}
	}
	proxy.onSend.Store(&onSend)
	<-reads
	proxy.silent.Store(true)
	close(release) // the busy loop's fact is now due

	var first error
	select {
	case first = <-busy.done:
		busy.done <- first
	case err := <-idle.done:
		idle.done <- err
		t.Fatalf("the idle loop gave up first: %v", err)
	case <-time.After(3 * silentLimit):
		t.Fatal("no loop gave up")
	}
	if !errors.Is(first, ErrBrokerUnavailable) {
		t.Fatalf("busy Run = %v, want ErrBrokerUnavailable", first)
	}
	t.Logf("the busy loop gave up first: %v", first)
	if !strings.HasPrefix(first.Error(), ErrBrokerUnavailable.Error()+": cmds:") {
		t.Errorf("error %q does not name the busy loop's stream", first)
	}
}

// lastLine returns the last log line containing sub.
func lastLine(logs, sub string) string {
	lines := strings.Split(logs, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], sub) {
			return lines[i]
		}
	}
	return ""
}

// TestLoopGivesUpAfterTheOutageLimitWhateverTheTimeouts: at the defaults
// the limit is 451 s; with every read waiting out a 7 s timeout, counting
// 20 failed cycles would take 20 × 7 s more. The loop gives up 451 s after
// the first read was due (its 5 s block after the start), to the
// millisecond.
func TestLoopGivesUpAfterTheOutageLimitWhateverTheTimeouts(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clk := &fakeClock{t: t0}
	logs := &testenv.LogBuffer{}
	o := testOptions(&testCap{}, logs)
	o.Concurrency = 1
	l := newLoop(nil, o)
	// Each read waits out a 7 s timeout on the loop's clock and fails, as
	// on a silent network; a shorter deadline on its context cuts the wait
	// short.
	fb := newFakeBroker("c", clk.now)
	fb.fault("read", func(ctx context.Context) error {
		wait := 7 * time.Second
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		clk.advance(wait)
		return errors.New("i/o timeout")
	})
	b := newRecorder(fb)
	l.b, l.clock = b, clock{now: clk.now, sleep: clk.sleep}

	err := l.Run(context.Background())
	if !errors.Is(err, ErrBrokerUnavailable) {
		t.Fatalf("Run = %v, want ErrBrokerUnavailable", err)
	}
	want := t0.Add(DefaultReadBlock + 451*time.Second)
	if got := clk.now(); got.Before(want) || got.After(want.Add(time.Millisecond)) {
		t.Errorf("gave up at start + %v, want start + %v", got.Sub(t0), want.Sub(t0))
	}
	reads := 0
	for _, call := range b.record() {
		if strings.HasPrefix(call, "read") {
			reads++
		}
	}
	if n := reads; n >= DefaultMaxConsecutiveFailures {
		t.Errorf("%d reads; the timeouts should have left room for fewer than %d", n, DefaultMaxConsecutiveFailures)
	}
	line := lastLine(logs.String(), "giving up")
	for _, want := range []string{`"stream":"cmds"`, `"op":"read"`, `"outage_seconds":451`, `"outage_limit_seconds":451`} {
		if !strings.Contains(line, want) {
			t.Errorf("giving-up line %s lacks %s", line, want)
		}
	}
}
