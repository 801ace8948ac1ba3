package policy

import (
	"context"
	"sync"
	"time"
)

// Defaults of LocalOptions.
const (
	// DefaultInterval is the floor of a host with no published policy when
	// the options leave it unset (REPLICATOR_MIN_HOST_INTERVAL_SECONDS).
	DefaultInterval = time.Second
	// DefaultMaxHosts is how many hosts a Local pacer tracks before it
	// prunes; it is also the least MaxHosts may be.
	DefaultMaxHosts = 4096
	// DefaultLease is how long a granted request may take to report its
	// departure (Sent) before the pacer counts it as gone at the lease's
	// end. It only matters when a process dies between the two; make it at
	// least the longest a fetch may run before its first request leaves.
	DefaultLease = 2 * time.Minute
)

// The escalation curve every Pacer follows (see the package documentation;
// LocalOptions.MaxEscalation may change a Local's headroom). It is
// mechanism, not policy: the numbers an operator owns travel on
// content.fetch-policy. Callers read it to know what Refused can return and
// how long a refusal is remembered.
const (
	// EscalationFirstStep is the least the first 429/503 raises a host to,
	// so a fast floor becomes meaningfully slower after one refusal: what
	// Refused returns for a host refused once whose floor is below it.
	EscalationFirstStep = 2 * time.Second
	// EscalationHeadroom is how far above its floor escalation may take a
	// host (headroom, not an absolute cap, so slow floors still escalate),
	// and the default of LocalOptions.MaxEscalation. A caller that holds
	// waits to its own cap compares it with this.
	EscalationHeadroom = 60 * time.Second
	// EscalationReset is how long after its last refusal a host drops back to
	// its floor, in one step: when an escalation shown to an operator ends
	// (policy/fleet's Hold.Until).
	EscalationReset = 1800 * time.Second
)

// PendingPoll is the least Wait a Pacer's Reserve reports, unless the
// interval in force is shorter, while the host's granted request has yet to
// report its departure (Sent): a caller that asks again after Wait polls
// such a host no faster than this. It is part of what Reserve promises, so
// every Pacer reports the same waits (policy/fleet's script is given it).
const PendingPoll = 5 * time.Millisecond

// None, given to an option that documents it, turns that spacing off. Every
// package of the module spells "none" this way; zero always means the
// documented default.
const None = -1

// Floors is where a pacer reads a host's published floor. ok is false when
// the host has no policy (never published, or revoked): the pacer then uses
// its default interval, never "unlimited". A floor of 0 is a real answer (no
// spacing).
//
// Implementations must be safe for concurrent use; pacers call Floor on every
// decision, so it should be cheap.
type Floors interface {
	Floor(host string) (time.Duration, bool)
}

// maxInterval bounds every interval the package handles, so that doubling it
// and the arithmetic in the Redis script (microseconds in a Lua double) stay
// exact. No origin needs ten years between requests.
const maxInterval = 10 * 365 * 24 * time.Hour

// LocalOptions configures a Local pacer. The zero value is valid and means
// the defaults documented on each field.
type LocalOptions struct {
	// DefaultInterval is the floor of a host that Floors has no policy for
	// (unknown or revoked). Zero means DefaultInterval (1 s); None means
	// such hosts are not spaced at all.
	DefaultInterval time.Duration
	// Floors supplies the per-host published floors, typically a *Table.
	// It is read on every decision, so a republished policy applies at once.
	// Nil means every host uses DefaultInterval. A negative floor from it is
	// treated as absent.
	Floors Floors
	// MaxHosts is how many hosts may be tracked before pruning starts. Zero
	// means DefaultMaxHosts; a smaller value is raised to DefaultMaxHosts.
	// Pruning never drops a host whose spacing or escalation is still in
	// force, so the bound may be exceeded while every host still matters.
	MaxHosts int
	// Lease bounds how long a granted request may go without reporting its
	// departure. Zero means DefaultLease.
	Lease time.Duration
	// MaxEscalation is how far above its floor a 429 or 503 may raise a
	// host's interval, a Retry-After included. Zero means
	// EscalationHeadroom (60 s); None turns escalation off, so refusals
	// leave every host at its floor. A library caller that retries with
	// its own cap (fetch.MaxGetWait) can hold the pacer to the same one.
	MaxEscalation time.Duration
}

