// Package pacertest holds the pacing decisions every policy.Pacer must
// make, as cases a pacer's tests play with Run: policy's on Local at
// explicit times, policy/fleet's on the Redis pacer for the cases whose
// steps all happen at one instant, since Redis reads its own clock.
package pacertest

import (
	"math"
	"testing"
	"time"

	"github.com/replicator-go/replicator/policy"
)

const (
	opReserve = "reserve"
	opRefused = "refused"
	opPublish = "publish" // publish host's floor on the case's Table
	opRevoke  = "revoke"  // revoke host's floor
	opSent    = "sent"    // a granted request reports leaving (or being abandoned)
)

// Step is one call a case makes, and what it must return.
type Step struct {
	op string
	// at is the decision's time as an offset from t0 (Local only).
	at      time.Duration
	host    string
	maxWait time.Duration
	// retryAfter is the header value a refusal carried, parsed as the
	// handler would, with ParseRetryAfter at t0.
	retryAfter string
	floor      float64 // seconds, for opPublish

	want policy.Reservation // for opReserve
	wait time.Duration      // for opRefused: the interval it returns
	// holdLease leaves a granted request unreported (opReserve): it has
	// not left yet, or its process died.
	holdLease bool
}

// Case is one scenario: floors published, then steps played in order.
type Case struct {
	// Name says what the case shows, for t.Run.
	Name string
	// def is the default interval option; zero means the package default.
	def time.Duration
	// floors are published before the first step, in seconds.
	floors map[string]float64
	steps  []Step
}

