package feed

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"

	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/guard"
)

// Defaults for Options fields left zero.
const (
	DefaultMaxPageBytes  = 1 << 20
	DefaultMaxCandidates = 3
)

// defaultPreference is the order of fetch.DefaultAccept, then the kinds it
// does not name.
var defaultPreference = []fetch.DocumentKind{fetch.KindAtom, fetch.KindRSS, fetch.KindJSONFeed, fetch.KindRDF, fetch.KindNWF}

// Errors of feed discovery.
var (
	// ErrNoLink means the page is HTML and advertises no feed link of a
	// kind Options.Prefer lists (within its first MaxPageBytes).
	ErrNoLink = errors.New("feed: no feed link on the page")
	// ErrNotAFeed means a feed link led to a document that is not a feed
	// (fetch.DetectKind says html).
	ErrNotAFeed = errors.New("feed: not a feed")
)

// Options configures Get. The zero value means the defaults documented on
// each field.
type Options struct {
	// Prefer is the order in which feed links are tried, by the kind their
	// type names; links of the same kind keep the page's order, and links
	// of kinds not listed are ignored. Nil or empty means atom, rss,
	// jsonfeed, rdf, nwf: fetch.DefaultAccept's order, then the kinds it
	// does not name.
	Prefer []fetch.DocumentKind
	// MaxPageBytes is how much of the page is read for links: links past
	// it are not seen. Zero (or less) means DefaultMaxPageBytes (1 MiB).
	MaxPageBytes int64
	// MaxCandidates is how many feed links are fetched, at most, before
	// discovery gives up. Zero (or less) means DefaultMaxCandidates (3).
	MaxCandidates int
}

// Feed is a feed found by Get.
type Feed struct {
	// Document is the feed; its Kind is never fetch.KindHTML.
	Document *fetch.Document
	// PageURL is the final URL of the page the feed was found on, after
	// redirects; "" when the URL given to Get was itself a feed.
	PageURL string
	// Link is the page's link that led to the feed; zero when PageURL is
	// "".
	Link Link
	// Alternates are the page's other feed links of a preferred kind, in
	// preference order: those that failed and those not tried.
	Alternates []Link
}

// Error reports that a page advertised feed links but none of those tried
// gave a feed. errors.Is and errors.As see each link's error.
type Error struct {
	// PageURL is the redacted final URL of the page.
	PageURL string
	// Links are the links tried, in order, each with its error.
	Links []*LinkError
}

// Error names the page, then each link tried and its error.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "feed: no feed at the %d links tried from %s", len(e.Links), e.PageURL)
	for i, l := range e.Links {
		sep := "; "
		if i == 0 {
			sep = ": "
		}
		b.WriteString(sep + l.URL + ": " + l.Err.Error())
	}
	return b.String()
}

// Unwrap returns each link's *LinkError.
func (e *Error) Unwrap() []error {
	errs := make([]error, len(e.Links))
	for i, l := range e.Links {
		errs[i] = l
	}
	return errs
}

// LinkError is why one feed link gave no feed.
type LinkError struct {
	// URL is the link's URL, its userinfo redacted.
	URL string
	// Err is the link's fetch.Fetcher.Get error, or ErrNotAFeed wrapped
	// with detail.
	Err error
}

// Error names the link and its error.
func (e *LinkError) Error() string { return "feed: link " + e.URL + ": " + e.Err.Error() }

// Unwrap returns the link's error.
func (e *LinkError) Unwrap() error { return e.Err }

