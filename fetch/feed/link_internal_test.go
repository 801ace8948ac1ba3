package feed

import (
	"fmt"
	"io"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/internal/testenv/fetchenv"
)

const testPage = "https://blog.test/posts/hello?lang=en#top"

// link is a Link with only its URL and kind, the fields most rows
// check.
func link(u string, k fetch.DocumentKind) Link {
	return Link{URL: u, Type: map[fetch.DocumentKind]string{
		fetch.KindAtom: "application/atom+xml", fetch.KindRSS: "application/rss+xml", fetch.KindRDF: "application/rdf+xml",
		fetch.KindJSONFeed: "application/feed+json", fetch.KindNWF: "text/x-neurowire",
	}[k], Kind: k}
}

func TestFeedLinks(t *testing.T) {
	const (
		rss  = `type="application/rss+xml"`
		atom = `type="application/atom+xml"`
	)
	many := new(strings.Builder)
	for i := range MaxLinks + 10 {
		fmt.Fprintf(many, `<link rel=alternate %s href="/f/%d">`, rss, i)
	}
	var manyWant []Link
	for i := range MaxLinks {
		manyWant = append(manyWant, link(fmt.Sprintf("https://blog.test/f/%d", i), fetch.KindRSS))
	}
	tests := []struct {
		name string
		page string
		want []Link
	}{
		{name: "no links", page: `<html><head><title>t</title></head><body>hi</body></html>`},
		{name: "relative href", page: `<link rel="alternate" ` + rss + ` href="feed.xml">`,
			want: []Link{link("https://blog.test/posts/feed.xml", fetch.KindRSS)}},
		{name: "root-relative and scheme-relative hrefs", page: `<link rel=alternate ` + rss + ` href="/rss"><link rel=alternate ` + atom + ` href="//cdn.test/atom">`,
			want: []Link{link("https://blog.test/rss", fetch.KindRSS), link("https://cdn.test/atom", fetch.KindAtom)}},
		{name: "every feed type", page: `<link rel=alternate type="application/atom+xml" href=/a>` +
			`<link rel=alternate type="application/rss+xml" href=/r>` +
			`<link rel=alternate type="application/rdf+xml" href=/d>` +
			`<link rel=alternate type="application/feed+json" href=/j>` +
			`<link rel=alternate type="text/x-neurowire" href=/n>`,
			want: []Link{link("https://blog.test/a", fetch.KindAtom), link("https://blog.test/r", fetch.KindRSS), link("https://blog.test/d", fetch.KindRDF),
				link("https://blog.test/j", fetch.KindJSONFeed), link("https://blog.test/n", fetch.KindNWF)}},
		{name: "types that are not feeds", page: `<link rel=alternate type="application/json" href=/wp-json/post>` +
			`<link rel=alternate type="text/html" href=/fr/>` + `<link rel="alternate stylesheet" type="text/css" href=/dark.css>` +
			`<link rel=alternate href=/untyped>` + `<link rel=alternate type="" href=/blank>`},
		{name: "type with parameters and case", page: `<link rel=alternate type=" Application/RSS+XML; charset=utf-8" href=/r>`,
			want: []Link{link("https://blog.test/r", fetch.KindRSS)}},
		{name: "rel is a case-insensitive token list", page: `<link rel="feed ALTERNATE" ` + rss + ` href=/a>` +
			"<link rel=\"home\talternate\n\" " + rss + ` href=/b>` + `<link rel=alternates ` + rss + ` href=/c>` +
			`<link rel="alter nate" ` + rss + ` href=/d>` + `<link ` + rss + ` href=/e>` + `<link rel=alternate ` + rss + `>`,
			want: []Link{link("https://blog.test/a", fetch.KindRSS), link("https://blog.test/b", fetch.KindRSS)}},
		{name: "base href", page: `<head><base href="https://static.test/feeds/"><link rel=alternate ` + rss + ` href="main.xml"></head>`,
			want: []Link{link("https://static.test/feeds/main.xml", fetch.KindRSS)}},
		{name: "relative base href", page: `<base href="../archive/"><link rel=alternate ` + rss + ` href="rss">`,
			want: []Link{link("https://blog.test/archive/rss", fetch.KindRSS)}},
		{name: "base after the link still applies", page: `<link rel=alternate ` + rss + ` href="rss"><base href="https://static.test/">`,
			want: []Link{link("https://static.test/rss", fetch.KindRSS)}},
		{name: "the first base with an href wins", page: `<base target=_top><base href="https://one.test/"><base href="https://two.test/">` +
			`<link rel=alternate ` + rss + ` href="rss">`,
			want: []Link{link("https://one.test/rss", fetch.KindRSS)}},
		{name: "a javascript: base leaves the page's URL", page: `<base href="javascript:alert(1)"><link rel=alternate ` + rss + ` href="rss">`,
			want: []Link{link("https://blog.test/posts/rss", fetch.KindRSS)}},
		{name: "an unparseable base leaves the page's URL", page: `<base href="http://[::1/"><base href="https://two.test/"><link rel=alternate ` + rss + ` href="rss">`,
			want: []Link{link("https://blog.test/posts/rss", fetch.KindRSS)}},
		{name: "duplicates dropped, the first kept", page: `<link rel=alternate ` + rss + ` href="/feed">` +
			`<link rel=alternate ` + atom + ` href="https://BLOG.test/feed#x">` + `<link rel=alternate ` + rss + ` href="HTTPS://blog.test/feed">`,
			want: []Link{link("https://blog.test/feed", fetch.KindRSS)}},
		{name: "links back to the page dropped", page: `<link rel=alternate ` + rss + ` href="">` + `<link rel=alternate ` + rss + ` href="#comments">` +
			`<link rel=alternate ` + rss + ` href="?lang=en">` + `<link rel=alternate ` + rss + ` href="?lang=fr">`,
			want: []Link{link("https://blog.test/posts/hello?lang=fr", fetch.KindRSS)}},
		{name: "only http and https", page: `<link rel=alternate ` + rss + ` href="ftp://blog.test/rss">` +
			`<link rel=alternate ` + rss + ` href="javascript:alert(1)">` + `<link rel=alternate ` + rss + ` href="data:text/xml,<rss/>">` +
			`<link rel=alternate ` + rss + ` href="mailto:a@blog.test">` + `<link rel=alternate ` + rss + ` href="http:///nohost">` +
			`<link rel=alternate ` + rss + ` href="http://plain.test/rss">`,
			want: []Link{link("http://plain.test/rss", fetch.KindRSS)}},
		{name: "href white space stripped as URL parsing does", page: "<link rel=alternate " + rss + " href=\" \n/r\tss\n \">",
			want: []Link{link("https://blog.test/rss", fetch.KindRSS)}},
		{name: "entities in attributes", page: `<link rel=alternate ` + rss + ` href="/feed?a=1&amp;b=2" title="News &amp; notes">`,
			want: []Link{{URL: "https://blog.test/feed?a=1&b=2", Type: "application/rss+xml", Kind: fetch.KindRSS, Title: "News & notes"}}},
		{name: "title trimmed and bounded", page: `<link rel=alternate ` + rss + ` href="/a" title="  ` + strings.Repeat("é", MaxTitle) + ` ">`,
			want: []Link{{URL: "https://blog.test/a", Type: "application/rss+xml", Kind: fetch.KindRSS, Title: strings.Repeat("é", MaxTitle/2)}}},
		{name: "the first of a repeated attribute wins", page: `<link rel=alternate ` + rss + ` href="/first" href="/second" rel=stylesheet>`,
			want: []Link{link("https://blog.test/first", fetch.KindRSS)}},
		{name: "not links: script, style, comment, title, textarea", page: `<script>document.write('<link rel=alternate ` + rss + ` href=/s>')</script>` +
			`<style>/* <link rel=alternate ` + rss + ` href=/y> */</style><!-- <link rel=alternate ` + rss + ` href=/c> -->` +
			`<title><link rel=alternate ` + rss + ` href=/t></title><textarea><link rel=alternate ` + rss + ` href=/x></textarea>` +
			`<link rel=alternate ` + rss + ` href=/real>`,
			want: []Link{link("https://blog.test/real", fetch.KindRSS)}},
		{name: "malformed HTML", page: `<HTML><HEAD><LINK REL=ALTERNATE TYPE=APPLICATION/ATOM+XML HREF=/upper>` +
			`<link rel=alternate ` + rss + ` href=/self-closing/><p><div></span>` +
			`<link rel=alternate ` + rss + ` href='/single'` + `<body><link rel=alternate ` + rss + ` href=/in-body>` +
			`<link rel=alternate ` + rss + ` href="/unclosed`,
			want: []Link{link("https://blog.test/upper", fetch.KindAtom), link("https://blog.test/self-closing/", fetch.KindRSS),
				link("https://blog.test/single", fetch.KindRSS), link("https://blog.test/in-body", fetch.KindRSS)}},
		{name: "at most MaxLinks", page: many.String(), want: manyWant},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := feedLinks(strings.NewReader(tt.page), fetchenv.MustURL(t, testPage))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("feedLinks (-want +got):\n%s", diff)
			}
		})
	}
}

