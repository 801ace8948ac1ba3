package testenv

// RobotsAgentCase is a robots.txt judged for the User-Agent a request
// sends: fetched as Agent, each Allowed path reaches the origin and no
// Disallowed one does. The cases are RFC 9309's section 5.1 example and the
// user-agent cases of Google's robots.txt parser tests (robots_test.cc),
// named after them, written here as a table of their own; one robots.txt
// becomes a case per agent it is judged for.
type RobotsAgentCase struct {
	Name                string
	Robots              string
	Agent               string // the User-Agent request header
	Allowed, Disallowed []string
}

// rfc9309Example is RFC 9309 section 5.1's robots.txt.
const rfc9309Example = "User-Agent: *\nDisallow: *.gif$\nDisallow: /example/\nAllow: /publications/\n\n" +
	"User-Agent: foobot\nDisallow:/\nAllow:/example/page.html\nAllow:/example/allowed.gif\n\n" +
	"User-Agent: barbot\nUser-Agent: bazbot\nDisallow: /example/page.html\n\n" +
	"User-Agent: quxbot\n\nEOF\n"

// googleGroups is ID_LineSyntax_Groups's robots.txt: groups merged per
// agent, rules outside any group ignored.
const googleGroups = "allow: /foo/bar/\n\nuser-agent: FooBot\ndisallow: /\nallow: /x/\n" +
	"user-agent: BarBot\ndisallow: /\nallow: /y/\n\n\nallow: /w/\nuser-agent: BazBot\n\n" +
	"user-agent: FooBot\nallow: /z/\ndisallow: /\n"

// googleGlobal is ID_GlobalGroups_Secondary's file with a "*" group.
const googleGlobal = "user-agent: *\nallow: /\nuser-agent: FooBot\ndisallow: /\n"

