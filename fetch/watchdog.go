package fetch

import (
	"context"
	"io"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"
)

// watchdog cancels a request's context when one operation — connect, TLS
// handshake, waiting for headers, or a single read — takes longer than d.
// It is armed while an operation is in progress and paused between them,
// so a slow consumer never counts against the origin.
type watchdog struct {
	d      time.Duration
	timer  *time.Timer
	cancel context.CancelFunc
	fire   atomic.Bool

	// While the request is being sent, each step that begins an operation
	// gives it the whole of d afresh (see trace); sending ends with sent.
	mu      sync.Mutex
	sending bool
}

// startWatchdog arms a watchdog for sending a request: the returned context
// carries the trace that restarts the clock at each operation. When it
// fires it calls cancel, which ends the whole fetch, not only this request:
// a timed-out operation is the fetch's end, so the request needs no
// context of its own.
func startWatchdog(ctx context.Context, cancel context.CancelFunc, d time.Duration) (context.Context, *watchdog) {
	w := &watchdog{d: d, cancel: cancel, sending: true}
	w.timer = time.AfterFunc(d, func() {
		w.fire.Store(true)
		cancel()
	})
	return httptrace.WithClientTrace(ctx, w.trace()), w
}

// trace restarts the clock as each operation of sending begins: a dial
// (name resolution included), a TLS handshake, the request written on the
// connection it got, then the wait for the response's headers. Each is
// bounded by d on its own, not all of them together.
func (w *watchdog) trace() *httptrace.ClientTrace {
	next := func() { w.restart() }
	return &httptrace.ClientTrace{
		ConnectStart:      func(string, string) { next() },
		TLSHandshakeStart: next,
		GotConn:           func(httptrace.GotConnInfo) { next() },
		WroteRequest:      func(httptrace.WroteRequestInfo) { next() },
	}
}

// restart gives the current sending operation the whole of d. A hook that
// runs late, once the response is in, changes nothing.
func (w *watchdog) restart() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sending {
		w.timer.Reset(w.d)
	}
}

// sent ends the sending: the clock stops until a body read arms it.
func (w *watchdog) sent() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sending = false
	w.timer.Stop()
}

func (w *watchdog) arm()        { w.timer.Reset(w.d) }
func (w *watchdog) pause()      { w.timer.Stop() }
func (w *watchdog) fired() bool { return w.fire.Load() }

// stop ends the request: no more operations will be timed. The fetch's
// context is left alone, for the next hop.
func (w *watchdog) stop() { w.timer.Stop() }

// timedBody reads a response body under the watchdog, remembering the
// first read error (to tell a failed download from a failed store) and
// when the body ended.
type timedBody struct {
	r      io.Reader
	wd     *watchdog
	now    func() time.Time
	err    error
	doneAt time.Time
}

func (b *timedBody) Read(p []byte) (int, error) {
	b.wd.arm()
	n, err := b.r.Read(p)
	b.wd.pause()
	switch {
	case err == io.EOF:
		b.doneAt = b.now()
	case err != nil && b.err == nil:
		b.err = err
	}
	return n, err
}
