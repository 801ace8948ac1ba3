package policy

import (
	"context"
	_ "embed"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// DefaultKeyPrefix is where the fleet pacer keeps its per-host keys.
const DefaultKeyPrefix = "replicator:pace:"

// defaultRedisTimeout bounds one pacing round trip, so a Redis that hangs
// degrades to the local fallback instead of stalling every fetch.
const defaultRedisTimeout = time.Second

// keyGrace keeps a host's key this much longer than its spacing and
// escalation need, so a floor republished a little higher still finds it.
const keyGrace = 60 * time.Second

// RedisOptions configures a Redis (fleet) pacer. The zero value is valid and
// means the defaults documented on each field.
type RedisOptions struct {
	// Fallback decides while Redis cannot, and is where the fleet pacer
	// reads each host's floor (Local.Floor) and the lease it grants
	// (Local.Lease), so the two always pace alike. It is kept up to date
	// with the fleet's decisions (Local.Mirror), so a degradation starts
	// from what this worker last knew. Give it the Floors of a *Table fed
	// by a Reader; every worker should read the same policy stream so they
	// agree on floors. Nil means NewLocal(LocalOptions{}): the default
	// interval for every host.
	Fallback *Local
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

// Redis paces a fleet: workers sharing one Redis (a single server or a
// Cluster) share each host's spacing and escalation, so a fleet is exactly as
// polite as one worker. Each decision is one single-key Lua script, atomic on
// the server and timed by the server's clock, so workers on different
// machines agree without synchronized clocks.
//
// If Redis fails, decisions fall back to a Local pacer (never to "no
// pacing"), with one WARN when that starts and one INFO when Redis answers
// again.
//
// Create it with NewRedis; the zero value is not usable. A Redis is safe for
// concurrent use.
type Redis struct {
	client   rueidis.Client
	prefix   string
	fallback *Local
	log      *slog.Logger
	timeout  time.Duration
	lease    string // microseconds, as the script takes it
	degraded atomic.Bool
	clock    serverClock
}

// paceScript makes the whole decision for one host. See pace.lua.
//
//go:embed pace.lua
var paceLua string

var paceScript = rueidis.NewLuaScript(paceLua)

// The script's constant arguments, in microseconds.
var (
	argFirstStep = micros(EscalationFirstStep)
	argHeadroom  = micros(EscalationHeadroom)
	argReset     = micros(EscalationReset)
	argGrace     = micros(keyGrace)
	argPoll      = micros(PendingPoll)
)

var errScriptReply = errors.New("policy: unexpected reply from the pace script")

// NewRedis returns a fleet pacer that keeps its state in client's Redis.
func NewRedis(client rueidis.Client, opts RedisOptions) *Redis {
	r := &Redis{
		client:   client,
		prefix:   opts.KeyPrefix,
		fallback: opts.Fallback,
		log:      opts.Logger,
		timeout:  opts.Timeout,
		clock:    serverClock{base: time.Now()},
	}
	if r.prefix == "" {
		r.prefix = DefaultKeyPrefix
	}
	if r.fallback == nil {
		r.fallback = NewLocal(LocalOptions{})
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	if r.timeout <= 0 {
		r.timeout = defaultRedisTimeout
	}
	r.lease = micros(r.fallback.Lease())
	return r
}

// Key returns the Redis key holding host's pacing state. The host's HostKey
// is the hash tag, so the key lives on one Cluster slot.
func (r *Redis) Key(host string) string {
	return r.prefix + "{" + HostKey(host) + "}"
}

// Degraded reports whether decisions are currently made by the fallback
// because Redis failed on the latest attempt.
func (r *Redis) Degraded() bool { return r.degraded.Load() }

// Reserve decides when a request to host may go out, against the fleet's
// shared state. When the wait is at most maxWait the slot is taken
// atomically; otherwise nothing is recorded. It returns ctx.Err() when ctx
// ends, ErrEmptyHost for an empty host, and no error for a Redis failure
// (the fallback decides).
func (r *Redis) Reserve(ctx context.Context, host string, maxWait time.Duration) (Reservation, error) {
	host = HostKey(host)
	if host == "" {
		return Reservation{}, ErrEmptyHost
	}
	if err := ctx.Err(); err != nil {
		return Reservation{}, err
	}
	res, err := r.reserve(ctx, host, maxWait)
	if err != nil {
		if ctx.Err() != nil {
			return Reservation{}, ctx.Err()
		}
		r.degrade(err)
		return r.fallback.Reserve(ctx, host, maxWait)
	}
	r.recover()
	return res, nil
}

// reserve takes the fleet's decision: for a host with no floor and no
// fleet state one EXISTS decides (the script would grant at once and write
// nothing), otherwise the script.
func (r *Redis) reserve(ctx context.Context, host string, maxWait time.Duration) (Reservation, error) {
	floor := r.fallback.Floor(host)
	if floor <= 0 {
		if res, ok, err := r.reserveUnspaced(ctx, host); ok || err != nil {
			return res, err
		}
	}
	v, err := r.exec(ctx, host, "reserve", floor, max(maxWait, -time.Microsecond))
	if err != nil {
		return Reservation{}, err
	}
	now := time.Now()
	res := Reservation{OK: v.ok, Wait: max(0, v.slot.Sub(now)), Interval: v.interval, At: v.slot}
	d := Decision{Escalation: v.esc, EscalationAge: v.escAge}
	if res.OK {
		d.GoesOut = v.slot
	}
	r.fallback.Mirror(now, host, d)
	return res, nil
}

// reserveUnspaced decides without the script for a host with no floor: if
// the fleet holds no state for it (no escalation, no request awaiting its
// departure), the script would grant at once and write nothing, so one
// EXISTS decides the same at a fraction of the server's time. ok is false
// when the host has state, and the script must decide.
func (r *Redis) reserveUnspaced(ctx context.Context, host string) (res Reservation, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	n, err := r.client.Do(ctx, r.client.B().Exists().Key(r.Key(host)).Build()).AsInt64()
	if err != nil || n > 0 {
		return Reservation{}, false, err
	}
	now := time.Now()
	r.fallback.Mirror(now, host, Decision{GoesOut: now})
	return Reservation{OK: true, At: now}, true, nil
}

// Refused reports that host answered 429 or 503, with the delay its
// Retry-After asked for (0 when absent, malformed or past), and returns the
// interval now in force for the whole fleet. Errors are as for Reserve.
func (r *Redis) Refused(ctx context.Context, host string, retryAfter time.Duration) (time.Duration, error) {
	host = HostKey(host)
	if host == "" {
		return 0, ErrEmptyHost
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	v, err := r.exec(ctx, host, "refuse", r.fallback.Floor(host), max(retryAfter, 0))
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		r.degrade(err)
		return r.fallback.Refused(ctx, host, retryAfter)
	}
	r.recover()
	r.fallback.Mirror(time.Now(), host, Decision{Escalation: v.esc, EscalationAge: v.escAge})
	return v.interval, nil
}

// Sent records that a request to host left now, on the server's clock (a
// round trip later than the departure, which errs toward more spacing).
// Errors are as for Reserve.
func (r *Redis) Sent(ctx context.Context, host string) error {
	host = HostKey(host)
	if host == "" {
		return ErrEmptyHost
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := r.exec(ctx, host, "sent", r.fallback.Floor(host), 0); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.degrade(err)
	} else {
		r.recover()
	}
	return r.fallback.Sent(ctx, host)
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
func (r *Redis) exec(ctx context.Context, host, mode string, floor, arg time.Duration) (scriptResult, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	sent := time.Now()
	resp := paceScript.Exec(ctx, r.client, []string{r.Key(host)}, []string{
		mode, micros(floor), micros(arg), argFirstStep, argHeadroom, argReset, argGrace, r.lease, argPoll,
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
	r.clock.observe(sent, received, v.serverNow)
	// The slot is an instant on the server's clock. Waiting for it from when
	// the reply happened to arrive would add the reply's latency, which
	// varies, to the spacing the origin sees; so it is mapped to the local
	// clock, and kept within what this round trip alone proves (the server
	// decided between sent and received) in case the mapping is off.
	v.slot = r.clock.local(v.serverNow + v.wait)
	if lo := sent.Add(v.wait); v.slot.Before(lo) {
		v.slot = lo
	} else if hi := received.Add(v.wait); v.slot.After(hi) {
		v.slot = hi
	}
	return v, nil
}

// serverClock maps instants on the Redis server's clock to this process's
// monotonic clock, NTP-style: each round trip gives an offset accurate to
// half its duration, and the quickest recent one is kept.
type serverClock struct {
	base time.Time // local reference; durations below are since base

	mu     sync.Mutex
	have   bool
	offset time.Duration // server time minus local time since base
	rtt    time.Duration
	at     time.Duration // when the kept sample was taken
}

// observe takes one sample: sent and received bracket a reply stamped
// server on the server.
func (c *serverClock) observe(sent, received time.Time, server time.Duration) {
	s, e := sent.Sub(c.base), received.Sub(c.base)
	rtt := e - s
	offset := server - (s + rtt/2)
	c.mu.Lock()
	defer c.mu.Unlock()
	// A kept sample ages by 50 µs per second, faster than clocks drift, so
	// a slower but fresher sample eventually replaces it.
	if !c.have || rtt <= c.rtt+(e-c.at)/20000 {
		c.have, c.offset, c.rtt, c.at = true, offset, rtt, e
	}
}

// local returns the local instant of server time t.
func (c *serverClock) local(t time.Duration) time.Time {
	c.mu.Lock()
	offset := c.offset
	c.mu.Unlock()
	return c.base.Add(t - offset)
}

func (r *Redis) degrade(err error) {
	if r.degraded.CompareAndSwap(false, true) {
		r.log.Warn("fleet pacing unavailable: pacing from this worker's own state until Redis answers", "error", err)
	}
}

func (r *Redis) recover() {
	if r.degraded.Load() && r.degraded.CompareAndSwap(true, false) {
		r.log.Info("fleet pacing restored")
	}
}

// micros formats d in whole microseconds, the script's unit: exact in a Lua
// double for every interval this package allows.
func micros(d time.Duration) string {
	return strconv.FormatInt(int64(d/time.Microsecond), 10)
}
