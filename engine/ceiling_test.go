package engine

import (
	"testing"
	"time"
)

func TestFailuresCountPerEntry(t *testing.T) {
	f := newFailures(time.Minute)
	t0 := fateT0
	for want := 1; want <= 3; want++ {
		if got := f.add("1-1", t0.Add(time.Duration(want)*time.Minute)); got != want {
			t.Fatalf("failure %d of 1-1 counted %d", want, got)
		}
	}
	if got := f.add("1-2", t0); got != 1 {
		t.Errorf("first failure of 1-2 counted %d, want 1", got)
	}
	f.forget("1-1")
	if got := f.add("1-1", t0.Add(4*time.Minute)); got != 1 {
		t.Errorf("a failure after forget counted %d, want 1", got)
	}
}

func TestFailuresForgetPastTheHorizon(t *testing.T) {
	f := newFailures(time.Minute)
	f.add("1-1", fateT0)
	f.add("1-1", fateT0)
	later := fateT0.Add(failureHorizon*time.Minute + time.Second)
	if got := f.add("1-1", later); got != 1 {
		t.Errorf("a failure past the horizon counted %d, want 1 (the old count forgotten)", got)
	}
	if len(f.n) != 1 {
		t.Errorf("%d counts kept, want 1", len(f.n))
	}
}
