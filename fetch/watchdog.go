package fetch

import (
	"context"
	"io"
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
}

func startWatchdog(ctx context.Context, d time.Duration) (context.Context, *watchdog) {
	ctx, cancel := context.WithCancel(ctx)
	w := &watchdog{d: d, cancel: cancel}
	w.timer = time.AfterFunc(d, func() {
		w.fire.Store(true)
		cancel()
	})
	return ctx, w
}

func (w *watchdog) arm()        { w.timer.Reset(w.d) }
func (w *watchdog) pause()      { w.timer.Stop() }
func (w *watchdog) fired() bool { return w.fire.Load() }

// stop ends the request: no more operations will be timed.
func (w *watchdog) stop() {
	w.timer.Stop()
	w.cancel()
}

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
