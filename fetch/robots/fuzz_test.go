package robots_test

import (
	"strings"
	"testing"

	"github.com/replicator-go/replicator/fetch/robots"
)

// FuzzParse feeds arbitrary robots.txt bodies and paths to the parser and
// matcher: nothing panics, /robots.txt is always allowed, a file with no
// rules allows everything, "disallow: /" for everyone refuses every other
// path, and only the agent's product token counts, without case: the
// token alone, upper-cased, or followed by a version, is answered alike.
func FuzzParse(f *testing.F) {
	f.Add([]byte("User-agent: *\nDisallow: /a*b$\nAllow: /a%62\nCrawl-delay: 2\n"), "FooBot", "/ab")
	f.Add([]byte("\xEF\xBBuser-agent FooBot\rdisallow /\r\n"), "foobot/1.0", "/x?y=%E3%83%84")
	f.Add([]byte("user-agent: a\nallow: /*$\n"), "a", "/$*")
	f.Fuzz(func(t *testing.T, body []byte, agent, path string) {
		r := robots.Parse(body)
		_ = r.Allowed(agent, path)
		r.CrawlDelay(agent)
		tok := robots.ProductToken(agent)
		for _, same := range []string{tok, strings.ToUpper(tok) + "/9.9 (+https://example.com)", strings.ToLower(tok) + " x"} {
			if r.Allowed(same, path) != r.Allowed(agent, path) {
				t.Fatalf("%q and %q judged %q differently", same, agent, path)
			}
			d1, ok1 := r.CrawlDelay(same)
			d2, ok2 := r.CrawlDelay(agent)
			if d1 != d2 || ok1 != ok2 {
				t.Fatalf("%q and %q have different Crawl-delays", same, agent)
			}
		}
		if !r.Allowed(agent, "/robots.txt") {
			t.Fatal("/robots.txt refused")
		}
		if !strings.ContainsAny(string(body), "lL") && !r.Allowed(agent, path) {
			t.Fatalf("a file with no allow or disallow line refused %q", path)
		}
		all := robots.Parse([]byte("user-agent: *\ndisallow: /\n" + "user-agent: " + robots.ProductToken(agent) + "\ndisallow: /\n"))
		if p := "/" + strings.TrimLeft(path, "/"); !strings.HasPrefix(p, "/robots.txt") && all.Allowed(agent, p) {
			t.Fatalf("disallow: / let %q through", p)
		}
	})
}
