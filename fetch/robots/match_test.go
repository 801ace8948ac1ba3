package robots_test

import (
	"strings"
	"testing"
	"time"

	"github.com/replicator-go/replicator/fetch/robots"
)

// check is one question put to a robots.txt: may agent fetch path?
type check struct {
	agent, path string
	want        bool
}

// judge runs every check against body through Parse and Rules.Allowed.
func judge(t *testing.T, body string, checks []check) {
	t.Helper()
	r := robots.Parse([]byte(body))
	for _, c := range checks {
		if got := r.Allowed(c.agent, c.path); got != c.want {
			t.Errorf("%q: Allowed(%q, %q) = %v, want %v", body, c.agent, c.path, got, c.want)
		}
	}
}

// TestMatcherGoogleSuite carries the cases of Google's robots.txt parser
// test suite (robots_test.cc) over to this matcher, case by case. Where
// that suite and RFC 9309 part ways the RFC wins, and the case says so;
// Google's own extensions that the RFC does not ask for (index.html as a
// directory, the 16 KiB line cut) are left out.
func TestMatcherGoogleSuite(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		checks []check
	}{
		{name: "empty file allows everything", body: "",
			checks: []check{{"FooBot", "/", true}, {"", "/", true}}},
		{name: "no agent to match allows everything", body: "user-agent: FooBot\ndisallow: /\n",
			checks: []check{{"", "/", true}, {"FooBot", "/", false}}},
		{name: "key and value need a colon", body: "user-agent: FooBot\ndisallow: /\n",
			checks: []check{{"FooBot", "/x/y", false}}},
		{name: "unknown keys are no rules", body: "foo: FooBot\nbar: /\n",
			checks: []check{{"FooBot", "/x/y", true}}},
		{name: "a missing colon is forgiven between two words", body: "user-agent FooBot\ndisallow /\n",
			checks: []check{{"FooBot", "/x/y", false}}},
		{name: "groups, merged per agent, rules outside groups ignored",
			body: "allow: /foo/bar/\n\nuser-agent: FooBot\ndisallow: /\nallow: /x/\nuser-agent: BarBot\ndisallow: /\nallow: /y/\n\n\nallow: /w/\nuser-agent: BazBot\n\nuser-agent: FooBot\nallow: /z/\ndisallow: /\n",
			checks: []check{
				{"FooBot", "/x/b", true}, {"FooBot", "/z/d", true}, {"FooBot", "/y/c", false},
				{"BarBot", "/y/c", true}, {"BarBot", "/w/a", true}, {"BarBot", "/z/d", false},
				{"BazBot", "/z/d", true},
				{"FooBot", "/foo/bar/", false}, {"BarBot", "/foo/bar/", false}, {"BazBot", "/foo/bar/", false},
			}},
		{name: "a sitemap line does not close a group",
			body:   "User-agent: BarBot\nSitemap: https://foo.bar/sitemap\nUser-agent: *\nDisallow: /\n",
			checks: []check{{"FooBot", "/", false}, {"BarBot", "/", false}}},
		{name: "an unknown line does not close a group",
			body:   "User-agent: FooBot\nInvalid-Unknown-Line: unknown\nUser-agent: *\nDisallow: /\n",
			checks: []check{{"FooBot", "/", false}, {"BarBot", "/", false}}},
		{name: "a crawl-delay line does not close a group",
			body:   "User-agent: FooBot\nCrawl-delay: 10\nUser-agent: *\nDisallow: /\n",
			checks: []check{{"FooBot", "/", false}, {"BarBot", "/", false}}},
		{name: "key names in upper case", body: "USER-AGENT: FooBot\nALLOW: /x/\nDISALLOW: /\n",
			checks: []check{{"FooBot", "/x/y", true}, {"FooBot", "/a/b", false}}},
		{name: "key names in mixed case", body: "uSeR-aGeNt: FooBot\nAlLoW: /x/\ndIsAlLoW: /\n",
			checks: []check{{"FooBot", "/x/y", true}, {"FooBot", "/a/b", false}}},
		{name: "agent values compared without case, first word only",
			body: "User-Agent: FOO BAR\nAllow: /x/\nDisallow: /\n",
			checks: []check{
				{"Foo", "/x/y", true}, {"Foo", "/a/b", false},
				{"foo", "/x/y", true}, {"foo", "/a/b", false},
			}},
		{name: "agent value in lower case", body: "User-Agent: foo bar\nAllow: /x/\nDisallow: /\n",
			checks: []check{{"Foo", "/x/y", true}, {"FOO", "/a/b", false}}},
		{name: "the agent's product token is what is matched",
			body: "User-Agent: *\nDisallow: /\nUser-Agent: Foo Bar\nAllow: /x/\nDisallow: /\n",
			checks: []check{
				{"Foo", "/x/y", true},
				// The User-Agent "Foo Bar" sends the product token Foo.
				{"Foo Bar", "/x/y", true},
				{"Foo/2.1 (+https://foo.bar)", "/x/y", true},
				{"Qux", "/x/y", false},
			}},
		{name: "no named group: the * group", body: "user-agent: *\nallow: /\nuser-agent: FooBot\ndisallow: /\n",
			checks: []check{{"FooBot", "/x/y", false}, {"BarBot", "/x/y", true}}},
		{name: "no named group and no * group: nothing applies",
			body:   "user-agent: FooBot\nallow: /\nuser-agent: BarBot\ndisallow: /\nuser-agent: BazBot\ndisallow: /\n",
			checks: []check{{"QuxBot", "/x/y", true}}},
		{name: "paths are case-sensitive (lower)", body: "user-agent: FooBot\ndisallow: /x/\n",
			checks: []check{{"FooBot", "/x/y", false}}},
		{name: "paths are case-sensitive (upper)", body: "user-agent: FooBot\ndisallow: /X/\n",
			checks: []check{{"FooBot", "/x/y", true}}},
		{name: "longest match: disallow longer", body: "user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/\n",
			checks: []check{{"FooBot", "/x/page.html", false}}},
		{name: "longest match: allow longer", body: "user-agent: FooBot\nallow: /x/page.html\ndisallow: /x/\n",
			checks: []check{{"FooBot", "/x/page.html", true}, {"FooBot", "/x/", false}}},
		{name: "empty allow and disallow", body: "user-agent: FooBot\ndisallow: \nallow: \n",
			checks: []check{{"FooBot", "/x/page.html", true}}},
		{name: "equal patterns: allow wins", body: "user-agent: FooBot\ndisallow: /\nallow: /\n",
			checks: []check{{"FooBot", "/x/page.html", true}}},
		{name: "equal page patterns: allow wins", body: "user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/page.html\n",
			checks: []check{{"FooBot", "/x/page.html", true}}},
		{name: "trailing slash is longer", body: "user-agent: FooBot\ndisallow: /x\nallow: /x/\n",
			checks: []check{{"FooBot", "/x", false}, {"FooBot", "/x/", true}}},
		{name: "a wildcard pattern counts its own length", body: "user-agent: FooBot\nallow: /page\ndisallow: /*.html\n",
			checks: []check{{"FooBot", "/page.html", false}, {"FooBot", "/page", true}}},
		{name: "a longer literal beats a wildcard", body: "user-agent: FooBot\nallow: /x/page.\ndisallow: /*.html\n",
			checks: []check{{"FooBot", "/x/page.html", true}, {"FooBot", "/x/y.html", false}}},
		{name: "the named group replaces the * group", body: "User-agent: *\nDisallow: /x/\nUser-agent: FooBot\nDisallow: /y/\n",
			checks: []check{{"FooBot", "/x/page", true}, {"FooBot", "/y/page", false}}},
		{name: "query with a URL in it compared as written",
			body:   "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar?qux=taz&baz=http://foo.bar?tar&par\n",
			checks: []check{{"FooBot", "/foo/bar?qux=taz&baz=http://foo.bar?tar&par", true}}},
		{name: "a raw UTF-8 pattern is encoded", body: "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/ツ\n",
			checks: []check{
				{"FooBot", "/foo/bar/%E3%83%84", true},
				// Google's suite leaves a raw UTF-8 URL unencoded (and
				// unmatched); RFC 9309 encodes both sides.
				{"FooBot", "/foo/bar/ツ", true},
			}},
		{name: "an encoded pattern matches either spelling", body: "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%E3%83%84\n",
			checks: []check{{"FooBot", "/foo/bar/%E3%83%84", true}, {"FooBot", "/foo/bar/%e3%83%84", true}, {"FooBot", "/foo/bar/ツ", true}}},
		{name: "encoded unreserved characters are decoded",
			body: "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/%62%61%7A\n",
			checks: []check{
				// Google's suite says no match; RFC 9309 2.2.2 decodes
				// them first (its table: /foo/bar/%62%61%7A is /foo/bar/baz).
				{"FooBot", "/foo/bar/baz", true},
				{"FooBot", "/foo/bar/%62%61%7A", true},
			}},
		{name: "* matches any run", body: "User-agent: FooBot\nDisallow: /foo/bar/quz\nAllow: /foo/*/qux\n",
			checks: []check{
				{"FooBot", "/foo/bar/quz", false}, {"FooBot", "/foo/quz", true},
				{"FooBot", "/foo//quz", true}, {"FooBot", "/foo/bax/quz", true},
			}},
		{name: "$ ends the pattern", body: "User-agent: FooBot\nDisallow: /foo/bar$\nAllow: /foo/bar/qux\n",
			checks: []check{
				{"FooBot", "/foo/bar", false}, {"FooBot", "/foo/bar/qux", true},
				{"FooBot", "/foo/bar/", true}, {"FooBot", "/foo/bar/baz", true},
			}},
		{name: "# starts a comment", body: "User-agent: FooBot\n# Disallow: /\nDisallow: /foo/quz#qux\nAllow: /\n",
			checks: []check{{"FooBot", "/foo/bar", true}, {"FooBot", "/foo/quz", false}}},
		{name: "documentation: /fish", body: "user-agent: FooBot\ndisallow: /\nallow: /fish\n",
			checks: []check{
				{"FooBot", "/bar", false},
				{"FooBot", "/fish", true}, {"FooBot", "/fish.html", true}, {"FooBot", "/fish/salmon.html", true},
				{"FooBot", "/fishheads", true}, {"FooBot", "/fishheads/yummy.html", true}, {"FooBot", "/fish.html?id=anything", true},
				{"FooBot", "/Fish.asp", false}, {"FooBot", "/catfish", false}, {"FooBot", "/?id=fish", false},
			}},
		{name: "documentation: /fish* is /fish", body: "user-agent: FooBot\ndisallow: /\nallow: /fish*\n",
			checks: []check{
				{"FooBot", "/bar", false},
				{"FooBot", "/fish", true}, {"FooBot", "/fish.html", true}, {"FooBot", "/fish/salmon.html", true},
				{"FooBot", "/fishheads", true}, {"FooBot", "/fishheads/yummy.html", true}, {"FooBot", "/fish.html?id=anything", true},
				{"FooBot", "/Fish.bar", false}, {"FooBot", "/catfish", false}, {"FooBot", "/?id=fish", false},
			}},
		{name: "documentation: /fish/ is not /fish", body: "user-agent: FooBot\ndisallow: /\nallow: /fish/\n",
			checks: []check{
				{"FooBot", "/bar", false},
				{"FooBot", "/fish/", true}, {"FooBot", "/fish/salmon", true}, {"FooBot", "/fish/?salmon", true},
				{"FooBot", "/fish/salmon.html", true}, {"FooBot", "/fish/?id=anything", true},
				{"FooBot", "/fish", false}, {"FooBot", "/fish.html", false}, {"FooBot", "/Fish/Salmon.html", false},
			}},
		{name: "documentation: /*.php", body: "user-agent: FooBot\ndisallow: /\nallow: /*.php\n",
			checks: []check{
				{"FooBot", "/bar", false},
				{"FooBot", "/filename.php", true}, {"FooBot", "/folder/filename.php", true},
				{"FooBot", "/folder/filename.php?parameters", true}, {"FooBot", "//folder/any.php.file.html", true},
				{"FooBot", "/filename.php/", true}, {"FooBot", "/index?f=filename.php/", true},
				{"FooBot", "/php/", false}, {"FooBot", "/index?php", false}, {"FooBot", "/windows.PHP", false},
			}},
		{name: "documentation: /*.php$", body: "user-agent: FooBot\ndisallow: /\nallow: /*.php$\n",
			checks: []check{
				{"FooBot", "/bar", false},
				{"FooBot", "/filename.php", true}, {"FooBot", "/folder/filename.php", true},
				{"FooBot", "/filename.php?parameters", false}, {"FooBot", "/filename.php/", false},
				{"FooBot", "/filename.php5", false}, {"FooBot", "/php/", false}, {"FooBot", "/filename?php", false},
				{"FooBot", "/aaaphpaaa", false}, {"FooBot", "//windows.PHP", false},
			}},
		{name: "documentation: /fish*.php", body: "user-agent: FooBot\ndisallow: /\nallow: /fish*.php\n",
			checks: []check{
				{"FooBot", "/bar", false}, {"FooBot", "/fish.php", true},
				{"FooBot", "/fishheads/catfish.php?parameters", true}, {"FooBot", "/Fish.PHP", false},
			}},
		{name: "precedence: /p beats /", body: "user-agent: FooBot\nallow: /p\ndisallow: /\n",
			checks: []check{{"FooBot", "/page", true}}},
		{name: "precedence: equal /folder", body: "user-agent: FooBot\nallow: /folder\ndisallow: /folder\n",
			checks: []check{{"FooBot", "/folder/page", true}}},
		{name: "precedence: /*.htm beats /page", body: "user-agent: FooBot\nallow: /page\ndisallow: /*.htm\n",
			checks: []check{{"FooBot", "/page.htm", false}}},
		{name: "precedence: /$ only the root", body: "user-agent: FooBot\nallow: /$\ndisallow: /\n",
			checks: []check{{"FooBot", "/", true}, {"FooBot", "/page.html", false}}},
		{name: "LF line ends", body: "User-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\nDisallow: /\n",
			checks: []check{{"foo", "/some/path", true}, {"bar", "/x", false}, {"foo", "/x", true}}},
		{name: "CRLF line ends", body: "User-Agent: foo\r\nAllow: /some/path\r\nUser-Agent: bar\r\n\r\n\r\nDisallow: /\r\n",
			checks: []check{{"foo", "/some/path", true}, {"bar", "/x", false}, {"foo", "/x", true}}},
		{name: "CR line ends", body: "User-Agent: foo\rAllow: /some/path\rUser-Agent: bar\r\r\rDisallow: /\r",
			checks: []check{{"foo", "/some/path", true}, {"bar", "/x", false}, {"foo", "/x", true}}},
		{name: "no final line end", body: "User-Agent: foo\nAllow: /some/path\nUser-Agent: bar\n\n\nDisallow: /",
			checks: []check{{"bar", "/x", false}}},
		{name: "mixed line ends", body: "User-Agent: foo\nAllow: /some/path\r\nUser-Agent: bar\n\r\n\nDisallow: /",
			checks: []check{{"foo", "/some/path", true}, {"bar", "/x", false}}},
		{name: "a whole BOM is skipped", body: "\xEF\xBB\xBFUser-Agent: foo\nDisallow: /AnyValue\n",
			checks: []check{{"foo", "/AnyValue", false}}},
		{name: "two bytes of a BOM are skipped", body: "\xEF\xBBUser-Agent: foo\nDisallow: /AnyValue\n",
			checks: []check{{"foo", "/AnyValue", false}}},
		{name: "one byte of a BOM is skipped", body: "\xEFUser-Agent: foo\nDisallow: /AnyValue\n",
			checks: []check{{"foo", "/AnyValue", false}}},
		{name: "a broken BOM spoils the first line", body: "\xEF\x11\xBFUser-Agent: foo\nDisallow: /AnyValue\n",
			checks: []check{{"foo", "/AnyValue", true}}},
		{name: "a BOM later on spoils its line", body: "User-Agent: foo\n\xEF\xBB\xBFDisallow: /AnyValue\n",
			checks: []check{{"foo", "/AnyValue", true}}},
		{name: "/robots.txt is always allowed", body: "user-agent: FooBot\ndisallow: /\ndisallow: /robots.txt\n",
			checks: []check{{"FooBot", "/robots.txt", true}, {"FooBot", "/robots.txt?x=1", true}, {"FooBot", "/robots.txt/x", false}}},
		{name: "a literal * or $ in a URL is named encoded", body: "user-agent: FooBot\ndisallow: /a%2Ab\ndisallow: /c%24\n",
			checks: []check{{"FooBot", "/a*b", false}, {"FooBot", "/a%2Ab", false}, {"FooBot", "/axb", true}, {"FooBot", "/c$", false}, {"FooBot", "/c", true}}},
		{name: "misspelt keys", body: "useragent: FooBot\ndisalow: /a\nuser agent: BarBot\ndissallow: /b\n",
			checks: []check{{"FooBot", "/a", false}, {"BarBot", "/b", false}, {"BarBot", "/a", true}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { judge(t, tt.body, tt.checks) })
	}
}