// endless is an HTML page that never ends: head, then comment text
// forever, which a tokenizer must buffer whole as one token.
type endless struct {
	head string
	read int64
}

func (e *endless) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		i := e.read
		switch {
		case i < int64(len(e.head)):
			p[n] = e.head[i]
		case i < int64(len(e.head))+4:
			p[n] = "<!--"[i-int64(len(e.head))]
		default:
			p[n] = 'x'
		}
		n++
		e.read++
	}
	return n, nil
}

// TestFeedLinksBounded checks the page is read through a bound, not
// whole: behind a LimitReader, an endless page is read up to the bound
// and no further, links before it are found, and memory stays within a
// small multiple of the bound.
func TestFeedLinksBounded(t *testing.T) {
	const bound = 1 << 20
	page := &endless{head: `<head><link rel=alternate type=application/rss+xml href=/rss>`}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got := feedLinks(io.LimitReader(page, bound), fetchenv.MustURL(t, testPage))
	runtime.ReadMemStats(&after)
	if diff := cmp.Diff([]Link{link("https://blog.test/rss", fetch.KindRSS)}, got); diff != "" {
		t.Errorf("feedLinks (-want +got):\n%s", diff)
	}
	if page.read != bound {
		t.Errorf("read %d bytes, want the bound, %d", page.read, bound)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8*bound {
		t.Errorf("allocated %d bytes reading a %d-byte bound", alloc, bound)
	}
}

// FuzzFeedLinks checks the extraction never panics and keeps its promises
// whatever the page: every link an absolute http(s) URL with a host and no
// fragment, no two alike, none the page itself, a feed kind, a short valid
// title, at most MaxLinks.
func FuzzFeedLinks(f *testing.F) {
	seeds := []string{
		`<link rel=alternate type=application/rss+xml href=feed.xml>`,                                                // relative
		`<base href="//cdn.test/a/"><link rel="Feed Alternate" type="application/atom+xml" href=x>`,                  // base, token list
		`<link rel=alternate type=application/rss+xml href="/f"><base href="../b/">`,                                 // base after the link
		`<link rel=alternate type=application/rss+xml href="  \t/r\nss#frag ">`,                                      // stripped characters, fragment
		`<link rel=alternate type=application/rss+xml href="http://[::1]:80/">`,                                      // IPv6 literal
		`<link rel=alternate type=application/rss+xml href="http://a b/">`,                                           // space in the host
		`<link rel=alternate type=application/rss+xml href="http://%41/">`,                                           // escaped host
		`<link rel=alternate type=application/rss+xml href="https://u:p@h.test/">`,                                   // userinfo
		`<base href="javascript:x"><link rel=alternate type=text/x-neurowire href="?q">`,                             // ignored base, query only
		`<script><link rel=alternate type=application/rss+xml href=/s></script>`,                                     // raw text
		`<link rel=alternate type=application/rss+xml href="/x" title="` + "\xff\xfe" + `">`,                         // invalid UTF-8 title
		`<link rel=alternate type=application/rss+xml href=/a><link rel=alternate type=application/rss+xml href=/a>`, // duplicate
		`<link rel=alternate type=application/feed+json href="HTTP://Blog.Test/posts/hello?lang=en">`,                // the page itself
		`<link rel=alternate type=application/rss+xml href="/unclosed`,                                               // cut short
		"\x00<link\x00rel=alternate type=application/rss+xml href=/nul>",                                             // NUL bytes
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	page := fetchenv.MustURL(f, testPage)
	f.Fuzz(func(t *testing.T, doc []byte) {
		links := feedLinks(strings.NewReader(string(doc)), page)
		if len(links) > MaxLinks {
			t.Fatalf("%d links, more than %d", len(links), MaxLinks)
		}
		seen := map[string]bool{linkKey(page): true}
		for _, l := range links {
			u, err := url.Parse(l.URL)
			if err != nil {
				t.Fatalf("link %q does not parse: %v", l.URL, err)
			}
			if (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.Opaque != "" || !u.IsAbs() {
				t.Fatalf("link %q is not an absolute http(s) URL with a host", l.URL)
			}
			if u.Fragment != "" || strings.Contains(l.URL, "#") {
				t.Fatalf("link %q keeps a fragment", l.URL)
			}
			if k := linkKey(u); seen[k] {
				t.Fatalf("link %q repeats another or the page", l.URL)
			} else {
				seen[k] = true
			}
			if _, ok := linkKind(l.Type); !ok || l.Kind == fetch.KindHTML || l.Kind == "" {
				t.Fatalf("link %q has type %q, kind %q", l.URL, l.Type, l.Kind)
			}
			if len(l.Title) > MaxTitle || !utf8.ValidString(l.Title) {
				t.Fatalf("link %q has a title of %d bytes, valid UTF-8 %v", l.URL, len(l.Title), utf8.ValidString(l.Title))
			}
		}
	})
}
