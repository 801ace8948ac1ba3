package fetch

import (
	"errors"
	"fmt"
	"time"
)

// Errors returned by Fetcher.Fetch, wrapped with detail; check them with
// errors.Is. Errors from the guard (guard.ErrRefused, guard.ErrResolve) and
// the sink (sink.ErrTooLarge) pass through wrapped as well.
var (
	// ErrURLRefused means a CheckURL hook refused a hop; nothing was sent
	// to it. The hook's error is wrapped too.
	ErrURLRefused = errors.New("fetch: url refused")
	// ErrNotFetchable means a URL (asked for or a redirect target) is not
	// http or https with a host, or the redirect limit was exceeded.
	ErrNotFetchable = errors.New("fetch: not fetchable")
	// ErrTooLarge means the body is over the size limit; nothing was stored.
	ErrTooLarge = errors.New("fetch: body too large")
	// ErrStorageFull means the sink has no room for the body
	// (sink.ErrNoRoom, wrapped too): before the first request, so none was
	// sent; once the response's declared length was known, so the body was
	// not read; or when the disk filled up under the store. Nothing was
	// stored.
	ErrStorageFull = errors.New("fetch: no room to store the body")
	// ErrTimeout means one operation (connect, TLS handshake, waiting for
	// headers, one read) took longer than the request's timeout.
	ErrTimeout = errors.New("fetch: operation timed out")
	// ErrDeadline means the whole fetch, all hops included, ran past the
	// fetcher's MaxFetchTime or the request's, whichever is shorter.
	ErrDeadline = errors.New("fetch: whole-fetch deadline exceeded")
	// ErrNetwork means the exchange with an origin failed on the wire:
	// connect, TLS, a reset, a malformed or truncated response. The
	// underlying error is wrapped too. Refusals at dial time keep
	// guard.ErrRefused and failed lookups guard.ErrResolve instead.
	ErrNetwork = errors.New("fetch: network error")
	// ErrContentCoding means a body's Content-Encoding could not be removed:
	// the stream is corrupt or ends early. Nothing was stored.
	ErrContentCoding = errors.New("fetch: body does not decode")
	// ErrStore means the sink failed to store a body that arrived whole (a
	// full disk, an unreachable bucket). A failure the sink reports as
	// sink.ErrPermanent keeps that sentinel too.
	ErrStore = errors.New("fetch: storing the body failed")
	// ErrRobotsDisallowed means the origin's robots.txt refuses a hop
	// (Options.Robots); nothing was sent to it.
	ErrRobotsDisallowed = errors.New("fetch: disallowed by robots.txt")
	// ErrRobotsUnreachable means the origin's robots.txt could not be had
	// (429, 5xx, no answer), which refuses every hop there until it is
	// asked for again, after a back-off.
	ErrRobotsUnreachable = errors.New("fetch: robots.txt unreachable")
)

// deadlineCause is the cause a fetch's context ends with when its
// whole-fetch bound runs out: ErrDeadline, naming the bound in force. Every
// fetch makes one, so the text is formatted only when it is read.
type deadlineCause time.Duration

func (d deadlineCause) Error() string {
	return ErrDeadline.Error() + " (" + time.Duration(d).String() + ")"
}

func (d deadlineCause) Unwrap() error { return ErrDeadline }

// StatusError is returned for a final response that is neither 2xx nor 304.
type StatusError struct {
	// StatusCode is the final response's status.
	StatusCode int
	// URL is the redacted URL of the hop that answered.
	URL string
	// RetryAfter is the raw Retry-After header of the response, "" if none.
	RetryAfter string
}

// Error names the status and the redacted URL that answered it.
func (e *StatusError) Error() string {
	return fmt.Sprintf("fetch: %s answered HTTP %d", e.URL, e.StatusCode)
}

// Transient reports whether a fresh attempt later might succeed: 5xx
// (500-599), 408 and 429, as Classify says; 600 and above are permanent
// (docs/taxonomy.md).
func (e *StatusError) Transient() bool { return statusTransient(e.StatusCode) }

// networkError marks a failure on the wire with ErrNetwork while keeping the
// message of the underlying error.
type networkError struct {
	url string
	err error
}

func (e *networkError) Error() string { return "fetch: " + e.url + ": " + e.err.Error() }

// Unwrap makes errors.Is(err, ErrNetwork) true and keeps the cause
// reachable.
func (e *networkError) Unwrap() []error { return []error{ErrNetwork, e.err} }
