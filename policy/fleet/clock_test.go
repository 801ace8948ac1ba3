package fleet

import (
	"testing"
	"time"
)

func TestServerClockMapping(t *testing.T) {
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// The server's clock runs 1 h 3 ms ahead of ours.
	const skew = time.Hour + 3*time.Millisecond
	serverAt := func(local time.Duration) time.Duration {
		return time.Duration(base.Add(local).UnixNano()) + skew
	}
	c := serverClock{base: base}
	// A slow first round trip (40 ms) whose reply was stamped early in it.
	c.observe(base, base.Add(40*time.Millisecond), serverAt(5*time.Millisecond))
	if got, want := c.local(serverAt(time.Second)), base.Add(time.Second); absDur(got.Sub(want)) > 20*time.Millisecond {
		t.Fatalf("after a 40 ms sample, mapping is off by %v; want within 20 ms", got.Sub(want))
	}
	// A quick one (200 µs) replaces it.
	at := 100 * time.Millisecond
	c.observe(base.Add(at), base.Add(at+200*time.Microsecond), serverAt(at+150*time.Microsecond))
	if got, want := c.local(serverAt(time.Second)), base.Add(time.Second); absDur(got.Sub(want)) > 100*time.Microsecond {
		t.Fatalf("after a 200 µs sample, mapping is off by %v; want within 100 µs", got.Sub(want))
	}
	// A slower one soon after does not displace it.
	at = 200 * time.Millisecond
	c.observe(base.Add(at), base.Add(at+30*time.Millisecond), serverAt(at+29*time.Millisecond))
	if got, want := c.local(serverAt(time.Second)), base.Add(time.Second); absDur(got.Sub(want)) > 100*time.Microsecond {
		t.Fatalf("a slow sample displaced a quick one: mapping off by %v", got.Sub(want))
	}
	// Long after, a fresher sample of similar quality does.
	at = time.Hour
	c.observe(base.Add(at), base.Add(at+300*time.Microsecond), serverAt(at+150*time.Microsecond))
	if c.at != at+300*time.Microsecond {
		t.Fatalf("a fresh sample an hour later was not taken (kept sample from %v)", c.at)
	}
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}
