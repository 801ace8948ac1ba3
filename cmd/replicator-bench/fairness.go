//go:build linux

package main

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"time"
)

// fairBacklog is how many commands wait for the slow host.
const fairBacklog = 1000

// fairBar is how soon a command for another host must complete.
const fairBar = 2 * time.Second

// runFairness queues 1000 commands for one slow host (1 s apart, each
// answered after 1 s), lets the worker get busy with them, then publishes
// commands for other hosts one at a time and times each from XADD to its
// fact.
func runFairness(ctx context.Context, b *bench) error {
	probes := cmp.Or(b.o.samples, 5)
	fmt.Fprintf(b.out, "%d commands for slow.test (interval 1 s, responses after 1 s), then %d probes for other hosts, 1 s apart\n",
		fairBacklog, probes)
	var worst []float64
	for run := 1; run <= b.o.runs; run++ {
		took, err := b.fairnessOnce(ctx, run, probes)
		if err != nil {
			return fmt.Errorf("run %d: %w", run, err)
		}
		p50, _, _, mx := latencies(took)
		worst = append(worst, float64(mx))
		fmt.Fprintf(b.out, "run %d: probe XADD to fact: p50 %s  max %s  (all: %v)\n", run, ms(p50), ms(mx), took)
	}
	m := time.Duration(median(worst))
	fmt.Fprintf(b.out, "bar: another host completes in < 2s behind a 1000-command backlog: median of the worst probe %s %s\n", ms(m), verdict(m < fairBar))
	if m >= fairBar {
		return fmt.Errorf("bar missed: %s", ms(m))
	}
	return nil
}

func (b *bench) fairnessOnce(ctx context.Context, run, probes int) ([]time.Duration, error) {
	ctx, cancel, err := b.begin(ctx, true)
	if err != nil {
		return nil, err
	}
	defer cancel()
	fast := fixedBody(1024)
	o, err := startOrigin(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hostOf(r) == "slow.test" {
			select {
			case <-time.After(time.Second):
			case <-r.Context().Done():
				return
			}
		}
		fast.ServeHTTP(w, r)
	}), false)
	if err != nil {
		return nil, err
	}
	defer o.close()
	hosts := []string{"slow.test"}
	for i := range probes {
		hosts = append(hosts, fmt.Sprintf("probe-%d.test", i))
	}
	cmds := make([]*command, fairBacklog)
	for i := range cmds {
		cmds[i] = &command{id: fmt.Sprintf("fair-%d-slow-%04d", run, i), url: o.url("slow.test", fmt.Sprintf("/s/%d", i))}
	}
	if err := publish(ctx, b.client, cmds); err != nil {
		return nil, err
	}
	w, err := b.startWorker(fmt.Sprintf("fair-%d", run), b.workerEnv(
		"REPLICATOR_MIN_HOST_INTERVAL_SECONDS=1", "REPLICATOR_BLOB_DIR="+filepath.Join(b.dir, "blobs-fair")))
	if err != nil {
		return nil, err
	}
	defer w.kill()
	if err := w.waitHealthy(ctx, 30*time.Second); err != nil {
		return nil, err
	}
	// Let the backlog be read and the slow host's requests start.
	time.Sleep(3 * time.Second)
	last, err := lastEntry(ctx, b, streamFacts)
	if err != nil {
		return nil, err
	}
	var took []time.Duration
	for i := range probes {
		c := &command{id: fmt.Sprintf("fair-%d-probe-%d", run, i), url: o.url(hosts[1+i], "/probe")}
		start := time.Now()
		if err := publish(ctx, b.client, []*command{c}); err != nil {
			return nil, err
		}
		// Facts of the slow host arrive meanwhile; read until the probe's.
		for done := false; !done; {
			res, err := b.client.Do(ctx, b.client.B().Xread().Count(100).Block(10000).Streams().Key(streamFacts).Id(last).Build()).AsXRead()
			if err != nil {
				return nil, fmt.Errorf("waiting for probe %s: %w (log: %s)", c.id, err, w.tail(600))
			}
			for _, e := range res[streamFacts] {
				last = e.ID
				if f, err := decodeFact(e); err == nil && f.commandID == c.id {
					took = append(took, time.Since(start))
					done = true
				}
			}
		}
		time.Sleep(time.Second)
	}
	slow := o.host("slow.test")
	if slow.n < 3 {
		return nil, fmt.Errorf("the slow host got only %d requests: the backlog was not being worked", slow.n)
	}
	if err := w.stop(30 * time.Second); err != nil {
		return nil, err
	}
	return took, nil
}

// lastEntry is the id of the stream's newest entry, or "0" when empty.
func lastEntry(ctx context.Context, b *bench, stream string) (string, error) {
	entries, err := b.client.Do(ctx, b.client.B().Xrevrange().Key(stream).End("+").Start("-").Count(1).Build()).AsXRange()
	if err != nil {
		return "", err
	}
	if len(entries) == 0 {
		return "0", nil
	}
	return entries[0].ID, nil
}
