package fetch

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"time"

	"github.com/replicator-go/replicator/fetch/robots"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/policy"
	"github.com/replicator-go/replicator/sink"
)

// Defaults for Options fields left zero.
const (
	DefaultMaxBodyBytes = 64 << 20
	DefaultMaxFetchTime = 120 * time.Second
	DefaultMaxRedirects = 10
)

// Options configures a Fetcher. The zero value is usable: every zero field
// means the documented default.
type Options struct {
	// Guard judges every hop's destination, at check time and again at dial
	// time. Nil means guard.New(guard.Options{}): public unicast only.
	Guard *guard.Guard
	// Pacer spaces requests per host. Nil means a policy.Local pacer with
	// its default floor.
	Pacer policy.Pacer
	// MaxInFlight bounds the requests in flight across every fetch of the
	// Fetcher, each from its pacing decision until its body is consumed; a
	// fetch waiting for its host's politeness window holds no place, so it
	// never holds up another host. Zero means no bound.
	MaxInFlight int
	// MaxOpenFiles > 0 bounds the file descriptors the Fetcher holds at
	// once, so that a process fits its open-file limit: a connection per
	// request in flight, the sink's file or upload while a body streams to
	// it, and idle connections kept for reuse. What MaxInFlight leaves is
	// shared between the last two (Options.OpenFiles). It needs MaxInFlight
	// and is ignored without it. Zero means no bound: every body may stream
	// at once, with the whole idle pool.
	MaxOpenFiles int
	// MaxBodyBytes bounds the bytes stored, counted after the content
	// codings are removed. Zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// DefaultTimeout bounds each operation when the request sets no timeout.
	// Zero means guard.DefaultTimeout (30 s).
	DefaultTimeout time.Duration
	// MaxFetchTime bounds the whole fetch, all hops and pacing included.
	// Zero means DefaultMaxFetchTime.
	MaxFetchTime time.Duration
	// MaxRedirects is how many redirects are followed. Zero means
	// DefaultMaxRedirects (10, so 11 requests in all).
	MaxRedirects int
	// UserAgent replaces DefaultUserAgent.
	UserAgent string
	// TLSConfig is cloned into the transport (e.g. for private roots in
	// tests). Nil means the system roots, TLS 1.2 or later.
	TLSConfig *tls.Config
	// Logger receives debug lines about hops. Nil means slog.Default().
	Logger *slog.Logger
	// CheckURL, when set, judges every hop of every fetch (the URL asked
	// for and each redirect target) before any lookup, pacing or request:
	// an error refuses the hop and fails the fetch with ErrURLRefused
	// wrapping it. A request's own CheckURL runs after it; both must pass.
	// Nil means no check beyond the guard. It must be concurrency-safe.
	CheckURL func(ctx context.Context, u *url.URL) error
	// Proxy, when set, sends requests through HTTP egress proxies
	// (EnvironmentProxy reads HTTP_PROXY, HTTPS_PROXY and NO_PROXY); the
	// guard still judges every target before a proxy is asked. Nil means
	// every connection is direct and the environment is ignored.
	Proxy *Proxy
	// Robots, when set, judges every hop by its origin's robots.txt before
	// pacing it, fetching that first, guarded and paced, when not cached,
	// both as the User-Agent the hop sends: the request's own when it has
	// one, else UserAgent (package fetch/robots; docs/politeness.md,
	// robots.txt). Its
	// Crawl-delays reach the pacer through Robots.Floors, which the
	// default Pacer reads. Nil means robots.txt is never asked for.
	Robots *robots.Cache
}

// Fetcher performs guarded, paced HTTP GETs, follows redirects itself and
// streams 2xx bodies into a sink. It is safe for concurrent use; create one
// and share it, since it owns a connection pool.
type Fetcher struct {
	guard        *guard.Guard
	pacer        policy.Pacer
	inFlight     places
	storing      places
	maxBody      int64
	timeout      time.Duration
	maxFetch     time.Duration
	maxRedirects int
	userAgent    string
	log          *slog.Logger
	checkURL     func(context.Context, *url.URL) error
	robots       *robots.Cache
	transport    *http.Transport
	clock        clock
}

