package policy

import (
	"context"
	"errors"
	"time"
)

// ErrEmptyHost is returned by a pacer asked about an empty host. Such a URL
// is unfetchable anyway; pacing it under "" would space unrelated commands.
var ErrEmptyHost = errors.New("policy: empty host")

// Reservation is a pacing decision for one request.
type Reservation struct {
	// Wait is how long the caller must wait before sending the request.
	Wait time.Duration
	// OK is true when the slot was taken: the request is recorded as going
	// out after Wait, and the caller must wait that long and then send it.
	// False when Wait exceeded the caller's maxWait: nothing was recorded
	// and the caller parks the request.
	OK bool
	// Interval is the spacing in force for the host at the decision.
	Interval time.Duration
	// At is the instant, on the local clock, that Wait ends. Sleeping until
	// At rather than for Wait keeps the time between the decision and the
	// start of the sleep (a busy scheduler's) out of the spacing.
	At time.Time
}

// Pacer spaces requests per host. Hosts are URL hostnames without a port;
// each is paced under its HostKey, so every spelling of one destination
// shares its spacing.
//
// Implementations are safe for concurrent use.
type Pacer interface {
	// Reserve decides when a request to host may go out. When the wait is no
	// longer than maxWait the slot is taken atomically (so concurrent callers
	// are spaced from one another); otherwise nothing is recorded.
	Reserve(ctx context.Context, host string, maxWait time.Duration) (Reservation, error)
	// Refused reports that host answered 429 or 503, with the delay its
	// Retry-After asked for (0 when absent, malformed or past). It returns the
	// interval now in force.
	Refused(ctx context.Context, host string, retryAfter time.Duration) (time.Duration, error)
	// Sent records that a request to host actually left now. The next
	// request is spaced from the later of its reservation and its
	// departure, so a request that leaves late (a slow connect, a stalled
	// process) never shortens the gap after it.
	Sent(ctx context.Context, host string) error
}

// Local is a Pacer (so is policy/fleet's), and the Table is a Floors source.
var (
	_ Pacer  = (*Local)(nil)
	_ Floors = (*Table)(nil)
)
