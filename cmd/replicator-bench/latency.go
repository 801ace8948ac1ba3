//go:build linux

package main

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// runLatency measures, on an idle worker, the time from XADD of one
// command to its fact being readable: the bench blocks in XREAD on the
// facts stream right after the XADD. The origin is on loopback with spacing
// 0, so the connection is reused as it would be for a busy host.
func runLatency(ctx context.Context, b *bench) error {
	samples := cmp.Or(b.o.samples, 200)
	fmt.Fprintf(b.out, "%d commands one at a time on an idle worker, 1 KiB bodies, one host, spacing 0\n", samples)
	var p50s []float64
	for run := 1; run <= b.o.runs; run++ {
		lat, rss, err := b.latencyOnce(ctx, run, samples)
		if err != nil {
			return fmt.Errorf("run %d: %w", run, err)
		}
		p50, p90, p99, mx := latencies(lat)
		p50s = append(p50s, float64(p50))
		fmt.Fprintf(b.out, "run %d: p50 %s  p90 %s  p99 %s  max %s  peak RSS %s\n", run, ms(p50), ms(p90), ms(p99), ms(mx), mib(rss))
	}
	m := time.Duration(median(p50s))
	fmt.Fprintf(b.out, "bar: idle latency p50 < 5ms: median p50 %s %s\n", ms(m), verdict(m < 5*time.Millisecond))
	if m >= 5*time.Millisecond {
		return fmt.Errorf("bar missed: p50 %s", ms(m))
	}
	return nil
}

func (b *bench) latencyOnce(ctx context.Context, run, samples int) ([]time.Duration, int64, error) {
	ctx, cancel, err := b.begin(ctx, false)
	if err != nil {
		return nil, 0, err
	}
	defer cancel()
	o, err := startOrigin(fixedBody(1024), false)
	if err != nil {
		return nil, 0, err
	}
	defer o.close()
	host := "latency.test"
	w, err := b.startWorker(fmt.Sprintf("latency-%d", run), b.workerEnv(
		"REPLICATOR_MIN_HOST_INTERVAL_SECONDS=0", "REPLICATOR_BLOB_DIR="+filepath.Join(b.dir, "blobs-latency")))
	if err != nil {
		return nil, 0, err
	}
	defer w.kill()
	if err := w.waitHealthy(ctx, 30*time.Second); err != nil {
		return nil, 0, err
	}
	last := "0"
	lat := make([]time.Duration, 0, samples)
	// Two unmeasured commands first: the first connection to the origin
	// and the first file in a new blob tree are one-off costs.
	for i := -2; i < samples; i++ {
		// Let the worker go back to its blocking read: idle, as the bar asks.
		time.Sleep(20 * time.Millisecond)
		c := &command{id: fmt.Sprintf("lat-%d-%04d", run, i+2), url: o.url(host, fmt.Sprintf("/l/%d/%d", run, i+2))}
		start := time.Now()
		if err := publish(ctx, b.client, []*command{c}); err != nil {
			return nil, 0, err
		}
		res, err := b.client.Do(ctx, b.client.B().Xread().Count(1).Block(10000).Streams().Key(streamFacts).Id(last).Build()).AsXRead()
		if err != nil {
			return nil, 0, fmt.Errorf("waiting for the fact of %s: %w (worker log: %s)", c.id, err, w.tail(600))
		}
		took := time.Since(start)
		entries := res[streamFacts]
		if len(entries) != 1 {
			return nil, 0, fmt.Errorf("got %d facts, want 1", len(entries))
		}
		last = entries[0].ID
		f, err := decodeFact(entries[0])
		if err != nil || f.commandID != c.id || f.event != "blob_available" {
			return nil, 0, fmt.Errorf("unexpected fact for %s: %+v %v", c.id, f, err)
		}
		if i >= 0 {
			lat = append(lat, took)
		}
	}
	rss := w.peakRSS()
	if err := w.stop(30 * time.Second); err != nil {
		return nil, 0, err
	}
	return lat, rss, nil
}
