package fleet

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/policy"
)

// benchHosts are the hostnames the benchmark cycles through, built once so
// the loops measure decisions, not formatting.
var benchHosts = func() []string {
	h := make([]string, 1000)
	for i := range h {
		h[i] = fmt.Sprintf("host%d.example", i)
	}
	return h
}()

// BenchmarkPacerReserve is one fleet pacing decision: a Lua script round
// trip to a private local redis-server, sequentially and from parallel
// goroutines sharing one client (rueidis pipelines them).
func BenchmarkPacerReserve(b *testing.B) {
	srv := testenv.StartRedis(b)
	client := newClient(b, srv.Addr)
	ctx := context.Background()
	p := NewPacer(client, PacerOptions{Fallback: policy.NewLocal(policy.LocalOptions{Floors: policy.NewTable()}), KeyPrefix: "bench:"})
	if _, err := p.Reserve(ctx, "warm.example", 0); err != nil { // loads the script
		b.Fatal(err)
	}
	opsPerSec := func(b *testing.B) {
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	}
	b.Run("sequential", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := p.Reserve(ctx, benchHosts[i%len(benchHosts)], time.Second); err != nil {
				b.Fatal(err)
			}
			i++
		}
		opsPerSec(b)
	})
	b.Run("parallel", func(b *testing.B) {
		reserveParallel(b, p)
		opsPerSec(b)
	})
	if p.Degraded() {
		b.Fatal("the pacer fell back to local pacing during the benchmark")
	}
}

// BenchmarkPacerUnspacedCached is the decision for a host with no floor
// and no fleet state through a caching client, the worker's shape under a
// high command rate with spacing 0: answered from the client-side cache
// once each host has been looked up.
// Run: go test -run=^$ -bench=UnspacedCached -count=5 ./policy/fleet
func BenchmarkPacerUnspacedCached(b *testing.B) {
	srv := testenv.StartRedis(b)
	p := unspacedPacer(cachingClient(b, srv.Addr), "bench:unspaced:")
	for _, h := range benchHosts {
		if _, err := p.Reserve(context.Background(), h, time.Second); err != nil {
			b.Fatal(err)
		}
	}
	reserveParallel(b, p)
}

// reserveParallel takes decisions from many goroutines sharing p, cycling
// through benchHosts.
func reserveParallel(b *testing.B, p *Pacer) {
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8) // many handlers per worker, as in production
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			if _, err := p.Reserve(context.Background(), benchHosts[i%int64(len(benchHosts))], time.Second); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
