// Package policy decides how often each origin may be asked: per-host floors
// from content.fetch-policy, minimum spacing between requests, and escalation
// when an origin answers 429 or 503.
//
// A fetcher asks a [Pacer] before every request (every redirect hop too,
// keyed on the host it really contacts): [Pacer.Reserve] says how long to
// wait, and takes the slot when the caller can afford the wait; the caller
// then sleeps until [Reservation].At, sends, and calls [Pacer.Sent] as the
// request leaves (or when it gives up on it). After a 429 or 503 it calls
// [Pacer.Refused] with what [ParseRetryAfter] made of the response's
// Retry-After. [Local] paces one process; the Redis-shared pacer of
// policy/fleet paces a fleet, with a Local as its fallback.
//
// # Floors
//
// A host's floor is the latest fetch_policy_state published for it on
// content.fetch-policy, else the default interval
// (REPLICATOR_MIN_HOST_INTERVAL_SECONDS, 1 s unless configured). 0.0 is a
// real floor meaning no spacing; a revoked host falls back to the default,
// never to "unlimited", because a consumer cannot tell whether the set it
// replayed is whole.
//
// A [Table] holds the floors: [Table.Apply] folds in a decoded frame,
// [Table.Set] and [Table.Revoke] change a host directly, all under one rule.
// Last write wins per host by occurred_at, applied on >= so a whole set
// republished under one instant applies; a revoked host's instant is
// remembered so an older republish cannot bring it back. What the table
// refuses comes back as an error wrapping [ErrIgnored] ([ErrStale] for a
// frame older than the one in force), for the caller to log as it sees
// fit. Reading content.fetch-policy into a Table is policy/fleet's job.
//
// Pacers read the floor on every decision, so a republished policy takes
// effect at the next request.
//
// # Spacing
//
// Consecutive requests to one host go out at least the interval in force
// apart. This is minimum spacing between requests that actually went out,
// not a token bucket: there is no burst allowance, because a burst is what
// an origin notices. A reservation records its request as going out at
// now+Wait, so concurrent callers are spaced from one another; a wait longer
// than the caller's maxWait records nothing (the command parks, and an
// attempt that never reached the origin must not push the next one out).
// Hosts are hostnames without a port, keyed by HostKey (the ASCII name
// net/http dials, lower-cased; an IP literal as the address it means), so
// every spelling of one destination shares one budget.
//
// The origin sees arrivals, not reservations, and a request can leave late:
// a slow connect, a TLS handshake, a process starved of CPU. So a granted
// request on a spaced host holds a lease until it reports its departure with
// Sent, and nothing more is granted for that host until then; the next slot
// counts from the later of the reservation and the departure. Callers that
// take only slots that are due now (maxWait 0, as the fetcher does) thereby
// keep every gap at the origin at least the interval, even across a fleet.
// A lease that is never released (the process died) counts as a departure
// when it runs out (DefaultLease, or the pacer's Lease option: at least the
// longest a fetch may run). A host with no floor and no escalation takes no
// lease and, in the fleet pacer, costs no write.
//
// # Escalation
//
// A 429 or 503 doubles the interval in force for that host, with a first
// step of at least 2 s (doubling alone would take a fast host many refusals
// to slow down meaningfully), up to 60 s above the floor: headroom rather
// than an absolute cap, so hosts already published slower still escalate. A
// Retry-After raises the escalation to at least what it asks, clamped to the
// same headroom, and never lowers it; an absent, malformed or past value
// falls back to doubling. The escalation drops back to the floor in one step
// 1800 s after the last refusal (measured from the refusal, not from the
// last request, or a busy host would never recover). The floor is never
// folded into the escalation, so a floor republished above it wins.
// LocalOptions.MaxEscalation sets a Local's headroom, or turns escalation
// off (None), for a caller that holds waits to its own cap.
//
// A Local pacer bounds the hosts it tracks (at least 4096). Pruning drops
// only hosts that can no longer change a decision, never one whose spacing or
// escalation is in force, and a prune that frees nothing is not retried until
// something could have lapsed.
//
// # Fleets
//
// Package policy/fleet shares spacing and escalation between workers
// through Redis, and reads the policy stream into a Table. Its pacer falls
// back to a Local while Redis cannot answer; any pacer that decides
// elsewhere can do the same: it reads the host's floor and the lease from
// the Local ([Local.Floor], [Local.Lease]) so both pace alike, and reports
// each decision it makes with [Local.Follow], so the Local starts from what
// was last decided rather than from nothing.
//
// Time-dependent methods of Local have explicit-time twins ([Local.ReserveAt],
// [Local.RefusedAt]) so tests and examples need no clock.
package policy
