//go:build linux

package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/replicator-go/replicator/contentfetch"
)

// The throughput variants, in the order they run.
var throughputVariants = []string{"serial", "default", "fleet", "naive", "bare"}

func validVariant(v string) bool { return slices.Contains(throughputVariants, v) }

// tpResult is one variant's figures in one run.
type tpResult struct {
	variant    string
	commands   int
	perSec     float64       // first to last completion
	wall       time.Duration // process start to last completion
	p50, p90   time.Duration // publish to fact (queueing included: the load is queued first)
	p99        time.Duration
	peakRSS    int64
	minGap     time.Duration
	duplicates int // facts beyond one per command
	refetches  int // origin requests beyond one per path
	conns      int // connections the origin accepted
	errors     int // bare and naive loops: commands that failed
	// CPU seconds spent during the run by the measured process(es), Redis
	// and the bench itself (mostly the origin).
	cpuWorker, cpuRedis, cpuBench float64
}

// cpuPerCommand is the measured process(es)' CPU time per command.
func (r tpResult) cpuPerCommand() time.Duration {
	if r.commands == 0 {
		return 0
	}
	return time.Duration(r.cpuWorker / float64(r.commands) * float64(time.Second))
}

// maxCPUPerCommand is the bar on the default worker's CPU per command.
const maxCPUPerCommand = 100 * time.Microsecond

// minOverNaive is the bar on the default worker's rate over the naive
// loop's.
const minOverNaive = 1.25

func (b *bench) throughputVariants() []string {
	if b.o.only == "" {
		return throughputVariants
	}
	var out []string
	for _, v := range throughputVariants {
		if slices.Contains(strings.Split(b.o.only, ","), v) {
			out = append(out, v)
		}
	}
	return out
}

