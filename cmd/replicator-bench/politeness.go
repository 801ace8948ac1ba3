//go:build linux

package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// politeHost is one backlogged host of the politeness mode.
type politeHost struct {
	name     string
	interval time.Duration
	policy   bool // published on content.fetch-policy; else the default floor
}

// politeDefault is REPLICATOR_MIN_HOST_INTERVAL_SECONDS in this mode.
const politeDefault = 500 * time.Millisecond

// politeBacklog is how long each host's queue lasts at full rate.
const politeBacklog = 10 * time.Second

func politeHosts() []politeHost {
	return []politeHost{
		{"fast-a.test", 200 * time.Millisecond, true},
		{"fast-b.test", 200 * time.Millisecond, true},
		{"floor-a.test", politeDefault, false},
		{"floor-b.test", politeDefault, false},
		{"slow-a.test", time.Second, true},
		{"slow-b.test", time.Second, true},
	}
}

// politeRow is what the origin saw of one host.
type politeRow struct {
	host     politeHost
	requests int
	minGap   time.Duration // kernel receive times
	handler  time.Duration // handler start times
	rate     float64       // of 1/interval, first to last request
}

// runPoliteness queues a backlog for each host (enough for politeBacklog at
// its interval), runs 1 worker, then 3, and checks every gap at the origin
// against the host's interval and each host's rate against 1/interval.
func runPoliteness(ctx context.Context, b *bench) error {
	fmt.Fprintf(b.out, "hosts: 0.2 s (published), 0.5 s (default floor), 1 s (published), two each, each with a %s backlog\n", politeBacklog)
	var missed []string
	for run := 1; run <= b.o.runs; run++ {
		for _, n := range []int{1, 3} {
			rows, err := b.politenessOnce(ctx, run, n)
			if err != nil {
				return fmt.Errorf("%d workers, run %d: %w", n, run, err)
			}
			worstGap, worstRate := 1e9, 1e9
			for _, r := range rows {
				fmt.Fprintf(b.out, "run %d, %d worker(s): %-13s interval %5s  requests %3d  min gap %s (%.3f× interval; by handler clock %s)  rate %.3f of 1/interval\n",
					run, n, r.host.name, r.host.interval, r.requests, ms(r.minGap), float64(r.minGap)/float64(r.host.interval), ms(r.handler), r.rate)
				worstGap = min(worstGap, float64(r.minGap)/float64(r.host.interval))
				worstRate = min(worstRate, r.rate)
			}
			okGap, okRate := worstGap >= 1, worstRate >= 0.9
			fmt.Fprintf(b.out, "run %d, %d worker(s): smallest gap %.3f× interval %s; lowest rate %.3f of 1/interval %s\n",
				run, n, worstGap, verdict(okGap), worstRate, verdict(okRate))
			if !okGap {
				missed = append(missed, fmt.Sprintf("run %d, %d workers: a gap of %.3f× interval", run, n, worstGap))
			}
			if !okRate {
				missed = append(missed, fmt.Sprintf("run %d, %d workers: a rate of %.3f of 1/interval", run, n, worstRate))
			}
		}
	}
	if len(missed) > 0 {
		return fmt.Errorf("bar missed: %v", missed)
	}
	fmt.Fprintln(b.out, "bar: every gap ≥ interval with 1 and 3 workers, backlogged hosts at ≥ 90% of 1/interval: PASS")
	return nil
}

func (b *bench) politenessOnce(ctx context.Context, run, nWorkers int) (rows []politeRow, err error) {
	ctx, cancel, err := b.begin(ctx, true)
	if err != nil {
		return nil, err
	}
	defer cancel()
	hosts := politeHosts()
	for _, h := range hosts {
		if h.policy {
			if err := publishPolicy(ctx, b.client, h.name, h.interval.Seconds()); err != nil {
				return nil, err
			}
		}
	}
	o, err := startOrigin(fixedBody(1024), true)
	if err != nil {
		return nil, err
	}
	defer o.close()
	var cmds []*command
	for _, h := range hosts {
		n := int(politeBacklog/h.interval) + 1
		for i := range n {
			cmds = append(cmds, &command{id: fmt.Sprintf("polite-%d-%d-%s-%03d", run, nWorkers, h.name, i), url: o.url(h.name, fmt.Sprintf("/p/%d", i))})
		}
	}
	// Interleaved by host, as an issuer publishing for many hosts would.
	slices.SortStableFunc(cmds, func(a, b *command) int { return cmpSuffix(a.id, b.id) })
	if err := publish(ctx, b.client, cmds); err != nil {
		return nil, err
	}
	env := b.workerEnv("REPLICATOR_MIN_HOST_INTERVAL_SECONDS=" + strconv.FormatFloat(politeDefault.Seconds(), 'f', -1, 64))
	var ws workers
	defer func() { ws.killAll() }()
	for i := range nWorkers {
		w, err := b.startWorker(fmt.Sprintf("polite-%d-%d-%d", run, nWorkers, i),
			append(slices.Clone(env), "REPLICATOR_BLOB_DIR="+filepath.Join(b.dir, "blobs-polite", strconv.Itoa(i))))
		if err != nil {
			return nil, err
		}
		ws = append(ws, w)
	}
	oc := newOutcomes()
	err = waitUntil(ctx, 3*politeBacklog+time.Minute, 100*time.Millisecond, func() (bool, error) {
		for _, w := range ws {
			if w.exited() {
				return false, fmt.Errorf("worker %s exited: %v: %s", w.name, w.err, w.tail(600))
			}
		}
		if err := oc.poll(ctx, b.client); err != nil {
			return false, err
		}
		return len(oc.facts) >= len(cmds), nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w (%d of %d facts)", err, len(oc.facts), len(cmds))
	}
	if err := ws.stopAll(30 * time.Second); err != nil {
		return nil, err
	}
	if st := o.stats(); st.unstamped > 0 {
		fmt.Fprintf(b.out, "run %d, %d worker(s): %d of %d requests had no kernel timestamp and were timed by the handler\n", run, nWorkers, st.unstamped, st.requests)
	}
	for _, h := range hosts {
		l := o.host(h.name)
		r := politeRow{host: h, requests: l.n, minGap: l.minGap, handler: l.minGapHandler}
		if l.n > 1 {
			span := l.last.Sub(l.first)
			r.rate = float64(l.n-1) / span.Seconds() * h.interval.Seconds()
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// cmpSuffix orders command ids by their trailing index, so hosts
// interleave.
func cmpSuffix(a, b string) int {
	ia, ib := a[len(a)-3:], b[len(b)-3:]
	switch {
	case ia < ib:
		return -1
	case ia > ib:
		return 1
	}
	return 0
}
