package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/replicator-go/replicator/fetch/robots"
	"github.com/replicator-go/replicator/policy"
)

// robotsCheck judges a hop against its origin's robots.txt
// (Options.Robots), asking the origin for it when it is not known:
// ErrRobotsDisallowed when a rule refuses the hop, ErrRobotsUnreachable
// while the robots.txt cannot be had. The request for robots.txt is
// guarded and paced as any other, and its pacing wait counts in paced.
// agent chooses the group of rules.
func (f *Fetcher) robotsCheck(ctx, fetchCtx context.Context, u *url.URL, agent string, wd *watchdog, pace func(context.Context, string, time.Duration, time.Duration) error, res *Result) error {
	origin := originOf(u)
	host := policy.HostKey(u.Hostname())
	d, retry, err := f.robots.Check(fetchCtx, origin, host, agent, u.RequestURI(), f.clock.now, func(context.Context) (robots.Response, error) {
		return f.fetchRobots(ctx, fetchCtx, origin, wd, pace, res)
	})
	switch {
	case err != nil:
		var refusal pacingRefusal
		if errors.As(err, &refusal) {
			return refusal.err
		}
		return f.ioError(ctx, fetchCtx, nil, u, err)
	case d == robots.Disallowed:
		return fmt.Errorf("%w: %s", ErrRobotsDisallowed, shown(u))
	case d == robots.Unreachable:
		return fmt.Errorf("%w: %s/robots.txt, asked for again from %s", ErrRobotsUnreachable, origin, retry.UTC().Format(time.RFC3339))
	}
	return nil
}

// fetchRobots asks origin for /robots.txt, following up to
// robots.MaxRedirects redirects, each hop judged by Options.CheckURL and
// the guard and paced like any request to its host. A redirect that may
// not be followed ends the chain as a 3xx: no robots.txt. An error is
// returned only when the fetch was abandoned (its caller, its deadline or
// its PacingWait): nothing is learned then.
func (f *Fetcher) fetchRobots(ctx, fetchCtx context.Context, origin string, wd *watchdog, pace func(context.Context, string, time.Duration, time.Duration) error, res *Result) (robots.Response, error) {
	current, err := url.Parse(origin + "/robots.txt")
	if err != nil {
		return robots.Response{Err: err}, nil
	}
	for hop := 0; ; hop++ {
		if f.checkURL != nil {
			copied := *current
			if err := f.checkURL(fetchCtx, &copied); err != nil {
				if fetchCtx.Err() != nil {
					return robots.Response{}, err
				}
				return robots.Response{StatusCode: http.StatusFound}, nil
			}
		}
		if err := f.guard.CheckURL(fetchCtx, current); err != nil {
			if fetchCtx.Err() != nil {
				return robots.Response{}, err
			}
			if hop == 0 {
				// The origin's own name did not resolve this time.
				return robots.Response{Err: err}, nil
			}
			return robots.Response{StatusCode: http.StatusFound}, nil
		}
		host := policy.HostKey(current.Hostname())
		paced, spaced, err := f.admit(fetchCtx, host, pace)
		res.Paced += paced
		if err != nil {
			return robots.Response{}, err
		}
		hopCtx, cancel := context.WithCancel(fetchCtx)
		departed := func() {}
		if spaced {
			hopCtx, departed = f.departureTrace(hopCtx, host)
		}
		header := http.Header{"User-Agent": {f.userAgent}, "Accept-Encoding": {"gzip"}}
		// A timeout ends this request only: robots.txt that cannot be had
		// is an answer too.
		resp, w, err := f.send(hopCtx, wd, cancel, current, header)
		departed()
		if err != nil {
			f.inFlight.release()
			cancel()
			if fetchCtx.Err() != nil {
				return robots.Response{}, err
			}
			return robots.Response{Err: f.ioError(ctx, fetchCtx, w, current, err)}, nil
		}
		out, next := f.readRobots(fetchCtx, host, current, resp, w)
		f.inFlight.release()
		cancel()
		if fetchCtx.Err() != nil {
			return robots.Response{}, context.Cause(fetchCtx)
		}
		if next == nil {
			return out, nil
		}
		if hop >= robots.MaxRedirects {
			return robots.Response{StatusCode: resp.StatusCode}, nil
		}
		current = next
	}
}

// readRobots reads one answer to a robots.txt request: a redirect to
// follow (next), or the response, a 2xx body read up to robots.MaxBytes.
// A 429 or 503 is reported to the pacer, as for any request.
func (f *Fetcher) readRobots(ctx context.Context, host string, u *url.URL, resp *http.Response, w *watch) (_ robots.Response, next *url.URL) {
	defer resp.Body.Close()
	out := robots.Response{StatusCode: resp.StatusCode, Header: resp.Header}
	if target, redirect := f.redirectTarget(u, resp); redirect {
		drain(resp.Body)
		if target.err != nil {
			return robots.Response{StatusCode: resp.StatusCode}, nil
		}
		return out, target.url
	}
	switch code := resp.StatusCode; {
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		retryAfter, _ := policy.ParseRetryAfter(resp.Header.Get("Retry-After"), f.clock.now())
		if _, err := f.pacer.Refused(ctx, host, retryAfter); err != nil {
			f.log.WarnContext(ctx, "pacer did not record a refusal", "host", host, "error", err)
		}
		return out, nil
	case code < 200 || code > 299:
		return out, nil
	}
	// Nothing reads when robots.txt ended: no clock is read for it.
	body := &timedBody{r: resp.Body, w: w}
	var src io.Reader = body
	if dec := newDecoder(body, contentCodings(resp.Header.Values("Content-Encoding")), robots.MaxBytes, nil); dec != nil {
		defer dec.close()
		src = dec
	}
	// A body that does not decode past some point is parsed up to there:
	// every line that parses counts (RFC 9309 2.3.1.5). One cut short on
	// the wire is no answer at all.
	out.Body, _ = io.ReadAll(io.LimitReader(src, robots.MaxBytes))
	if body.err != nil && body.err != io.EOF {
		return robots.Response{Err: f.ioError(ctx, ctx, w, u, body.err)}, nil
	}
	return out, nil
}