// TestMatcherRFCExamples checks RFC 9309 section 5's examples.
func TestMatcherRFCExamples(t *testing.T) {
	simple := "User-Agent: *\nDisallow: *.gif$\nDisallow: /example/\nAllow: /publications/\n\n" +
		"User-Agent: foobot\nDisallow:/\nAllow:/example/page.html\nAllow:/example/allowed.gif\n\n" +
		"User-Agent: barbot\nUser-Agent: bazbot\nDisallow: /example/page.html\n\n" +
		"User-Agent: quxbot\n\nEOF\n"
	judge(t, simple, []check{
		{"foobot", "/example/page.html", true},
		{"foobot", "/example/allowed.gif", true},
		{"foobot", "/publications/", false},
		{"foobot", "/", false},
		{"barbot", "/example/page.html", false},
		{"bazbot", "/example/page.html", false},
		{"barbot", "/example/other.html", true},
		{"quxbot", "/example/page.html", true},
		{"quxbot", "/a.gif", true},
		{"otherbot", "/a.gif", false},
		{"otherbot", "/example/x", false},
		{"otherbot", "/publications/x", true},
		{"otherbot", "/a.gifs", true},
	})
	judge(t, "User-Agent: foobot\nAllow: /example/page/\nDisallow: /example/page/disallowed.gif\n", []check{
		{"foobot", "/example/page/disallowed.gif", false},
		{"foobot", "/example/page/allowed.gif", true},
	})
}