func runThroughput(ctx context.Context, b *bench) error {
	n := cmp.Or(b.o.commands, 20000)
	h := cmp.Or(b.o.hosts, 1000)
	conc := cmp.Or(b.o.concurrency, contentfetch.DefaultConcurrency)
	bodies := "distinct"
	if b.o.sameBody {
		bodies = "identical"
	}
	fmt.Fprintf(b.out, "%d commands over %d hosts, %d-byte %s bodies, spacing %s, blobs on %s; concurrency %d (serial: 1, held 1)\n",
		n, h, b.o.bodySize, bodies, b.o.interval, b.dir, conc)
	fmt.Fprintf(b.out, "latency is publish to fact with the whole load queued first, so it includes queueing\n")
	variants := b.throughputVariants()
	all := map[string][]tpResult{}
	ratios := map[string][]float64{}
	for run := 1; run <= b.o.runs; run++ {
		fmt.Fprintf(b.out, "run %d:\n", run)
		got := map[string]tpResult{}
		for _, v := range variants {
			r, err := b.throughputOnce(ctx, v, run, n, h, conc)
			if err != nil {
				return fmt.Errorf("%s, run %d: %w", v, run, err)
			}
			got[v] = r
			all[v] = append(all[v], r)
			printTP(b, r)
		}
		if d, ok := got["default"]; ok {
			for _, base := range []string{"serial", "naive", "bare"} {
				if r, ok := got[base]; ok && r.perSec > 0 && r.cpuPerCommand() > 0 {
					ratio := d.perSec / r.perSec
					ratios[base] = append(ratios[base], ratio)
					fmt.Fprintf(b.out, "  ratio default/%s = %.2f commands/s, %.2f CPU per command\n",
						base, ratio, float64(d.cpuPerCommand())/float64(r.cpuPerCommand()))
				}
			}
		}
	}
	if b.o.runs > 1 {
		fmt.Fprintf(b.out, "medians of %d runs:\n", b.o.runs)
		for _, v := range variants {
			rs := all[v]
			fmt.Fprintf(b.out, "  %-8s %8.0f commands/s  p50 %s  peak RSS %s  CPU/cmd %s\n", v,
				median(mapf(rs, func(r tpResult) float64 { return r.perSec })),
				ms(time.Duration(median(mapf(rs, func(r tpResult) float64 { return float64(r.p50) })))),
				mib(int64(median(mapf(rs, func(r tpResult) float64 { return float64(r.peakRSS) })))),
				us(time.Duration(median(mapf(rs, func(r tpResult) float64 { return float64(r.cpuPerCommand()) })))))
		}
	}
	var misses []string
	if rs := ratios["serial"]; len(rs) > 0 {
		m := median(rs)
		fmt.Fprintf(b.out, "bar: default ≥ 5× serial: median ratio %.2f (runs %s) %s\n", m, floats(rs), verdict(m >= 5))
		if m < 5 {
			misses = append(misses, fmt.Sprintf("default/serial %.2f < 5", m))
		}
	}
	if rs := ratios["naive"]; len(rs) > 0 {
		m := median(rs)
		fmt.Fprintf(b.out, "bar: default ≥ %.2f× the naive loop: median ratio %.2f (runs %s) %s\n", minOverNaive, m, floats(rs), verdict(m >= minOverNaive))
		if m < minOverNaive {
			misses = append(misses, fmt.Sprintf("default/naive %.2f < %.2f", m, minOverNaive))
		}
	}
	if rs := ratios["bare"]; len(rs) > 0 {
		m := median(rs)
		fmt.Fprintf(b.out, "bar: default ≥ 60%% of the bare loop: median ratio %.2f (runs %s) %s\n", m, floats(rs), verdict(m >= 0.6))
		if m < 0.6 {
			misses = append(misses, fmt.Sprintf("default/bare %.2f < 0.60", m))
		}
	}
	if rs := all["default"]; len(rs) > 0 {
		cpu := mapf(rs, func(r tpResult) float64 { return float64(r.cpuPerCommand()) })
		m := time.Duration(median(cpu))
		runs := make([]string, len(cpu))
		for i, c := range cpu {
			runs[i] = us(time.Duration(c))
		}
		fmt.Fprintf(b.out, "bar: default worker CPU per command ≤ %s: median %s (runs %s) %s\n",
			us(maxCPUPerCommand), us(m), strings.Join(runs, ", "), verdict(m <= maxCPUPerCommand))
		if m > maxCPUPerCommand {
			misses = append(misses, fmt.Sprintf("default CPU per command %s > %s", us(m), us(maxCPUPerCommand)))
		}
	}
	if len(misses) > 0 {
		return fmt.Errorf("bar missed: %s", strings.Join(misses, "; "))
	}
	return nil
}

func printTP(b *bench, r tpResult) {
	gap := "-"
	if r.minGap >= 0 {
		gap = ms(r.minGap)
	}
	extra := ""
	if r.errors > 0 {
		extra = fmt.Sprintf("  GET errors %d", r.errors)
	}
	fmt.Fprintf(b.out, "  %-8s %6d cmds %8.0f commands/s  wall %6.2fs  latency p50 %s p90 %s p99 %s  peak RSS %s  min gap/host %s  duplicates %d  re-fetches %d  connections %d  CPU s: measured %.2f redis %.2f bench %.2f  CPU/cmd %s%s\n",
		r.variant, r.commands, r.perSec, r.wall.Seconds(), ms(r.p50), ms(r.p90), ms(r.p99), mib(r.peakRSS), gap, r.duplicates, r.refetches, r.conns,
		r.cpuWorker, r.cpuRedis, r.cpuBench, us(r.cpuPerCommand()), extra)
}

