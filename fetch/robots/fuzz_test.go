package robots_test

import (
	"strings"
	"testing"

	"github.com/replicator-go/replicator/fetch/robots"
)

// FuzzParse feeds arbitrary robots.txt bodies and paths to the parser and
// matcher: nothing panics, /robots.txt is always allowed, a file with no
// rules allows everything, and "disallow: /" for everyone refuses every
// other path.
func FuzzParse(f *testing.F) {
	f.Add([]byte("User-agent: *\nDisallow: /a*b$\nAllow: /a%62\nCrawl-delay: 2\n"), "FooBot", "/ab")
	f.Add([]byte("\xEF\xBBuser-agent FooBot\rdisallow /\r\n"), "foobot/1.0", "/x?y=%E3%83%84")
	f.Add([]byte("user-agent: a\nallow: /*$\n"), "a", "/$*")
	f.Fuzz(func(t *testing.T, body []byte, agent, path string) {
		r := robots.Parse(body)
		_ = r.Allowed(agent, path)
		r.CrawlDelay(agent)
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
