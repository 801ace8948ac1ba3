package feed_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"

	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/fetch/feed"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/policy"
)

// A blog page advertises its feeds; Get reads the page, picks the
// preferred link (Atom before RSS by default), fetches it and checks it
// really is a feed. The feed lives on another origin, so the caller's
// authorization header, meant for the blog, does not go with it.
func ExampleGet() {
	feeds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("feed request carries authorization:", r.Header.Get("Authorization") != "")
		w.Header().Set("Content-Type", "application/atom+xml")
		fmt.Fprint(w, `<feed xmlns="http://www.w3.org/2005/Atom"><title>posts</title></feed>`)
	}))
	defer feeds.Close()
	blog := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!DOCTYPE html><html><head>
<link rel="alternate" type="application/rss+xml" title="Comments" href="/comments.rss">
<link rel="alternate" type="application/atom+xml" title="Posts" href="%s/posts.atom">
</head><body>…</body></html>`, feeds.URL)
	}))
	defer blog.Close()

	f := fetch.New(fetch.Options{
		Guard: guard.New(guard.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}),
		Pacer: policy.NewLocal(policy.LocalOptions{DefaultInterval: policy.None}),
	})
	defer f.Close()

	found, err := feed.Get(context.Background(), f, blog.URL+"/2026/11/hello.html", fetch.GetOptions{
		Headers: map[string]string{"authorization": "Bearer for-the-blog"},
	}, feed.Options{})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	u, _ := url.Parse(found.Document.URL)
	fmt.Println("feed:", u.Path, found.Document.Kind, found.Link.Title)
	for _, l := range found.Alternates {
		a, _ := url.Parse(l.URL)
		fmt.Println("also:", a.Path, l.Kind, l.Title)
	}
	// Output:
	// feed request carries authorization: false
	// feed: /posts.atom atom Posts
	// also: /comments.rss rss Comments
}
