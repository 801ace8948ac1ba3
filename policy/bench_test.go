package policy

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// benchHosts are the hostnames the benchmarks cycle through, built once so
// the loops measure decisions, not formatting.
var benchHosts = func() []string {
	h := make([]string, 1000)
	for i := range h {
		h[i] = fmt.Sprintf("host%d.example", i)
	}
	return h
}()

// BenchmarkLocalReserve is one pacing decision by the local pacer, over 1000
// hosts with published floors, at advancing explicit times.
func BenchmarkLocalReserve(b *testing.B) {
	tab := NewTable()
	for i, h := range benchHosts {
		if i%2 == 0 {
			mustApply(b, tab, published(h, 0.5, 0))
		}
	}
	l := NewLocal(LocalOptions{Floors: tab})
	now := t0
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		now = now.Add(time.Millisecond)
		if _, err := l.ReserveAt(now, benchHosts[i%len(benchHosts)], time.Second); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkLocalReserveParallel is the same decision from every CPU at once:
// they share the pacer's mutex.
func BenchmarkLocalReserveParallel(b *testing.B) {
	l := NewLocal(LocalOptions{Floors: NewTable()})
	var n atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			if _, err := l.ReserveAt(t0.Add(time.Duration(i)*time.Millisecond), benchHosts[i%int64(len(benchHosts))], time.Second); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
