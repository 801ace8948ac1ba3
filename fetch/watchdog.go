package fetch

import (
	"context"
	"io"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"
)

// watchdog enforces a fetch's two bounds with one timer: MaxFetchTime over
// the whole fetch, and the per-operation timeout d over each operation of
// its requests — connect, TLS handshake, waiting for headers, a single body
// read. An operation is armed while it is in progress and paused between
// operations, so a slow consumer never counts against the origin.
//
// Arming is a read of the monotonic clock and an atomic store, pausing a
// store: the timer is not touched then. It fires at the earliest moment
// something could be due and re-arms itself from what it finds, so a fetch
// that ends in time does no timer operation beyond creating it and one Stop.
type watchdog struct {
	start    time.Time     // its monotonic reading is the clock of every operation
	d        time.Duration // the per-operation timeout
	maxFetch time.Duration // the whole-fetch bound, from start
	ctx      fetchContext
	cancel   context.CancelCauseFunc

	// op is the operation state of the request in progress, nil before the
	// first request.
	op atomic.Pointer[opState]

	mu      sync.Mutex // guards timer and stopped against check
	timer   *time.Timer
	stopped bool
}

// opState is when the operation in progress began, in monotonic
// nanoseconds since the fetch's start, or paused between operations.
type opState struct {
	at atomic.Int64
	w  *watch
}

// paused is an opState with no operation in progress.
const paused = -1

// startWatchdog starts timing a fetch bounded by maxFetch, each operation
// by d. The returned context ends when the watchdog cancels it or parent
// ends; stop releases both.
func startWatchdog(parent context.Context, d, maxFetch time.Duration) (context.Context, *watchdog) {
	wd := &watchdog{start: time.Now(), d: d, maxFetch: maxFetch}
	ctx, cancel := context.WithCancelCause(parent)
	wd.ctx = fetchContext{Context: ctx, deadline: wd.start.Add(maxFetch)}
	wd.cancel = cancel
	wd.mu.Lock()
	wd.timer = time.AfterFunc(min(d, maxFetch), wd.check)
	wd.mu.Unlock()
	return &wd.ctx, wd
}

// since is the time since the fetch began, on the monotonic clock alone.
func (wd *watchdog) since() int64 { return int64(time.Since(wd.start)) }

// check runs when the timer fires: it ends the fetch at its deadline, ends
// the request whose operation has run for d, or sets the timer for the
// earliest moment either could next be due. An operation armed later than
// now is due no sooner than now+d.
func (wd *watchdog) check() {
	wd.mu.Lock()
	defer wd.mu.Unlock()
	if wd.stopped || wd.ctx.Err() != nil {
		return
	}
	now := time.Duration(wd.since())
	if now >= wd.maxFetch {
		// The cause names the bound in force, so the error says which one ran out.
		wd.cancel(deadlineCause(wd.maxFetch))
		return
	}
	from := now
	if o := wd.op.Load(); o != nil {
		if at := time.Duration(o.at.Load()); at >= 0 {
			if now-at >= wd.d {
				o.w.expire()
				if wd.ctx.Err() != nil {
					return
				}
			} else {
				from = at
			}
		}
	}
	next := wd.maxFetch
	if wd.d < next-from {
		next = from + wd.d
	}
	wd.timer.Reset(next - now)
}

// stop ends the fetch's timing and cancels its context.
func (wd *watchdog) stop() {
	wd.mu.Lock()
	wd.stopped = true
	wd.timer.Stop()
	wd.mu.Unlock()
	wd.cancel(nil)
}

// fetchContext is a fetch's context. Its watchdog cancels it at the
// fetch's deadline, and it reports that deadline to whatever reads one:
// the hooks, the pacer, the guard's check of each hop. Embedding forwards
// Value and Done to the cancelCtx beneath, which is how context.WithCancel
// recognises a cancelable parent: a child registers with it and needs no
// goroutine of its own (TestFetchContextChildNeedsNoGoroutine).
type fetchContext struct {
	context.Context
	deadline time.Time
}

// Deadline is the earlier of the fetch's deadline and its parent's.
func (c *fetchContext) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

// watch is one request's part of its fetch's watchdog. While the request
// is sent, each step that begins an operation (see trace) restarts the
// clock of sending; once it is sent, the body reads arm and pause the
// clock of reading. A hook that runs late, once the request is sent or a
// later request has begun, writes the clock of a sending that is no longer
// timed: it cannot re-arm anything.
type watch struct {
	wd      *watchdog
	cancel  context.CancelFunc // what a timeout ends; nil means the fetch
	expired atomic.Bool
	sending opState
	reading opState
	trace   httptrace.ClientTrace
}

// startRequest times a request from now on, its first operation begun.
// A timeout calls cancel, or ends the whole fetch when cancel is nil:
// a timed-out operation is the fetch's end, except for a robots.txt
// request, which ends only itself.
func (wd *watchdog) startRequest(cancel context.CancelFunc) *watch {
	w := &watch{wd: wd, cancel: cancel}
	w.sending.w, w.reading.w = w, w
	w.sending.at.Store(wd.since())
	w.reading.at.Store(paused)
	w.trace = httptrace.ClientTrace{
		ConnectStart:      func(string, string) { w.restart() },
		TLSHandshakeStart: w.restart,
		GotConn:           func(httptrace.GotConnInfo) { w.restart() },
		WroteRequest:      func(httptrace.WroteRequestInfo) { w.restart() },
	}
	wd.op.Store(&w.sending)
	return w
}

// The trace restarts the clock as each operation of sending begins: a dial
// (name resolution included), a TLS handshake, the request written on the
// connection it got, then the wait for the response's headers. Each is
// bounded by d on its own, not all of them together.
func (w *watch) restart() { w.sending.at.Store(w.wd.since()) }

// sent ends the sending: the clock stops until a body read arms it.
func (w *watch) sent() { w.wd.op.Store(&w.reading) }

func (w *watch) arm()        { w.reading.at.Store(w.wd.since()) }
func (w *watch) pause()      { w.reading.at.Store(paused) }
func (w *watch) fired() bool { return w.expired.Load() }

// expire records that an operation of the request ran for d and ends it.
func (w *watch) expire() {
	w.expired.Store(true)
	if w.cancel != nil {
		w.cancel()
		return
	}
	w.wd.cancel(ErrTimeout)
}

// timedBody reads a response body under its request's watch, remembering
// the first read error (to tell a failed download from a failed store)
// and, when now is set, when the body ended.
type timedBody struct {
	r      io.Reader
	w      *watch
	now    func() time.Time
	err    error
	doneAt time.Time
}

func (b *timedBody) Read(p []byte) (int, error) {
	b.w.arm()
	n, err := b.r.Read(p)
	b.w.pause()
	switch {
	case err == io.EOF:
		if b.now != nil {
			b.doneAt = b.now()
		}
	case err != nil && b.err == nil:
		b.err = err
	}
	return n, err
}
