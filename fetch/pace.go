package fetch

import (
	"context"
	"crypto/tls"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"
)

// places bounds how many of something a Fetcher holds at once: requests
// in flight (Options.MaxInFlight) or bodies streaming to the sink
// (Options.MaxOpenFiles). A request holds a place in flight from its
// pacing decision until its response body is consumed; a fetch waiting
// for its host's window holds none, so waiting for one host never starves
// another. A nil places bounds nothing.
type places chan struct{}

func (s places) acquire(ctx context.Context) error {
	if s == nil {
		return ctx.Err()
	}
	select {
	case s <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s places) release() {
	if s != nil {
		<-s
	}
}

// admit waits until a request to host may go out and returns holding a
// place in flight, with the time spent waiting for the host's window. The
// waits are spent by pace (Request.PacingWait) or slept.
//
// The place is taken before the pacing decision and the decision only ever
// takes a slot that is due now, so the request leaves right after its
// reservation is recorded: a reservation can never age while its request
// waits for a place, which would let the next request to the host follow
// too closely. Losing a race for the window just means waiting again.
//
// spaced reports whether the host has an interval in force, so the caller
// knows the request's departure is worth recording (see policy.Pacer.Sent).
func (f *Fetcher) admit(ctx context.Context, host string, pace func(ctx context.Context, host string, waited, wait time.Duration) error) (paced time.Duration, spaced bool, err error) {
	var start time.Time // read once a wait begins: a request that goes at once reads no clock
	for {
		if err := f.inFlight.acquire(ctx); err != nil {
			return paced, false, err
		}
		r, err := f.pacer.Reserve(ctx, host, 0)
		if err != nil {
			f.inFlight.release()
			return paced, false, err
		}
		if r.OK {
			return paced, r.Interval > 0, nil
		}
		f.inFlight.release()
		if start.IsZero() {
			start = f.clock.now()
		}
		if pace == nil {
			err = f.clock.sleep(ctx, r.Wait)
		} else if err = pace(ctx, host, paced, r.Wait); err != nil && ctx.Err() == nil {
			err = pacingRefusal{err}
		}
		if err != nil {
			return paced, false, err
		}
		paced = f.clock.now().Sub(start)
	}
}

// pacingRefusal is an error of Request.PacingWait while the fetch was
// still live: Fetch returns it as it is.
type pacingRefusal struct{ err error }

func (p pacingRefusal) Error() string { return p.err.Error() }

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
