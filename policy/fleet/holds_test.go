package fleet

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/policy"
)

// TestHolds escalates two hosts through the pacer, on a Cluster so their
// keys live on different nodes, and reads them back; an unescalated host
// is not held.
func TestHolds(t *testing.T) {
	cl := testenv.StartCluster(t)
	c := newClient(t, cl.Addrs...)
	ctx := context.Background()
	if hs, err := Holds(ctx, c, ""); err != nil || len(hs) != 0 {
		t.Fatalf("nothing escalated: %+v, %v", hs, err)
	}
	p := NewPacer(c, PacerOptions{})
	before := time.Now().Add(-time.Second)
	for _, host := range []string{"b.example", "a.example", "c.example", "d.example"} {
		if _, err := p.Reserve(ctx, host, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Refused(ctx, "a.example", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Refused(ctx, "b.example", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	hs, err := Holds(ctx, c, "")
	if err != nil {
		t.Fatal(err)
	}
	var hosts []string
	for _, h := range hs {
		hosts = append(hosts, h.Host)
		if h.Since.Before(before) || h.Until != h.Since.Add(policy.EscalationReset) {
			t.Errorf("%s: since %v until %v", h.Host, h.Since, h.Until)
		}
	}
	if diff := cmp.Diff([]string{"a.example", "b.example"}, hosts); diff != "" {
		t.Fatalf("held hosts (-want +got):\n%s", diff)
	}
	if hs[0].Interval != policy.EscalationFirstStep || hs[1].Interval != 10*time.Second {
		t.Errorf("intervals: %v, %v", hs[0].Interval, hs[1].Interval)
	}
}

// TestReplayOnce reads the floors in force without tailing.
func TestReplayOnce(t *testing.T) {
	srv := testenv.StartRedis(t)
	c := newClient(t, srv.Addr)
	xadd(t, c, DefaultPolicyStream, frame(t, published("a.example", 5, 0)), frame(t, published("b.example", 2, 0)),
		poison, frame(t, revoked("b.example", 1)), frame(t, published("c.example", 0, 0)))
	table := policy.NewTable()
	r := NewReader(c, table, ReaderOptions{BatchSize: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := r.ReplayOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Duration{"a.example": 5 * time.Second, "c.example": 0}
	if diff := cmp.Diff(want, table.Snapshot()); diff != "" {
		t.Errorf("floors (-want +got):\n%s", diff)
	}
}
