package robots

import (
	"container/list"
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replicator-go/replicator/policy"
)

// Bounds of the Cache. MaxCrawlDelay and MaxOrigins are options; the rest
// is mechanism.
const (
	// MaxTTL is the longest a robots.txt is trusted (RFC 9309 2.4).
	MaxTTL = 24 * time.Hour
	// MinTTL is the shortest: a robots.txt sent with no-store, or with a
	// max-age under a minute, is still used for a minute, or every fetch
	// would cost the origin two requests.
	MinTTL = time.Minute
	// MinBackoff is how long an unreachable robots.txt refuses its origin
	// before it is asked for again; each further failure in a row doubles
	// it, up to MaxBackoff.
	MinBackoff = time.Minute
	// MaxBackoff bounds the back-off of an unreachable robots.txt.
	MaxBackoff = 30 * time.Minute
	// DefaultMaxCrawlDelay caps the Crawl-delay taken as a host's floor
	// when Options.MaxCrawlDelay is zero.
	DefaultMaxCrawlDelay = 60 * time.Second
	// DefaultMaxOrigins is how many origins a Cache remembers when
	// Options.MaxOrigins is zero.
	DefaultMaxOrigins = 4096
	// MaxRedirects is how many redirects a robots.txt request follows
	// (RFC 9309 2.3.1.2); a longer chain counts as no robots.txt.
	MaxRedirects = 5
)

// None, given to Options.MaxCrawlDelay, ignores Crawl-delay altogether.
const None = policy.None

// Options configures a Cache. The zero value is usable.
type Options struct {
	// MaxCrawlDelay caps the Crawl-delay that becomes a host's pacing
	// floor; a larger one is capped, with a log line. Zero means
	// DefaultMaxCrawlDelay (60 s); None ignores Crawl-delay.
	MaxCrawlDelay time.Duration
	// MaxOrigins bounds the origins remembered; the least recently used
	// is forgotten first. Zero means DefaultMaxOrigins.
	MaxOrigins int
	// Logger receives the capped Crawl-delays and unreachable robots.txt
	// files. Nil means slog.Default().
	Logger *slog.Logger
}

// Response is what asking an origin for its robots.txt came to, as the
// fetcher reports it to Check.
type Response struct {
	// StatusCode is the final response's status; 0 when none arrived
	// (Err says why). A 3xx is a redirect chain that was not followed.
	StatusCode int
	// Header is the final response's header (its caching headers count).
	Header http.Header
	// Body is a 2xx body, at most MaxBytes of it.
	Body []byte
	// Err is why no response arrived: the origin is unreachable.
	Err error
}

// Decision is what Check says of one URL.
type Decision int

const (
	// Allowed: the URL may be fetched.
	Allowed Decision = iota
	// Disallowed: the origin's robots.txt refuses it.
	Disallowed
	// Unreachable: the origin's robots.txt could not be had (429, 5xx, no
	// answer), so everything is refused until the back-off ends.
	Unreachable
)

// Stats counts what a Cache did, for metrics.
type Stats struct {
	// Robots.txt requests by what came of them: Parsed (a 2xx),
	// Unavailable (a 4xx but 429, or a redirect chain not followed: all
	// allowed) and Unreachable (429, 5xx, no answer: all refused).
	Parsed, Unavailable, Unreachable uint64
	// URLs refused: Disallowed by a rule, Withheld while robots.txt is
	// unreachable.
	Disallowed, Withheld uint64
}

// Cache remembers each origin's robots.txt and judges URLs against it, for
// whichever User-Agent each request sends. It is safe for concurrent use;
// an origin's robots.txt is asked for once however many fetches want it at
// the same time.
//
// One parsed file per origin answers for every agent: RFC 9309 gives an
// origin one robots.txt, whose groups say what each agent may do, so the
// file is asked for once, by the first request's agent, and never again
// for another agent (not even when the answer says Vary: User-Agent).
// Keying it by agent would let callers multiply the origin's robots.txt
// requests and the memory held, one per agent they name.
type Cache struct {
	maxDelay   time.Duration // 0: Crawl-delay ignored
	maxOrigins int
	log        *slog.Logger

	mu      sync.Mutex
	origins map[string]*list.Element // of *entry
	lru     list.List                // front: most recently used

	delayMu sync.RWMutex
	delays  map[string]map[string]time.Duration // host → origin → capped Crawl-delay

	parsed, unavailable, unreachable, disallowed, withheld atomic.Uint64
}

// entry is one origin's robots.txt.
type entry struct {
	origin, host string
	loading      chan struct{} // closed when the load in progress ends; nil when none
	rules        *Rules        // nil: everything allowed
	down         bool          // unreachable: everything refused
	until        time.Time     // when it must be asked for again
	failures     int           // unreachable answers in a row
	loaded       bool          // a load has finished
	// Of the file in force: the groups (Rules.groupKey) whose Crawl-delay
	// has been accounted for, and the largest of those delays, capped.
	accounted map[string]bool
	delay     time.Duration
	hasDelay  bool
}

