//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/replicator-go/replicator/contentfetch"
)

// Defaults of the latency-bound mode.
const (
	lbDefaultDelay  = 500 * time.Millisecond
	lbDefaultSteady = 5 * time.Second
	lbDefaultHosts  = 1000
	lbDefaultSweep  = "16,256,1024"
)

// The latency-bound bar: at lbBarConcurrency requests in flight the worker
// reaches lbBarShare of concurrency ÷ delay, or at least the bare loop's
// share in the same run.
const (
	lbBarConcurrency = 1024
	lbBarShare       = 0.9
)

// lbMaxShare is the most of concurrency ÷ delay a point may report: a
// rate above it counted something other than fetches waiting on the
// origin (commands failing fast, say), and the point is refused.
const lbMaxShare = 1.02

// lbLateShare: an origin whose timers wake on average later than
// delay ÷ lbLateShare past the delay is a bench short of CPU, and the
// point says so.
const lbLateShare = 50

// parseSweep reads a comma-separated list of positive concurrencies, in
// ascending order without repeats.
func parseSweep(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-sweep: %q is not a positive count", f)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// lbSide is what one process (the worker or the bare loop) did at one
// point of the sweep in one run.
type lbSide struct {
	commands int
	perSec   float64 // steady-state completions per second (steadyRate)
	peakRSS  int64
	// CPU seconds of the measured process, of Redis and of the bench (the
	// origin and the watching) over the whole point.
	cpu, cpuRedis, cpuBench float64
	failed                  int // worker: commands not stored; bare: failed GETs
	// The origin's view: most requests it held at once, their mean over
	// the steady window, connections it accepted, and how late its timers
	// woke past the delay.
	originPeak        int64
	originMean        float64
	conns             int
	lateMax, lateMean time.Duration
	refetched         int // requests the origin saw again for one command
	// The worker: how long after a fetch ended (its fact's fetched_at)
	// the fact was in the stream (its entry id), median and p99.
	publishP50, publishP99 time.Duration
}

// perCommand is s seconds of CPU divided over the side's commands.
func (s lbSide) perCommand(sec float64) time.Duration {
	if s.commands == 0 {
		return 0
	}
	return time.Duration(math.Round(sec * 1e9 / float64(s.commands)))
}

// lbPoint is one concurrency of the sweep in one run.
type lbPoint struct {
	concurrency  int
	delay        time.Duration
	worker, bare lbSide
	openFiles    uint64 // the worker's open-file limit
}

// filesShort reports whether the worker may open fewer files than it
// needs at the point's concurrency even once fitted to its limit
// (contentfetch.MinOpenFiles): then its fetches and stores fail with "too many
// open files".
func (p lbPoint) filesShort() bool {
	return p.openFiles > 0 && p.openFiles < uint64(contentfetch.MinOpenFiles(p.concurrency))
}

// marked reports whether the origin saw a worker's command more than once:
// a command failed (out of descriptors, say) and came back through the
// reclaim a minute later, so the figures are not those of a worker
// keeping its concurrency in flight, and the point is marked.
func (p lbPoint) marked() bool { return p.worker.refetched > 0 }

// ideal is the rate a loop with concurrency requests always in flight,
// each taking exactly delay, would reach: concurrency ÷ delay.
func (p lbPoint) ideal() float64 {
	if p.delay <= 0 {
		return 0
	}
	return float64(p.concurrency) / p.delay.Seconds()
}

// share is rate ÷ ideal.
func (p lbPoint) share(rate float64) float64 {
	if id := p.ideal(); id > 0 {
		return rate / id
	}
	return 0
}

// steadyRate is the completion rate, per second, over steadyWindow; 0
// for fewer than two completions or none apart.
func steadyRate(doneNs []int64, skip int) float64 {
	from, to, n := steadyWindow(doneNs, skip)
	if to <= from {
		return 0
	}
	return float64(n) / (float64(to-from) / 1e9)
}

// steadyWindow is the span, as unix ns, from the end of the first skip
// completions to the end of the last-but-skip, and how many completions
// fall after its start and by its end. With every command queued first,
// completions come in waves of concurrency one delay apart, the first and
// last being ramp-up and tail; a window from one wave's end to another's
// holds whole waves, so perfect waves give exactly concurrency ÷ delay.
// skip shrinks when there are too few completions; with 0 the window is
// first to last.
func steadyWindow(doneNs []int64, skip int) (from, to int64, n int) {
	if len(doneNs) < 2 {
		return 0, 0, 0
	}
	t := slices.Clone(doneNs)
	slices.Sort(t)
	skip = max(min(skip, (len(t)-1)/2), 0)
	a, b := 0, len(t)-1
	if skip > 0 {
		a, b = skip-1, len(t)-skip-1
	}
	return t[a], t[b], b - a
}

// lbCommands is how many commands a point needs: whole waves of
// concurrency covering steady, at least lbMinWaves, plus the first and
// last waves that steadyRate skips. Whole waves keep the window exact when
// the delay is as long as steady or longer.
func lbCommands(concurrency int, delay, steady time.Duration) int {
	waves := max(int(math.Ceil(steady.Seconds()/delay.Seconds())), lbMinWaves)
	return concurrency * (waves + 2)
}

// lbMinWaves is the fewest waves the steady window holds. A machine short
// of CPU handles a wave's completions over seconds, the first wave (every
// request sent at once) the longest; the window opens at its end, so with
// a window of one long wave that lag alone moved the rate by a tenth.
const lbMinWaves = 4

// lbOpenFiles is how many descriptors a process may use at a
// concurrency: what the worker uses unfitted (contentfetch.OpenFiles: a
// connection and a blob file per request in flight, the idle pool, a
// margin), which is more than the bare loop's. The origin, inside the
// bench, holds the other end of each connection.
func lbOpenFiles(concurrency int) uint64 {
	return uint64(contentfetch.OpenFiles(concurrency))
}

// raiseOpenFiles raises this process's open-file limit, which the worker
// it starts inherits, towards need: the soft limit, and the hard one where
// it is allowed to (as root with CAP_SYS_RESOURCE). It returns the soft
// limit now in force, which may stay under need: the points that need
// more are run, and marked if commands fail (lbPoint.marked).
func raiseOpenFiles(need uint64) (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("reading RLIMIT_NOFILE: %w", err)
	}
	if lim.Cur >= need {
		return lim.Cur, nil
	}
	for _, want := range []syscall.Rlimit{{Cur: need, Max: max(lim.Max, need)}, {Cur: min(need, lim.Max), Max: lim.Max}} {
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err == nil {
			return want.Cur, nil
		}
	}
	return lim.Cur, nil
}

