package testenv

import (
	"net"
	"sync/atomic"
	"testing"
)

// Tripwire listens on a loopback address that a test's guard refuses, and
// counts the connections that reach it: a refusal must leave it at 0.
type Tripwire struct {
	net.Listener
	hits atomic.Int32
}

// StartTripwire listens on addr ("127.0.0.2:0", say) until the test ends.
func StartTripwire(t testing.TB, addr string) *Tripwire {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("testenv: tripwire on %s: %v", addr, err)
	}
	tw := &Tripwire{Listener: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			tw.hits.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close() })
	return tw
}

// Hits is how many connections reached it.
func (tw *Tripwire) Hits() int32 { return tw.hits.Load() }

// Port is the port it listens on.
func (tw *Tripwire) Port() string {
	_, port, _ := net.SplitHostPort(tw.Addr().String())
	return port
}