// TestCrawlDelay: the chosen group's Crawl-delay, fractions allowed,
// nonsense ignored, several groups giving the largest.
func TestCrawlDelay(t *testing.T) {
	tests := []struct {
		body, agent string
		want        time.Duration
		ok          bool
	}{
		{"User-agent: *\nCrawl-delay: 10\nDisallow: /private/\n", "Googlebot", 10 * time.Second, true},
		{"User-agent: *\nCrawl-delay: 0.5\n", "Googlebot", 500 * time.Millisecond, true},
		{"User-agent: *\nCrawl-delay: 10\n\nUser-agent: FooBot\nCrawl-delay: 5\n", "FooBot", 5 * time.Second, true},
		{"User-agent: *\nDisallow: /private/\n", "Googlebot", 0, false},
		{"User-agent: *\ncrawldelay: 3\n", "Googlebot", 3 * time.Second, true},
		{"User-agent: *\nCrawl-delay: invalid\n", "Googlebot", 0, false},
		{"User-agent: *\nCrawl-delay: -5\n", "Googlebot", 0, false},
		{"User-agent: FooBot\nCrawl-delay: 2\nDisallow: /a\nUser-agent: FooBot\nCrawl-delay: 7\n", "foobot", 7 * time.Second, true},
		{"Crawl-delay: 9\nUser-agent: *\n", "FooBot", 0, false},
	}
	for _, tt := range tests {
		d, ok := robots.Parse([]byte(tt.body)).CrawlDelay(tt.agent)
		if d != tt.want || ok != tt.ok {
			t.Errorf("%q: CrawlDelay(%q) = %v, %v; want %v, %v", tt.body, tt.agent, d, ok, tt.want, tt.ok)
		}
	}
}

// TestProductToken: the product token is the leading run RFC 9309 2.2.1
// allows.
func TestProductToken(t *testing.T) {
	for ua, want := range map[string]string{
		"replicator/1.0 (+https://example.com/bot)": "replicator",
		"Foo_Bar-Baz":              "Foo_Bar-Baz",
		"Foobot Bar":               "Foobot",
		"ツ":                        "",
		"":                         "",
		"Foobot*":                  "Foobot",
		" Foobot ":                 "Foobot",
		"Mozilla/5.0 (compatible)": "Mozilla",
	} {
		if got := robots.ProductToken(ua); got != want {
			t.Errorf("ProductToken(%q) = %q, want %q", ua, got, want)
		}
	}
}

// TestMatchWorstCase: hostile patterns stay polynomial.
func TestMatchWorstCase(t *testing.T) {
	body := "user-agent: *\ndisallow: /" + strings.Repeat("*a", 2000) + "b\n"
	path := "/" + strings.Repeat("a", 4000)
	if !robots.Parse([]byte(body)).Allowed("x", path) {
		t.Error("a pattern ending in b matched a path of a's")
	}
}