// New returns a Fetcher configured by opts.
func New(opts Options) *Fetcher {
	f := &Fetcher{
		guard:        opts.Guard,
		pacer:        opts.Pacer,
		maxBody:      opts.MaxBodyBytes,
		timeout:      opts.DefaultTimeout,
		maxFetch:     opts.MaxFetchTime,
		maxRedirects: opts.MaxRedirects,
		userAgent:    opts.UserAgent,
		log:          opts.Logger,
		checkURL:     opts.CheckURL,
		robots:       opts.Robots,
		clock:        wallClock,
	}
	if f.guard == nil {
		f.guard = guard.New(guard.Options{})
	}
	if f.pacer == nil {
		var floors policy.Floors
		if f.robots != nil {
			floors = f.robots.Floors(nil, 0)
		}
		f.pacer = policy.NewLocal(policy.LocalOptions{Floors: floors})
	}
	storing, idle := opts.OpenFiles()
	if opts.MaxInFlight > 0 {
		f.inFlight = make(places, opts.MaxInFlight)
	}
	if storing > 0 {
		f.storing = make(places, storing)
	}
	if f.maxBody <= 0 {
		f.maxBody = DefaultMaxBodyBytes
	}
	if f.timeout <= 0 {
		f.timeout = guard.DefaultTimeout
	}
	if f.maxFetch <= 0 {
		f.maxFetch = DefaultMaxFetchTime
	}
	if f.maxRedirects <= 0 {
		f.maxRedirects = DefaultMaxRedirects
	}
	if f.userAgent == "" {
		f.userAgent = DefaultUserAgent()
	}
	if f.log == nil {
		f.log = slog.Default()
	}
	perHost := idle
	if opts.MaxInFlight > 0 {
		perHost = opts.MaxInFlight
	}
	f.transport = newTransport(f.guard, opts.TLSConfig, idle, perHost, opts.Proxy)
	return f
}

// InFlight returns how many requests are in flight and the bound on them
// (Options.MaxInFlight; 0 when unbounded), for a gauge. Requests are
// counted only under a bound.
func (f *Fetcher) InFlight() (n, bound int) { return len(f.inFlight), cap(f.inFlight) }

// MaxFetchTime returns the bound on a whole fetch in force.
func (f *Fetcher) MaxFetchTime() time.Duration { return f.maxFetch }

// Close releases idle connections.
func (f *Fetcher) Close() { f.transport.CloseIdleConnections() }

// Request is one fetch.
type Request struct {
	// URL is fetched with GET.
	URL string
	// Headers are sent on every hop, lower-cased names, already screened by
	// guard.SanitizeHeaders; they are merged over the defaults and the
	// request wins. Credentials (authorization, cookie) go to a hop only
	// while every hop so far, that one included, is on the request URL's
	// origin.
	Headers map[string]string
	// Timeout bounds each operation: connect, TLS handshake, waiting for
	// headers, each read. Zero means the fetcher's default.
	Timeout time.Duration
	// Conditional headers (if-none-match, if-modified-since) go on the
	// first hop only and win over Headers of the same name: validators
	// describe the URL asked for, not wherever it redirects.
	Conditional map[string]string
	// MaxFetchTime bounds this whole fetch, all hops and pacing included,
	// failing with ErrDeadline. It can only shorten the fetcher's
	// MaxFetchTime; zero means the fetcher's.
	MaxFetchTime time.Duration
	// CheckURL judges every hop of this fetch as Options.CheckURL does,
	// after the fetcher's own; both must pass. Nil means none.
	CheckURL func(ctx context.Context, u *url.URL) error
	// PacingWait, when set, spends each wait for a hop's politeness window
	// instead of sleeping: given the host, how long this hop has waited and
	// how much longer the pacer asks, it returns nil once it has waited
	// that long, or an error that ends the fetch with nothing sent to the
	// hop. Nil means sleep, cut short only by ctx (and MaxFetchTime).
	PacingWait func(ctx context.Context, host string, waited, wait time.Duration) error
}