// Get finds and fetches the feed a page advertises, with f. The page is
// fetched with f.Get and opts; when it is already a feed (any Kind but
// html) it is returned as the Feed's Document. Otherwise its first
// o.MaxPageBytes are read for <link rel="alternate"> elements whose type
// names a feed kind (see Link; at most MaxLinks are kept), resolved against
// the page's final URL and its first <base href>. The links are tried in
// o.Prefer's order, each with f.Get and opts, up to o.MaxCandidates of
// them: the first whose document is a feed is returned, and a link that
// fails or gives no feed falls back to the next.
//
// Every fetch is a full f.Get: retries, the cache, the sink, the guard,
// pacing and opts.CheckURL apply to the page and to each link. The
// credentials among opts.Headers (fetch.WithoutCredentials) go to a link
// only when the page's fetch never left the origin asked for
// (fetch.Document.LeftOrigin) and the link is on that origin too: a page
// cannot hand them to another origin, by its links or by redirecting away
// and back. Other headers go to every link.
//
// The page is stored like any document, up to the fetcher's MaxBodyBytes,
// in opts.Sink (it may turn out to be the feed); only its first
// MaxPageBytes are parsed, as they stream from the sink.
//
// A page that cannot be fetched returns f.Get's error. A page with no feed
// link returns an error wrapping ErrNoLink. When every link tried fails,
// the error is an *Error naming each link and its error. Cancelling ctx
// ends discovery with ctx.Err().
func Get(ctx context.Context, f *fetch.Fetcher, pageURL string, opts fetch.GetOptions, o Options) (*Feed, error) {
	page, err := f.Get(ctx, pageURL, opts)
	if err != nil {
		return nil, err
	}
	if page.Kind != fetch.KindHTML {
		return &Feed{Document: page}, nil
	}
	// Both parsed already: Get fetched the one and reached the other.
	asked, err := url.Parse(pageURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %s does not parse", fetch.ErrNotFetchable, guard.RedactURL(pageURL))
	}
	final, err := url.Parse(page.URL)
	if err != nil {
		return nil, fmt.Errorf("%w: %s does not parse", fetch.ErrNotFetchable, guard.RedactURL(page.URL))
	}
	links, err := pageLinks(ctx, page, final, cmp.Or(max(o.MaxPageBytes, 0), DefaultMaxPageBytes))
	if err != nil {
		return nil, err
	}
	prefer := o.Prefer
	if len(prefer) == 0 {
		prefer = defaultPreference
	}
	candidates := byPreference(links, prefer)
	if len(candidates) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoLink, shown(final))
	}

	credentialed := !page.LeftOrigin && fetch.SameOrigin(asked, final)
	anonymous := fetch.WithoutCredentials(opts.Headers)
	failed := &Error{PageURL: shown(final)}
	tries := min(len(candidates), cmp.Or(max(o.MaxCandidates, 0), DefaultMaxCandidates))
	for i, link := range candidates[:tries] {
		u, _ := url.Parse(link.URL) // made by feedLinks from a parsed URL
		linkOpts := opts
		if !credentialed || !fetch.SameOrigin(u, asked) {
			linkOpts.Headers = anonymous
		}
		doc, err := f.Get(ctx, link.URL, linkOpts)
		if err == nil && doc.Kind == fetch.KindHTML {
			err = fmt.Errorf("%w: %s is html", ErrNotAFeed, guard.RedactURL(doc.URL))
		}
		if err == nil {
			return &Feed{
				Document:   doc,
				PageURL:    page.URL,
				Link:       link,
				Alternates: others(candidates, i),
			}, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		failed.Links = append(failed.Links, &LinkError{URL: shown(u), Err: err})
	}
	return nil, failed
}

// pageLinks reads the feed links from the first limit bytes of a page's
// stored body.
func pageLinks(ctx context.Context, page *fetch.Document, final *url.URL, limit int64) ([]Link, error) {
	body, err := page.Open(ctx)
	if err != nil {
		return nil, fmt.Errorf("feed: reading the page %s back: %w", shown(final), err)
	}
	defer body.Close()
	r := &readErr{r: io.LimitReader(body, limit)}
	links := feedLinks(r, final)
	if r.err != nil {
		return nil, fmt.Errorf("feed: reading the page %s back: %w", shown(final), r.err)
	}
	return links, nil
}

// readErr remembers the first error other than io.EOF, which the
// tokenizer would take for the end of the page.
type readErr struct {
	r   io.Reader
	err error
}

func (e *readErr) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}

// others is links without links[i], nil when none is left.
func others(links []Link, i int) []Link {
	if len(links) == 1 {
		return nil
	}
	return slices.Concat(links[:i], links[i+1:])
}

// byPreference keeps the links of the kinds in prefer, ordered as prefer
// lists their kinds (a kind listed twice counts where first listed), the
// page's order kept within a kind.
func byPreference(links []Link, prefer []fetch.DocumentKind) []Link {
	rank := make(map[fetch.DocumentKind]int, len(prefer))
	for i, k := range prefer {
		if _, ok := rank[k]; !ok {
			rank[k] = i
		}
	}
	var out []Link
	for _, l := range links {
		if _, ok := rank[l.Kind]; ok {
			out = append(out, l)
		}
	}
	slices.SortStableFunc(out, func(a, b Link) int { return cmp.Compare(rank[a.Kind], rank[b.Kind]) })
	return out
}

// shown is u as errors show it, its userinfo hidden (guard.RedactURL).
func shown(u *url.URL) string { return guard.RedactURL(u.String()) }