// procOpenFiles is the soft "Max open files" limit of process pid, 0 if
// unknown or unlimited.
func procOpenFiles(pid int) uint64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				n, _ := strconv.ParseUint(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}

// delayedOrigin answers every request delay after its bytes reached the
// origin's socket (the kernel's stamp, stamp.go), so the origin's own
// scheduling lag is not added to the delay. Each request waits on a
// timer in its connection's goroutine: nothing spins, and a thousand
// waiting requests cost a thousand parked goroutines.
type delayedOrigin struct {
	delay time.Duration
	body  http.Handler

	inFlight, peak atomic.Int64
	lateMax        atomic.Int64 // ns past the delay, the largest
	lateSum, woken atomic.Int64

	mu      sync.Mutex
	samples []inFlightSample // see watch
	seen    map[string]bool  // paths requested
	again   int              // requests for a path already requested
}

// inFlightSample is how many requests the origin held at one moment.
type inFlightSample struct {
	at int64 // unix ns
	n  int64
}

// watch samples the requests in flight every tick until the returned
// stop is called; stop waits for the sampler to be gone. Twenty samples a
// second cost the bench nothing it would notice.
func (d *delayedOrigin) watch(tick time.Duration) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case now := <-t.C:
				d.mu.Lock()
				d.samples = append(d.samples, inFlightSample{now.UnixNano(), d.inFlight.Load()})
				d.mu.Unlock()
			}
		}
	}()
	return func() { close(quit); <-done }
}