// Result describes the final response of a fetch.
type Result struct {
	// FinalURL is the URL of the hop that answered.
	FinalURL *url.URL
	// StatusCode is the final response's status.
	StatusCode int
	// Header is the final response's header.
	Header http.Header
	// Blob is the stored body; set only for a 2xx.
	Blob sink.Blob
	// FetchedAt is when the body finished arriving (for a 2xx) or when the
	// final response's headers arrived.
	FetchedAt time.Time
	// Requests counts the requests sent, redirects included.
	Requests int
	// Paced is the time spent waiting for hosts' politeness windows.
	Paced time.Duration
	// LeftOrigin is true once a hop went to an origin other than the
	// request URL's: from that hop on, credentials were not sent, even to
	// a hop back on the first origin.
	LeftOrigin bool
}

// NotModified reports whether the final response was 304 Not Modified.
func (r *Result) NotModified() bool { return r != nil && r.StatusCode == http.StatusNotModified }

// Fetch GETs req.URL, following up to MaxRedirects redirects, and streams a
// 2xx body into dst, decoded, with the media type blob_available announces
// (sink.PutOptions). For each hop, in this order: the URL must be http(s)
// with a host (ErrNotFetchable); the fetcher's CheckURL, then the
// request's, judge it (ErrURLRefused); the guard judges the destination
// (guard.ErrRefused); before the first request only, a sink with no room
// (sink.Room) refuses the fetch (ErrStorageFull); the hop waits for its
// host's politeness window (Request.PacingWait); then the request goes
// out. A 2xx body's declared length goes to the sink
// (sink.PutOptions.Size), which may refuse it unread (ErrStorageFull).
//
// A final 2xx returns a Result with Blob set; a 304 returns a Result and a
// nil error (see Result.NotModified); any other final status returns the
// Result and a *StatusError. A 429 or 503 is reported to the pacer. The
// returned Result is nil when no final response arrived.
func (f *Fetcher) Fetch(ctx context.Context, req Request, dst sink.Sink) (*Result, error) {
	current, err := parseTarget(req.URL)
	if err != nil {
		return nil, err
	}
	first := current
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = f.timeout
	}
	maxFetch := f.maxFetch
	if req.MaxFetchTime > 0 && req.MaxFetchTime < maxFetch {
		maxFetch = req.MaxFetchTime
	}
	// One watchdog times the whole fetch: every hop, every robots.txt
	// request, each of their operations.
	fetchCtx, wd := startWatchdog(ctx, timeout, maxFetch)
	defer wd.stop()

	// Credentials go only while every hop so far is on the origin asked
	// for: once a chain has left it, a hop back is still chosen by the
	// other origin, so they stay dropped (docs/security.md). A new Fetch
	// (a retried attempt) starts a fresh chain.
	res := &Result{}
	for hop := 0; ; hop++ {
		if err := f.checkHop(ctx, fetchCtx, req.CheckURL, current); err != nil {
			return nil, err
		}
		if err := f.guard.CheckURL(fetchCtx, current); err != nil {
			return nil, f.ioError(ctx, fetchCtx, nil, current, err)
		}
		if hop == 0 {
			if r, ok := dst.(sink.Room); ok {
				if err := r.Room(0); err != nil {
					return nil, f.noRoom(err)
				}
			}
		}
		if f.robots != nil {
			if err := f.robotsCheck(ctx, fetchCtx, current, f.agentFor(req.Headers), wd, req.PacingWait, res); err != nil {
				return nil, err
			}
		}
		host := policy.HostKey(current.Hostname())
		paced, spaced, err := f.admit(fetchCtx, host, req.PacingWait)
		res.Paced += paced
		if refusal, ok := err.(pacingRefusal); ok {
			return nil, refusal.err
		}
		if err != nil {
			return nil, f.ioError(ctx, fetchCtx, nil, current, err)
		}
		hopCtx, departed := fetchCtx, func() {}
		if spaced {
			hopCtx, departed = f.departureTrace(fetchCtx, host)
		}
		if hop > 0 && !SameOrigin(current, first) {
			res.LeftOrigin = true
		}
		header := f.hopHeader(req.Headers, !res.LeftOrigin)
		if hop == 0 {
			for name, value := range req.Conditional {
				header.Set(name, value)
			}
		}
		resp, w, err := f.send(hopCtx, wd, nil, current, header)
		departed()
		res.Requests++
		if err != nil {
			f.inFlight.release()
			return nil, f.ioError(ctx, fetchCtx, w, current, err)
		}
		next, redirect := f.redirectTarget(current, resp)
		if redirect {
			drain(resp.Body)
			f.inFlight.release()
			if hop >= f.maxRedirects {
				return nil, fmt.Errorf("%w: more than %d redirects from %s", ErrNotFetchable, f.maxRedirects, guard.RedactURL(req.URL))
			}
			if next.err != nil {
				return nil, next.err
			}
			if f.log.Enabled(ctx, slog.LevelDebug) {
				f.log.DebugContext(ctx, "following redirect", "from", shown(current), "to", shown(next.url), "status_code", resp.StatusCode)
			}
			current = next.url
			continue
		}
		res.FinalURL = current
		res.StatusCode = resp.StatusCode
		res.Header = resp.Header
		res.FetchedAt = f.clock.now()
		return res, f.finish(ctx, fetchCtx, w, host, current, resp, dst, res)
	}
}

