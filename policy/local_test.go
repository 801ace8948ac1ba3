package policy

import (
	"fmt"
	"testing"
	"time"
)

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