// meanInFlight is the mean of the samples taken from from to to (unix
// ns), 0 if none was: how many requests the measured loop really kept at
// the origin over the window its rate is counted in.
func (d *delayedOrigin) meanInFlight(from, to int64) float64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	var sum, n int64
	for _, s := range d.samples {
		if s.at >= from && s.at <= to {
			sum += s.n
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return float64(sum) / float64(n)
}

func (d *delayedOrigin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	if d.seen == nil {
		d.seen = make(map[string]bool)
	}
	if d.seen[r.URL.Path] {
		d.again++
	}
	d.seen[r.URL.Path] = true
	d.mu.Unlock()
	n := d.inFlight.Add(1)
	defer d.inFlight.Add(-1)
	for p := d.peak.Load(); n > p && !d.peak.CompareAndSwap(p, n); p = d.peak.Load() {
	}
	at, _ := arrival(r.Context())
	t := time.NewTimer(d.delay - time.Since(at))
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
		return
	}
	late := int64(max(time.Since(at)-d.delay, 0))
	for m := d.lateMax.Load(); late > m && !d.lateMax.CompareAndSwap(m, late); m = d.lateMax.Load() {
	}
	d.lateSum.Add(late)
	d.woken.Add(1)
	d.body.ServeHTTP(w, r)
}

// lateMean is the mean time the timers woke past the delay.
func (d *delayedOrigin) lateMean() time.Duration {
	if n := d.woken.Load(); n > 0 {
		return time.Duration(d.lateSum.Load() / n)
	}
	return 0
}

// runLatencyBound runs the sweep -runs times: at each concurrency the
// worker, then the bare loop, each over its own queued load and a fresh
// delayed origin; it prints every point, the medians, the bar at
// lbBarConcurrency, and writes the plot of the medians.
func runLatencyBound(ctx context.Context, b *bench) error {
	sweep, err := b.lbSweep()
	if err != nil {
		return err
	}
	for _, c := range sweep {
		if h := b.lbHosts(c); h*maxActivePerHost < c {
			return fmt.Errorf("%d hosts × %d requests per host < %d in flight: the worker cannot reach that concurrency (leave -hosts unset for as many hosts as fetches in flight)",
				h, maxActivePerHost, c)
		}
	}
	fmt.Fprintf(b.out, "every response %s after the request arrived; %s, %d-byte bodies, spacing 0, blobs on %s\n",
		b.lbDelayText(), b.lbHostsText(), b.o.bodySize, b.dir)
	fmt.Fprintf(b.out, "sweep of REPLICATOR_CONCURRENCY %s (the bare loop with as many GETs in flight); all commands queued first;\n",
		ints(sweep))
	fmt.Fprintf(b.out, "commands/s counted from the end of the first wave of completions to the end of the last-but-one (a wave: concurrency commands);\n")
	fmt.Fprintf(b.out, "a completion is the fetch's end, its fact's fetched_at (the bare loop: its ack)\n")
	files, err := raiseOpenFiles(lbOpenFiles(sweep[len(sweep)-1]))
	if err != nil {
		return err
	}
	all := make([][]lbPoint, len(sweep)) // per sweep point, one per run
	for run := 1; run <= b.o.runs; run++ {
		fmt.Fprintf(b.out, "run %d:\n", run)
		printLBHeader(b)
		for i, c := range sweep {
			delay, h := b.lbDelay(c), b.lbHosts(c)
			n := b.o.commands
			if n == 0 {
				n = lbCommands(c, delay, b.o.steady)
			}
			p := lbPoint{concurrency: c, delay: delay, openFiles: files}
			for _, variant := range []string{"worker", "bare"} {
				s, err := b.latencyBoundOnce(ctx, variant, run, p, n, h)
				if err != nil {
					return fmt.Errorf("%s at concurrency %d, run %d: %w", variant, c, run, err)
				}
				if variant == "worker" {
					p.worker = s
				} else {
					p.bare = s
				}
			}
			all[i] = append(all[i], p)
			printLBPoint(b, p)
		}
	}
	med := make([]lbPoint, len(sweep))
	for i, ps := range all {
		med[i] = medianPoint(ps)
	}
	if b.o.runs > 1 {
		fmt.Fprintf(b.out, "medians of %d runs:\n", b.o.runs)
		printLBHeader(b)
		for _, p := range med {
			printLBPoint(b, p)
		}
	}
	plotErr := b.writeLBPlot(med)
	barErr := lbBar(b, sweep, all)
	return errors.Join(plotErr, barErr)
}