// throughputOnce runs one variant over a freshly queued load.
func (b *bench) throughputOnce(ctx context.Context, variant string, run, n, h, conc int) (tpResult, error) {
	ctx, cancel, err := b.begin(ctx, true)
	if err != nil {
		return tpResult{}, err
	}
	defer cancel()
	body := fixedBody(b.o.bodySize)
	if b.o.sameBody {
		body = sameBody(b.o.bodySize)
	}
	o, err := startOrigin(body, b.o.interval > 0)
	if err != nil {
		return tpResult{}, err
	}
	defer o.close()
	hosts := hostNames("tp", h)
	cmds := make([]*command, n)
	for i := range cmds {
		cmds[i] = &command{id: fmt.Sprintf("tp-%s-%d-%06d", variant, run, i), url: o.url(hosts[i%h], fmt.Sprintf("/c/%06d", i))}
	}
	if err := publish(ctx, b.client, cmds); err != nil {
		return tpResult{}, err
	}
	b.progress("throughput %s run %d: %d commands queued", variant, run, n)
	entryMs := make(map[string]int64, n)
	for _, c := range cmds {
		entryMs[c.id] = entryMillis(c.entry)
	}
	res := tpResult{variant: variant, commands: n}
	b.resetRedisStats(ctx)
	redis0, bench0 := b.redisCPU(ctx), selfCPU()
	blobs := filepath.Join(b.dir, "blobs-"+variant)
	defer os.RemoveAll(blobs)

	if variant == "bare" {
		sum, wall, err := b.runBare(ctx, o, n, conc)
		if err != nil {
			return tpResult{}, err
		}
		res.wall = wall
		res.perSec = float64(sum.Done-1) / (float64(sum.LastNs-sum.FirstNs) / 1e9)
		lat := make([]time.Duration, len(sum.LatencyUs))
		for i, us := range sum.LatencyUs {
			lat[i] = time.Duration(us) * time.Microsecond
		}
		res.p50, res.p90, res.p99, _ = latencies(lat)
		res.peakRSS = sum.PeakRSS
		res.errors = sum.Errors
		res.cpuWorker = sum.cpu
	} else if variant == "naive" {
		sum, wall, err := b.runNaive(ctx, o, blobs, n, conc)
		if err != nil {
			return tpResult{}, err
		}
		res.wall, res.peakRSS, res.errors, res.cpuWorker = wall, sum.PeakRSS, sum.Errors, sum.cpu
		oc := newOutcomes()
		if err := oc.poll(ctx, b.client); err != nil {
			return tpResult{}, err
		}
		if err := factFigures(oc, entryMs, &res); err != nil {
			return tpResult{}, err
		}
	} else {
		env := b.workerEnv("REPLICATOR_MIN_HOST_INTERVAL_SECONDS=" + strconv.FormatFloat(b.o.interval.Seconds(), 'f', -1, 64))
		count := 1
		switch variant {
		case "serial":
			env = append(env, "REPLICATOR_CONCURRENCY=1", "REPLICATOR_MAX_HELD=1")
		case "fleet":
			count = 3
		}
		start := time.Now()
		var ws workers
		defer func() { ws.killAll() }()
		for i := range count {
			w, err := b.startWorker(fmt.Sprintf("tp-%s-%d", variant, i), append(slices.Clone(env), "REPLICATOR_BLOB_DIR="+filepath.Join(blobs, strconv.Itoa(i))))
			if err != nil {
				return tpResult{}, err
			}
			ws = append(ws, w)
		}
		oc := newOutcomes()
		// Cheap polling while the load runs, so the bench takes little CPU
		// from the worker; facts are read and decoded afterwards.
		err := waitUntil(ctx, b.o.timeout, 20*time.Millisecond, func() (bool, error) {
			for _, w := range ws {
				if w.exited() {
					return false, fmt.Errorf("worker %s exited: %v: %s", w.name, w.err, w.tail(600))
				}
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
			return tpResult{}, err
		}
		res.wall = time.Since(start)
		res.peakRSS = ws.peakRSS()
		if err := ws.stopAll(30 * time.Second); err != nil {
			return tpResult{}, err
		}
		res.cpuWorker = ws.cpu()
		if err := factFigures(oc, entryMs, &res); err != nil {
			return tpResult{}, err
		}
	}
	res.cpuRedis, res.cpuBench = b.redisCPU(ctx)-redis0, selfCPU()-bench0
	if b.o.verbose {
		for _, line := range b.redisCommandStats(ctx) {
			b.progress("  redis %s: %s", variant, line)
		}
	}
	st := o.stats()
	res.minGap, res.refetches, res.conns = st.minGap, st.refetches, st.conns
	for _, p := range o.closePairs(b.o.interval) {
		fmt.Fprintf(b.out, "  %s: gap under the interval: %s\n", variant, p)
	}
	return res, nil
}

// runBare runs the bare loop in a child process and returns its summary.
func (b *bench) runBare(ctx context.Context, o *origin, n, conc int) (*bareSummary, time.Duration, error) {
	var sum bareSummary
	cpu, wall, err := b.runChild(ctx, fmt.Sprintf("%s=%s %s %d %d", bareChildEnv, b.url, "127.0.0.1:"+o.port, n, conc), &sum)
	if err != nil {
		return nil, 0, fmt.Errorf("bare loop: %w", err)
	}
	sum.cpu = cpu
	if sum.Done < 2 || sum.LastNs <= sum.FirstNs {
		return nil, 0, fmt.Errorf("bare loop acked %d commands", sum.Done)
	}
	return &sum, wall, nil
}

// factFigures sets res's rate, latencies and duplicates from the facts
// published for its commands: the rate from the first fact's stream id to
// the last's, latency from each command's entry to its first fact.
func factFigures(oc *outcomes, entryMs map[string]int64, res *tpResult) error {
	if len(oc.facts) < res.commands {
		return fmt.Errorf("%d of %d commands have a fact", len(oc.facts), res.commands)
	}
	var first, last int64
	lat := make([]time.Duration, 0, res.commands)
	for id, fs := range oc.facts {
		if fs[0].event != "blob_available" {
			return fmt.Errorf("command %s ended %s %s", id, fs[0].event, fs[0].reason)
		}
		at := entryMillis(fs[0].entry)
		if first == 0 || at < first {
			first = at
		}
		last = max(last, at)
		lat = append(lat, time.Duration(at-entryMs[id])*time.Millisecond)
	}
	res.perSec = float64(res.commands-1) / (float64(last-first) / 1e3)
	res.p50, res.p90, res.p99, _ = latencies(lat)
	res.duplicates = oc.duplicateFacts()
	return nil
}

// runNaive runs the naive loop in a child process, storing into blobs,
// and returns its summary.
func (b *bench) runNaive(ctx context.Context, o *origin, blobs string, n, conc int) (*naiveSummary, time.Duration, error) {
	var sum naiveSummary
	cpu, wall, err := b.runChild(ctx, fmt.Sprintf("%s=%s %s %s %d %d", naiveChildEnv, b.url, "127.0.0.1:"+o.port, blobs, n, conc), &sum)
	if err != nil {
		return nil, 0, fmt.Errorf("naive loop: %w", err)
	}
	sum.cpu = cpu
	if sum.Done < n {
		return nil, 0, fmt.Errorf("naive loop handled %d of %d commands", sum.Done, n)
	}
	return &sum, wall, nil
}

// runChild re-executes the bench with env set, decodes the JSON summary
// it prints into sum and returns the child's CPU seconds and wall time.
func (b *bench) runChild(ctx context.Context, env string, sum any) (cpu float64, wall time.Duration, err error) {
	self, err := os.Executable()
	if err != nil {
		return 0, 0, err
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(cleanEnv(), env)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, 0, fmt.Errorf("%v: %s", err, stderr.String())
	}
	wall = time.Since(start)
	if err := json.Unmarshal(stdout.Bytes(), sum); err != nil {
		return 0, 0, fmt.Errorf("summary: %w", err)
	}
	return (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds(), wall, nil
}
