package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"sync"

	"github.com/replicator-go/replicator/policy"
)

// Transport is an http.RoundTripper with a Fetcher's guarantees, for code
// that hands an *http.Client to a library (a crawler, a retrying client, a
// REST or OAuth client). Each request it sends, so each redirect hop an
// http.Client follows and each retry a library makes, in this order:
//
//   - must be http or https with a host (ErrNotFetchable);
//   - is judged by Options.CheckURL (ErrURLRefused), then by the guard,
//     before anything is sent, and again at dial time on every address
//     (guard.ErrRefused);
//   - with Options.Robots, is judged by its origin's robots.txt, for the
//     group of the request's own User-Agent, or Options.UserAgent when it
//     sets none (ErrRobotsDisallowed, ErrRobotsUnreachable);
//   - waits for its host's politeness window from Options.Pacer, holding
//     a place among Options.MaxInFlight only once it may go;
//   - is sent, each operation (connect, TLS handshake, waiting for headers,
//     each body read) bounded by Options.DefaultTimeout (ErrTimeout), the
//     whole request, body included, by Options.MaxFetchTime (ErrDeadline).
//
// A 429 or 503 is reported to the pacer with its Retry-After, and returned
// as the response it is. A request that sets no Accept-Encoding (and no
// Range) asks for gzip, and its body is decoded as Fetcher.Fetch decodes,
// Content-Encoding and Content-Length removed. The body is bounded by
// Options.MaxBodyBytes, counted after decoding: past it a Read fails with
// ErrTooLarge, never a silent cut, and a declared length over it fails the
// request unread. Closing the body gives the request's place back.
//
// Redirects, cookies and retries are the http.Client's and the library's;
// NewClient returns a client that drops credentials off-origin as a
// Fetcher does. A Transport is safe for concurrent use; share one, since it
// owns a connection pool.
type Transport struct {
	f *Fetcher
	// limit bounds each body, -1 for none.
	limit int64
	// agent is the User-Agent value sent for a request that sets none.
	agent []string
}

var _ http.RoundTripper = (*Transport)(nil)

// NewTransport returns a Transport configured by opts, which mean what they
// mean for New, but for these: MaxBodyBytes < 0 means no bound on a body;
// MaxFetchTime bounds each request until its body is read or closed;
// MaxRedirects is NewClient's; MaxOpenFiles is ignored (a Transport stores
// nothing).
func NewTransport(opts Options) *Transport {
	limit := opts.MaxBodyBytes
	opts.MaxOpenFiles = 0
	t := &Transport{f: New(opts), limit: -1}
	t.agent = []string{t.f.userAgent}
	if limit >= 0 {
		t.limit = t.f.maxBody
	}
	return t
}

// NewClient returns an *http.Client on NewTransport(opts). It follows up
// to opts.MaxRedirects redirects (ErrNotFetchable past them), and drops
// Authorization, Proxy-Authorization and Cookie set on the first request
// from the first redirect to another origin on, even if the chain comes
// back, as Fetcher.Fetch does (docs/security.md). Cookies a Jar holds for
// a hop's own domain are still sent. It sets no Timeout: each request is
// bounded by opts.MaxFetchTime.
func NewClient(opts Options) *http.Client {
	t := NewTransport(opts)
	return &http.Client{Transport: t, CheckRedirect: t.checkRedirect}
}

// checkRedirect is NewClient's http.Client.CheckRedirect.
func (t *Transport) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > t.f.maxRedirects {
		return fmt.Errorf("%w: more than %d redirects from %s", ErrNotFetchable, t.f.maxRedirects, shown(via[0].URL))
	}
	for _, hop := range append(via[1:], req) {
		if !SameOrigin(hop.URL, via[0].URL) {
			for name := range credentialHeaders {
				req.Header.Del(name)
			}
			break
		}
	}
	return nil
}

// CloseIdleConnections closes the idle connections of the pool.
func (t *Transport) CloseIdleConnections() { t.f.Close() }