// lbDelay is the origin's delay at a concurrency: -delay, grown to
// concurrency ÷ -rate when that is longer, so every point asks for about
// the same rate and only the number of fetches waiting grows.
func (b *bench) lbDelay(concurrency int) time.Duration {
	d := b.o.delay
	if b.o.rate > 0 {
		d = max(d, time.Duration(float64(concurrency)/b.o.rate*float64(time.Second)).Round(time.Millisecond))
	}
	return d
}

func (b *bench) lbDelayText() string {
	if b.o.rate > 0 {
		return fmt.Sprintf("concurrency ÷ %s/s, at least %s,", thousands(b.o.rate), b.o.delay)
	}
	return b.o.delay.String()
}

// lbHosts is how many hosts a point's commands are spread over: -hosts,
// else lbDefaultHosts or as many as fetches in flight, whichever is more.
func (b *bench) lbHosts(concurrency int) int {
	if b.o.hosts > 0 {
		return b.o.hosts
	}
	return max(lbDefaultHosts, concurrency)
}

func (b *bench) lbHostsText() string {
	if b.o.hosts > 0 {
		return fmt.Sprintf("%d hosts", b.o.hosts)
	}
	return fmt.Sprintf("%d hosts or as many as fetches in flight", lbDefaultHosts)
}

// lbSweep is the sweep: -sweep, else the one point -concurrency, else the
// default.
func (b *bench) lbSweep() ([]int, error) {
	switch {
	case b.o.sweep != "":
		return parseSweep(b.o.sweep)
	case b.o.concurrency > 0:
		return []int{b.o.concurrency}, nil
	default:
		return parseSweep(lbDefaultSweep)
	}
}

// lbBar checks the bar at lbBarConcurrency on the medians of the runs.
func lbBar(b *bench, sweep []int, all [][]lbPoint) error {
	i := slices.Index(sweep, lbBarConcurrency)
	if i < 0 {
		fmt.Fprintf(b.out, "bar: not checked: the sweep has no %d point\n", lbBarConcurrency)
		return nil
	}
	ps := all[i]
	w := mapf(ps, func(p lbPoint) float64 { return p.share(p.worker.perSec) })
	bare := mapf(ps, func(p lbPoint) float64 { return p.share(p.bare.perSec) })
	mw, mb := median(w), median(bare)
	ok := lbBarMet(mw, mb)
	fmt.Fprintf(b.out, "bar: at %d in flight (%s per response) the worker reaches ≥ %.0f%% of concurrency ÷ delay or the bare loop's share: median worker %.3f (runs %s), bare %.3f (runs %s) %s\n",
		lbBarConcurrency, ps[0].delay, lbBarShare*100, mw, floats3(w), mb, floats3(bare), verdict(ok))
	if !ok {
		return fmt.Errorf("bar missed: worker %.3f of concurrency ÷ delay at %d in flight, under %.2f and under the bare loop's %.3f",
			mw, lbBarConcurrency, lbBarShare, mb)
	}
	return nil
}

// lbBarMet is the bar's test on the worker's and the bare loop's shares
// of concurrency ÷ delay.
func lbBarMet(worker, bare float64) bool {
	return worker >= lbBarShare || worker >= bare
}

