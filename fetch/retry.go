package fetch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/policy"
	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/memory"
)

// Defaults for GetOptions fields left zero, and the longest retry wait.
const (
	DefaultGetRetries = 2
	DefaultGetBackoff = 500 * time.Millisecond
	DefaultGetTimeout = 15 * time.Second
	// MaxGetWait caps every wait between attempts, a Retry-After included,
	// so a hostile or huge value cannot stall the caller.
	MaxGetWait = 30 * time.Second
)

// None, given to an option that documents it, turns that default off: no
// retries, no wait, no per-attempt bound. Every package of the module
// spells "none" this way; zero always means the documented default.
const None = -1

// DefaultAccept is the Accept header Get sends unless the caller sets one:
// feed formats first, then JSON, then HTML.
const DefaultAccept = "application/atom+xml, application/rss+xml, application/feed+json, " +
	"application/json;q=0.9, text/html;q=0.8, */*;q=0.5"

// GetOptions configures one Fetcher.Get. The zero value means the defaults
// documented on each field.
type GetOptions struct {
	// Retries is how many more attempts follow a first one that failed
	// retryably (see Retryable). Zero means DefaultGetRetries; None means
	// a single attempt.
	Retries int
	// Backoff is the base of the jittered exponential wait before a retry:
	// before retry n (from 0) Get waits Backoff·2ⁿ·U[0.5, 1), at most
	// MaxGetWait. A 429's Retry-After replaces it. Zero means
	// DefaultGetBackoff; None means no wait.
	Backoff time.Duration
	// Timeout bounds one whole attempt, all hops and pacing included; an
	// attempt cut short fails with ErrDeadline and is retried. It can only
	// shorten the fetcher's MaxFetchTime. Zero means DefaultGetTimeout; None
	// leaves only the fetcher's MaxFetchTime. Each operation within an
	// attempt is also bounded by the fetcher's DefaultTimeout.
	Timeout time.Duration
	// Headers are extra request headers, e.g. authorization for a private
	// feed. They pass guard.SanitizeHeaders (a refusal fails Get with
	// guard.ErrInvalidOptions before anything is sent), names lower-cased,
	// and override the defaults (user-agent, accept). If-None-Match and
	// If-Modified-Since are ignored: they belong to Cache. Credentials
	// follow Request.Headers' rule within each attempt; proxy-* names are
	// refused: a proxy's own credentials are Options.Proxy's.
	Headers map[string]string
	// Cache, when set, makes the request conditional on the document cached
	// for the URL and receives every document fetched with a final 200.
	// Nil means unconditional requests and no caching.
	Cache Cache
	// Sink stores the body. Nil means a fresh in-memory sink for this Get,
	// which lives as long as the returned Document.
	Sink sink.Sink
	// CheckURL judges every hop of every attempt as Options.CheckURL does,
	// after it (both must pass); a refusal fails Get at once, never
	// retried. The hook sees a copy of the URL and the attempt's context.
	// Nil means no check beyond the guard.
	CheckURL func(ctx context.Context, u *url.URL) error
}