// put stores src in dst and gives back the place among the bodies
// streaming that its caller took, even when the sink panics (see finish).
func (f *Fetcher) put(ctx context.Context, dst sink.Sink, src io.Reader, opts sink.PutOptions) (sink.Blob, error) {
	defer f.storing.release()
	return dst.Put(ctx, src, opts)
}

// finish consumes the final response: stores a 2xx body, reports a 429/503
// to the pacer and turns other statuses into a *StatusError. It ends the
// request: the place in flight is given back.
func (f *Fetcher) finish(ctx, fetchCtx context.Context, w *watch, host string, u *url.URL, resp *http.Response, dst sink.Sink, res *Result) error {
	// Deferred so that a sink that panics (a caller may recover it) still
	// gives the place in flight back: a place lost per panic would stall
	// every host once as many panics as places had happened.
	defer f.inFlight.release()
	defer resp.Body.Close()
	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		body := &timedBody{r: resp.Body, w: w}
		var codings []string
		if code != http.StatusPartialContent {
			// A 206 is a range of the encoded representation: stored as sent.
			codings = contentCodings(resp.Header.Values("Content-Encoding"))
		}
		dec := newDecoder(body, codings, f.maxBody, f.clock.now)
		var src io.Reader = body
		if dec == nil {
			// fetched_at is when the body stored ended: the body as sent
			// here, else the decoder's output, which stamps its own end.
			body.now = f.clock.now
			// The bytes stored are the bytes sent, so a declared length
			// over the limit is refused unread.
			if resp.ContentLength > f.maxBody {
				return fmt.Errorf("%w: Content-Length %d over the %d-byte limit", ErrTooLarge, resp.ContentLength, f.maxBody)
			}
		} else {
			// The declared length counts encoded bytes, which say little
			// about the decoded size; only the encoded bound applies.
			defer dec.close()
			if limit := encodedLimit(f.maxBody); resp.ContentLength > limit {
				return fmt.Errorf("%w: %s body of Content-Length %d over the %d-byte encoded limit", ErrTooLarge, strings.Join(dec.removed, ", "), resp.ContentLength, limit)
			}
			src = dec
		}
		// The declared length is claimed before a byte is read. For a body
		// to decode it counts encoded bytes: less than what will be stored,
		// as a rule, and the sink counts the rest as it arrives.
		opts := sink.PutOptions{Limit: f.maxBody, Size: max(resp.ContentLength, 0), MediaType: headerMediaType(resp.Header)}
		// The sink's file or upload counts against Options.MaxOpenFiles;
		// the wait for it is the fetch's time.
		if err := f.storing.acquire(fetchCtx); err != nil {
			return f.ioError(ctx, fetchCtx, w, u, err)
		}
		blob, err := f.put(ctx, dst, src, opts)
		if err != nil {
			switch {
			case errors.Is(err, sink.ErrNoRoom) && ctx.Err() == nil:
				return f.noRoom(err)
			case errors.Is(err, sink.ErrTooLarge):
				return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, f.maxBody)
			case body.err != nil:
				return f.ioError(ctx, fetchCtx, w, u, body.err)
			case dec != nil && dec.over():
				return fmt.Errorf("%w: %s body over the %d-byte encoded limit", ErrTooLarge, strings.Join(dec.removed, ", "), encodedLimit(f.maxBody))
			case dec != nil && dec.err != nil:
				return fmt.Errorf("%w: %s: removing %s: %w", ErrContentCoding, shown(u), strings.Join(dec.removed, ", "), dec.err)
			case ctx.Err() != nil:
				return ctx.Err()
			}
			return fmt.Errorf("%w: %w", ErrStore, err)
		}
		res.Blob = blob
		res.FetchedAt = body.doneAt
		if dec != nil {
			res.FetchedAt = dec.doneAt
		}
		return nil
	case code == http.StatusNotModified:
		return nil
	}
	if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
		retryAfter, _ := policy.ParseRetryAfter(resp.Header.Get("Retry-After"), f.clock.now())
		interval, err := f.pacer.Refused(ctx, host, retryAfter)
		if err != nil {
			f.log.WarnContext(ctx, "pacer did not record a refusal", "host", host, "error", err)
		}
		f.log.WarnContext(ctx, "origin asked to be asked less often", "host", host, "status_code", code, "interval_ms", interval.Milliseconds())
	}
	return &StatusError{StatusCode: code, URL: shown(u), RetryAfter: resp.Header.Get("Retry-After")}
}

