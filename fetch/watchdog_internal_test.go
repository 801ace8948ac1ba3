package fetch

import (
	"context"
	"errors"
	"net/http/httptrace"
	"runtime"
	"testing"
	"time"
)

// lateHooks runs every hook of w's trace, as a dial or a writer that lags
// behind its request would.
func lateHooks(w *watch) {
	w.trace.ConnectStart("tcp", "127.0.0.1:80")
	w.trace.TLSHandshakeStart()
	w.trace.GotConn(httptrace.GotConnInfo{})
	w.trace.WroteRequest(httptrace.WroteRequestInfo{})
}

// sentRequest starts timing a fetch bounded by maxFetch, each operation by
// d, and one request already sent: its body reads are what is timed next.
// The watchdog stops when the test ends.
func sentRequest(t *testing.T, d, maxFetch time.Duration) (context.Context, *watch) {
	ctx, wd := startWatchdog(context.Background(), d, maxFetch)
	t.Cleanup(wd.stop)
	w := wd.startRequest(nil)
	w.sent()
	return ctx, w
}

// waitDone waits for ctx to end, failing the test after limit.
func waitDone(t *testing.T, ctx context.Context, limit time.Duration) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(limit):
		t.Fatalf("context still live after %v", limit)
	}
}

// TestWatchdogReadTimesOutDAfterItBegan arms a read shortly after the
// fetch began, while the timer is set for d after the start: the timer
// must re-arm from the read's start, so the read times out d after it
// began, neither sooner nor d after the timer's first firing.
func TestWatchdogReadTimesOutDAfterItBegan(t *testing.T) {
	const d = 500 * time.Millisecond
	ctx, w := sentRequest(t, d, time.Minute)
	time.Sleep(d / 10)
	began := time.Now()
	w.arm()
	waitDone(t, ctx, 10*time.Second)
	took := time.Since(began)
	if took < d {
		t.Errorf("the read timed out %v after it began, before the %v timeout", took, d)
	}
	// A timer re-armed from its own firing would end it at 2d after the
	// start, 1.9d after the read began.
	if took > d+d/2 {
		t.Errorf("the read timed out %v after it began, want about %v", took, d)
	}
	if !w.fired() || !errors.Is(context.Cause(ctx), ErrTimeout) {
		t.Errorf("fired = %v, cause = %v; want the operation timeout", w.fired(), context.Cause(ctx))
	}
}

// TestWatchdogPausedReadsNeverTimeOut pauses between reads for several
// times d, as a slow consumer does: the timer fires and re-arms through
// the pauses, and no read, each quick, times out.
func TestWatchdogPausedReadsNeverTimeOut(t *testing.T) {
	const d = 50 * time.Millisecond
	ctx, w := sentRequest(t, d, time.Minute)
	for range 4 {
		w.arm()
		w.pause()
		time.Sleep(3 * d)
	}
	if err := context.Cause(ctx); err != nil || w.fired() {
		t.Fatalf("cause = %v, fired = %v after paused reads; want live", err, w.fired())
	}
	// The timer still runs: a read that stalls now times out.
	w.arm()
	waitDone(t, ctx, 10*time.Second)
	if !w.fired() {
		t.Error("a stalled read after the pauses did not time out")
	}
}

// TestWatchdogLateHookReArmsNothing runs a request's hooks after it was
// sent, and again while a later request is being sent: neither arms a
// timeout in a pause nor gives the later request's operation more time.
func TestWatchdogLateHookReArmsNothing(t *testing.T) {
	const d = 600 * time.Millisecond
	ctx, wd := startWatchdog(context.Background(), d, time.Minute)
	defer wd.stop()
	first := wd.startRequest(nil)
	first.sent()
	lateHooks(first)
	time.Sleep(d + d/2)
	if err := context.Cause(ctx); err != nil || first.fired() {
		t.Fatalf("cause = %v, fired = %v: a late hook armed a timeout between operations", err, first.fired())
	}

	began := time.Now()
	second := wd.startRequest(nil)
	time.Sleep(d * 3 / 4)
	lateHooks(first)
	waitDone(t, ctx, 10*time.Second)
	// Restarted by the late hook, it would end 1.75d after it began.
	if took := time.Since(began); took > d+d/2 {
		t.Errorf("the second request's operation timed out %v after it began, want about %v", took, d)
	}
	if first.fired() || !second.fired() {
		t.Errorf("fired: first %v, second %v; want only the second", first.fired(), second.fired())
	}
}

