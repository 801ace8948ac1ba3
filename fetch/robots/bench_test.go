package robots_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/replicator-go/replicator/fetch/robots"
)

// benchFile is a robots.txt of the size large sites publish: 60 groups of
// two agents and ten rules each, then a "*" group.
func benchFile() []byte {
	var b strings.Builder
	for g := range 60 {
		fmt.Fprintf(&b, "User-agent: Bot%cA\nUser-agent: Bot%cB\n", 'a'+g%26, 'a'+g/26)
		for r := range 10 {
			fmt.Fprintf(&b, "Disallow: /g%d/r%d/*.html$\nAllow: /g%d/r%d/open\n", g, r, g, r)
		}
		b.WriteString("\n")
	}
	b.WriteString("User-agent: *\nDisallow: /private/\nAllow: /private/press\nCrawl-delay: 1\n")
	return []byte(b.String())
}

// benchAgents are User-Agents as requests send them: one naming a group
// near the end of the file, one falling to "*", the default.
var benchAgents = []string{"BotzB/2.0 (+https://example.com/bot)", "OtherBot/1.0", "replicator-go/1.4"}

// BenchmarkAllowed is the matcher's cost per URL judged, by agent.
func BenchmarkAllowed(b *testing.B) {
	r := robots.Parse(benchFile())
	for _, agent := range benchAgents {
		b.Run(robots.ProductToken(agent), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r.Allowed(agent, "/private/press/release-2026.html?id=42")
			}
		})
	}
}

// BenchmarkCacheCheck is the fetcher's per-hop cost with robots.txt known:
// agents alternating over one cached file.
func BenchmarkCacheCheck(b *testing.B) {
	c := robots.New(robots.Options{})
	body := benchFile()
	load := func(context.Context) (robots.Response, error) {
		return robots.Response{StatusCode: 200, Body: body}, nil
	}
	now := time.Now
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		agent := benchAgents[i%len(benchAgents)]
		i++
		if _, _, err := c.Check(ctx, "https://example.com", "example.com", agent, "/private/press/release-2026.html?id=42", now, load); err != nil {
			b.Fatal(err)
		}
	}
}