// Local paces requests from one process: per-host minimum spacing between
// requests that actually go out (not a token bucket: no bursts), raised on
// 429/503 and reset after a quiet window. See the package documentation for
// the rules.
//
// Create it with NewLocal; the zero value is not usable. A Local is safe for
// concurrent use; decisions for all hosts share one mutex and never block.
type Local struct {
	def      time.Duration
	floors   Floors
	maxHosts int
	lease    time.Duration
	headroom time.Duration // 0 when escalation is off

	mu    sync.Mutex
	hosts map[string]hostState
	// pruneNotBefore defers the next prune until something could be
	// reclaimable, so a map over the bound with nothing to drop is not
	// rebuilt on every new host.
	pruneNotBefore time.Time
	prunes         int // scans run, for tests
}

// hostState is what a pacer remembers about one host. esc is what the
// escalation decided, never the interval in force: the floor is folded in
// at each decision so a republished floor is never shadowed.
type hostState struct {
	last  time.Time     // when the latest request went (or will go) out
	esc   time.Duration // escalated interval; 0 when none
	escAt time.Time     // when the latest refusal was reported
	// lease is set while a granted request has yet to report its departure
	// (Sent); nothing else is granted until then, or until the lease ends.
	lease time.Time
}

// NewLocal returns a Local pacer with the given options.
func NewLocal(opts LocalOptions) *Local {
	if opts.Lease <= 0 {
		opts.Lease = DefaultLease
	}
	l := &Local{
		def:      resolveDefault(opts.DefaultInterval),
		floors:   opts.Floors,
		maxHosts: max(opts.MaxHosts, DefaultMaxHosts),
		lease:    opts.Lease,
		headroom: resolveHeadroom(opts.MaxEscalation),
		hosts:    make(map[string]hostState),
	}
	return l
}

// resolveDefault reads a DefaultInterval option: zero is the package
// default, None (any negative value) no spacing.
func resolveDefault(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return DefaultInterval
	case d < 0:
		return 0
	}
	return min(d, maxInterval)
}

// resolveHeadroom reads a MaxEscalation option: zero is
// EscalationHeadroom, None (any negative value) no escalation.
func resolveHeadroom(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return EscalationHeadroom
	case d < 0:
		return 0
	}
	return min(d, maxInterval)
}

// Reserve is ReserveAt at the current time. It returns ctx.Err() if ctx is
// already done, and ErrEmptyHost for an empty host.
func (l *Local) Reserve(ctx context.Context, host string, maxWait time.Duration) (Reservation, error) {
	if err := ctx.Err(); err != nil {
		return Reservation{}, err
	}
	return l.ReserveAt(time.Now(), host, maxWait)
}