// New returns a Cache configured by opts.
func New(opts Options) *Cache {
	c := &Cache{
		maxDelay:   opts.MaxCrawlDelay,
		maxOrigins: opts.MaxOrigins,
		log:        opts.Logger,
		origins:    make(map[string]*list.Element),
		delays:     make(map[string]map[string]time.Duration),
	}
	switch {
	case c.maxDelay == 0:
		c.maxDelay = DefaultMaxCrawlDelay
	case c.maxDelay < 0:
		c.maxDelay = 0
	}
	if c.maxOrigins <= 0 {
		c.maxOrigins = DefaultMaxOrigins
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	return c
}

// Stats returns the counts so far.
func (c *Cache) Stats() Stats {
	return Stats{
		Parsed: c.parsed.Load(), Unavailable: c.unavailable.Load(), Unreachable: c.unreachable.Load(),
		Disallowed: c.disallowed.Load(), Withheld: c.withheld.Load(),
	}
}

// Check judges path (a URL's path and query as sent) on origin
// (scheme://host:port, host its pacing key) for agent, the User-Agent the
// request sends: its product token chooses the group. When the origin's
// robots.txt is not known or has expired, load asks for it (with the same
// User-Agent), once for all concurrent callers; an error from load (the
// fetch was abandoned) is returned with nothing learned. For Unreachable,
// retry is when robots.txt will be asked for again.
func (c *Cache) Check(ctx context.Context, origin, host, agent, path string, now func() time.Time, load func(context.Context) (Response, error)) (d Decision, retry time.Time, err error) {
	if p, _, _ := strings.Cut(path, "?"); p == "/robots.txt" {
		return Allowed, time.Time{}, nil
	}
	for {
		c.mu.Lock()
		e := c.lookup(origin, host)
		if e.loading != nil {
			wait := e.loading
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return Allowed, time.Time{}, ctx.Err()
			}
		}
		if e.loaded && now().Before(e.until) {
			c.mu.Unlock()
			d, retry := c.judge(e, agent, path)
			return d, retry, nil
		}
		done := make(chan struct{})
		e.loading = done
		c.mu.Unlock()
		resp, err := load(ctx)
		c.mu.Lock()
		if err == nil {
			c.learn(e, resp, agent, now())
		}
		e.loading = nil
		close(done)
		c.mu.Unlock()
		if err != nil {
			return Allowed, time.Time{}, err
		}
		d, retry := c.judge(e, agent, path)
		return d, retry, nil
	}
}

// judge applies e's verdict for agent to path, counting refusals, and
// accounts for agent's Crawl-delay.
func (c *Cache) judge(e *entry, agent, path string) (Decision, time.Time) {
	tok := token(agent)
	c.mu.Lock()
	rules, down, until := e.rules, e.down, e.until
	if !down {
		c.account(e, tok)
	}
	c.mu.Unlock()
	switch {
	case down:
		c.withheld.Add(1)
		return Unreachable, until
	case !rules.allowed(tok, path):
		c.disallowed.Add(1)
		return Disallowed, time.Time{}
	}
	return Allowed, time.Time{}
}

// lookup returns origin's entry, made if need be, as the most recently
// used; called with c.mu held.
func (c *Cache) lookup(origin, host string) *entry {
	if el, ok := c.origins[origin]; ok {
		c.lru.MoveToFront(el)
		return el.Value.(*entry)
	}
	e := &entry{origin: origin, host: host}
	c.origins[origin] = c.lru.PushFront(e)
	for len(c.origins) > c.maxOrigins {
		old := c.lru.Back().Value.(*entry)
		if old.loading != nil {
			break // in use; the bound gives a little until it settles
		}
		c.lru.Remove(c.lru.Back())
		delete(c.origins, old.origin)
		c.setDelay(old.host, old.origin, 0, false)
	}
	return e
}

// learn records what a robots.txt request came to; called with c.mu held.
func (c *Cache) learn(e *entry, resp Response, agent string, now time.Time) {
	e.loaded = true
	code := resp.StatusCode
	switch {
	case resp.Err != nil || code == http.StatusTooManyRequests || code >= 500 || code < 200:
		c.unreachable.Add(1)
		e.failures++
		backoff := min(MinBackoff<<min(e.failures-1, 10), MaxBackoff)
		e.rules, e.down, e.until = nil, true, now.Add(backoff)
		why := "HTTP " + strconv.Itoa(code)
		if resp.Err != nil {
			why = resp.Err.Error()
		}
		c.log.Warn("robots.txt unreachable: refusing the origin until it is asked for again", "origin", e.origin, "error", why, "retry_in_s", backoff.Seconds())
		return
	case code >= 300 && code < 500:
		c.unavailable.Add(1)
		e.rules = nil
	default:
		c.parsed.Add(1)
		e.rules = Parse(resp.Body)
	}
	e.down, e.failures = false, 0
	e.until = now.Add(ttl(resp.Header, now))
	e.accounted, e.delay, e.hasDelay = nil, 0, false
	c.account(e, token(agent))
	if !e.hasDelay {
		c.setDelay(e.host, e.origin, 0, false) // the old file's goes
	}
}

