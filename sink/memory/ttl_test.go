package memory

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/replicator-go/replicator/sink"
)

func TestTTL(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := New(Options{TTL: time.Hour})
	clock := t0
	s.now = func() time.Time { return clock }

	b, err := s.Put(ctx, strings.NewReader("x"), sink.PutOptions{})
	if err != nil || !b.Created || !b.ExpiresAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("Put = %+v, %v", b, err)
	}
	// Re-referencing restarts the clock.
	clock = t0.Add(50 * time.Minute)
	if b, _ := s.Put(ctx, strings.NewReader("x"), sink.PutOptions{}); b.Created {
		t.Errorf("re-reference reported Created")
	}
	clock = t0.Add(100 * time.Minute)
	if _, err := s.Open(ctx, b.Fingerprint); err != nil {
		t.Errorf("Open within the refreshed TTL: %v", err)
	}
	clock = t0.Add(110 * time.Minute)
	if _, err := s.Open(ctx, b.Fingerprint); !errors.Is(err, sink.ErrNotFound) {
		t.Errorf("Open after the TTL = %v, want ErrNotFound", err)
	}
	if b, _ := s.Put(ctx, strings.NewReader("x"), sink.PutOptions{}); !b.Created {
		t.Errorf("Put after expiry should store afresh")
	}
	s.Put(ctx, strings.NewReader("y"), sink.PutOptions{})
	if n := s.SweepAt(clock.Add(2 * time.Hour)); n != 2 || s.Len() != 0 {
		t.Errorf("SweepAt dropped %d, left %d; want 2 and 0", n, s.Len())
	}
}
