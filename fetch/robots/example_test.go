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

// One parsed robots.txt answers every agent: each request is judged by the
// group of the User-Agent it sends, and the file is loaded once.
func ExampleCache_Check() {
	c := robots.New(robots.Options{})
	loads := 0
	load := func(context.Context) (robots.Response, error) {
		loads++
		return robots.Response{StatusCode: 200, Body: []byte("User-agent: FooBot\nDisallow: /x/\n")}, nil
	}
	for _, agent := range []string{"FooBot/1.0 (+https://foo.example)", "replicator-go/1.4"} {
		d, _, err := c.Check(context.Background(), "https://example.com", "example.com", agent, "/x/y", time.Now, load)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(robots.ProductToken(agent), d == robots.Allowed)
	}
	fmt.Println("loads:", loads)
	// Output:
	// FooBot false
	// replicator-go true
	// loads: 1
}
