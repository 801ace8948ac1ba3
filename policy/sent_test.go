package policy

import (
	"context"
	"testing"
	"time"

	"github.com/replicator-go/replicator/internal/testenv"
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

// TestRedisSentSpacesFromTheDeparture checks the same rule through the
// script: after Sent the next slot is a full interval from the departure.
func TestRedisSentSpacesFromTheDeparture(t *testing.T) {
	srv := testenv.StartRedis(t)
	iv := 400 * time.Millisecond
	p := NewRedis(newClient(t, srv.Addr), RedisOptions{Fallback: NewLocal(LocalOptions{DefaultInterval: iv})})
	ctx := context.Background()
	if r, err := p.Reserve(ctx, "a.test", 0); err != nil || !r.OK {
		t.Fatalf("first reservation: %+v, %v", r, err)
	}
	// The request leaves late; the departure is what counts.
	time.Sleep(150 * time.Millisecond)
	if err := p.Sent(ctx, "a.test"); err != nil {
		t.Fatal(err)
	}
	r, err := p.Reserve(ctx, "a.test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if r.Wait < iv-50*time.Millisecond {
		t.Errorf("wait after a late departure = %v, want about %v (spaced from the departure)", r.Wait, iv)
	}
}
