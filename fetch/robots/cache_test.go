package robots_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replicator-go/replicator/fetch/robots"
)

// agentSite is a robots.txt whose groups differ by agent, Crawl-delay
// included.
const agentSite = "User-agent: *\nDisallow: /private/\nCrawl-delay: 2\n\n" +
	"User-agent: FooBot\nDisallow: /x/\nCrawl-delay: 1\n\n" +
	"User-agent: SlowBot\nDisallow: /\nAllow: /slow/\nCrawl-delay: 10\n"

// loader serves body and counts the loads.
func loader(body string, loads *atomic.Int32) func(context.Context) (robots.Response, error) {
	return func(context.Context) (robots.Response, error) {
		loads.Add(1)
		return robots.Response{StatusCode: 200, Body: []byte(body)}, nil
	}
}

// TestCacheAnswersAnyAgent: one load of an origin's robots.txt answers
// every agent, each by its own group, its product token compared without
// case; an agent no group names gets the "*" group.
func TestCacheAnswersAnyAgent(t *testing.T) {
	c := robots.New(robots.Options{})
	var loads atomic.Int32
	now := func() time.Time { return time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) }
	for _, tt := range []struct {
		agent, path string
		want        robots.Decision
	}{
		{"FooBot/1.0 (+https://foo.example)", "/x/y", robots.Disallowed},
		{"foobot", "/private/y", robots.Allowed},
		{"FOOBOT", "/x/", robots.Disallowed},
		{"OtherBot/2", "/x/y", robots.Allowed},
		{"OtherBot/2", "/private/y", robots.Disallowed},
		{"", "/private/y", robots.Disallowed},
		{"slowbot", "/slow/a", robots.Allowed},
		{"SlowBot/3", "/x/y", robots.Disallowed},
	} {
		d, _, err := c.Check(context.Background(), "http://a.test", "a.test", tt.agent, tt.path, now, loader(agentSite, &loads))
		if err != nil || d != tt.want {
			t.Errorf("Check(%q, %q) = %v, %v; want %v", tt.agent, tt.path, d, err, tt.want)
		}
	}
	if n := loads.Load(); n != 1 {
		t.Errorf("robots.txt loaded %d times, want 1", n)
	}
}

// TestCacheCrawlDelayByAgent: the host's Crawl-delay is the largest of the
// groups of the agents that have asked since the file was loaded; a new
// load starts again from the agent that loads it.
func TestCacheCrawlDelayByAgent(t *testing.T) {
	c := robots.New(robots.Options{})
	var loads atomic.Int32
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { return at }
	for _, step := range []struct {
		agent string
		later time.Duration // how far the clock moves first
		want  time.Duration
	}{
		{agent: "FooBot/1.0", want: time.Second},
		{agent: "foobot", want: time.Second},
		{agent: "OtherBot", want: 2 * time.Second},
		{agent: "FooBot", want: 2 * time.Second},
		{agent: "SlowBot", want: 10 * time.Second},
		{agent: "AnotherBot", want: 10 * time.Second},
		{agent: "FooBot", later: robots.MaxTTL, want: time.Second},
	} {
		at = at.Add(step.later)
		if _, _, err := c.Check(context.Background(), "http://a.test", "a.test", step.agent, "/page", now, loader(agentSite, &loads)); err != nil {
			t.Fatal(err)
		}
		if d, ok := c.CrawlDelay("a.test"); !ok || d != step.want {
			t.Errorf("after %q: CrawlDelay = %v, %v; want %v", step.agent, d, ok, step.want)
		}
	}
	if n := loads.Load(); n != 2 {
		t.Errorf("robots.txt loaded %d times, want 2", n)
	}
}
