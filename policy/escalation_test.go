package policy

import (
	"testing"
	"time"
)

// TestLocalMaxEscalation checks the MaxEscalation option through the
// explicit-time twins: a 429 with a huge Retry-After raises a host by at
// most the cap above its floor, and with escalation off a refused host stays
// spaced by its floor alone.
func TestLocalMaxEscalation(t *testing.T) {
	const floor = time.Second
	huge := 99999 * time.Second
	tests := []struct {
		name          string
		maxEscalation time.Duration
		refusals      int
		want          time.Duration // interval in force after the refusals
	}{
		{name: "default headroom", refusals: 1, want: floor + EscalationHeadroom},
		{name: "capped at 30 s above the floor", maxEscalation: 30 * time.Second, refusals: 1, want: floor + 30*time.Second},
		{name: "the cap holds over repeated refusals", maxEscalation: 30 * time.Second, refusals: 5, want: floor + 30*time.Second},
		{name: "a cap below the first step", maxEscalation: 500 * time.Millisecond, refusals: 1, want: floor + 500*time.Millisecond},
		{name: "escalation off", maxEscalation: None, refusals: 3, want: floor},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := NewLocal(LocalOptions{DefaultInterval: floor, MaxEscalation: tt.maxEscalation})
			now := t0
			if r, _ := l.ReserveAt(now, "a.test", 0); !r.OK {
				t.Fatalf("first ReserveAt = %+v; want a slot at once", r)
			}
			if err := l.SentAt(now, "a.test"); err != nil {
				t.Fatal(err)
			}
			for range tt.refusals {
				got, err := l.RefusedAt(now, "a.test", huge)
				if err != nil {
					t.Fatal(err)
				}
				if got != tt.want {
					t.Fatalf("RefusedAt = %v; want %v", got, tt.want)
				}
			}
			// The next request is spaced by the interval in force, from the
			// request that was refused.
			if r, _ := l.ReserveAt(now.Add(tt.want-time.Millisecond), "a.test", 0); r.OK {
				t.Errorf("ReserveAt just before %v = %+v; want no slot yet", tt.want, r)
			}
			r, _ := l.ReserveAt(now.Add(tt.want), "a.test", 0)
			if !r.OK || r.Interval != tt.want {
				t.Errorf("ReserveAt at %v = %+v; want a slot with interval %v", tt.want, r, tt.want)
			}
		})
	}
}