// account makes the Crawl-delay of the groups chosen for tok count in e's
// host floor, once per group key while the file is in force: the floor is
// the largest Crawl-delay of the agents that have asked, since all of them
// share the host's pacing. Called with c.mu held.
func (c *Cache) account(e *entry, tok string) {
	key := e.rules.groupKey(tok)
	if e.accounted[key] {
		return
	}
	if e.accounted == nil {
		e.accounted = make(map[string]bool)
	}
	e.accounted[key] = true
	d, ok := e.rules.crawlDelay(tok)
	if !ok || c.maxDelay == 0 {
		return
	}
	if d > c.maxDelay {
		c.log.Info("robots.txt Crawl-delay capped", "origin", e.origin, "crawl_delay_s", d.Seconds(), "cap_s", c.maxDelay.Seconds())
		d = c.maxDelay
	}
	if e.hasDelay && d <= e.delay {
		return
	}
	e.delay, e.hasDelay = d, true
	c.setDelay(e.host, e.origin, d, true)
}

// ttl is how long an answer is trusted: what its Cache-Control max-age or
// Expires says, within [MinTTL, MaxTTL]; MaxTTL when they say nothing.
func ttl(h http.Header, now time.Time) time.Duration {
	d := MaxTTL
	for _, v := range h.Values("Cache-Control") {
		for _, dir := range strings.Split(v, ",") {
			name, arg, _ := strings.Cut(strings.TrimSpace(dir), "=")
			switch strings.ToLower(name) {
			case "no-store", "no-cache":
				d = 0
			case "max-age":
				if s, err := strconv.ParseInt(strings.Trim(arg, `"`), 10, 64); err == nil && s >= 0 {
					d = min(d, time.Duration(min(s, int64(MaxTTL/time.Second)))*time.Second)
				}
			}
		}
	}
	if len(h.Values("Cache-Control")) == 0 {
		if exp, err := http.ParseTime(h.Get("Expires")); err == nil {
			d = min(d, max(exp.Sub(now), 0))
		} else if h.Get("Expires") != "" {
			d = 0 // an invalid Expires means already expired
		}
	}
	return min(max(d, MinTTL), MaxTTL)
}

// setDelay records origin's capped Crawl-delay for host (ok false: none).
func (c *Cache) setDelay(host, origin string, d time.Duration, ok bool) {
	c.delayMu.Lock()
	defer c.delayMu.Unlock()
	if !ok {
		if m := c.delays[host]; m != nil {
			delete(m, origin)
			if len(m) == 0 {
				delete(c.delays, host)
			}
		}
		return
	}
	if c.delays[host] == nil {
		c.delays[host] = make(map[string]time.Duration)
	}
	c.delays[host][origin] = d
}

// CrawlDelay returns the Crawl-delay in force for host (a pacing key,
// policy.HostKey), capped: the largest its remembered origins ask for.
func (c *Cache) CrawlDelay(host string) (time.Duration, bool) {
	c.delayMu.RLock()
	defer c.delayMu.RUnlock()
	m := c.delays[host]
	var d time.Duration
	for _, v := range m {
		d = max(d, v)
	}
	return d, len(m) > 0
}

// Floors returns inner with the Crawl-delays folded in: a host's floor is
// its Crawl-delay when that is larger than the floor in force (inner's,
// else defaultInterval, read as policy.LocalOptions.DefaultInterval is).
// Give it to the pacer (policy.LocalOptions.Floors) of the Fetcher that
// uses this Cache. inner may be nil.
func (c *Cache) Floors(inner policy.Floors, defaultInterval time.Duration) policy.Floors {
	switch {
	case defaultInterval == 0:
		defaultInterval = policy.DefaultInterval
	case defaultInterval < 0:
		defaultInterval = 0
	}
	return &floors{cache: c, inner: inner, def: defaultInterval}
}

type floors struct {
	cache *Cache
	inner policy.Floors
	def   time.Duration
}

// Floor implements policy.Floors.
func (f *floors) Floor(host string) (time.Duration, bool) {
	floor, ok := f.def, false
	if f.inner != nil {
		if d, found := f.inner.Floor(host); found && d >= 0 {
			floor, ok = d, true
		}
	}
	if d, found := f.cache.CrawlDelay(host); found && d > floor {
		return d, true
	}
	if !ok {
		return 0, false
	}
	return floor, true
}