// RobotsAgentCases are every RobotsAgentCase.
var RobotsAgentCases = []RobotsAgentCase{
	// The two ways round of judging for an agent other than the one sent.
	{Name: "a FooBot rule binds FooBot/1.0", Robots: "User-agent: FooBot\nDisallow: /x/\n", Agent: "FooBot/1.0",
		Allowed: []string{"/y/x"}, Disallowed: []string{"/x/y"}},
	{Name: "RFC 9309 5.1 foobot", Robots: rfc9309Example, Agent: "foobot",
		Allowed: []string{"/example/page.html", "/example/allowed.gif"}, Disallowed: []string{"/publications/", "/"}},
	{Name: "RFC 9309 5.1 barbot", Robots: rfc9309Example, Agent: "barbot",
		Allowed: []string{"/example/other.html"}, Disallowed: []string{"/example/page.html"}},
	{Name: "RFC 9309 5.1 bazbot", Robots: rfc9309Example, Agent: "BazBot/2.0 (+https://baz.example)",
		Allowed: []string{"/a.gif"}, Disallowed: []string{"/example/page.html"}},
	{Name: "RFC 9309 5.1 quxbot", Robots: rfc9309Example, Agent: "quxbot",
		Allowed: []string{"/example/page.html", "/a.gif"}},
	{Name: "RFC 9309 5.1 another bot", Robots: rfc9309Example, Agent: "otherbot",
		Allowed: []string{"/publications/x", "/a.gifs"}, Disallowed: []string{"/a.gif", "/example/x"}},

	{Name: "ID_UserAgentValueCaseInsensitive upper Foo", Robots: "User-Agent: FOO BAR\nAllow: /x/\nDisallow: /\n", Agent: "Foo",
		Allowed: []string{"/x/y"}, Disallowed: []string{"/a/b"}},
	{Name: "ID_UserAgentValueCaseInsensitive upper foo", Robots: "User-Agent: FOO BAR\nAllow: /x/\nDisallow: /\n", Agent: "foo",
		Allowed: []string{"/x/y"}, Disallowed: []string{"/a/b"}},
	{Name: "ID_UserAgentValueCaseInsensitive lower Foo", Robots: "User-Agent: foo bar\nAllow: /x/\nDisallow: /\n", Agent: "Foo",
		Allowed: []string{"/x/y"}, Disallowed: []string{"/a/b"}},
	{Name: "ID_UserAgentValueCaseInsensitive lower foo", Robots: "User-Agent: foo bar\nAllow: /x/\nDisallow: /\n", Agent: "foo",
		Allowed: []string{"/x/y"}, Disallowed: []string{"/a/b"}},
	{Name: "ID_UserAgentValueCaseInsensitive camel Foo", Robots: "User-Agent: FoO bAr\nAllow: /x/\nDisallow: /\n", Agent: "Foo",
		Allowed: []string{"/x/y"}, Disallowed: []string{"/a/b"}},
	{Name: "ID_UserAgentValueCaseInsensitive camel foo", Robots: "User-Agent: FoO bAr\nAllow: /x/\nDisallow: /\n", Agent: "foo",
		Allowed: []string{"/x/y"}, Disallowed: []string{"/a/b"}},

	{Name: "ID_GlobalGroups_Secondary empty file", Robots: "", Agent: "FooBot",
		Allowed: []string{"/x/y"}},
	{Name: "ID_GlobalGroups_Secondary named group", Robots: googleGlobal, Agent: "FooBot",
		Disallowed: []string{"/x/y"}},
	{Name: "ID_GlobalGroups_Secondary * group", Robots: googleGlobal, Agent: "BarBot",
		Allowed: []string{"/x/y"}},
	{Name: "ID_GlobalGroups_Secondary no group", Agent: "QuxBot",
		Robots:  "user-agent: FooBot\nallow: /\nuser-agent: BarBot\ndisallow: /\nuser-agent: BazBot\ndisallow: /\n",
		Allowed: []string{"/x/y"}},

	{Name: "ID_LineSyntax_Groups FooBot", Robots: googleGroups, Agent: "FooBot",
		Allowed: []string{"/x/b", "/z/d"}, Disallowed: []string{"/y/c", "/foo/bar/"}},
	{Name: "ID_LineSyntax_Groups BarBot", Robots: googleGroups, Agent: "BarBot",
		Allowed: []string{"/y/c", "/w/a"}, Disallowed: []string{"/z/d", "/foo/bar/"}},
	{Name: "ID_LineSyntax_Groups BazBot", Robots: googleGroups, Agent: "BazBot",
		Allowed: []string{"/z/d"}, Disallowed: []string{"/foo/bar/"}},

	{Name: "ID_LongestMatch longer disallow", Robots: "user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/\n", Agent: "FooBot",
		Disallowed: []string{"/x/page.html"}},
	{Name: "ID_LongestMatch longer allow", Robots: "user-agent: FooBot\nallow: /x/page.html\ndisallow: /x/\n", Agent: "FooBot",
		Allowed: []string{"/x/page.html"}, Disallowed: []string{"/x/"}},
	{Name: "ID_LongestMatch empty rules", Robots: "user-agent: FooBot\ndisallow: \nallow: \n", Agent: "FooBot",
		Allowed: []string{"/x/page.html"}},
	{Name: "ID_LongestMatch equal /", Robots: "user-agent: FooBot\ndisallow: /\nallow: /\n", Agent: "FooBot",
		Allowed: []string{"/x/page.html"}},
	{Name: "ID_LongestMatch trailing slash", Robots: "user-agent: FooBot\ndisallow: /x\nallow: /x/\n", Agent: "FooBot",
		Allowed: []string{"/x/"}, Disallowed: []string{"/x"}},
	{Name: "ID_LongestMatch equal page", Robots: "user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/page.html\n", Agent: "FooBot",
		Allowed: []string{"/x/page.html"}},
	{Name: "ID_LongestMatch wildcard longer", Robots: "user-agent: FooBot\nallow: /page\ndisallow: /*.html\n", Agent: "FooBot",
		Allowed: []string{"/page"}, Disallowed: []string{"/page.html"}},
	{Name: "ID_LongestMatch literal longer", Robots: "user-agent: FooBot\nallow: /x/page.\ndisallow: /*.html\n", Agent: "FooBot",
		Allowed: []string{"/x/page.html"}, Disallowed: []string{"/x/y.html"}},
	{Name: "ID_LongestMatch named group over *", Robots: "User-agent: *\nDisallow: /x/\nUser-agent: FooBot\nDisallow: /y/\n", Agent: "FooBot",
		Allowed: []string{"/x/page"}, Disallowed: []string{"/y/page"}},
}