// medianPoint takes, figure by figure, the median of one point's runs.
func medianPoint(ps []lbPoint) lbPoint {
	side := func(get func(lbPoint) lbSide) lbSide {
		f := func(g func(lbSide) float64) float64 {
			return median(mapf(ps, func(p lbPoint) float64 { return g(get(p)) }))
		}
		return lbSide{
			commands:   int(f(func(s lbSide) float64 { return float64(s.commands) })),
			perSec:     f(func(s lbSide) float64 { return s.perSec }),
			peakRSS:    int64(f(func(s lbSide) float64 { return float64(s.peakRSS) })),
			cpu:        f(func(s lbSide) float64 { return s.cpu }),
			cpuRedis:   f(func(s lbSide) float64 { return s.cpuRedis }),
			cpuBench:   f(func(s lbSide) float64 { return s.cpuBench }),
			failed:     int(f(func(s lbSide) float64 { return float64(s.failed) })),
			originPeak: int64(f(func(s lbSide) float64 { return float64(s.originPeak) })),
			originMean: f(func(s lbSide) float64 { return s.originMean }),
			conns:      int(f(func(s lbSide) float64 { return float64(s.conns) })),
			lateMax:    time.Duration(f(func(s lbSide) float64 { return float64(s.lateMax) })),
			lateMean:   time.Duration(f(func(s lbSide) float64 { return float64(s.lateMean) })),
			refetched:  int(f(func(s lbSide) float64 { return float64(s.refetched) })),
			publishP50: time.Duration(f(func(s lbSide) float64 { return float64(s.publishP50) })),
			publishP99: time.Duration(f(func(s lbSide) float64 { return float64(s.publishP99) })),
		}
	}
	m := lbPoint{
		concurrency: ps[0].concurrency,
		delay:       ps[0].delay,
		openFiles:   ps[0].openFiles,
		worker:      side(func(p lbPoint) lbSide { return p.worker }),
		bare:        side(func(p lbPoint) lbSide { return p.bare }),
	}
	// A point marked in any run stays marked.
	for _, p := range ps {
		m.worker.refetched = max(m.worker.refetched, p.worker.refetched)
	}
	return m
}

func printLBHeader(b *bench) {
	fmt.Fprintf(b.out, "  %5s %8s %6s | %9s %6s %9s %8s | %9s %6s %9s %8s\n",
		"conc", "ideal/s", "cmds", "worker/s", "share", "peak RSS", "CPU/cmd", "bare/s", "share", "peak RSS", "CPU/cmd")
}

func printLBPoint(b *bench, p lbPoint) {
	w, bare := p.worker, p.bare
	fmt.Fprintf(b.out, "  %5d %8.1f %6d | %9.1f %6.3f %9s %8s | %9.1f %6.3f %9s %8s\n",
		p.concurrency, p.ideal(), w.commands,
		w.perSec, p.share(w.perSec), mib(w.peakRSS), us(w.perCommand(w.cpu)),
		bare.perSec, p.share(bare.perSec), mib(bare.peakRSS), us(bare.perCommand(bare.cpu)))
	if p.marked() {
		why := ""
		if p.filesShort() {
			why = fmt.Sprintf("; it may open %d files and needs at least %d here, a connection per fetch in flight and a few more (raise: ulimit -Hn)",
				p.openFiles, contentfetch.MinOpenFiles(p.concurrency))
		}
		fmt.Fprintf(b.out, "        marked: the origin saw %d of the worker's requests again: commands failed and came back through the reclaim, so these are not the figures of a worker at %d in flight%s\n",
			w.refetched, p.concurrency, why)
	}
	for _, s := range []struct {
		name string
		lbSide
	}{{"worker", w}, {"bare", bare}} {
		fmt.Fprintf(b.out, "        %-6s origin: in flight peak %d, steady mean %.0f; connections %d; timers late by mean %s, max %s; CPU/cmd redis %s, bench %s; failed %d\n",
			s.name, s.originPeak, s.originMean, s.conns, ms(s.lateMean), ms(s.lateMax),
			us(s.perCommand(s.cpuRedis)), us(s.perCommand(s.cpuBench)), s.failed)
		if s.name == "worker" {
			fmt.Fprintf(b.out, "        %-6s facts in the stream after the fetch ended: median %s, p99 %s\n",
				s.name, ms(s.publishP50), ms(s.publishP99))
		}
		if s.lateMean > p.delay/lbLateShare {
			fmt.Fprintf(b.out, "        warning: the origin's timers woke %s late on average, over 1/%d of the delay: the bench was short of CPU, and the %s's rate is understated\n",
				ms(s.lateMean), lbLateShare, s.name)
		}
	}
}