// Get fetches url as a library caller wants it: with retries, an optional
// conditional cache and kind detection. Every attempt is a full Fetch, so
// the URL rules, the destination guard and pacing apply to every hop of
// every attempt, and the fetcher's limits (size, redirects, timeouts) hold.
//
// An attempt that fails retryably (see Retryable) is retried up to
// opts.Retries times, after a jittered backoff or, for a 429, the
// response's Retry-After, capped at MaxGetWait; then the attempt waits for
// its host's pacing window, inside its Timeout. Both waits end with ctx.
// A 429 or 503 escalates that window by up to 60 s whatever MaxGetWait
// says (docs/politeness.md); policy.LocalOptions.MaxEscalation bounds it.
//
// With opts.Cache, the cached document's validators go on the first hop of
// every attempt (never to a redirect target), and a 304 returns a copy of
// the cached document with NotModified set. A 304 that answers no validator
// of ours fails with a *StatusError.
//
// On failure Get returns the last attempt's error, wrapped with the number
// of attempts when there were several. Cancelling ctx stops Get at once
// with ctx.Err(), never confused with a per-attempt timeout (ErrDeadline).
func (f *Fetcher) Get(ctx context.Context, url string, opts GetOptions) (*Document, error) {
	headers, err := f.getHeaders(opts.Headers)
	if err != nil {
		return nil, err
	}
	// Zero means the default; None (any negative value) means none.
	retries := max(cmp.Or(opts.Retries, DefaultGetRetries), 0)
	base := max(cmp.Or(opts.Backoff, DefaultGetBackoff), 0)
	timeout := max(cmp.Or(opts.Timeout, DefaultGetTimeout), 0)
	dst := opts.Sink
	if dst == nil {
		dst = memory.New(memory.Options{})
	}

	req := Request{URL: url, Headers: headers, MaxFetchTime: timeout, CheckURL: opts.CheckURL}
	var cached *Document
	if opts.Cache != nil {
		if d, ok := opts.Cache.Load(url); ok && d != nil {
			if req.Conditional = conditional(d); req.Conditional != nil {
				cached = d
			}
		}
	}

	for attempt := 1; ; attempt++ {
		sniff := &sniffSink{Sink: dst}
		res, err := f.Fetch(ctx, req, sniff)
		if err == nil {
			return f.document(url, res, sniff, cached, attempt, opts.Cache)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if attempt > retries || !Retryable(err) {
			if attempt > 1 {
				err = fmt.Errorf("fetch: gave up after %d attempts: %w", attempt, err)
			}
			return nil, err
		}
		wait := retryDelay(err, attempt-1, base, f.clock.now(), rand.Float64())
		f.log.DebugContext(ctx, "retrying fetch", "url", guard.RedactURL(url), "attempt", attempt, "wait_ms", wait.Milliseconds(), "error", err)
		if err := f.clock.sleep(ctx, wait); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
	}
}

// getDefaultHeaders are Get's headers when the caller gives none; shared,
// so never modified.
var getDefaultHeaders = map[string]string{"accept": DefaultAccept}

// getHeaders screens the caller's headers and merges them over Get's
// defaults. The user-agent default is the fetcher's own (see hopHeader).
func (f *Fetcher) getHeaders(h map[string]string) (map[string]string, error) {
	if len(h) == 0 {
		return getDefaultHeaders, nil
	}
	clean, err := guard.SanitizeHeaders(h)
	if err != nil {
		return nil, fmt.Errorf("fetch: get: %w", err)
	}
	out := map[string]string{"accept": DefaultAccept}
	for name, value := range clean {
		switch name {
		case "if-none-match", "if-modified-since":
			continue // the cache's, never the caller's
		}
		out[name] = value
	}
	return out, nil
}

// document turns a successful Fetch into the Document Get returns and
// updates the cache after a final 200.
func (f *Fetcher) document(url string, res *Result, sniff *sniffSink, cached *Document, attempts int, cache Cache) (*Document, error) {
	if res.NotModified() {
		// Validators go on the first hop only, so only a 304 from that hop
		// answers them.
		if cached == nil || res.Requests != 1 {
			return nil, fmt.Errorf("%w (no validator was sent to it)", &StatusError{StatusCode: res.StatusCode, URL: shown(res.FinalURL)})
		}
		d := *cached
		d.StatusCode = res.StatusCode
		d.NotModified = true
		d.Attempts = attempts
		return &d, nil
	}
	contentType := strings.TrimSpace(res.Header.Get("Content-Type"))
	d := &Document{
		URL:          res.FinalURL.String(),
		StatusCode:   res.StatusCode,
		ContentType:  contentType,
		Kind:         DetectKind(contentType, sniff.head),
		Blob:         res.Blob,
		ETag:         strings.TrimSpace(res.Header.Get("ETag")),
		LastModified: strings.TrimSpace(res.Header.Get("Last-Modified")),
		Attempts:     attempts,
		LeftOrigin:   res.LeftOrigin,
		sink:         sniff.Sink,
	}
	if cache != nil && res.StatusCode == http.StatusOK {
		stored := *d
		stored.Attempts = 0
		cache.Store(url, &stored)
	}
	return d, nil
}

// conditional returns the validator headers for a cached document, nil
// when it has none that can be sent.
func conditional(d *Document) map[string]string {
	h := make(map[string]string, 2)
	if guard.SendableValidator(d.ETag) {
		h["if-none-match"] = d.ETag
	}
	if guard.SendableValidator(d.LastModified) {
		h["if-modified-since"] = d.LastModified
	}
	if len(h) == 0 {
		return nil
	}
	return h
}

// Retryable reports whether a fresh attempt soon might succeed where a
// Fetch or Get failed with err: Classify(err).Retry. Get retries exactly
// these; see Classify for the table.
func Retryable(err error) bool { return err != nil && Classify(err).Retry }

// retryDelay is the wait before retry n (from 0) after err, at now: a
// 429's Retry-After when it parses, else the jittered backoff; u is a
// uniform draw from [0, 1).
func retryDelay(err error, n int, base time.Duration, now time.Time, u float64) time.Duration {
	var status *StatusError
	if errors.As(err, &status) && status.StatusCode == http.StatusTooManyRequests {
		if d, ok := policy.ParseRetryAfter(status.RetryAfter, now); ok {
			return min(d, MaxGetWait)
		}
	}
	return backoff(n, base, u)
}

// backoff is full jitter: base·2ⁿ scaled by a factor in [0.5, 1), so
// sources failing together do not retry in lockstep; at most MaxGetWait.
func backoff(n int, base time.Duration, u float64) time.Duration {
	w := float64(base) * math.Exp2(float64(n)) * (0.5 + u/2)
	if w >= float64(MaxGetWait) {
		return MaxGetWait
	}
	return time.Duration(w)
}
