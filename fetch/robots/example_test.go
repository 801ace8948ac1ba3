package robots_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/fetch/robots"
	"github.com/replicator-go/replicator/policy"
)

func ExampleParse() {
	r := robots.Parse([]byte(`User-agent: *
Disallow: /private/
Allow: /private/press-kit
Crawl-delay: 2

User-agent: replicator-go
Disallow: /drafts$
`))
	ua := "replicator-go/1.4 (+https://example.com/bot)"
	fmt.Println(r.Allowed(ua, "/private/x"))  // no rule of its group matches
	fmt.Println(r.Allowed(ua, "/drafts"))     // "$" anchors the end
	fmt.Println(r.Allowed(ua, "/drafts?x=1")) // so this is not matched
	fmt.Println(r.Allowed("otherbot", "/private/press-kit.zip"))
	fmt.Println(r.CrawlDelay("otherbot"))
	// Output:
	// true
	// false
	// true
	// true
	// 2s true
}

// A Fetcher that obeys robots.txt: the Cache judges every hop, and its
// Crawl-delays reach the pacer as floors. Without a Pacer of its own the
// Fetcher wires that itself.
func ExampleCache() {
	cache := robots.New(robots.Options{MaxCrawlDelay: 30 * time.Second})
	pacer := policy.NewLocal(policy.LocalOptions{Floors: cache.Floors(nil, 0)})
	f := fetch.New(fetch.Options{Robots: cache, Pacer: pacer})
	defer f.Close()
	_, err := f.Get(context.Background(), "https://example.com/page", fetch.GetOptions{})
	if errors.Is(err, fetch.ErrRobotsDisallowed) {
		fmt.Println("robots.txt says no")
	}
}