// latencyBoundOnce runs one variant ("worker" or "bare") at one point
// over a freshly queued load of n commands spread over h hosts.
func (b *bench) latencyBoundOnce(ctx context.Context, variant string, run int, p lbPoint, n, h int) (lbSide, error) {
	conc := p.concurrency
	ctx, cancel, err := b.begin(ctx, true)
	if err != nil {
		return lbSide{}, err
	}
	defer cancel()
	d := &delayedOrigin{delay: p.delay, body: fixedBody(b.o.bodySize)}
	o, err := startOrigin(d, false)
	if err != nil {
		return lbSide{}, err
	}
	defer o.close()
	stopWatch := d.watch(50 * time.Millisecond)
	defer stopWatch()
	hosts := hostNames("lb", h)
	cmds := make([]*command, n)
	for i := range cmds {
		cmds[i] = &command{id: fmt.Sprintf("lb-%s-%d-%d-%06d", variant, conc, run, i), url: o.url(hosts[i%h], fmt.Sprintf("/lb/%d/%06d", conc, i))}
	}
	if err := publish(ctx, b.client, cmds); err != nil {
		return lbSide{}, err
	}
	b.progress("latency-bound %s at %d, run %d: %d commands queued", variant, conc, run, n)
	res := lbSide{commands: n}
	redis0, bench0 := b.redisCPU(ctx), selfCPU()
	// The load at the ideal rate, with room for a slow machine.
	ideal := p.ideal()
	within := min(b.o.timeout, 4*time.Duration(float64(n)/ideal*float64(time.Second))+time.Minute)

	if variant == "bare" {
		sum, _, err := b.runBare(ctx, o, n, conc)
		if err != nil {
			return lbSide{}, err
		}
		done := make([]int64, len(sum.AckUs))
		for i, us := range sum.AckUs {
			done[i] = sum.FirstNs + us*1e3
		}
		res.perSec = steadyRate(done, conc)
		from, to, _ := steadyWindow(done, conc)
		res.originMean = d.meanInFlight(from, to)
		res.peakRSS, res.cpu, res.failed = sum.PeakRSS, sum.cpu, sum.Errors
		if res.failed > 0 {
			// A loopback origin fails no GET; one that did means the
			// loop, not the delay, set the pace.
			return lbSide{}, fmt.Errorf("%d of %d GETs failed", res.failed, n)
		}
	} else {
		blobs := filepath.Join(b.dir, "blobs-lb")
		defer os.RemoveAll(blobs)
		// REPLICATOR_CONCURRENCY comes after workerEnv's own (from
		// -concurrency): os/exec keeps the last value of a repeated key.
		env := b.workerEnv("REPLICATOR_MIN_HOST_INTERVAL_SECONDS=0",
			"REPLICATOR_CONCURRENCY="+strconv.Itoa(conc), "REPLICATOR_BLOB_DIR="+blobs)
		w, err := b.startWorker(fmt.Sprintf("lb-%d-%d", conc, run), env)
		if err != nil {
			return lbSide{}, err
		}
		defer w.kill()
		checked := false
		oc := newOutcomes()
		// As in throughput.go: cheap polling of XLEN while the load runs,
		// the facts read once they are all there.
		err = waitUntil(ctx, within, 20*time.Millisecond, func() (bool, error) {
			if w.exited() {
				return false, fmt.Errorf("worker exited: %v: %s", w.err, w.tail(600))
			}
			if !checked {
				// The worker inherits the bench's limit (raiseOpenFiles);
				// one that kept a lower one would mislabel the point.
				if lim := procOpenFiles(w.cmd.Process.Pid); lim > 0 && lim < min(p.openFiles, lbOpenFiles(conc)) {
					return false, fmt.Errorf("worker may open only %d files, the bench %d", lim, p.openFiles)
				}
				checked = true
			}
			l, err := streamLen(ctx, b.client, streamFacts)
			if err != nil || l < int64(n) {
				return false, err
			}
			if err := oc.poll(ctx, b.client); err != nil {
				return false, err
			}
			return len(oc.facts) >= n, nil
		})
		if err != nil {
			return lbSide{}, err
		}
		res.peakRSS = w.peakRSS()
		if err := w.stop(30 * time.Second); err != nil {
			return lbSide{}, err
		}
		res.cpu = workers{w}.cpu()
		var done []int64
		var lag []time.Duration
		done, lag, res.failed = fetchesEnded(oc.facts)
		res.publishP50, res.publishP99 = percentile(lag, 50), percentile(lag, 99)
		res.perSec = steadyRate(done, conc)
		from, to, _ := steadyWindow(done, conc)
		res.originMean = d.meanInFlight(from, to)
		if res.failed > 0 {
			return lbSide{}, fmt.Errorf("%d of %d commands did not end blob_available with a fetched_at", res.failed, n)
		}
	}
	if share := p.share(res.perSec); share > lbMaxShare {
		return lbSide{}, fmt.Errorf("%.1f commands/s is %.3f of concurrency ÷ delay, more than fetches waiting on the origin allow: not a result", res.perSec, share)
	}
	res.cpuRedis, res.cpuBench = b.redisCPU(ctx)-redis0, selfCPU()-bench0
	res.originPeak, res.conns = d.peak.Load(), o.stats().conns
	res.lateMax, res.lateMean = time.Duration(d.lateMax.Load()), d.lateMean()
	d.mu.Lock()
	res.refetched = d.again
	d.mu.Unlock()
	return res, nil
}

