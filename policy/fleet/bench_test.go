package fleet

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

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
		var n atomic.Int64
		b.ReportAllocs()
		b.SetParallelism(8) // many handlers per worker, as in production
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := n.Add(1)
				if _, err := p.Reserve(ctx, benchHosts[i%int64(len(benchHosts))], time.Second); err != nil {
					b.Error(err)
					return
				}
			}
		})
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
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, CacheSizeEachConn: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	p := unspacedPacer(c, "bench:unspaced:")
	ctx := context.Background()
	for _, h := range benchHosts {
		if _, err := p.Reserve(ctx, h, time.Second); err != nil {
			b.Fatal(err)
		}
	}
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			if _, err := p.Reserve(ctx, benchHosts[i%int64(len(benchHosts))], time.Second); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
