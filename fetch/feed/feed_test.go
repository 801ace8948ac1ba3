package feed_test

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
	"github.com/replicator-go/replicator/fetch/feed"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/internal/testenv/fetchenv"
	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/memory"
)

const (
	rssBody  = `<?xml version="1.0"?><rss version="2.0"><channel><title>t</title></channel></rss>`
	jsonBody = `{"version": "https://jsonfeed.org/version/1.1", "title": "t", "items": []}`
)

// htmlPage serves an HTML page whose head holds the given markup.
func htmlPage(head string) http.Handler {
	return testenv.Status(200, map[string]string{"Content-Type": "text/html; charset=utf-8"},
		"<!DOCTYPE html><html><head><title>blog</title>"+head+"</head><body><p>hello</p></body></html>")
}

func alt(mediaType, href string) string {
	return fmt.Sprintf(`<link rel="alternate" type=%q href=%q>`, mediaType, href)
}

// feedView is what a test checks of a Feed.
type feedView struct {
	URL        string
	Kind       fetch.DocumentKind
	PageURL    string
	Link       feed.Link
	Alternates []feed.Link
}

func viewOf(f *feed.Feed) feedView {
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
	lnk := func(host, path, mediaType string, kind fetch.DocumentKind) feed.Link {
		return feed.Link{URL: u(host, path), Type: mediaType, Kind: kind}
	}
	type row struct {
		name      string
		routes    func() map[string]http.Handler // patterns with the host, e.g. "origin.test /page"
		path      string                         // the page on origin.test
		opts      feed.Options
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
					"origin.test/feed.atom": fetchenv.Served(atomType, fetchenv.AtomFeed),
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
					"a.test/static/rss.xml":      fetchenv.Served("text/xml", rssBody),
					"origin.test/static/rss.xml": fetchenv.Served(rssType, "wrong: not resolved against the base"),
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
					"origin.test/atom":      fetchenv.Served(atomType, fetchenv.AtomFeed),
					"origin.test/rss":       fetchenv.Served(rssType, rssBody),
					"origin.test/json":      fetchenv.Served(jsonType, jsonBody),
					"origin.test/comments/": fetchenv.Served(rssType, rssBody),
				}
			},
			path: "/page",
			want: func() feedView {
				return feedView{URL: u("origin.test", "/atom"), Kind: fetch.KindAtom, PageURL: u("origin.test", "/page"),
					Link: lnk("origin.test", "/atom", atomType, fetch.KindAtom),
					Alternates: []feed.Link{
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
					"origin.test/json": fetchenv.Served(jsonType, jsonBody),
				}
			},
			path: "/page",
			opts: feed.Options{Prefer: []fetch.DocumentKind{fetch.KindJSONFeed, fetch.KindRSS}},
			want: func() feedView {
				return feedView{URL: u("origin.test", "/json"), Kind: fetch.KindJSONFeed, PageURL: u("origin.test", "/page"),
					Link:       lnk("origin.test", "/json", jsonType, fetch.KindJSONFeed),
					Alternates: []feed.Link{lnk("origin.test", "/rss", rssType, fetch.KindRSS)}}
			},
			wantPaths: []string{"origin.test /page", "origin.test /json"},
		},
		{
			name: "a page that is itself a feed",
			routes: func() map[string]http.Handler {
				return map[string]http.Handler{"origin.test/feed": fetchenv.Served("text/plain", rssBody)}
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
					"origin.test/new/feed": fetchenv.Served(atomType, fetchenv.AtomFeed),
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
				var fe *feed.Error
				if !errors.Is(err, feed.ErrNoLink) || errors.As(err, &fe) {
					t.Errorf("err = %v, want feed.ErrNoLink alone", err)
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
			opts: feed.Options{Prefer: []fetch.DocumentKind{fetch.KindAtom}},
			wantErr: func(t *testing.T, err error) {
				if !errors.Is(err, feed.ErrNoLink) {
					t.Errorf("err = %v, want feed.ErrNoLink", err)
				}
			},
			wantPaths: []string{"origin.test /page"},
		},
		{
			name: "a link that 404s falls back to the next",
			routes: func() map[string]http.Handler {
				return map[string]http.Handler{
					"origin.test/page": htmlPage(alt(atomType, "/gone.atom") + alt(rssType, "/rss")),
					"origin.test/rss":  fetchenv.Served(rssType, rssBody),
				}
			},
			path: "/page",
			want: func() feedView {
				return feedView{URL: u("origin.test", "/rss"), Kind: fetch.KindRSS, PageURL: u("origin.test", "/page"),
					Link:       lnk("origin.test", "/rss", rssType, fetch.KindRSS),
					Alternates: []feed.Link{lnk("origin.test", "/gone.atom", atomType, fetch.KindAtom)}}
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
				var fe *feed.Error
				if !errors.As(err, &fe) {
					t.Fatalf("err = %v, want a *feed.Error", err)
				}
				var got []string
				for _, l := range fe.Links {
					got = append(got, l.URL)
				}
				if diff := cmp.Diff([]string{u("origin.test", "/gone.atom"), u("a.test", "/not-a-feed")}, got); diff != "" {
					t.Errorf("links reported (-want +got):\n%s", diff)
				}
				var se *fetch.StatusError
				if !errors.As(err, &se) || se.StatusCode != http.StatusNotFound || !errors.Is(err, feed.ErrNotAFeed) || errors.Is(err, feed.ErrNoLink) {
					t.Errorf("err = %v, want the 404 and ErrNotAFeed reachable, not ErrNoLink", err)
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
				var fe *feed.Error
				if !errors.As(err, &fe) || len(fe.Links) != feed.DefaultMaxCandidates {
					t.Errorf("err = %v, want a *feed.Error of %d links", err, feed.DefaultMaxCandidates)
				}
			},
			wantPaths: []string{"origin.test /page", "origin.test /1", "origin.test /2", "origin.test /3"},
		},
		{
			name: "the caller's MaxCandidates",
			routes: func() map[string]http.Handler {
				return map[string]http.Handler{
					"origin.test/page": htmlPage(alt(rssType, "/1") + alt(rssType, "/2") + alt(rssType, "/3") + alt(rssType, "/4")),
					"origin.test/4":    fetchenv.Served(rssType, rssBody),
				}
			},
			path: "/page",
			opts: feed.Options{MaxCandidates: 4},
			want: func() feedView {
				return feedView{URL: u("origin.test", "/4"), Kind: fetch.KindRSS, PageURL: u("origin.test", "/page"),
					Link: lnk("origin.test", "/4", rssType, fetch.KindRSS),
					Alternates: []feed.Link{lnk("origin.test", "/1", rssType, fetch.KindRSS), lnk("origin.test", "/2", rssType, fetch.KindRSS),
						lnk("origin.test", "/3", rssType, fetch.KindRSS)}}
			},
			wantPaths: []string{"origin.test /page", "origin.test /1", "origin.test /2", "origin.test /3", "origin.test /4"},
		},
		{
			name: "a link refused by CheckURL is never fetched and falls back",
			routes: func() map[string]http.Handler {
				return map[string]http.Handler{
					"origin.test/page": htmlPage(alt(atomType, u("a.test", "/atom")) + alt(rssType, "/rss")),
					"origin.test/rss":  fetchenv.Served(rssType, rssBody),
				}
			},
			path: "/page",
			get: fetch.GetOptions{CheckURL: func(ctx context.Context, u *url.URL) error {
				if u.Hostname() == "a.test" {
					return errors.New("a.test is not allowed")
				}
				return nil
			}},
			want: func() feedView {
				return feedView{URL: u("origin.test", "/rss"), Kind: fetch.KindRSS, PageURL: u("origin.test", "/page"),
					Link:       lnk("origin.test", "/rss", rssType, fetch.KindRSS),
					Alternates: []feed.Link{lnk("a.test", "/atom", atomType, fetch.KindAtom)}}
			},
			wantPaths: []string{"origin.test /page", "origin.test /rss"},
		},
		{
			name: "malformed HTML",
			routes: func() map[string]http.Handler {
				return map[string]http.Handler{
					"origin.test/page": fetchenv.Served("text/html", `<html><HEAD><title>unclosed<LINK REL=Alternate TYPE=application/rss+xml HREF=/in-title></title>`+
						`<div><p><LINK rel='alternate' type='application/atom+xml' href='/atom'`+"\x00"+` <body><p>no closing tags`),
					"origin.test/atom": fetchenv.Served(atomType, fetchenv.AtomFeed),
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
			h := fetchenv.New(t, mux, fetchenv.Options{Fetch: fetch.Options{Pacer: fetchenv.NoPacer{}}})
			u = h.URL
			for pattern, handler := range tt.routes() {
				mux.Handle(pattern, handler)
			}
			get := tt.get
			get.Retries = fetch.None
			found, err := feed.Get(fetchenv.Ctx(t), h.Fetcher, h.URL("origin.test", tt.path), get, tt.opts)
			if tt.want != nil {
				if err != nil {
					t.Fatalf("Get: %v", err)
				}
				if diff := cmp.Diff(tt.want(), viewOf(found)); diff != "" {
					t.Errorf("feed (-want +got):\n%s", diff)
				}
				if body := fetchenv.ReadDoc(t, found.Document); body != fetchenv.AtomFeed && body != rssBody && body != jsonBody {
					t.Errorf("feed body = %q, want one of the feeds", body)
				}
			} else {
				if found != nil {
					t.Fatalf("Get returned %+v, want an error", viewOf(found))
				}
				tt.wantErr(t, err)
			}
			if diff := cmp.Diff(tt.wantPaths, seenPaths(h.Origin)); diff != "" {
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
	other := testenv.StartOrigin(t, fetchenv.Served("application/atom+xml", fetchenv.AtomFeed)) // same host name, another port
	tests := []struct {
		name     string
		page     func(h *fetchenv.Harness) http.Handler
		path     string
		feedAt   func(h *fetchenv.Harness) *testenv.Origin
		wantCred bool
	}{
		{name: "a feed on the page's origin", path: "/page",
			page: func(h *fetchenv.Harness) http.Handler { return htmlPage(alt("application/atom+xml", "/feed")) }, wantCred: true},
		{name: "a feed on another host", path: "/page",
			page: func(h *fetchenv.Harness) http.Handler {
				return htmlPage(alt("application/atom+xml", h.URL("a.test", "/feed")))
			}},
		{name: "a feed on another port", path: "/page",
			page: func(h *fetchenv.Harness) http.Handler {
				return htmlPage(alt("application/atom+xml", other.URLFor("origin.test", "/feed")))
			},
			feedAt: func(*fetchenv.Harness) *testenv.Origin { return other }},
		{name: "a base href on another origin", path: "/page",
			page: func(h *fetchenv.Harness) http.Handler {
				return htmlPage(`<base href="` + h.URL("a.test", "/") + `">` + alt("application/atom+xml", "feed"))
			}},
		{name: "a page redirected to another origin, its feed on that origin", path: "/moved",
			page: func(h *fetchenv.Harness) http.Handler { return htmlPage(alt("application/atom+xml", "/feed")) }},
		{name: "a page redirected to another origin, its feed back on the first", path: "/moved-back",
			page: func(h *fetchenv.Harness) http.Handler {
				return htmlPage(alt("application/atom+xml", h.URL("origin.test", "/feed")))
			}},
		{name: "a page redirected away and back, its feed on the first origin", path: "/away-and-back",
			page: func(h *fetchenv.Harness) http.Handler { return htmlPage(alt("application/atom+xml", "/feed")) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mux := http.NewServeMux()
			h := fetchenv.New(t, mux, fetchenv.Options{Fetch: fetch.Options{Pacer: fetchenv.NoPacer{}}})
			mux.Handle("/page", tt.page(h))
			mux.Handle("/moved", testenv.Redirect(http.StatusFound, h.URL("a.test", "/page")))
			mux.Handle("/moved-back", testenv.Redirect(http.StatusFound, h.URL("a.test", "/page")))
			mux.Handle("/away-and-back", testenv.Redirect(http.StatusFound, h.URL("a.test", "/back")))
			mux.Handle("/back", testenv.Redirect(http.StatusFound, h.URL("origin.test", "/page")))
			mux.Handle("/feed", fetchenv.Served("application/atom+xml", fetchenv.AtomFeed))
			before := other.Count()
			found, err := feed.Get(fetchenv.Ctx(t), h.Fetcher, h.URL("origin.test", tt.path), fetch.GetOptions{Headers: caller, Retries: fetch.None}, feed.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if found.Document.Kind != fetch.KindAtom {
				t.Fatalf("feed = %+v", viewOf(found))
			}
			seen := h.Origin.Requests()
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
		{name: "the default bound", want: feed.DefaultMaxPageBytes},
		{name: "a caller's bound", bound: 64 << 10, want: 64 << 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mux := http.NewServeMux()
			h := fetchenv.New(t, mux, fetchenv.Options{Fetch: fetch.Options{Pacer: fetchenv.NoPacer{}}})
			mux.Handle("/page", fetchenv.Served("text/html", "<html><head>"+alt("application/rss+xml", "/late")+
				"</head><body>"+filler+alt("application/atom+xml", "/past-the-bound")+"</body></html>"))
			mux.Handle("/late", fetchenv.Served("application/rss+xml", rssBody))
			mux.Handle("/past-the-bound", fetchenv.Served("application/atom+xml", fetchenv.AtomFeed))
			dst := &countingSink{Sink: memory.New(memory.Options{})}
			found, err := feed.Get(fetchenv.Ctx(t), h.Fetcher, h.URL("origin.test", "/page"), fetch.GetOptions{Sink: dst}, feed.Options{MaxPageBytes: tt.bound})
			if err != nil {
				t.Fatal(err)
			}
			// The atom link would win, had it been seen.
			if found.Document.URL != h.URL("origin.test", "/late") || len(found.Alternates) != 0 {
				t.Errorf("feed = %+v, want /late alone", viewOf(found))
			}
			if got := dst.read.Load(); got > tt.want {
				t.Errorf("read back %d bytes of the page, want at most %d", got, tt.want)
			}
			if got := seenPaths(h.Origin); len(got) != 2 {
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
	h := fetchenv.New(t, mux, fetchenv.Options{Fetch: fetch.Options{Pacer: fetchenv.NoPacer{}}})
	mux.Handle("/page", htmlPage(alt("application/rss+xml", "/1")+alt("application/rss+xml", "/2")))
	mux.Handle("/1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cancel()
		w.WriteHeader(http.StatusNotFound)
	}))
	_, err := feed.Get(ctx, h.Fetcher, h.URL("origin.test", "/page"), fetch.GetOptions{Retries: fetch.None}, feed.Options{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if diff := cmp.Diff([]string{"origin.test /page", "origin.test /1"}, seenPaths(h.Origin)); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}
