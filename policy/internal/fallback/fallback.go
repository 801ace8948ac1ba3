// Package fallback lends policy/fleet what it keeps in step with in the
// policy.Local it falls back to: the floor and the lease that Local
// applies, and the fleet's decisions, mirrored into it so a degradation
// starts from what the worker last knew. Package policy provides it; being
// internal, it adds nothing to the API of policy or policy/fleet.
package fallback

import "time"

// Decision is a pacing decision the fleet made for one host, as Mirror
// takes it: what the fleet pacer learned from Redis.
type Decision struct {
	// GoesOut is when the request the decision granted goes out; zero when
	// it recorded no request.
	GoesOut time.Time
	// Escalation is the escalated interval in force; zero when none.
	Escalation time.Duration
	// EscalationAge is how long before the decision the refusal that set
	// Escalation was reported.
	EscalationAge time.Duration
}

// Local is what the fleet pacer uses of a *policy.Local besides its
// policy.Pacer methods.
type Local interface {
	// Floor returns the floor in force for host: its published floor, else
	// the Local's default interval (0 under None). Escalation is not
	// included. The fleet reads it so that it and its fallback always
	// space a host alike.
	Floor(host string) time.Duration
	// Lease returns how long a granted request may go without reporting
	// its departure (the Local's Lease option, resolved), so the fleet
	// leases slots alike.
	Lease() time.Duration
	// Mirror copies a decision the fleet made for host at now into the
	// Local. The host's last request moves to d.GoesOut if that is later,
	// and its escalation becomes d's. An empty host is ignored.
	Mirror(now time.Time, host string, d Decision)
}

// Of returns l, a *policy.Local, as a Local. Package policy sets it when it
// is initialized, which is before any package importing policy runs.
var Of func(l any) Local
