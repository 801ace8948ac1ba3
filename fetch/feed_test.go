package fetch_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/memory"
)

const (
	atomBody = `<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom"><title>t</title></feed>`
	rssBody  = `<?xml version="1.0"?><rss version="2.0"><channel><title>t</title></channel></rss>`
	jsonBody = `{"version": "https://jsonfeed.org/version/1.1", "title": "t", "items": []}`
)

// htmlPage serves an HTML page whose head holds the given markup.
func htmlPage(head string) http.Handler {
	return testenv.Status(200, map[string]string{"Content-Type": "text/html; charset=utf-8"},
		"<!DOCTYPE html><html><head><title>blog</title>"+head+"</head><body><p>hello</p></body></html>")
}

func served(contentType, body string) http.Handler {
	return testenv.Status(200, map[string]string{"Content-Type": contentType}, body)
}

func alt(mediaType, href string) string {
	return fmt.Sprintf(`<link rel="alternate" type=%q href=%q>`, mediaType, href)
}

// feedView is what a test checks of a Feed.
type feedView struct {
	URL        string
	Kind       fetch.DocumentKind
	PageURL    string
	Link       fetch.FeedLink
	Alternates []fetch.FeedLink
}

func viewOf(f *fetch.Feed) feedView {
	return feedView{URL: f.Document.URL, Kind: f.Document.Kind, PageURL: f.PageURL, Link: f.Link, Alternates: f.Alternates}
}

// seenPaths is every request the origin saw, as "host path".
func seenPaths(o *testenv.Origin) []string {
	var out []string
	for _, s := range o.Requests() {
		out = append(out, s.Host+" "+s.Path)
	}
	return out
}

