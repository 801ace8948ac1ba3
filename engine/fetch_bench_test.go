package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/engine"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
)

// benchEnv is a wenv for benchmarks: same helpers, a *testing.B's
// lifetime.
func benchEnv(b *testing.B, client rueidis.Client, origin *testenv.Origin) *wenv {
	b.Helper()
	e := &wenv{t: b, client: client, origin: origin, logs: &testenv.LogBuffer{}, log: discard}
	p := fmt.Sprintf("b%d", envSeq.Add(1))
	e.stream, e.group, e.facts, e.dlq, e.prefix = p+":content.fetch", p+".fetch", p+":content.blobs", p+":content.fetch.dlq", p+":cmd:fetch:"
	return e
}

// BenchmarkWorkerThroughput measures commands per second through the whole
// path: read, dedupe check, guarded GET of a 1 KiB body from a loopback
// origin, store in memory, publish, dedupe key, ack. The commands are
// spread over 100 hosts with no spacing, and queued before the worker
// starts. One op is one command.
func BenchmarkWorkerThroughput(b *testing.B) {
	r := testenv.StartRedis(b)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr}, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	body := make([]byte, 1024)
	origin := testenv.StartOrigin(b, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Write([]byte(req.URL.Path))
		w.Write(body)
	}))
	hosts := make([]string, 100)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("h%d.test", i)
	}
	for _, concurrency := range []int{1, 16} {
		b.Run(fmt.Sprintf("concurrency=%d", concurrency), func(b *testing.B) {
			e := benchEnv(b, client, origin)
			cmds := make([]*envelope.ContentFetch, b.N)
			for i := range cmds {
				cmds[i] = e.command(fmt.Sprintf("c%d", i), origin.URLFor(hosts[i%len(hosts)], fmt.Sprintf("/%d", i)))
			}
			for len(cmds) > 0 {
				k := min(len(cmds), 1000)
				e.addMany(cmds[:k])
				cmds = cmds[k:]
			}
			ctx, cancel := context.WithCancel(context.Background())
			st := e.newStack(stackOptions{slots: concurrency})
			wo := e.workerOptions()
			wo.Loop.Logger = discard
			wo.Loop.ReadBlock, wo.Loop.ClaimMinIdle = engine.DefaultReadBlock, engine.DefaultClaimMinIdle
			w := newFetchLoop(client, st.with(wo, stackOptions{}))
			b.ResetTimer()
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			for {
				n, err := client.Do(ctx, client.B().Xlen().Key(e.facts).Build()).AsInt64()
				if err != nil {
					b.Fatal(err)
				}
				if int(n) >= b.N {
					break
				}
				time.Sleep(2 * time.Millisecond)
			}
			b.StopTimer()
			cancel()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commands/s")
		})
	}
}

// BenchmarkWorkerLatency measures, on an idle worker, the time from XADD of
// one command to its fact being readable (a blocking XREAD on the facts
// stream). One op is one command.
func BenchmarkWorkerLatency(b *testing.B) {
	r := testenv.StartRedis(b)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr}, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	origin := testenv.StartOrigin(b, http.HandlerFunc(okBody))
	e := benchEnv(b, client, origin)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := e.newStack(stackOptions{slots: 16})
	wo := e.workerOptions()
	wo.Loop.Logger = discard
	wo.Loop.ReadBlock, wo.Loop.ClaimMinIdle = engine.DefaultReadBlock, engine.DefaultClaimMinIdle
	w := newFetchLoop(client, st.with(wo, stackOptions{}))
	go w.Run(ctx)
	for !w.Healthy() {
		time.Sleep(time.Millisecond)
	}
	last := "0"
	b.ResetTimer()
	for i := range b.N {
		e.addMany([]*envelope.ContentFetch{e.command(fmt.Sprintf("c%d", i), origin.URLFor("w.test", fmt.Sprintf("/%d", i)))})
		res, err := client.Do(ctx, client.B().Xread().Count(1).Block(10000).Streams().Key(e.facts).Id(last).Build()).AsXRead()
		if err != nil || len(res[e.facts]) != 1 {
			b.Fatalf("no fact: %v", err)
		}
		last = res[e.facts][0].ID
	}
}