// TestWatchdogRequestTimeoutEndsOnlyIt: a request given its own cancel (a
// robots.txt request) ends alone when it times out, and the watchdog goes
// on timing the requests after it.
func TestWatchdogRequestTimeoutEndsOnlyIt(t *testing.T) {
	const d = 50 * time.Millisecond
	ctx, wd := startWatchdog(context.Background(), d, time.Minute)
	defer wd.stop()
	robotsCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	robots := wd.startRequest(cancel)
	waitDone(t, robotsCtx, 10*time.Second)
	robots.sent()
	if err := context.Cause(ctx); err != nil || !robots.fired() {
		t.Fatalf("fetch cause = %v, request fired = %v; want only the request ended", err, robots.fired())
	}
	page := wd.startRequest(nil)
	waitDone(t, ctx, 10*time.Second)
	if !page.fired() || !errors.Is(context.Cause(ctx), ErrTimeout) {
		t.Errorf("fired = %v, cause = %v; want the operation timeout", page.fired(), context.Cause(ctx))
	}
}

// TestWatchdogDeadline: the fetch ends at its deadline with deadlineCause,
// whether an operation is in progress or not, and no request counts as
// timed out.
func TestWatchdogDeadline(t *testing.T) {
	const d, maxFetch = 250 * time.Millisecond, 400 * time.Millisecond
	for _, read := range []time.Duration{0, 30 * time.Millisecond} {
		began := time.Now()
		ctx, w := sentRequest(t, d, maxFetch)
		// Reads well within d, back to back, or with pauses between.
		for ctx.Err() == nil {
			w.arm()
			time.Sleep(read)
			w.pause()
			time.Sleep(30*time.Millisecond - read)
		}
		if took := time.Since(began); took < maxFetch {
			t.Errorf("reads of %v: the fetch ended after %v, before its %v deadline", read, took, maxFetch)
		}
		if cause := context.Cause(ctx); !errors.Is(cause, ErrDeadline) || cause.Error() != deadlineCause(maxFetch).Error() {
			t.Errorf("reads of %v: cause = %v, want %v", read, cause, deadlineCause(maxFetch))
		}
		if w.fired() {
			t.Errorf("reads of %v: the deadline counted as an operation timeout", read)
		}
	}
}

// TestFetchContextDeadline: the fetch's context reports the fetch's
// deadline, or its parent's when that is earlier.
func TestFetchContextDeadline(t *testing.T) {
	before := time.Now()
	ctx, wd := startWatchdog(context.Background(), time.Second, time.Minute)
	defer wd.stop()
	if dl, ok := ctx.Deadline(); !ok || dl.Before(before.Add(time.Minute)) || dl.After(time.Now().Add(time.Minute)) {
		t.Errorf("Deadline() = %v, %v; want a minute after the start", dl, ok)
	}
	parent, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	want, _ := parent.Deadline()
	ctx, wd2 := startWatchdog(parent, time.Second, time.Minute)
	defer wd2.stop()
	if dl, ok := ctx.Deadline(); !ok || !dl.Equal(want) {
		t.Errorf("Deadline() = %v, %v; want the parent's %v", dl, ok, want)
	}
	child, cancelChild := context.WithCancel(ctx)
	defer cancelChild()
	if dl, ok := child.Deadline(); !ok || !dl.Equal(want) {
		t.Errorf("a child's Deadline() = %v, %v; want %v", dl, ok, want)
	}
}

// TestFetchContextChildNeedsNoGoroutine: context.WithCancel on a fetch's
// context registers with the cancelCtx beneath, as on any cancelCtx, so
// no goroutine waits per child; cancelling the fetch still ends them all.
func TestFetchContextChildNeedsNoGoroutine(t *testing.T) {
	ctx, wd := startWatchdog(context.Background(), time.Minute, time.Minute)
	defer wd.stop()
	const n = 200
	before := runtime.NumGoroutine()
	children := make([]context.Context, n)
	for i := range children {
		var cancel context.CancelFunc
		children[i], cancel = context.WithCancel(ctx)
		defer cancel()
	}
	if grew := runtime.NumGoroutine() - before; grew >= n/2 {
		t.Errorf("%d children started %d goroutines", n, grew)
	}
	wd.cancel(deadlineCause(time.Minute))
	for i, c := range children {
		if !errors.Is(context.Cause(c), ErrDeadline) {
			t.Fatalf("child %d: cause = %v, want the fetch's", i, context.Cause(c))
		}
	}
}
