package policy

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// spacing is d as a DefaultInterval option: None when d is zero.
func spacing(d time.Duration) time.Duration {
	if d == 0 {
		return None
	}
	return d
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func TestLocalEmptyHost(t *testing.T) {
	l := NewLocal(LocalOptions{})
	if _, err := l.ReserveAt(t0, "", 0); !errors.Is(err, ErrEmptyHost) {
		t.Errorf("ReserveAt(\"\") error = %v; want ErrEmptyHost", err)
	}
	if _, err := l.RefusedAt(t0, "", 0); !errors.Is(err, ErrEmptyHost) {
		t.Errorf("RefusedAt(\"\") error = %v; want ErrEmptyHost", err)
	}
	if n := l.Tracked(); n != 0 {
		t.Errorf("Tracked() = %d; want 0", n)
	}
}

func TestLocalCancelledContext(t *testing.T) {
	l := NewLocal(LocalOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Reserve(ctx, "a.test", 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Reserve error = %v; want context.Canceled", err)
	}
	if _, err := l.Refused(ctx, "a.test", 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Refused error = %v; want context.Canceled", err)
	}
}

// fill reserves n distinct hosts at now.
func fill(t *testing.T, l *Local, now time.Time, prefix string, n int) {
	t.Helper()
	for i := range n {
		host := fmt.Sprintf("%s%d.test", prefix, i)
		if _, err := l.ReserveAt(now, host, 0); err != nil {
			t.Fatal(err)
		}
		if err := l.SentAt(now, host); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLocalPruning(t *testing.T) {
	sec := func(n float64) time.Duration { return secs(n) }
	tests := []struct {
		name     string
		maxHosts int
		def      time.Duration
		floors   map[string]float64
		// run drives the pacer; it returns nothing and the checks follow.
		run         func(t *testing.T, l *Local)
		wantTracked int
		wantPrunes  int
		// wantWait probes hosts after run: the wait a reservation at probeAt
		// would get.
		probeAt  time.Duration
		wantWait map[string]time.Duration
	}{
		{
			name: "hosts whose spacing has lapsed are dropped past the bound",
			run: func(t *testing.T, l *Local) {
				fill(t, l, t0, "h", DefaultMaxHosts+1)
				l.ReserveAt(t0.Add(sec(1)), "trigger.test", 0)
			},
			wantTracked: 1,
			wantPrunes:  2, // the crossing (nothing lapsed yet), then the trigger
		},
		{
			name:     "MaxHosts below the minimum is raised to it",
			maxHosts: 10,
			run: func(t *testing.T, l *Local) {
				fill(t, l, t0, "h", 100)
				l.ReserveAt(t0.Add(sec(1)), "trigger.test", 0)
			},
			wantTracked: 101,
			wantPrunes:  0,
		},
		{
			name:     "a larger MaxHosts is kept",
			maxHosts: 2 * DefaultMaxHosts,
			run: func(t *testing.T, l *Local) {
				fill(t, l, t0, "h", DefaultMaxHosts+1)
				l.ReserveAt(t0.Add(sec(1)), "trigger.test", 0)
			},
			wantTracked: DefaultMaxHosts + 2,
			wantPrunes:  0,
		},
		{
			name: "hosts still inside their spacing are kept, and the prune is deferred",
			run: func(t *testing.T, l *Local) {
				fill(t, l, t0, "h", DefaultMaxHosts+1) // crossing: prune finds nothing
				fill(t, l, t0.Add(sec(0.5)), "later", 10)
			},
			wantTracked: DefaultMaxHosts + 11,
			wantPrunes:  1,
			probeAt:     sec(0.5),
			wantWait:    map[string]time.Duration{"h0.test": sec(0.5)},
		},
		{
			name: "the deferred prune runs once something can be reclaimed",
			run: func(t *testing.T, l *Local) {
				fill(t, l, t0, "h", DefaultMaxHosts+1)
				fill(t, l, t0.Add(sec(0.5)), "later", 10)
				l.ReserveAt(t0.Add(sec(1)), "trigger.test", 0)
			},
			// The later hosts (reserved at 0.5 s) are still inside their
			// spacing at 1 s; the first batch is not.
			wantTracked: 11,
			wantPrunes:  2,
		},
		{
			name:   "each host's own floor decides, not the default",
			floors: map[string]float64{"slow.test": 300},
			run: func(t *testing.T, l *Local) {
				l.ReserveAt(t0, "slow.test", 0)
				fill(t, l, t0, "h", DefaultMaxHosts)
				l.ReserveAt(t0.Add(sec(2)), "trigger.test", 0)
			},
			wantTracked: 2,
			probeAt:     sec(2),
			wantWait:    map[string]time.Duration{"slow.test": sec(298)},
			wantPrunes:  2,
		},
		{
			name: "a host whose escalation is in force is kept after its spacing lapsed",
			run: func(t *testing.T, l *Local) {
				l.ReserveAt(t0, "limited.test", 0)
				l.SentAt(t0, "limited.test") // it left, and its answer was a 429
				l.RefusedAt(t0, "limited.test", 0)
				fill(t, l, t0, "h", DefaultMaxHosts)
				l.ReserveAt(t0.Add(sec(30)), "trigger.test", 0)
				l.ReserveAt(t0.Add(sec(30)), "limited.test", 0)
			},
			wantTracked: 2,
			probeAt:     sec(30),
			wantWait:    map[string]time.Duration{"limited.test": sec(2)},
			wantPrunes:  2,
		},
		{
			// With a 0 default nothing but the escalations constrains, so a
			// deferral computed from the spacing alone would rescan on every
			// new host.
			name: "the deferral waits out a live escalation",
			def:  spacing(0),
			run: func(t *testing.T, l *Local) {
				for i := range DefaultMaxHosts + 1 {
					h := fmt.Sprintf("h%d.test", i)
					l.ReserveAt(t0, h, 0)
					l.RefusedAt(t0, h, 0)
				}
				fill(t, l, t0.Add(sec(61)), "a", 3)
				fill(t, l, t0.Add(sec(600)), "b", 3)
				fill(t, l, t0.Add(EscalationReset-sec(1)), "c", 3)
			},
			wantTracked: DefaultMaxHosts + 1 + 9,
			wantPrunes:  2, // the crossing, then the refusal that re-added the host it dropped
		},
		{
			name: "once the windows close the escalated hosts go",
			def:  spacing(0),
			run: func(t *testing.T, l *Local) {
				for i := range DefaultMaxHosts + 1 {
					h := fmt.Sprintf("h%d.test", i)
					l.ReserveAt(t0, h, 0)
					l.RefusedAt(t0, h, 0)
				}
				fill(t, l, t0.Add(sec(61)), "a", 3)
				l.ReserveAt(t0.Add(EscalationReset), "trigger.test", 0)
			},
			wantTracked: 0,
			wantPrunes:  3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := NewTable()
			for h, s := range tt.floors {
				mustApply(t, tab, published(h, s, 0))
			}
			l := NewLocal(LocalOptions{DefaultInterval: tt.def, Floors: tab, MaxHosts: tt.maxHosts})
			tt.run(t, l)
			if got := l.Tracked(); got != tt.wantTracked {
				t.Errorf("Tracked() = %d; want %d", got, tt.wantTracked)
			}
			if l.prunes != tt.wantPrunes {
				t.Errorf("prune scans = %d; want %d", l.prunes, tt.wantPrunes)
			}
			for h, want := range tt.wantWait {
				r, _ := l.ReserveAt(t0.Add(tt.probeAt), h, -1)
				if r.Wait != want {
					t.Errorf("wait for %s = %v; want %v", h, r.Wait, want)
				}
			}
		})
	}
}

// TestLocalFollow: a decision made elsewhere binds the next local decision
// as if this pacer had made it.
func TestLocalFollow(t *testing.T) {
	l := NewLocal(LocalOptions{})
	// The fleet granted a slot 300 ms out, with a 4 s escalation set 10 s ago.
	l.FollowAt(t0, "A.test.", Decision{GoesOut: t0.Add(300 * time.Millisecond), Escalation: 4 * time.Second, EscalatedAt: t0.Add(-10 * time.Second)})
	r, err := l.ReserveAt(t0.Add(time.Second), "a.test", time.Hour)
	if err != nil || !r.OK || r.Interval != 4*time.Second || r.Wait != 3300*time.Millisecond {
		t.Errorf("ReserveAt after FollowAt = %+v, %v; want a slot 3.3 s out at 4 s", r, err)
	}
	// The escalation resets EscalationReset after it was set, not after
	// it was followed.
	if r, _ := l.ReserveAt(t0.Add(EscalationReset-10*time.Second), "a.test", 0); r.Interval != time.Second {
		t.Errorf("interval once the followed escalation's window closed = %v; want the 1 s floor", r.Interval)
	}

	// No escalation in the decision clears the local one; an earlier
	// GoesOut does not pull the last request in.
	l.RefusedAt(t0, "b.test", 0)
	l.FollowAt(t0, "b.test", Decision{GoesOut: t0.Add(-time.Hour)})
	if r, _ := l.ReserveAt(t0.Add(time.Second), "b.test", 0); !r.OK || r.Interval != time.Second {
		t.Errorf("ReserveAt after a followed decision without escalation = %+v; want the floor, due", r)
	}
	// A decision that recorded no request still marks the host as seen now.
	l.FollowAt(t0, "c.test", Decision{})
	if r, _ := l.ReserveAt(t0.Add(500*time.Millisecond), "c.test", time.Hour); r.Wait != 500*time.Millisecond {
		t.Errorf("ReserveAt after an empty followed decision: wait = %v; want 500ms", r.Wait)
	}
	// A lease this Local granted is kept: its request has yet to leave.
	if r, _ := l.ReserveAt(t0, "d.test", 0); !r.OK {
		t.Fatalf("first ReserveAt for d.test = %+v; want a slot", r)
	}
	l.FollowAt(t0, "d.test", Decision{GoesOut: t0.Add(-time.Hour)})
	if r, _ := l.ReserveAt(t0.Add(2*time.Second), "d.test", time.Hour); r.OK {
		t.Errorf("ReserveAt while its lease is held, after FollowAt = %+v; want no slot", r)
	}
	before := l.Tracked()
	l.FollowAt(t0, "", Decision{GoesOut: t0})
	if l.Tracked() != before {
		t.Error("FollowAt tracked an empty host")
	}
}

func TestLocalFloorAndLease(t *testing.T) {
	tab := NewTable()
	mustApply(t, tab, published("Bücher.test", 30, 0))
	mustApply(t, tab, published("fast.test", 0, 0))
	l := NewLocal(LocalOptions{DefaultInterval: 2 * time.Second, Floors: tab})
	for host, want := range map[string]time.Duration{"bücher.test": 30 * time.Second, "FAST.test.": 0, "other.test": 2 * time.Second} {
		if got := l.Floor(host); got != want {
			t.Errorf("Floor(%q) = %v; want %v", host, got, want)
		}
	}
	l.RefusedAt(t0, "other.test", 0)
	if got := l.Floor("other.test"); got != 2*time.Second {
		t.Errorf("Floor of an escalated host = %v; want the floor alone", got)
	}
	if got := NewLocal(LocalOptions{DefaultInterval: None}).Floor("a.test"); got != 0 {
		t.Errorf("Floor under None = %v; want 0", got)
	}
	if got := l.Lease(); got != DefaultLease {
		t.Errorf("Lease() = %v; want DefaultLease", got)
	}
	if got := NewLocal(LocalOptions{Lease: time.Minute}).Lease(); got != time.Minute {
		t.Errorf("Lease() = %v; want the option's 1m", got)
	}
}
