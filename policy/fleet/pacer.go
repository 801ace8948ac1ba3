package fleet

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/policy"
)

// DefaultKeyPrefix is where the fleet pacer keeps its per-host keys.
const DefaultKeyPrefix = "replicator:pace:"

// defaultRedisTimeout bounds one pacing round trip, so a Redis that hangs
// degrades to the local fallback instead of stalling every fetch.
const defaultRedisTimeout = time.Second

// keyGrace keeps a host's key this much longer than its spacing and
// escalation need, so a floor republished a little higher still finds it.
const keyGrace = 60 * time.Second

// With a client that caches (rueidis's server-assisted client-side
// caching), "this host has no fleet state" is answered locally until Redis
// invalidates it, which it does when any worker writes the key or it
// expires. noStateTTL bounds how long such an answer may be trusted
// without hearing from Redis. Redis sends the invalidation after the reply
// to the write that caused it, so for ownWriteSettle after this pacer
// itself wrote a host's key the answer is asked of Redis instead.
const (
	noStateTTL      = 10 * time.Second
	ownWriteSettle  = time.Second
	maxRecentWrites = 4096
)

// PacerOptions configures a fleet Pacer. The zero value is valid and
// means the defaults documented on each field.
type PacerOptions struct {
	// Fallback decides while Redis cannot. The pacer also reads each
	// host's floor and the lease it grants from it (Local.Floor,
	// Local.Lease), so the two always pace alike, and tells it every
	// decision the fleet makes (Local.Follow), so a degradation starts from
	// what this worker last knew. Give it the Floors of a *policy.Table fed
	// by a Reader; every worker should read the same policy stream so they
	// agree on floors. Nil means
	// policy.NewLocal(policy.LocalOptions{}): the default interval for every
	// host.
	Fallback *policy.Local
	// KeyPrefix is prepended to each host's key, "<prefix>{<host>}". Empty
	// means DefaultKeyPrefix.
	KeyPrefix string
	// Logger receives the degrade (WARN) and recovery (INFO) lines. Nil means
	// slog.Default().
	Logger *slog.Logger
	// Timeout bounds one Redis round trip; past it the decision is made by
	// Fallback. Zero means 1 s.
	Timeout time.Duration
}

// Pacer is a policy.Pacer.
var _ policy.Pacer = (*Pacer)(nil)

// Pacer paces a fleet: workers sharing one Redis (a single server or a
// Cluster) share each host's spacing and escalation, so a fleet is exactly as
// polite as one worker. Each decision is one single-key Lua script, atomic on
// the server and timed by the server's clock, so workers on different
// machines agree without synchronized clocks.
//
// If Redis fails, decisions fall back to a policy.Local pacer (never to "no
// pacing"), with one WARN when that starts and one INFO when Redis answers
// again.
//
// Create it with NewPacer; the zero value is not usable. A Pacer is safe for
// concurrent use.
type Pacer struct {
	client   rueidis.Client
	prefix   string
	fallback *policy.Local // also the source of floors and the lease, and told every decision
	log      *slog.Logger
	timeout  time.Duration
	lease    string // microseconds, as the script takes it
	degraded atomic.Bool
	clock    serverClock

	// wrote holds when this pacer last ran the script for a host (which may
	// have written its key), for ownWriteSettle.
	wroteMu sync.Mutex
	wrote   map[string]time.Time
}

// paceScript makes the whole decision for one host. See pace.lua.
//
//go:embed pace.lua
var paceLua string

var paceScript = rueidis.NewLuaScript(paceLua)

// The script's constant arguments, in microseconds.
var (
	argFirstStep = micros(policy.EscalationFirstStep)
	argHeadroom  = micros(policy.EscalationHeadroom)
	argReset     = micros(policy.EscalationReset)
	argGrace     = micros(keyGrace)
	argPoll      = micros(policy.PendingPoll)
)

var errScriptReply = errors.New("fleet: unexpected reply from the pace script")

