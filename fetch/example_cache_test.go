package fetch_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"

	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/policy"
)

// With a cache, the second Get asks whether the feed changed; the origin
// answers 304 and the cached document comes back, marked NotModified.
func ExampleMemoryCache() {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Content-Type", "application/atom+xml")
		w.Header().Set("ETag", `"v1"`)
		fmt.Fprint(w, `<feed xmlns="http://www.w3.org/2005/Atom"/>`)
	}))
	defer origin.Close()

	f := fetch.New(fetch.Options{
		Guard: guard.New(guard.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}),
		Pacer: policy.NewLocal(policy.LocalOptions{DefaultInterval: policy.None}),
	})
	defer f.Close()

	// One cache per set of credentials: the key is the URL alone.
	cache := fetch.NewMemoryCache()
	for range 2 {
		doc, err := f.Get(context.Background(), origin.URL+"/feed.atom", fetch.GetOptions{Cache: cache})
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		fmt.Println(doc.StatusCode, doc.NotModified, doc.Kind, doc.ETag, doc.Blob.Size)
	}
	// Output:
	// 200 false atom "v1" 43
	// 304 true atom "v1" 43
}