// ReserveAt decides, at now, when a request to host may go out. When the
// wait is at most maxWait the request is recorded as going out at now+Wait
// (so the next caller is spaced from it) and OK is true; otherwise nothing is
// recorded. It returns ErrEmptyHost for an empty host.
//
// A request granted on a spaced host holds a lease until its departure is
// reported with Sent: until then nothing more is granted for the host (OK is
// false and Wait is the earliest the next slot could be, at least
// PendingPoll unless the interval is shorter), because the next request must
// be spaced from when that one really leaves.
func (l *Local) ReserveAt(now time.Time, host string, maxWait time.Duration) (Reservation, error) {
	host = HostKey(host)
	if host == "" {
		return Reservation{}, ErrEmptyHost
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	floor := l.floorFor(host)
	s, known := l.hosts[host]
	interval, wait := floor, time.Duration(0)
	var esc time.Duration
	if known {
		esc = liveEscalation(s, now)
		interval = max(floor, esc)
		if !s.lease.IsZero() {
			if now.Before(s.lease) {
				wait := max(s.last.Add(interval).Sub(now), min(interval, PendingPoll))
				return Reservation{Wait: wait, Interval: interval, At: now.Add(wait)}, nil
			}
			// The holder never reported: its request counts as leaving when
			// the lease ran out.
			s.last, s.lease = later(s.last, s.lease), time.Time{}
			l.hosts[host] = s
		}
		if interval > 0 {
			wait = max(0, interval-now.Sub(s.last))
		}
	}
	if wait > maxWait {
		return Reservation{Wait: wait, Interval: interval, At: now.Add(wait)}, nil
	}
	next := hostState{last: now.Add(wait)}
	if interval > 0 {
		next.lease = next.last.Add(l.lease)
	}
	if esc > 0 {
		next.esc, next.escAt = s.esc, s.escAt
	}
	l.hosts[host] = next
	if !known {
		l.maybePrune(now)
	}
	return Reservation{Wait: wait, OK: true, Interval: interval, At: now.Add(wait)}, nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Refused is RefusedAt at the current time. It returns ctx.Err() if ctx is
// already done, and ErrEmptyHost for an empty host.
func (l *Local) Refused(ctx context.Context, host string, retryAfter time.Duration) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return l.RefusedAt(time.Now(), host, retryAfter)
}

// RefusedAt records, at now, that host answered 429 or 503, with the delay
// its Retry-After asked for (0 when absent, malformed or past), and returns
// the interval now in force. With escalation off (MaxEscalation None) it
// changes nothing and returns the floor. It returns ErrEmptyHost for an
// empty host.
func (l *Local) RefusedAt(now time.Time, host string, retryAfter time.Duration) (time.Duration, error) {
	host = HostKey(host)
	if host == "" {
		return 0, ErrEmptyHost
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	floor := l.floorFor(host)
	if l.headroom == 0 {
		return floor, nil
	}
	s, known := l.hosts[host]
	inForce := floor
	last := now // a refusal means a request just went out, recorded or not
	if known {
		inForce = max(floor, liveEscalation(s, now))
		last = s.last
	}
	esc := escalate(inForce, floor, retryAfter, l.headroom)
	// Only the spacing changes: a granted request that has yet to leave
	// keeps its lease, or the next could be granted before it departs.
	s.last, s.esc, s.escAt = last, esc, now
	l.hosts[host] = s
	if !known {
		l.maybePrune(now)
	}
	return max(floor, esc), nil
}

// Sent is SentAt at the current time. It returns ctx.Err() if ctx is
// already done, and ErrEmptyHost for an empty host.
func (l *Local) Sent(ctx context.Context, host string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return l.SentAt(time.Now(), host)
}

// SentAt records that a request to host left at now (or was abandoned
// before leaving): the host's last request moves to now if that is later,
// and its lease is released.
func (l *Local) SentAt(now time.Time, host string) error {
	host = HostKey(host)
	if host == "" {
		return ErrEmptyHost
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s, known := l.hosts[host]
	s.last, s.lease = later(s.last, now), time.Time{}
	l.hosts[host] = s
	if !known {
		l.maybePrune(now)
	}
	return nil
}

// Tracked returns how many hosts the pacer currently remembers.
func (l *Local) Tracked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.hosts)
}

// Decision is what a pacer elsewhere decided for one host, as Follow
// takes it: policy/fleet's pacer, deciding in Redis for a fleet, reports
// each of its decisions to the Local it falls back to.
type Decision struct {
	// GoesOut is when the request the decision granted goes out, on the
	// local clock; zero when it granted none.
	GoesOut time.Time
	// Escalation is the escalated interval in force for the host; zero
	// when none.
	Escalation time.Duration
	// EscalatedAt is when the refusal that set Escalation was reported, on
	// the local clock; the escalation resets EscalationReset after it.
	EscalatedAt time.Time
}

// Follow is FollowAt at the current time.
func (l *Local) Follow(host string, d Decision) {
	l.FollowAt(time.Now(), host, d)
}

// FollowAt records, at now, a decision that a pacer sharing the host's
// budget made elsewhere, so that if l must decide in its place, it starts
// from what that pacer last decided rather than from nothing. The host's
// last request moves to d.GoesOut if that is later (to now if the host had
// none), and its escalation becomes d's, cleared when d has none: the other
// pacer is the authority while it answers. A lease l holds is kept. An
// empty host is ignored.
func (l *Local) FollowAt(now time.Time, host string, d Decision) {
	host = HostKey(host)
	if host == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s, known := l.hosts[host]
	s.last = later(s.last, d.GoesOut)
	if s.last.IsZero() {
		s.last = now
	}
	if d.Escalation > 0 {
		s.esc, s.escAt = d.Escalation, d.EscalatedAt
	} else {
		s.esc, s.escAt = 0, time.Time{}
	}
	l.hosts[host] = s
	if !known {
		l.maybePrune(now)
	}
}

// Floor returns the interval host is spaced at before any escalation: its
// published floor from the Floors option, else the default interval (0
// under None). The host is matched by its HostKey. A pacer that shares its
// decisions with a Local (policy/fleet's) reads it so that both space a
// host alike.
func (l *Local) Floor(host string) time.Duration {
	return l.floorFor(HostKey(host))
}

// Lease returns how long a request l grants may go without reporting its
// departure before l counts it as gone: the Lease option, resolved.
func (l *Local) Lease() time.Duration { return l.lease }

// floorFor is the host's published floor, else the default. Read on every
// decision rather than cached with the host's state.
func (l *Local) floorFor(host string) time.Duration {
	if l.floors != nil {
		if d, ok := l.floors.Floor(host); ok && d >= 0 {
			return min(d, maxInterval)
		}
	}
	return l.def
}

// liveEscalation is the escalation still in force at now, or 0 once the quiet
// window since the last refusal has passed. Expiry is derived, not swept.
func liveEscalation(s hostState, now time.Time) time.Duration {
	if s.esc <= 0 || now.Sub(s.escAt) >= EscalationReset {
		return 0
	}
	return s.esc
}

// escalate is the next escalation: the interval in force doubled (at least
// the first step), raised to what Retry-After asked, capped at headroom
// above the floor. A Retry-After only ever raises it.
func escalate(inForce, floor, retryAfter, headroom time.Duration) time.Duration {
	stepped := max(inForce*2, EscalationFirstStep)
	return min(max(stepped, retryAfter), floor+headroom)
}

// maybePrune drops hosts that can no longer change a decision, once the map
// is over its bound. Called with l.mu held, only when a host was added.
func (l *Local) maybePrune(now time.Time) {
	if len(l.hosts) <= l.maxHosts || now.Before(l.pruneNotBefore) {
		return
	}
	l.prunes++
	for host, s := range l.hosts {
		if !l.constrains(host, s, now) {
			delete(l.hosts, host)
		}
	}
	l.pruneNotBefore = time.Time{}
	if len(l.hosts) <= l.maxHosts {
		return
	}
	// Still over the bound: nothing left can be dropped before the earliest
	// survivor lapses, so do not try again until then.
	first := true
	for host, s := range l.hosts {
		at := l.reclaimableAt(host, s)
		if first || at.Before(l.pruneNotBefore) {
			l.pruneNotBefore, first = at, false
		}
	}
}

// constrains reports whether forgetting the host could change a later
// decision: its spacing has not lapsed, or it still holds an escalation
// (forgetting a recent refusal would be less polite, never more).
func (l *Local) constrains(host string, s hostState, now time.Time) bool {
	esc := liveEscalation(s, now)
	if now.Sub(s.last) < max(l.floorFor(host), esc) || now.Before(s.lease) {
		return true
	}
	return esc > 0
}

// reclaimableAt is the earliest constrains could turn false: a lower bound,
// since by the time the window closes the interval is back to the floor.
func (l *Local) reclaimableAt(host string, s hostState) time.Time {
	at := s.last.Add(l.floorFor(host))
	if s.esc > 0 {
		if w := s.escAt.Add(EscalationReset); w.After(at) {
			at = w
		}
	}
	return later(at, s.lease)
}
