package consume

import (
	"slices"
	"testing"
	"time"
)

func TestFIFO(t *testing.T) {
	f := NewFIFO[string, string](2)
	hs := make([]*Held[string], 4)
	for i := range hs {
		hs[i] = &Held[string]{Entry: Entry{ID: string(rune('a' + i))}}
		if ok, why, ev := f.Admit(hs[i], false, time.Time{}); !ok || ev != nil {
			t.Fatalf("Admit(%s) = %v, %q, %v", hs[i].ID, ok, why, ev)
		}
	}
	ids := func(hs []*Held[string]) []string {
		var out []string
		for _, h := range hs {
			out = append(out, h.ID)
		}
		return out
	}
	if got := ids(f.Start(time.Time{})); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Start = %v, want a, b (the limit)", got)
	}
	if got := f.Start(time.Time{}); len(got) != 0 {
		t.Errorf("Start = %v while two run, want none", ids(got))
	}
	if f.Done(hs[0], "", true, time.Time{}) {
		t.Error("Done requeued a command")
	}
	if got := ids(f.Start(time.Time{})); !slices.Equal(got, []string{"c"}) {
		t.Errorf("Start after one is done = %v, want c", got)
	}
	if ok, why, _ := f.Admit(&Held[string]{}, true, time.Time{}); ok || why != "worker full" {
		t.Errorf("Admit when full = %v, %q; want refused, worker full", ok, why)
	}
	if !f.Remove(hs[3]) || f.Remove(hs[3]) {
		t.Error("Remove of a waiting command did not remove it exactly once")
	}
	if d := f.Drain(); len(d) != 0 || f.Evictable() != 0 || f.Parked() != 0 || !f.Wake().IsZero() {
		t.Errorf("Drain = %v, Evictable %d, Parked %d, Wake %v; want nothing", ids(d), f.Evictable(), f.Parked(), f.Wake())
	}
}