// RoundTrip sends one request as the Transport's documentation says.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	f := t.f
	ctx := req.Context()
	u := req.URL
	fail := func(err error) (*http.Response, error) {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	if u == nil {
		return fail(fmt.Errorf("%w: no URL", ErrNotFetchable))
	}
	if err := Fetchable(u); err != nil {
		return fail(err)
	}
	fetchCtx, wd := startWatchdog(ctx, f.timeout, f.maxFetch)
	stop := func(err error) (*http.Response, error) {
		wd.stop()
		return fail(err)
	}
	if err := f.checkHop(ctx, fetchCtx, nil, u); err != nil {
		return stop(err)
	}
	if err := f.guard.CheckURL(fetchCtx, u); err != nil {
		return stop(f.ioError(ctx, fetchCtx, nil, u, err))
	}
	agent := req.Header.Get("User-Agent")
	if agent == "" {
		agent = f.userAgent
	}
	if f.robots != nil {
		if err := f.robotsCheck(ctx, fetchCtx, u, agent, wd, nil, &Result{}); err != nil {
			return stop(err)
		}
	}
	header, decode := t.header(req, agent)
	host := policy.HostKey(u.Hostname())
	_, spaced, err := f.admit(fetchCtx, host, nil)
	if err != nil {
		return stop(f.ioError(ctx, fetchCtx, nil, u, err))
	}
	hopCtx, departed := context.Context(fetchCtx), func() {}
	if spaced {
		hopCtx, departed = f.departureTrace(fetchCtx, host)
	}
	resp, w, err := f.sendRequest(hopCtx, wd, nil, req, header)
	departed()
	if err != nil {
		f.inFlight.release()
		wd.stop()
		return nil, f.ioError(ctx, fetchCtx, w, u, err)
	}
	if code := resp.StatusCode; code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
		retryAfter, _ := policy.ParseRetryAfter(resp.Header.Get("Retry-After"), f.clock.now())
		interval, err := f.pacer.Refused(ctx, host, retryAfter)
		if err != nil {
			f.log.WarnContext(ctx, "pacer did not record a refusal", "host", host, "error", err)
		}
		f.log.WarnContext(ctx, "origin asked to be asked less often", "host", host, "status_code", code, "interval_ms", interval.Milliseconds())
	}
	body := &transportBody{t: t, ctx: ctx, fetchCtx: fetchCtx, wd: wd, w: w, u: u, body: resp.Body, limit: t.limit}
	body.timed = timedBody{r: resp.Body, w: w}
	body.src = &body.timed
	if decode && req.Method != http.MethodHead {
		if dec := newDecoder(&body.timed, contentCodings(resp.Header.Values("Content-Encoding")), t.decodedLimit(), nil); dec != nil {
			if resp.ContentLength > encodedLimit(t.decodedLimit()) {
				body.finish()
				resp.Body.Close()
				return nil, fmt.Errorf("%w: %s body of Content-Length %d over the %d-byte encoded limit", ErrTooLarge, dec.removed, resp.ContentLength, encodedLimit(t.decodedLimit()))
			}
			body.dec, body.src = dec, dec
			resp.Header.Del("Content-Encoding")
			resp.Header.Del("Content-Length")
			resp.ContentLength = -1
			resp.Uncompressed = true
		}
	}
	if body.dec == nil && t.limit >= 0 && resp.ContentLength > t.limit {
		body.finish()
		resp.Body.Close()
		return nil, fmt.Errorf("%w: Content-Length %d over the %d-byte limit", ErrTooLarge, resp.ContentLength, t.limit)
	}
	resp.Body = body
	return resp, nil
}

// decodedLimit is the bound newDecoder derives the encoded one from.
func (t *Transport) decodedLimit() int64 {
	if t.limit < 0 {
		return 1 << 62
	}
	return t.limit
}

// header returns the header to send in place of req's, nil to send req's
// as it is: the User-Agent when it sets none, and Accept-Encoding gzip
// when it asks for no coding and no range, in which case the Transport
// decodes the body (decode). The values are shared, not copied: net/http
// only reads them.
func (t *Transport) header(req *http.Request, agent string) (_ http.Header, decode bool) {
	decode = req.Header.Get("Accept-Encoding") == "" && req.Header.Get("Range") == ""
	setAgent := req.Header.Get("User-Agent") == ""
	if !decode && !setAgent {
		return nil, false
	}
	h := make(http.Header, len(req.Header)+2)
	maps.Copy(h, req.Header)
	if setAgent {
		if agent == t.f.userAgent {
			h["User-Agent"] = t.agent
		} else {
			h["User-Agent"] = []string{agent}
		}
	}
	if decode {
		h["Accept-Encoding"] = gzipOnly
	}
	return h, decode
}

// gzipOnly is the Accept-Encoding a Transport sends for a request that
// asks for none; shared by every request, never written to.
var gzipOnly = []string{"gzip"}

// transportBody is a Transport's response body: read under the request's
// watch, decoded when the Transport asked for gzip, bounded, and ending the
// request (its watchdog, its place in flight) at its end or close.
type transportBody struct {
	t             *Transport
	ctx, fetchCtx context.Context
	wd            *watchdog
	w             *watch
	u             *url.URL
	body          io.ReadCloser
	timed         timedBody
	dec           *decoder
	src           io.Reader
	limit         int64 // -1: none
	n             int64
	err           error // sticky, once the body has failed or ended
	once          sync.Once
}

func (b *transportBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.limit >= 0 && int64(len(p)) > b.limit-b.n+1 {
		// One byte past the limit is enough to know it is passed.
		p = p[:b.limit-b.n+1]
	}
	n, err := b.src.Read(p)
	b.n += int64(n)
	if b.limit >= 0 && b.n > b.limit {
		n -= int(b.n - b.limit)
		b.n = b.limit
		err = fmt.Errorf("%w: more than %d bytes from %s", ErrTooLarge, b.limit, shown(b.u))
	} else if err != nil && err != io.EOF {
		err = b.failure(err)
	}
	if err != nil {
		b.err = err
		b.finish()
	}
	return n, err
}

// failure classifies a failed read as Fetcher.Fetch does.
func (b *transportBody) failure(err error) error {
	switch {
	case b.dec != nil && b.dec.over():
		return fmt.Errorf("%w: %v body over the %d-byte encoded limit", ErrTooLarge, b.dec.removed, encodedLimit(b.t.decodedLimit()))
	case b.dec != nil && b.dec.err != nil && b.timed.err == nil:
		return fmt.Errorf("%w: %s: removing %v: %w", ErrContentCoding, shown(b.u), b.dec.removed, b.dec.err)
	}
	return b.t.f.ioError(b.ctx, b.fetchCtx, b.w, b.u, err)
}

// Close closes the body and ends the request.
func (b *transportBody) Close() error {
	b.finish()
	if b.err == nil {
		b.err = errBodyClosed
	}
	return b.body.Close()
}

// finish ends the request once: its watchdog stops and its place in
// flight is given back.
func (b *transportBody) finish() {
	b.once.Do(func() {
		if b.dec != nil {
			b.dec.close()
		}
		b.wd.stop()
		b.t.f.inFlight.release()
	})
}

// errBodyClosed is what a read after Close returns, as net/http's bodies
// answer.
var errBodyClosed = errors.New("fetch: read on closed response body")
