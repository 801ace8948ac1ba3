package fetch

import (
	"context"
	"crypto/tls"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"
)

// Slots bounds how many requests are in flight at once. A request holds a
// slot from its pacing decision until its response body is consumed; a
// command waiting for its host's window holds none, so waiting for one host
// never starves another.
//
// Implementations are safe for concurrent use.
type Slots interface {
	// Acquire blocks until a slot is free or ctx ends.
	Acquire(ctx context.Context) error
	// Release frees a slot taken by Acquire.
	Release()
}

// NewSlots returns Slots allowing n requests at once (n < 1 means 1). They
// also report their Size and how many are InUse, for a worker's gauges.
func NewSlots(n int) Slots {
	if n < 1 {
		n = 1
	}
	return semaphore(make(chan struct{}, n))
}

type semaphore chan struct{}

func (s semaphore) Acquire(ctx context.Context) error {
	select {
	case s <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s semaphore) Release() { <-s }

// Size is how many requests the slots allow at once.
func (s semaphore) Size() int { return cap(s) }

// InUse is how many slots are taken.
func (s semaphore) InUse() int { return len(s) }

type noSlots struct{}

func (noSlots) Acquire(ctx context.Context) error { return ctx.Err() }
func (noSlots) Release()                          {}

// admit waits until a request to host may go out and returns holding a
// slot, with the time spent waiting for the host's window.
//
// The slot is taken before the pacing decision and the decision only ever
// takes a slot that is due now, so the request leaves right after its
// reservation is recorded: a reservation can never age while its request
// waits for a slot, which would let the next request to the host follow too
// closely. Losing a race for the window just means waiting again.
//
// spaced reports whether the host has an interval in force, so the caller
// knows the request's departure is worth recording (see policy.Pacer.Sent).
func (f *Fetcher) admit(ctx context.Context, host string) (paced time.Duration, spaced bool, err error) {
	start := f.clock.now()
	for {
		if err := f.slots.Acquire(ctx); err != nil {
			return paced, false, err
		}
		r, err := f.pacer.Reserve(ctx, host, 0)
		if err != nil {
			f.slots.Release()
			return paced, false, err
		}
		if r.OK {
			return paced, r.Interval > 0, nil
		}
		f.slots.Release()
		if f.maxWait > 0 && paced+r.Wait > f.maxWait {
			return paced, false, &ParkedError{Host: host, Wait: r.Wait}
		}
		if err := f.clock.sleep(ctx, f.stop, r.Wait); err != nil {
			return paced, false, err
		}
		paced = f.clock.now().Sub(start)
	}
}

// departureTrace reports the request's departure to the pacer once its
// first bytes are written to the connection: a connect or TLS handshake can
// take long enough to matter, and the origin measures spacing between
// arrivals. The pacer holds the host until it hears, so done must be called
// once the request is over: if the request never left (a failed dial, a
// cancellation) it reports the abandonment instead.
//
// HTTP/1 owns its connection for the request, so the connection's first
// write after it is handed over carries the request (departureConn).
// HTTP/2 shares its connection with other streams' frames, but calls
// WroteHeaders once the HEADERS frame is flushed, which is the departure.
func (f *Fetcher) departureTrace(ctx context.Context, host string) (_ context.Context, done func()) {
	detached := context.WithoutCancel(ctx)
	var once sync.Once
	report := func() {
		once.Do(func() {
			if err := f.pacer.Sent(detached, host); err != nil {
				f.log.Debug("pacer did not record a departure", "host", host, "error", err)
			}
		})
	}
	// Not inline: the hooks run on the connection's writer, and a fleet
	// pacer answers over the network.
	reportAsync := func() { go report() }
	var via atomic.Int32
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			if tc, ok := info.Conn.(*tls.Conn); ok && tc.ConnectionState().NegotiatedProtocol == "h2" {
				via.Store(viaHeaders)
				return
			}
			if dc := departureConnOf(info.Conn); dc != nil {
				via.Store(viaWrite)
				dc.onNextWrite(reportAsync)
			}
		},
		WroteHeaders: func() {
			if via.Load() == viaHeaders {
				reportAsync()
			}
		},
		// A connection not dialed by this Fetcher's transport: the flush
		// follows this hook closely.
		WroteRequest: func(httptrace.WroteRequestInfo) {
			if via.Load() == viaUnknown {
				reportAsync()
			}
		},
	})
	return ctx, report
}

// How departureTrace learns that a request has left.
const (
	viaUnknown = iota
	viaWrite   // the connection's first write after GotConn (HTTP/1)
	viaHeaders // WroteHeaders, called after the flush (HTTP/2)
)
