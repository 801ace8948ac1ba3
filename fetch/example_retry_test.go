package fetch_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/policy"
)

// A flaky origin fails its first request; Get retries and returns the
// document, its kind detected from the body.
func ExampleFetcher_Get() {
	var calls atomic.Int32
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			http.Error(w, "try again", http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "text/plain") // a feed served as plain text
		fmt.Fprint(w, `<?xml version="1.0"?><rss version="2.0"><channel/></rss>`)
	}))
	defer origin.Close()

	f := fetch.New(fetch.Options{
		// The origin is on loopback, which the guard refuses unless allowed.
		Guard: guard.New(guard.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}),
		Pacer: policy.NewLocal(policy.LocalOptions{DefaultInterval: policy.None}),
	})
	defer f.Close()

	doc, err := f.Get(context.Background(), origin.URL+"/feed", fetch.GetOptions{
		Retries: 3,
		Backoff: 10 * time.Millisecond,
		Timeout: 5 * time.Second,
	})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	body, _ := doc.Open(context.Background())
	defer body.Close()
	b, _ := io.ReadAll(body)
	fmt.Println("attempts:", doc.Attempts)
	fmt.Println("kind:", doc.Kind)
	fmt.Println("bytes:", len(b), doc.Blob.Size)
	// Output:
	// attempts: 2
	// kind: rss
	// bytes: 56 56
}
