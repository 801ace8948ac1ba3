package policy_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/policy"
)

// A Local pacer deciding at explicit times: a published floor, the spacing
// between requests, a parked attempt, a request reported as it leaves, and a
// 429 with Retry-After.
func ExampleLocal() {
	floors := policy.NewTable()
	// As a fetch_policy_state for slow.example would (see ExampleTable).
	floors.Set("slow.example", 10*time.Second, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	pacer := policy.NewLocal(policy.LocalOptions{Floors: floors})

	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	show := func(at time.Duration, host string, maxWait time.Duration) policy.Reservation {
		r, _ := pacer.ReserveAt(start.Add(at), host, maxWait)
		fmt.Printf("t=%-4v %-13s wait %-4v ok=%-5v interval %v\n", at, host, r.Wait, r.OK, r.Interval)
		return r
	}
	// A granted request is reported when it really leaves; the next one is
	// spaced from that moment.
	sent := func(at time.Duration, host string) { pacer.SentAt(start.Add(at), host) }

	show(0, "slow.example", 5*time.Second)
	sent(0, "slow.example")
	show(2*time.Second, "slow.example", 5*time.Second) // parks: nothing recorded
	show(2*time.Second, "fast.example", 5*time.Second) // other hosts are not held up
	sent(2*time.Second, "fast.example")
	r := show(6*time.Second, "slow.example", 5*time.Second) // due at 10 s
	sent(6*time.Second+r.Wait, "slow.example")

	// The origin answers 429 with Retry-After: 30.
	ra, _ := policy.ParseRetryAfter("30", start.Add(10*time.Second))
	interval, _ := pacer.RefusedAt(start.Add(10*time.Second), "slow.example", ra)
	fmt.Println("after the 429:", interval)
	show(12*time.Second, "slow.example", time.Minute)

	// Output:
	// t=0s   slow.example  wait 0s   ok=true  interval 10s
	// t=2s   slow.example  wait 8s   ok=false interval 10s
	// t=2s   fast.example  wait 0s   ok=true  interval 1s
	// t=6s   slow.example  wait 4s   ok=true  interval 10s
	// after the 429: 30s
	// t=12s  slow.example  wait 28s  ok=true  interval 30s
}

// A Table applies fetch_policy_state frames and direct changes under one
// rule: the latest instant per host wins, and an equal one applies.
func ExampleTable() {
	floors := policy.NewTable()
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	err := floors.Apply(&envelope.FetchPolicyState{
		SchemaVersion:      envelope.SchemaVersion,
		OccurredAt:         at,
		Host:               "Slow.Example.",
		MinIntervalSeconds: new(10.0),
	})
	fmt.Println("frame:", err)
	d, ok := floors.Floor("slow.example")
	fmt.Println("floor:", d, ok)

	// A change older than the policy in force is refused.
	err = floors.Set("slow.example", time.Second, at.Add(-time.Minute))
	fmt.Println("stale:", errors.Is(err, policy.ErrStale), errors.Is(err, policy.ErrIgnored))

	// A revoked host has no floor (the pacer's default applies), and the
	// revocation's instant is remembered.
	fmt.Println("revoke:", floors.Revoke("slow.example", at.Add(time.Minute)))
	_, ok = floors.Floor("slow.example")
	fmt.Println("in force:", ok, floors.Len())

	// Output:
	// frame: <nil>
	// floor: 10s true
	// stale: true true
	// revoke: <nil>
	// in force: false 0
}

// A Local standing in for a pacer that decides elsewhere (policy/fleet's,
// in Redis): it reads the host's floor from the Local so both pace alike,
// and reports each decision with Follow, so when it must fall back the
// Local starts from what was last decided.
func ExampleLocal_FollowAt() {
	fallback := policy.NewLocal(policy.LocalOptions{DefaultInterval: 2 * time.Second})
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	fmt.Println("floor:", fallback.Floor("a.example"))

	// Elsewhere, a request to a.example was granted 1 s out, after a 429
	// escalated the host to 8 s a minute ago.
	fallback.FollowAt(start, "a.example", policy.Decision{
		GoesOut:     start.Add(time.Second),
		Escalation:  8 * time.Second,
		EscalatedAt: start.Add(-time.Minute),
	})

	// The shared pacer stops answering; the Local decides as it would have.
	r, _ := fallback.ReserveAt(start.Add(2*time.Second), "a.example", time.Minute)
	fmt.Println("fallback: wait", r.Wait, "interval", r.Interval)

	// Output:
	// floor: 2s
	// fallback: wait 7s interval 8s
}
