package fleet

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/internal/redisacl"
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

// TestHoldsAsTheOperatorsUser reads holds as the production broker's
// operator user, which may SCAN and read INFO but not HMGET: with no
// pacing key (fleet pacing off) it reads nothing and Redis refuses
// nothing; with one, the HMGET refused is named with the grant that covers
// every pacing key.
func TestHoldsAsTheOperatorsUser(t *testing.T) {
	srv := testenv.StartRedisACL(t, "../../deploy/redis-acl/minimal.acl")
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, Username: "brokeradmin", Password: "PASSWORD",
		ForceSingleClient: true, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if hs, err := Holds(ctx, c, ""); err != nil || len(hs) != 0 {
		t.Fatalf("no pacing key: %+v, %v", hs, err)
	}
	if denied, err := srv.ACLDenials("brokeradmin"); err != nil || len(denied) != 0 {
		t.Fatalf("ACL denials without pacing keys: %v, %v", denied, err)
	}

	if _, err := srv.Do("HSET", DefaultKeyPrefix+"{a.example}", "esc", "4000000", "esc_at", "1"); err != nil {
		t.Fatal(err)
	}
	_, err = Holds(ctx, c, "")
	var d *redisacl.Denied
	if !errors.As(err, &d) || d.Command != "HMGET" || d.Key != DefaultKeyPrefix+"{a.example}" || d.Grant() != "(+hmget ~replicator:pace:*)" {
		t.Fatalf("with a pacing key: %v, want HMGET denied", err)
	}
}
