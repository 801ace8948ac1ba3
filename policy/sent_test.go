package policy

import (
	"testing"
	"time"
)

// TestLocalSentSpacesFromTheDeparture: a request that leaves after its slot
// moves the next slot later; one that leaves on time changes nothing.
func TestLocalSentSpacesFromTheDeparture(t *testing.T) {
	iv := secs(1)
	l := NewLocal(LocalOptions{DefaultInterval: iv})
	if r, _ := l.ReserveAt(t0, "a.test", 0); !r.OK {
		t.Fatal("first reservation refused")
	}
	if err := l.SentAt(t0.Add(300*time.Millisecond), "a.test"); err != nil {
		t.Fatal(err)
	}
	r, _ := l.ReserveAt(t0.Add(secs(1)), "a.test", time.Hour)
	if want := 300 * time.Millisecond; r.Wait != want {
		t.Errorf("after a late departure: wait = %v, want %v", r.Wait, want)
	}
	// Reserved for t0+1.3s; leaving earlier than that must not pull it in.
	l.SentAt(t0.Add(secs(1)), "a.test")
	if r, _ := l.ReserveAt(t0.Add(secs(2)), "a.test", 0); r.OK {
		t.Errorf("an early Sent shortened the spacing: %+v", r)
	}
	if err := l.SentAt(t0, ""); err != ErrEmptyHost {
		t.Errorf("empty host: err = %v, want ErrEmptyHost", err)
	}
}