// TestGetFeed runs discovery against a real origin reached under two host
// names, origin.test (the page's) and a.test (another origin): what is
// found, which requests are sent and in what order, and the errors.
func TestGetFeed(t *testing.T) {
	const (
		atomType = "application/atom+xml"
		rssType  = "application/rss+xml"
		jsonType = "application/feed+json"
	)
	// u is a URL on the test origin under a host name; set once it runs.
	var u func(host, path string) string
	lnk := func(host, path, mediaType string, kind fetch.DocumentKind) fetch.FeedLink {
		return fetch.FeedLink{URL: u(host, path), Type: mediaType, Kind: kind}
	}
	type row struct {
		name      string
		routes    func() map[string]http.Handler // patterns with the host, e.g. "origin.test /page"
		path      string                         // the page on origin.test
		feed      fetch.FeedOptions
		get       fetch.GetOptions
		want      func() feedView // nil when an error is wanted
		wantErr   func(t *testing.T, err error)
		wantPaths []string
	}
	tests := []row{
		{
			name: "a relative link",
			routes: func() map[string]http.Handler {
				return map[string]http.Handler{
					"origin.test/blog/post": htmlPage(alt(atomType, "../feed.atom")),
					"origin.test/feed.atom": served(atomType, atomBody),
				}
			},
			path: "/blog/post",
			want: func() feedView {
				return feedView{URL: u("origin.test", "/feed.atom"), Kind: fetch.KindAtom, PageURL: u("origin.test", "/blog/post"),
					Link: lnk("origin.test", "/feed.atom", atomType, fetch.KindAtom)}
			},
			wantPaths: []string{"origin.test /blog/post", "origin.test /feed.atom"},
		},
		{
			name: "base href",
			routes: func() map[string]http.Handler {
				return map[string]http.Handler{
					"origin.test/page":           htmlPage(`<base href="` + u("a.test", "/static/") + `">` + alt(rssType, "rss.xml")),
					"a.test/static/rss.xml":      served("text/xml", rssBody),
					"origin.test/static/rss.xml": served(rssType, "wrong: not resolved against the base"),
				}
			},
			path: "/page",
			want: func() feedView {
				return feedView{URL: u("a.test", "/static/rss.xml"), Kind: fetch.KindRSS, PageURL: u("origin.test", "/page"),
					Link: lnk("a.test", "/static/rss.xml", rssType, fetch.KindRSS)}
			},
			wantPaths: []string{"origin.test /page", "a.test /static/rss.xml"},
		},
		{
			name: "several links: the default preference",
			routes: func() map[string]http.Handler {
				return map[string]http.Handler{
					"origin.test/page":      htmlPage(alt(rssType, "/rss") + alt(jsonType, "/json") + alt(atomType, "/atom") + alt(rssType, "/comments/rss")),
					"origin.test/atom":      served(atomType, atomBody),
					"origin.test/rss":       served(rssType, rssBody),
					"origin.test/json":      served(jsonType, jsonBody),
					"origin.test/comments/": served(rssType, rssBody),
				}
			},
			path: "/page",
			want: func() feedView {
				return feedView{URL: u("origin.test", "/atom"), Kind: fetch.KindAtom, PageURL: u("origin.test", "/page"),
					Link: lnk("origin.test", "/atom", atomType, fetch.KindAtom),
					Alternates: []fetch.FeedLink{
						lnk("origin.test", "/rss", rssType, fetch.KindRSS),
						lnk("origin.test", "/comments/rss", rssType, fetch.KindRSS),
						lnk("origin.test", "/json", jsonType, fetch.KindJSONFeed),
					}}
			},
			wantPaths: []string{"origin.test /page", "origin.test /atom"},
		},
		{
			name: "several links: the caller's preference",
			routes: func() map[string]http.Handler {
				return map[string]http.Handler{
					"origin.test/page": htmlPage(alt(rssType, "/rss") + alt(jsonType, "/json") + alt(atomType, "/atom")),
					"origin.test/json": served(jsonType, jsonBody),
				}
			},
			path: "/page",
			feed: fetch.FeedOptions{Prefer: []fetch.DocumentKind{fetch.KindJSONFeed, fetch.KindRSS}},
			want: func() feedView {
				return feedView{URL: u("origin.test", "/json"), Kind: fetch.KindJSONFeed, PageURL: u("origin.test", "/page"),
					Link:       lnk("origin.test", "/json", jsonType, fetch.KindJSONFeed),
					Alternates: []fetch.FeedLink{lnk("origin.test", "/rss", rssType, fetch.KindRSS)}}
			},
			wantPaths: []string{"origin.test /page", "origin.test /json"},
		},
		{
			name: "a page that is itself a feed",
			routes: func() map[string]http.Handler {
				return map[string]http.Handler{"origin.test/feed": served("text/plain", rssBody)}
			},
			path: "/feed",
			want: func() feedView {
				return feedView{URL: u("origin.test", "/feed"), Kind: fetch.KindRSS}
			},
			wantPaths: []string{"origin.test /feed"},
		},
		{
			name: "a page reached by a redirect: links resolve against where it was found",
			routes: func() map[string]http.Handler {
				return map[string]http.Handler{
					"origin.test/old":      testenv.Redirect(http.StatusMovedPermanently, "/new/page"),
					"origin.test/new/page": htmlPage(alt(atomType, "feed")),
					"origin.test/new/feed": served(atomType, atomBody),
				}
			},
			path: "/old",
			want: func() feedView {
				return feedView{URL: u("origin.test", "/new/feed"), Kind: fetch.KindAtom, PageURL: u("origin.test", "/new/page"),
					Link: lnk("origin.test", "/new/feed", atomType, fetch.KindAtom)}
			},
			wantPaths: []string{"origin.test /old", "origin.test /new/page", "origin.test /new/feed"},
		},
		{
			name: "no feed link",
			routes: func() map[string]http.Handler {
				return map[string]http.Handler{"origin.test/page": htmlPage(`<link rel="stylesheet" href="/s.css">` + alt("application/json", "/wp-json/"))}
			},
			path: "/page",
			wantErr: func(t *testing.T, err error) {
				var fe *fetch.FeedError
				if !errors.Is(err, fetch.ErrNoFeed) || errors.As(err, &fe) {
					t.Errorf("err = %v, want fetch.ErrNoFeed alone", err)
				}
			},
			wantPaths: []string{"origin.test /page"},
		},
		{
			name: "no link of a preferred kind",
			routes: func() map[string]http.Handler {
				return map[string]http.Handler{"origin.test/page": htmlPage(alt(rssType, "/rss"))}
			},
			path: "/page",
			feed: fetch.FeedOptions{Prefer: []fetch.DocumentKind{fetch.KindAtom}},
			wantErr: func(t *testing.T, err error) {
				if !errors.Is(err, fetch.ErrNoFeed) {
					t.Errorf("err = %v, want fetch.ErrNoFeed", err)
				}
			},
			wantPaths: []string{"origin.test /page"},
		},
		{
			name: "a link that 404s falls back to the next",
			routes: func() map[string]http.Handler {
				return map[string]http.Handler{
					"origin.test/page": htmlPage(alt(atomType, "/gone.atom") + alt(rssType, "/rss")),
					"origin.test/rss":  served(rssType, rssBody),
				}
			},
			path: "/page",
			want: func() feedView {
				return feedView{URL: u("origin.test", "/rss"), Kind: fetch.KindRSS, PageURL: u("origin.test", "/page"),
					Link:       lnk("origin.test", "/rss", rssType, fetch.KindRSS),
					Alternates: []fetch.FeedLink{lnk("origin.test", "/gone.atom", atomType, fetch.KindAtom)}}
			},
			wantPaths: []string{"origin.test /page", "origin.test /gone.atom", "origin.test /rss"},
		},
		{
			name: "every link fails: each reported with its URL",
			routes: func() map[string]http.Handler {
				return map[string]http.Handler{
					"origin.test/page":      htmlPage(alt(atomType, "/gone.atom") + alt(rssType, u("a.test", "/not-a-feed"))),
					"a.test/not-a-feed":     htmlPage(""),
					"origin.test/gone.atom": http.NotFoundHandler(),
				}
			},
			path: "/page",
			wantErr: func(t *testing.T, err error) {
				var fe *fetch.FeedError
				if !errors.As(err, &fe) {
					t.Fatalf("err = %v, want a *fetch.FeedError", err)
				}
				var got []string
				for _, l := range fe.Links {
					got = append(got, l.URL)
				}
				if diff := cmp.Diff([]string{u("origin.test", "/gone.atom"), u("a.test", "/not-a-feed")}, got); diff != "" {
					t.Errorf("links reported (-want +got):\n%s", diff)
				}
				var se *fetch.StatusError
				if !errors.As(err, &se) || se.StatusCode != http.StatusNotFound || !errors.Is(err, fetch.ErrNotAFeed) || errors.Is(err, fetch.ErrNoFeed) {
					t.Errorf("err = %v, want the 404 and ErrNotAFeed reachable, not ErrNoFeed", err)
				}
				if fe.PageURL != u("origin.test", "/page") || !strings.Contains(err.Error(), u("a.test", "/not-a-feed")) {
					t.Errorf("err = %q (page %q), want it to name the page and each link", err, fe.PageURL)
				}
			},
			wantPaths: []string{"origin.test /page", "origin.test /gone.atom", "a.test /not-a-feed"},
		},
		{
			name: "at most MaxCandidates links are tried",
			routes: func() map[string]http.Handler {
				return map[string]http.Handler{"origin.test/page": htmlPage(alt(rssType, "/1") + alt(rssType, "/2") + alt(rssType, "/3") + alt(rssType, "/4"))}
			},
			path: "/page",
			wantErr: func(t *testing.T, err error) {
				var fe *fetch.FeedError
				if !errors.As(err, &fe) || len(fe.Links) != fetch.DefaultMaxFeedCandidates {
					t.Errorf("err = %v, want a *fetch.FeedError of %d links", err, fetch.DefaultMaxFeedCandidates)
				}
			},
			wantPaths: []string{"origin.test /page", "origin.test /1", "origin.test /2", "origin.test /3"},
		},
		{
			name: "the caller's MaxCandidates",
			routes: func() map[string]http.Handler {
				return map[string]http.Handler{
					"origin.test/page": htmlPage(alt(rssType, "/1") + alt(rssType, "/2") + alt(rssType, "/3") + alt(rssType, "/4")),
					"origin.test/4":    served(rssType, rssBody),
				}
			},
			path: "/page",
			feed: fetch.FeedOptions{MaxCandidates: 4},
			want: func() feedView {
				return feedView{URL: u("origin.test", "/4"), Kind: fetch.KindRSS, PageURL: u("origin.test", "/page"),
					Link: lnk("origin.test", "/4", rssType, fetch.KindRSS),
					Alternates: []fetch.FeedLink{lnk("origin.test", "/1", rssType, fetch.KindRSS), lnk("origin.test", "/2", rssType, fetch.KindRSS),
						lnk("origin.test", "/3", rssType, fetch.KindRSS)}}
			},
			wantPaths: []string{"origin.test /page", "origin.test /1", "origin.test /2", "origin.test /3", "origin.test /4"},
		},
		{
			name: "a link refused by CheckURL is never fetched and falls back",
			routes: func() map[string]http.Handler {
				return map[string]http.Handler{
					"origin.test/page": htmlPage(alt(atomType, u("a.test", "/atom")) + alt(rssType, "/rss")),
					"origin.test/rss":  served(rssType, rssBody),
				}
			},
			path: "/page",
			get: fetch.GetOptions{CheckURL: func(ctx context.Context, u *url.URL) error {
				if u.Hostname() == "a.test" {
					return errNotAllowed
				}
				return nil
			}},
			want: func() feedView {
				return feedView{URL: u("origin.test", "/rss"), Kind: fetch.KindRSS, PageURL: u("origin.test", "/page"),
					Link:       lnk("origin.test", "/rss", rssType, fetch.KindRSS),
					Alternates: []fetch.FeedLink{lnk("a.test", "/atom", atomType, fetch.KindAtom)}}
			},
			wantPaths: []string{"origin.test /page", "origin.test /rss"},
		},
		{
			name: "malformed HTML",
			routes: func() map[string]http.Handler {
				return map[string]http.Handler{
					"origin.test/page": served("text/html", `<html><HEAD><title>unclosed<LINK REL=Alternate TYPE=application/rss+xml HREF=/in-title></title>`+
						`<div><p><LINK rel='alternate' type='application/atom+xml' href='/atom'`+"\x00"+` <body><p>no closing tags`),
					"origin.test/atom": served(atomType, atomBody),
				}
			},
			path: "/page",
			want: func() feedView {
				return feedView{URL: u("origin.test", "/atom"), Kind: fetch.KindAtom, PageURL: u("origin.test", "/page"),
					Link: lnk("origin.test", "/atom", atomType, fetch.KindAtom)}
			},
			wantPaths: []string{"origin.test /page", "origin.test /atom"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mux := http.NewServeMux()
			h := newHarness(t, mux, harnessOptions{fetch: fetch.Options{Pacer: libPacer{}}})
			u = h.url
			for pattern, handler := range tt.routes() {
				mux.Handle(pattern, handler)
			}
			var sleeps libSleeps
			fetch.SetSleep(h.fetcher, sleeps.sleep)
			get := tt.get
			get.Retries = fetch.None
			feed, err := h.fetcher.GetFeed(libCtx(t), h.url("origin.test", tt.path), get, tt.feed)
			if tt.want != nil {
				if err != nil {
					t.Fatalf("GetFeed: %v", err)
				}
				if diff := cmp.Diff(tt.want(), viewOf(feed)); diff != "" {
					t.Errorf("feed (-want +got):\n%s", diff)
				}
				if body := readDoc(t, feed.Document); body != atomBody && body != rssBody && body != jsonBody {
					t.Errorf("feed body = %q, want one of the feeds", body)
				}
			} else {
				if feed != nil {
					t.Fatalf("GetFeed returned %+v, want an error", viewOf(feed))
				}
				tt.wantErr(t, err)
			}
			if diff := cmp.Diff(tt.wantPaths, seenPaths(h.origin)); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGetFeedCredentials checks which requests carry the caller's
// credentials: the page, and a feed only when the page's fetch never left
// the origin asked for and the feed is on it too. Other headers go
// everywhere.
func TestGetFeedCredentials(t *testing.T) {
	caller := map[string]string{
		"Authorization": "Bearer s3cret",
		"Cookie":        "session=1",
		"X-Trace":       "t-1",
	}
	// Proxy-Authorization is refused by guard.SanitizeHeaders before
	// anything is sent, so it never needs dropping here.
	credentials := []string{"Authorization", "Cookie"}
	other := testenv.StartOrigin(t, served("application/atom+xml", atomBody)) // same host name, another port
	tests := []struct {
		name     string
		page     func(h *harness) http.Handler
		path     string
		feedAt   func(h *harness) *testenv.Origin
		wantCred bool
	}{
		{name: "a feed on the page's origin", path: "/page",
			page: func(h *harness) http.Handler { return htmlPage(alt("application/atom+xml", "/feed")) }, wantCred: true},
		{name: "a feed on another host", path: "/page",
			page: func(h *harness) http.Handler { return htmlPage(alt("application/atom+xml", h.url("a.test", "/feed"))) }},
		{name: "a feed on another port", path: "/page",
			page: func(h *harness) http.Handler {
				return htmlPage(alt("application/atom+xml", other.URLFor("origin.test", "/feed")))
			},
			feedAt: func(*harness) *testenv.Origin { return other }},
		{name: "a base href on another origin", path: "/page",
			page: func(h *harness) http.Handler {
				return htmlPage(`<base href="` + h.url("a.test", "/") + `">` + alt("application/atom+xml", "feed"))
			}},
		{name: "a page redirected to another origin, its feed on that origin", path: "/moved",
			page: func(h *harness) http.Handler { return htmlPage(alt("application/atom+xml", "/feed")) }},
		{name: "a page redirected to another origin, its feed back on the first", path: "/moved-back",
			page: func(h *harness) http.Handler {
				return htmlPage(alt("application/atom+xml", h.url("origin.test", "/feed")))
			}},
		{name: "a page redirected away and back, its feed on the first origin", path: "/away-and-back",
			page: func(h *harness) http.Handler { return htmlPage(alt("application/atom+xml", "/feed")) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mux := http.NewServeMux()
			h := newHarness(t, mux, harnessOptions{fetch: fetch.Options{Pacer: libPacer{}}})
			mux.Handle("/page", tt.page(h))
			mux.Handle("/moved", testenv.Redirect(http.StatusFound, h.url("a.test", "/page")))
			mux.Handle("/moved-back", testenv.Redirect(http.StatusFound, h.url("a.test", "/page")))
			mux.Handle("/away-and-back", testenv.Redirect(http.StatusFound, h.url("a.test", "/back")))
			mux.Handle("/back", testenv.Redirect(http.StatusFound, h.url("origin.test", "/page")))
			mux.Handle("/feed", served("application/atom+xml", atomBody))
			before := other.Count()
			feed, err := h.fetcher.GetFeed(libCtx(t), h.url("origin.test", tt.path), fetch.GetOptions{Headers: caller, Retries: fetch.None}, fetch.FeedOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if feed.Document.Kind != fetch.KindAtom {
				t.Fatalf("feed = %+v", viewOf(feed))
			}
			seen := h.origin.Requests()
			if first := seen[0].Header; first.Get("Authorization") != "Bearer s3cret" || first.Get("Cookie") != "session=1" {
				t.Errorf("the page request lost its credentials")
			}
			if tt.feedAt != nil {
				seen = tt.feedAt(h).Requests()[before:]
			}
			last := seen[len(seen)-1]
			if last.Path != "/feed" {
				t.Fatalf("last request was %s %s, want the feed", last.Host, last.Path)
			}
			got := map[string]bool{}
			want := map[string]bool{}
			for _, name := range credentials {
				got[name] = last.Header.Get(name) != ""
				want[name] = tt.wantCred
			}
			got["X-Trace"], want["X-Trace"] = last.Header.Get("X-Trace") == "t-1", true
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("headers on the feed request (-want +got):\n%s", diff)
			}
		})
	}
}

// countingSink counts the bytes read back from the blobs it stores.
type countingSink struct {
	sink.Sink
	read atomic.Int64
}

func (s *countingSink) Open(ctx context.Context, fingerprint string) (io.ReadCloser, error) {
	rc, err := s.Sink.Open(ctx, fingerprint)
	if err != nil {
		return nil, err
	}
	return &countingReader{ReadCloser: rc, n: &s.read}, nil
}

type countingReader struct {
	io.ReadCloser
	n *atomic.Int64
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.n.Add(int64(n))
	return n, err
}

// TestGetFeedHugePage checks the page is read only up to MaxPageBytes:
// links before the bound are found, one after it is not, and no more than
// the bound is read back, however large the page.
func TestGetFeedHugePage(t *testing.T) {
	const pageSize = 8 << 20
	filler := strings.Repeat("<p>words and more words</p>\n", pageSize/28)
	tests := []struct {
		name  string
		bound int64
		want  int64 // the most read back
	}{
		{name: "the default bound", want: fetch.DefaultMaxPageBytes},
		{name: "a caller's bound", bound: 64 << 10, want: 64 << 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mux := http.NewServeMux()
			h := newHarness(t, mux, harnessOptions{fetch: fetch.Options{Pacer: libPacer{}}})
			mux.Handle("/page", served("text/html", "<html><head>"+alt("application/rss+xml", "/late")+
				"</head><body>"+filler+alt("application/atom+xml", "/past-the-bound")+"</body></html>"))
			mux.Handle("/late", served("application/rss+xml", rssBody))
			mux.Handle("/past-the-bound", served("application/atom+xml", atomBody))
			dst := &countingSink{Sink: memory.New(memory.Options{})}
			feed, err := h.fetcher.GetFeed(libCtx(t), h.url("origin.test", "/page"), fetch.GetOptions{Sink: dst}, fetch.FeedOptions{MaxPageBytes: tt.bound})
			if err != nil {
				t.Fatal(err)
			}
			// The atom link would win, had it been seen.
			if feed.Document.URL != h.url("origin.test", "/late") || len(feed.Alternates) != 0 {
				t.Errorf("feed = %+v, want /late alone", viewOf(feed))
			}
			if got := dst.read.Load(); got > tt.want {
				t.Errorf("read back %d bytes of the page, want at most %d", got, tt.want)
			}
			if got := seenPaths(h.origin); len(got) != 2 {
				t.Errorf("requests = %v, want the page and /late", got)
			}
		})
	}
}

// TestGetFeedCancel checks the caller's cancellation between links ends
// discovery at once.
func TestGetFeedCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mux := http.NewServeMux()
	h := newHarness(t, mux, harnessOptions{fetch: fetch.Options{Pacer: libPacer{}}})
	mux.Handle("/page", htmlPage(alt("application/rss+xml", "/1")+alt("application/rss+xml", "/2")))
	mux.Handle("/1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cancel()
		w.WriteHeader(http.StatusNotFound)
	}))
	_, err := h.fetcher.GetFeed(ctx, h.url("origin.test", "/page"), fetch.GetOptions{Retries: fetch.None}, fetch.FeedOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if diff := cmp.Diff([]string{"origin.test /page", "origin.test /1"}, seenPaths(h.origin)); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}
