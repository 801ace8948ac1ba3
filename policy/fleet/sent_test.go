package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/policy"
)

// TestPacerSentSpacesFromTheDeparture checks the same rule through the
// script: after Sent the next slot is a full interval from the departure.
func TestPacerSentSpacesFromTheDeparture(t *testing.T) {
	srv := testenv.StartRedis(t)
	iv := 400 * time.Millisecond
	p := NewPacer(newClient(t, srv.Addr), PacerOptions{Fallback: policy.NewLocal(policy.LocalOptions{DefaultInterval: iv})})
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