// ClockFree reports whether every step happens at one instant, so a pacer
// on another clock must reach the same decisions (within the time the
// calls take).
func (c Case) ClockFree() bool {
	for _, s := range c.steps {
		if s.at != 0 {
			return false
		}
	}
	return true
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// spacing is d as a DefaultInterval option: None when d is zero.
func spacing(d time.Duration) time.Duration {
	if d == 0 {
		return policy.None
	}
	return d
}

const long = time.Hour // a maxWait that never parks

func reserve(at time.Duration, host string, maxWait time.Duration, wait time.Duration, ok bool, interval time.Duration) Step {
	return Step{op: opReserve, at: at, host: host, maxWait: maxWait, want: policy.Reservation{Wait: wait, OK: ok, Interval: interval}}
}

// held is a reservation whose request has not reported leaving yet.
func held(at time.Duration, host string, maxWait time.Duration, wait time.Duration, ok bool, interval time.Duration) Step {
	s := reserve(at, host, maxWait, wait, ok, interval)
	s.holdLease = true
	return s
}

func sent(at time.Duration, host string) Step { return Step{op: opSent, at: at, host: host} }

func refused(at time.Duration, host, retryAfter string, interval time.Duration) Step {
	return Step{op: opRefused, at: at, host: host, retryAfter: retryAfter, wait: interval}
}

// Cases are the decisions every pacer must make.
var Cases = []Case{
	{
		Name: "a granted request holds its host until it reports leaving",
		steps: []Step{
			held(0, "a.test", long, 0, true, time.Second),
			reserve(0, "a.test", long, time.Second, false, time.Second),
			reserve(0, "b.test", long, 0, true, time.Second),
		},
	},
	{
		Name: "a request abandoned before leaving releases its host",
		steps: []Step{
			held(0, "a.test", long, 0, true, time.Second),
			sent(0, "a.test"),
			reserve(0, "a.test", long, time.Second, true, time.Second),
		},
	},
	{
		Name: "the next slot counts from a late departure",
		steps: []Step{
			held(0, "a.test", long, 0, true, time.Second),
			reserve(time.Second, "a.test", long, policy.PendingPoll, false, time.Second),
			sent(1300*time.Millisecond, "a.test"),
			reserve(1500*time.Millisecond, "a.test", long, 800*time.Millisecond, true, time.Second),
		},
	},
	{
		Name: "a refusal keeps the lease of a request yet to leave",
		steps: []Step{
			reserve(0, "a.test", long, 0, true, time.Second),
			held(0, "a.test", long, time.Second, true, time.Second),
			// The first request's 429 arrives before the second has left.
			refused(0, "a.test", "", 2*time.Second),
			// Granting now would let the third go out 2 s after the
			// second's slot, though the second may leave later than that.
			reserve(0, "a.test", long, 3*time.Second, false, 2*time.Second),
			sent(0, "a.test"),
			reserve(0, "a.test", long, 3*time.Second, true, 2*time.Second),
		},
	},
	{
		Name: "after a refusal the next request is spaced from a late departure",
		steps: []Step{
			reserve(0, "a.test", long, 0, true, time.Second),
			held(0, "a.test", long, time.Second, true, time.Second),
			refused(500*time.Millisecond, "a.test", "", 2*time.Second),
			reserve(1500*time.Millisecond, "a.test", long, 1500*time.Millisecond, false, 2*time.Second),
			sent(2500*time.Millisecond, "a.test"), // the second leaves late
			reserve(2500*time.Millisecond, "a.test", long, 2*time.Second, true, 2*time.Second),
		},
	},
	{
		Name: "a lease that runs out counts as a departure at its end",
		steps: []Step{
			held(0, "a.test", long, 0, true, time.Second),
			reserve(policy.DefaultLease-time.Second, "a.test", 0, policy.PendingPoll, false, time.Second),
			reserve(policy.DefaultLease+500*time.Millisecond, "a.test", long, 500*time.Millisecond, true, time.Second),
		},
	},
	{
		Name: "a host with no spacing takes no lease",
		def:  spacing(0),
		steps: []Step{
			held(0, "a.test", 0, 0, true, 0),
			held(0, "a.test", 0, 0, true, 0),
		},
	},
	{
		Name:  "the first request waits for nothing",
		steps: []Step{reserve(0, "a.test", 0, 0, true, time.Second)},
	},
	{
		Name: "a second request waits out the interval",
		steps: []Step{
			reserve(0, "a.test", long, 0, true, time.Second),
			reserve(250*time.Millisecond, "a.test", long, 750*time.Millisecond, true, time.Second),
		},
	},
	{
		Name: "the wait is gone once the interval has elapsed",
		steps: []Step{
			reserve(0, "a.test", 0, 0, true, time.Second),
			reserve(time.Second, "a.test", 0, 0, true, time.Second),
		},
	},
	{
		Name: "callers at one instant are spaced from one another",
		steps: []Step{
			reserve(0, "a.test", long, 0, true, time.Second),
			reserve(0, "a.test", long, 1*time.Second, true, time.Second),
			reserve(0, "a.test", long, 2*time.Second, true, time.Second),
		},
	},
	{
		Name: "pacing is per host",
		steps: []Step{
			reserve(0, "a.test", long, 0, true, time.Second),
			reserve(0, "b.test", long, 0, true, time.Second),
		},
	},
	{
		Name: "the host is case-insensitive",
		steps: []Step{
			reserve(0, "Example.TEST", long, 0, true, time.Second),
			reserve(0, "example.test", long, time.Second, true, time.Second),
		},
	},
	{
		Name: "every spelling of an address is one host",
		steps: []Step{
			reserve(0, "127.0.0.1", long, 0, true, time.Second),
			reserve(0, "2130706433", long, time.Second, true, time.Second),
			reserve(0, "0x7f.1", long, 2*time.Second, true, time.Second),
			reserve(0, "::ffff:127.0.0.1", long, 3*time.Second, true, time.Second),
			reserve(0, "１２７。０。０。１", long, 4*time.Second, true, time.Second),
			reserve(0, "127.0.0.2", long, 0, true, time.Second),
		},
	},
	{
		Name: "an IDN is paced under the ASCII name that is dialed",
		steps: []Step{
			reserve(0, "Bücher.test", long, 0, true, time.Second),
			reserve(0, "xn--bcher-kva.test.", long, time.Second, true, time.Second),
			refused(0, "BÜCHER.test", "", 2*time.Second),
			reserve(0, "bücher.test", long, 3*time.Second, true, 2*time.Second),
		},
	},
	{
		Name:   "a floor published under one spelling applies to every other",
		floors: map[string]float64{"Bücher.test.": 30, "0x7f.1": 20},
		steps: []Step{
			reserve(0, "xn--bcher-kva.test", long, 0, true, 30*time.Second),
			reserve(0, "127.0.0.1", long, 0, true, 20*time.Second),
		},
	},
	{
		Name: "a parked attempt records nothing",
		steps: []Step{
			reserve(0, "a.test", long, 0, true, time.Second),
			reserve(0, "a.test", 500*time.Millisecond, time.Second, false, time.Second),
			reserve(0, "a.test", 500*time.Millisecond, time.Second, false, time.Second),
			// Had the parks been recorded this would be 3 s.
			reserve(0, "a.test", time.Second, time.Second, true, time.Second),
		},
	},
	{
		Name: "a zero default is expressible",
		def:  spacing(0),
		steps: []Step{
			reserve(0, "a.test", 0, 0, true, 0),
			reserve(0, "a.test", 0, 0, true, 0),
		},
	},
	{
		Name:   "a published 0.0 is honoured over a slow default",
		def:    spacing(60 * time.Second),
		floors: map[string]float64{"fast.test": 0},
		steps: []Step{
			reserve(0, "fast.test", 0, 0, true, 0),
			reserve(0, "fast.test", 0, 0, true, 0),
			reserve(0, "other.test", 0, 0, true, 60*time.Second),
		},
	},
	{
		Name:   "a published floor replaces the default",
		floors: map[string]float64{"slow.test": 30},
		steps: []Step{
			reserve(0, "slow.test", long, 0, true, 30*time.Second),
			reserve(5*time.Second, "slow.test", long, 25*time.Second, true, 30*time.Second),
		},
	},
	{
		Name:   "a published floor applies even when the default is 0",
		def:    spacing(0),
		floors: map[string]float64{"slow.test": 30},
		steps: []Step{
			reserve(0, "slow.test", long, 0, true, 30*time.Second),
			reserve(0, "slow.test", long, 30*time.Second, true, 30*time.Second),
		},
	},
	{
		Name:   "a revoked host falls back to the default, not to unlimited",
		def:    spacing(2 * time.Second),
		floors: map[string]float64{"slow.test": 0},
		steps: []Step{
			reserve(0, "slow.test", long, 0, true, 0),
			{op: opRevoke, host: "slow.test"},
			reserve(0, "slow.test", long, 2*time.Second, true, 2*time.Second),
		},
	},
	{
		Name:   "the floor is re-read on every decision",
		floors: map[string]float64{"a.test": 0.5},
		steps: []Step{
			reserve(0, "a.test", long, 0, true, 500*time.Millisecond),
			{op: opPublish, host: "a.test", floor: 10},
			reserve(0, "a.test", long, 10*time.Second, true, 10*time.Second),
		},
	},
	{
		Name: "refusals double the interval in force",
		steps: []Step{
			reserve(0, "a.test", long, 0, true, time.Second),
			refused(0, "a.test", "", 2*time.Second),
			refused(0, "a.test", "", 4*time.Second),
			refused(0, "a.test", "", 8*time.Second),
			reserve(0, "a.test", long, 8*time.Second, true, 8*time.Second),
		},
	},
	{
		Name:   "the first step is at least 2 s however fast the floor",
		floors: map[string]float64{"fast.test": 0.1},
		steps: []Step{
			reserve(0, "fast.test", long, 0, true, 100*time.Millisecond),
			refused(0, "fast.test", "", 2*time.Second),
		},
	},
	{
		Name:   "a 0.0 floor escalates too",
		floors: map[string]float64{"fast.test": 0},
		steps: []Step{
			reserve(0, "fast.test", long, 0, true, 0),
			refused(0, "fast.test", "", 2*time.Second),
			reserve(0, "fast.test", long, 2*time.Second, true, 2*time.Second),
		},
	},
	{
		Name: "escalation stops at the headroom above the floor",
		steps: []Step{
			refused(0, "a.test", "", 2*time.Second),
			refused(0, "a.test", "", 4*time.Second),
			refused(0, "a.test", "", 8*time.Second),
			refused(0, "a.test", "", 16*time.Second),
			refused(0, "a.test", "", 32*time.Second),
			refused(0, "a.test", "", 61*time.Second),
			refused(0, "a.test", "", 61*time.Second),
		},
	},
	{
		Name:   "a floor above the old absolute cap still escalates",
		floors: map[string]float64{"slow.test": 300},
		steps: []Step{
			reserve(0, "slow.test", long, 0, true, 300*time.Second),
			refused(0, "slow.test", "", 360*time.Second),
			reserve(0, "slow.test", long, 360*time.Second, true, 360*time.Second),
		},
	},
	{
		Name: "a Retry-After beats the doubling",
		steps: []Step{
			reserve(0, "a.test", long, 0, true, time.Second),
			refused(0, "a.test", "45", 45*time.Second),
			reserve(0, "a.test", long, 45*time.Second, true, 45*time.Second),
		},
	},
	{
		Name: "a Retry-After is clamped to the headroom",
		steps: []Step{
			refused(0, "a.test", "3600", 61*time.Second),
		},
	},
	{
		Name: "a Retry-After date is clamped to the headroom",
		steps: []Step{
			refused(0, "a.test", "Sun, 01 Mar 2026 13:00:00 GMT", 61*time.Second),
		},
	},
	{
		Name: "a short Retry-After never lowers the escalation",
		steps: []Step{
			refused(0, "a.test", "", 2*time.Second),
			refused(0, "a.test", "1", 4*time.Second),
		},
	},
	{
		Name: "a malformed Retry-After falls back to doubling",
		steps: []Step{
			refused(0, "a.test", "1_0", 2*time.Second),
			refused(0, "a.test", "soon", 4*time.Second),
		},
	},
	{
		Name: "a Retry-After date in the past falls back to doubling",
		steps: []Step{
			refused(0, "a.test", "Sun, 01 Mar 2026 11:00:00 GMT", 2*time.Second),
		},
	},
	{
		Name: "a refusal for a host never reserved still spaces it",
		steps: []Step{
			refused(0, "a.test", "", 2*time.Second),
			reserve(0, "a.test", long, 2*time.Second, true, 2*time.Second),
		},
	},
	{
		Name:   "a floor republished above the escalation wins",
		floors: map[string]float64{"a.test": 0.5},
		steps: []Step{
			reserve(0, "a.test", long, 0, true, 500*time.Millisecond),
			refused(0, "a.test", "", 2*time.Second),
			{op: opPublish, host: "a.test", floor: 10},
			reserve(0, "a.test", long, 10*time.Second, true, 10*time.Second),
		},
	},
	{
		Name: "an escalation is spaced from the request that went out",
		steps: []Step{
			reserve(0, "a.test", long, 0, true, time.Second),
			refused(100*time.Millisecond, "a.test", "", 2*time.Second),
			reserve(500*time.Millisecond, "a.test", long, 1500*time.Millisecond, true, 2*time.Second),
		},
	},
	{
		Name: "the escalation resets in one step after the quiet window",
		steps: []Step{
			reserve(0, "a.test", long, 0, true, time.Second),
			refused(0, "a.test", "", 2*time.Second),
			refused(0, "a.test", "", 4*time.Second),
			reserve(policy.EscalationReset, "a.test", long, 0, true, time.Second),
			reserve(policy.EscalationReset, "a.test", long, time.Second, true, time.Second),
			refused(policy.EscalationReset, "a.test", "", 2*time.Second),
		},
	},
	{
		Name: "the escalation holds until the window has elapsed",
		steps: []Step{
			refused(0, "a.test", "", 2*time.Second),
			reserve(policy.EscalationReset-time.Second, "a.test", long, 0, true, 2*time.Second),
		},
	},
	{
		Name: "the quiet window runs from the last refusal, not the last request",
		steps: []Step{
			refused(0, "a.test", "", 2*time.Second),
			reserve(10*time.Minute, "a.test", long, 0, true, 2*time.Second),
			reserve(20*time.Minute, "a.test", long, 0, true, 2*time.Second),
			refused(20*time.Minute, "a.test", "", 4*time.Second),
			reserve(30*time.Minute, "a.test", long, 0, true, 4*time.Second),
			reserve(50*time.Minute-time.Second, "a.test", long, 0, true, 4*time.Second),
			reserve(50*time.Minute, "a.test", long, 0, true, time.Second),
		},
	},
}

// Decider is a pacer as the cases drive it. *policy.Local is one, deciding
// at the step's time; a pacer on another clock adapts itself by ignoring
// now.
type Decider interface {
	ReserveAt(now time.Time, host string, maxWait time.Duration) (policy.Reservation, error)
	RefusedAt(now time.Time, host string, retryAfter time.Duration) (time.Duration, error)
	SentAt(now time.Time, host string) error
}

// Run plays c against the pacer newPacer builds from opts: c's default
// interval, and Floors a fresh *policy.Table on which c publishes and
// revokes. Waits may come out up to slack shorter than wanted (the time the
// calls themselves took); with slack 0 they must be exact, and each
// reservation's At the decision time plus Wait.
func Run(t *testing.T, c Case, slack time.Duration, newPacer func(opts policy.LocalOptions) Decider) {
	t.Helper()
	tab := policy.NewTable()
	set := func(i int, host string, s float64) {
		t.Helper()
		if err := tab.Set(host, seconds(s), t0.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatalf("step %d: publishing %s: %v", i, host, err)
		}
	}
	for host, s := range c.floors {
		set(0, host, s)
	}
	p := newPacer(policy.LocalOptions{DefaultInterval: c.def, Floors: tab})
	for i, s := range c.steps {
		now := t0.Add(s.at)
		switch s.op {
		case opPublish:
			set(i+1, s.host, s.floor)
		case opRevoke:
			if err := tab.Revoke(s.host, t0.Add(time.Duration(i+1)*time.Second)); err != nil {
				t.Fatalf("step %d: revoking %s: %v", i, s.host, err)
			}
		case opReserve:
			got, err := p.ReserveAt(now, s.host, s.maxWait)
			if err != nil {
				t.Fatalf("step %d: reserve(%s): %v", i, s.host, err)
			}
			if got.OK != s.want.OK || got.Interval != s.want.Interval || !near(got.Wait, s.want.Wait, slack) {
				t.Errorf("step %d: reserve(%q, at %v, maxWait %v) = %+v; want %+v", i, s.host, s.at, s.maxWait, got, s.want)
			}
			if slack == 0 && !got.At.Equal(now.Add(got.Wait)) {
				t.Errorf("step %d: At = %v; want the decision time plus Wait, %v", i, got.At, now.Add(got.Wait))
			}
			if got.OK && !s.holdLease {
				// The request leaves at its slot and says so, as the
				// fetcher does.
				if err := p.SentAt(got.At, s.host); err != nil {
					t.Fatalf("step %d: sent(%s): %v", i, s.host, err)
				}
			}
		case opSent:
			if err := p.SentAt(now, s.host); err != nil {
				t.Fatalf("step %d: sent(%s): %v", i, s.host, err)
			}
		case opRefused:
			ra, _ := policy.ParseRetryAfter(s.retryAfter, now)
			got, err := p.RefusedAt(now, s.host, ra)
			if err != nil {
				t.Fatalf("step %d: refused(%s): %v", i, s.host, err)
			}
			if got != s.wait {
				t.Errorf("step %d: refused(%q, at %v, Retry-After %q) = %v; want %v", i, s.host, s.at, s.retryAfter, got, s.wait)
			}
		}
	}
}

// seconds is a published interval as a Table holds it.
func seconds(s float64) time.Duration { return time.Duration(math.Round(s * float64(time.Second))) }

// near allows a wait up to slack short (the calls took time) and, for a
// pacer on another clock, a millisecond long (the clock mapping's error).
func near(got, want, slack time.Duration) bool {
	if slack == 0 {
		return got == want
	}
	return got <= want+time.Millisecond && got >= want-slack
}