// NewPacer returns a fleet pacer that keeps its state in client's Redis.
func NewPacer(client rueidis.Client, opts PacerOptions) *Pacer {
	p := &Pacer{
		client:   client,
		prefix:   cmp.Or(opts.KeyPrefix, DefaultKeyPrefix),
		fallback: opts.Fallback,
		log:      opts.Logger,
		timeout:  opts.Timeout,
		clock:    serverClock{base: time.Now()},
	}
	if p.fallback == nil {
		p.fallback = policy.NewLocal(policy.LocalOptions{})
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	if p.timeout <= 0 {
		p.timeout = defaultRedisTimeout
	}
	p.lease = micros(p.fallback.Lease())
	return p
}

// Key returns the Redis key holding host's pacing state. The host's HostKey
// is the hash tag, so the key lives on one Cluster slot.
func (p *Pacer) Key(host string) string {
	return p.prefix + "{" + policy.HostKey(host) + "}"
}

// Degraded reports whether decisions are currently made by the fallback
// because Redis failed on the latest attempt.
func (p *Pacer) Degraded() bool { return p.degraded.Load() }

// Reserve decides when a request to host may go out, against the fleet's
// shared state. When the wait is at most maxWait the slot is taken
// atomically; otherwise nothing is recorded. It returns ctx.Err() when ctx
// ends, policy.ErrEmptyHost for an empty host, and no error for a Redis
// failure (the fallback decides).
func (p *Pacer) Reserve(ctx context.Context, host string, maxWait time.Duration) (policy.Reservation, error) {
	host = policy.HostKey(host)
	if host == "" {
		return policy.Reservation{}, policy.ErrEmptyHost
	}
	if err := ctx.Err(); err != nil {
		return policy.Reservation{}, err
	}
	res, err := p.reserve(ctx, host, maxWait)
	if err != nil {
		if ctx.Err() != nil {
			return policy.Reservation{}, ctx.Err()
		}
		p.degrade(err)
		return p.fallback.Reserve(ctx, host, maxWait)
	}
	p.recover()
	return res, nil
}

// reserve takes the fleet's decision: for a host with no floor and no
// fleet state one key lookup decides (the script would grant at once and write
// nothing), otherwise the script.
func (p *Pacer) reserve(ctx context.Context, host string, maxWait time.Duration) (policy.Reservation, error) {
	floor := p.fallback.Floor(host)
	if floor <= 0 {
		if res, ok, err := p.reserveUnspaced(ctx, host); ok || err != nil {
			return res, err
		}
	}
	v, err := p.exec(ctx, host, "reserve", floor, max(maxWait, -time.Microsecond))
	if err != nil {
		return policy.Reservation{}, err
	}
	now := time.Now()
	res := policy.Reservation{OK: v.ok, Wait: max(0, v.slot.Sub(now)), Interval: v.interval, At: v.slot}
	d := policy.Decision{Escalation: v.esc, EscalatedAt: now.Add(-v.escAge)}
	if res.OK {
		d.GoesOut = v.slot
	}
	p.fallback.FollowAt(now, host, d)
	return res, nil
}

// reserveUnspaced decides without the script for a host with no floor: if
// the fleet holds no state for it (no escalation, no request awaiting its
// departure), the script would grant at once and write nothing, so one
// key lookup decides the same at a fraction of the server's time, and with
// a caching client usually without asking Redis at all. ok is false
// when the host has state, and the script must decide.
func (p *Pacer) reserveUnspaced(ctx context.Context, host string) (res policy.Reservation, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	// HLEN of the host's hash is 0 exactly when it has no key, as EXISTS
	// would say, and unlike EXISTS it may be cached.
	var n int64
	if p.wroteRecently(host) {
		n, err = p.client.Do(ctx, p.client.B().Hlen().Key(p.Key(host)).Build()).AsInt64()
	} else {
		n, err = p.client.DoCache(ctx, p.client.B().Hlen().Key(p.Key(host)).Cache(), noStateTTL).AsInt64()
	}
	if err != nil || n > 0 {
		return policy.Reservation{}, false, err
	}
	now := time.Now()
	p.fallback.FollowAt(now, host, policy.Decision{GoesOut: now})
	return policy.Reservation{OK: true, At: now}, true, nil
}

// Refused reports that host answered 429 or 503, with the delay its
// Retry-After asked for (0 when absent, malformed or past), and returns the
// interval now in force for the whole fleet. Errors are as for Reserve.
func (p *Pacer) Refused(ctx context.Context, host string, retryAfter time.Duration) (time.Duration, error) {
	host = policy.HostKey(host)
	if host == "" {
		return 0, policy.ErrEmptyHost
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	v, err := p.exec(ctx, host, "refuse", p.fallback.Floor(host), max(retryAfter, 0))
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		p.degrade(err)
		return p.fallback.Refused(ctx, host, retryAfter)
	}
	p.recover()
	now := time.Now()
	p.fallback.FollowAt(now, host, policy.Decision{Escalation: v.esc, EscalatedAt: now.Add(-v.escAge)})
	return v.interval, nil
}

// Sent records that a request to host left now, on the server's clock (a
// round trip later than the departure, which errs toward more spacing).
// Errors are as for Reserve.
func (p *Pacer) Sent(ctx context.Context, host string) error {
	host = policy.HostKey(host)
	if host == "" {
		return policy.ErrEmptyHost
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := p.exec(ctx, host, "sent", p.fallback.Floor(host), 0); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.degrade(err)
	} else {
		p.recover()
	}
	return p.fallback.Sent(ctx, host)
}

// scriptResult is pace.lua's reply.
type scriptResult struct {
	ok        bool
	wait      time.Duration
	interval  time.Duration
	esc       time.Duration
	escAge    time.Duration
	serverNow time.Duration // since the Unix epoch, on the server's clock
	slot      time.Time     // when the decided wait ends, on the local clock
}

// exec runs one decision of the pace script for host, whose floor is given.
func (p *Pacer) exec(ctx context.Context, host, mode string, floor, arg time.Duration) (scriptResult, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	p.noteWrite(host)
	sent := time.Now()
	resp := paceScript.Exec(ctx, p.client, []string{p.Key(host)}, []string{
		mode, micros(floor), micros(arg), argFirstStep, argHeadroom, argReset, argGrace, p.lease, argPoll,
	})
	received := time.Now()
	vals, err := resp.AsIntSlice()
	if err != nil {
		return scriptResult{}, err
	}
	if len(vals) != 6 {
		return scriptResult{}, errScriptReply
	}
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	v := scriptResult{
		ok: vals[0] == 1, wait: us(vals[1]), interval: us(vals[2]),
		esc: us(vals[3]), escAge: us(vals[4]), serverNow: us(vals[5]),
	}
	p.clock.observe(sent, received, v.serverNow)
	// The slot is an instant on the server's clock. Waiting for it from when
	// the reply happened to arrive would add the reply's latency, which
	// varies, to the spacing the origin sees; so it is mapped to the local
	// clock, and kept within what this round trip alone proves (the server
	// decided between sent and received) in case the mapping is off.
	v.slot = p.clock.local(v.serverNow + v.wait)
	if lo := sent.Add(v.wait); v.slot.Before(lo) {
		v.slot = lo
	} else if hi := received.Add(v.wait); v.slot.After(hi) {
		v.slot = hi
	}
	return v, nil
}

func (p *Pacer) degrade(err error) {
	if p.degraded.CompareAndSwap(false, true) {
		p.log.Warn("fleet pacing unavailable: pacing from this worker's own state until Redis answers", "error", err)
	}
}

func (p *Pacer) recover() {
	if p.degraded.Load() && p.degraded.CompareAndSwap(true, false) {
		p.log.Info("fleet pacing restored")
	}
}

// micros formats d in whole microseconds, the script's unit: exact in a Lua
// double for every interval this package allows.
func micros(d time.Duration) string {
	return strconv.FormatInt(int64(d/time.Microsecond), 10)
}

// noteWrite records that this pacer is about to run the script for host.
func (p *Pacer) noteWrite(host string) {
	now := time.Now()
	p.wroteMu.Lock()
	defer p.wroteMu.Unlock()
	if p.wrote == nil {
		p.wrote = make(map[string]time.Time)
	}
	if len(p.wrote) >= maxRecentWrites {
		for h, at := range p.wrote {
			if now.Sub(at) >= ownWriteSettle {
				delete(p.wrote, h)
			}
		}
	}
	p.wrote[host] = now
}

// wroteRecently reports whether this pacer ran the script for host within
// ownWriteSettle, so an invalidation of its cached state may be in flight.
func (p *Pacer) wroteRecently(host string) bool {
	p.wroteMu.Lock()
	defer p.wroteMu.Unlock()
	at, ok := p.wrote[host]
	if ok && time.Since(at) >= ownWriteSettle {
		delete(p.wrote, host)
		return false
	}
	return ok
}
