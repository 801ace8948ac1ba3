package fleet

import (
	"sync"
	"time"
)

// serverClock maps instants on the Redis server's clock to this process's
// monotonic clock, NTP-style: each round trip gives an offset accurate to
// half its duration, and the quickest recent one is kept.
type serverClock struct {
	base time.Time // local reference; durations below are since base

	mu     sync.Mutex
	have   bool
	offset time.Duration // server time minus local time since base
	rtt    time.Duration
	at     time.Duration // when the kept sample was taken
}

// observe takes one sample: sent and received bracket a reply stamped
// server on the server.
func (c *serverClock) observe(sent, received time.Time, server time.Duration) {
	s, e := sent.Sub(c.base), received.Sub(c.base)
	rtt := e - s
	offset := server - (s + rtt/2)
	c.mu.Lock()
	defer c.mu.Unlock()
	// A kept sample ages by 50 µs per second, faster than clocks drift, so
	// a slower but fresher sample eventually replaces it.
	if !c.have || rtt <= c.rtt+(e-c.at)/20000 {
		c.have, c.offset, c.rtt, c.at = true, offset, rtt, e
	}
}

// local returns the local instant of server time t.
func (c *serverClock) local(t time.Duration) time.Time {
	c.mu.Lock()
	offset := c.offset
	c.mu.Unlock()
	return c.base.Add(t - offset)
}