// noRoom is the error of a fetch the sink has no room for.
func (f *Fetcher) noRoom(err error) error {
	return fmt.Errorf("%w: %w", ErrStorageFull, err)
}

// send performs one request under the fetch's watchdog, which enforces the
// per-operation timeout: it calls cancel when an operation times out, or
// ends the fetch when cancel is nil. The request's watch is returned so
// the body reads stay under it.
func (f *Fetcher) send(ctx context.Context, wd *watchdog, cancel context.CancelFunc, u *url.URL, header http.Header) (*http.Response, *watch, error) {
	// Made from the URL already parsed and checked, as
	// http.NewRequestWithContext would make it from its text, with no
	// formatting and parsing it again (three allocations and a parse per
	// request). An empty port is dropped from Host as there.
	return f.sendRequest(ctx, wd, cancel, &http.Request{
		Method:     http.MethodGet,
		URL:        u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     header,
		Host:       strings.TrimSuffix(u.Host, ":"),
	}, nil)
}

// sendRequest sends req as send does, under ctx, with header in place of
// req's when it is not nil; req itself is not changed.
func (f *Fetcher) sendRequest(ctx context.Context, wd *watchdog, cancel context.CancelFunc, req *http.Request, header http.Header) (*http.Response, *watch, error) {
	w := wd.startRequest(cancel)
	reqCtx := httptrace.WithClientTrace(ctx, &w.trace)
	httpReq := req.WithContext(reqCtx)
	if header != nil {
		httpReq.Header = header
	}
	resp, err := f.transport.RoundTrip(httpReq)
	w.sent()
	if err != nil {
		return nil, w, err
	}
	if w.fired() {
		// net/http hands over a response that raced the request's
		// cancellation; its context is gone, so its body would read
		// partly or not at all. The operation timed out.
		resp.Body.Close()
		return nil, w, context.Cause(reqCtx)
	}
	return resp, w, nil
}

// ioError classifies a failure seen while fetching: the caller's
// cancellation, the whole-fetch deadline and a per-operation timeout are
// told apart; anything else is returned wrapped with the redacted URL.
func (f *Fetcher) ioError(ctx, fetchCtx context.Context, w *watch, u *url.URL, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(context.Cause(fetchCtx), ErrDeadline):
		return fmt.Errorf("%w at %s", context.Cause(fetchCtx), shown(u))
	case w != nil && w.fired():
		return fmt.Errorf("%w (%s) at %s", ErrTimeout, w.wd.d, shown(u))
	}
	if errors.Is(err, ErrNotFetchable) {
		return err
	}
	// With a watch the failure happened on the wire (dial, TLS, a reset,
	// a malformed or truncated response); a refusal at dial time or a failed
	// lookup keeps its own sentinel instead.
	if w != nil && !errors.Is(err, guard.ErrRefused) && !errors.Is(err, guard.ErrResolve) {
		return &networkError{url: shown(u), err: err}
	}
	return fmt.Errorf("fetch: %s: %w", shown(u), err)
}

// drain reads a little of a body we do not keep so the connection can be
// reused, then closes it.
func drain(body io.ReadCloser) {
	io.CopyN(io.Discard, body, 4<<10)
	body.Close()
}