// fetchesEnded is, for each command's first fact, when its fetch ended
// (the fact's fetched_at, unix ns) and how long after that the fact was in
// the stream (its entry id), sorted; failed counts the facts that are not
// blob_available with a fetched_at. A fetch ends when its fact says it
// did, not when the fact reached the stream: on a machine short of CPU the
// facts leave in bursts, and a window bounded by two bursts would count
// the bursts' timing rather than the fetches.
func fetchesEnded(facts map[string][]fact) (done []int64, lag []time.Duration, failed int) {
	for _, fs := range facts {
		f := fs[0]
		if f.event != "blob_available" || f.fetchedAt.IsZero() {
			failed++
			continue
		}
		done = append(done, f.fetchedAt.UnixNano())
		// Entry ids count whole milliseconds.
		lag = append(lag, time.UnixMilli(entryMillis(f.entry)).Sub(f.fetchedAt.Truncate(time.Millisecond)))
	}
	slices.Sort(lag)
	return done, lag, failed
}

// writeLBPlot writes the sweep's plot to -plot, or, by default, into the
// scratch dir when it outlives the run and into a new file under the
// system's temp dir otherwise; it prints where.
func (b *bench) writeLBPlot(points []lbPoint) error {
	path := b.o.plot
	var f *os.File
	var err error
	switch {
	case path != "":
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		f, err = os.Create(path)
	case b.ownDir && !b.o.keep:
		f, err = os.CreateTemp("", "replicator-bench-latency-bound-*.svg")
	default:
		f, err = os.Create(filepath.Join(b.dir, "latency-bound.svg"))
	}
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	note := "one run"
	if b.o.runs > 1 {
		note = fmt.Sprintf("medians of %d runs", b.o.runs)
	}
	p := lbPlot{
		title: fmt.Sprintf("latency-bound: every response %s after its request, %s", strings.TrimSuffix(b.lbDelayText(), ","), b.lbHostsText()),
		note:  fmt.Sprintf("%s, %s, %d CPUs", note, time.Now().UTC().Format("2006-01-02"), runtime.NumCPU()),
	}
	for _, pt := range points {
		p.points = append(p.points, lbPlotPoint{
			concurrency: pt.concurrency, ideal: pt.ideal(), marked: pt.marked(),
			worker: pt.worker.perSec, bare: pt.bare.perSec,
			workerRSS: pt.worker.peakRSS, bareRSS: pt.bare.peakRSS,
		})
	}
	werr := writeLatencyPlot(f, p)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("plot %s: %w", f.Name(), werr)
	}
	fmt.Fprintf(b.out, "plot: %s\n", f.Name())
	return nil
}

// us formats a duration in microseconds.
func us(d time.Duration) string {
	return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
}

func floats3(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.3f", x)
	}
	return strings.Join(parts, ", ")
}

func ints(xs []int) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, ", ")
}
