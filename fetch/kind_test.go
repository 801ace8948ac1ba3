package fetch_test

import (
	"strings"
	"testing"

	"github.com/replicator-go/replicator/fetch"
)

func TestDetectKind(t *testing.T) {
	const (
		atom = `<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title></feed>`
		rss  = `<rss version="2.0"><channel><title>t</title></channel></rss>`
		rdf  = `<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/"><channel/></rdf:RDF>`
		json = `{"version": "https://jsonfeed.org/version/1.1", "title": "t", "items": []}`
		page = `<!DOCTYPE html><html><head><title>t</title></head><body>hi</body></html>`
	)
	tests := []struct {
		name        string
		contentType string
		body        string
		want        fetch.DocumentKind
	}{
		// The Content-Type decides alone when it names a feed type.
		{name: "text/x-neurowire", contentType: "text/x-neurowire", body: "anything", want: fetch.KindNWF},
		{name: "application/atom+xml", contentType: "application/atom+xml", body: rss, want: fetch.KindAtom},
		{name: "application/rss+xml", contentType: "application/rss+xml", body: "", want: fetch.KindRSS},
		{name: "application/feed+json", contentType: "application/feed+json", body: "{}", want: fetch.KindJSONFeed},
		{name: "content type with parameters and case", contentType: "Application/RSS+XML; charset=UTF-8", body: page, want: fetch.KindRSS},

		// Otherwise the body decides.
		{name: "NWF1 first line", contentType: "text/plain", body: "NWF1\nsource: x\n", want: fetch.KindNWF},
		{name: "NWF1 with CRLF", contentType: "application/octet-stream", body: "NWF1\r\nsource: x\r\n", want: fetch.KindNWF},
		{name: "NWF1 followed by a space", contentType: "", body: "NWF1 2026-11-30\n", want: fetch.KindNWF},
		{name: "NWF1 alone", contentType: "", body: "NWF1", want: fetch.KindNWF},
		{name: "NWF1 after a BOM", contentType: "text/plain", body: "\ufeffNWF1\n", want: fetch.KindNWF},
		{name: "NWF10 is not NWF1", contentType: "text/plain", body: "NWF10\n", want: fetch.KindHTML},
		{name: "NWF1 not on the first line", contentType: "text/plain", body: "hello\nNWF1\n", want: fetch.KindHTML},

		{name: "feed root as text/plain", contentType: "text/plain", body: atom, want: fetch.KindAtom},
		{name: "feed root as octet-stream", contentType: "application/octet-stream", body: atom, want: fetch.KindAtom},
		{name: "feed root as text/xml after a declaration", contentType: "text/xml", body: `<?xml version="1.0" encoding="utf-8"?>` + "\n" + atom, want: fetch.KindAtom},
		{name: "feed root with a namespace prefix", contentType: "application/xml", body: `<atom:feed xmlns:atom="http://www.w3.org/2005/Atom"/>`, want: fetch.KindAtom},
		{name: "empty feed root", contentType: "", body: `<feed/>`, want: fetch.KindAtom},
		{name: "rss root as text/plain", contentType: "text/plain", body: rss, want: fetch.KindRSS},
		{name: "rss root as octet-stream", contentType: "application/octet-stream", body: rss, want: fetch.KindRSS},
		{name: "rss root served as text/html", contentType: "text/html", body: rss, want: fetch.KindRSS},
		{name: "rss root after BOM, space, declaration, stylesheet, comment and doctype", contentType: "application/xml",
			body: "\ufeff \r\n<?xml version=\"1.0\"?>\n<?xml-stylesheet href=\"s.xsl\" type=\"text/xsl\"?>\n<!-- <feed> in a comment -->\n" +
				"<!DOCTYPE rss [<!ENTITY a \"<feed>\">]>\n" + rss, want: fetch.KindRSS},
		{name: "rdf:RDF root", contentType: "application/rdf+xml", body: rdf, want: fetch.KindRDF},
		{name: "rdf:RDF root as text/plain after a declaration", contentType: "text/plain", body: `<?xml version="1.0"?>` + rdf, want: fetch.KindRDF},
		{name: "rdf:RDF root as octet-stream", contentType: "application/octet-stream", body: rdf, want: fetch.KindRDF},

		{name: "JSON naming jsonfeed.org as application/json", contentType: "application/json", body: json, want: fetch.KindJSONFeed},
		{name: "JSON naming jsonfeed.org as text/plain", contentType: "text/plain", body: json, want: fetch.KindJSONFeed},
		{name: "JSON with items as octet-stream", contentType: "application/octet-stream", body: `{"title": "t", "items": [{"id": "1"}]}`, want: fetch.KindJSONFeed},
		{name: "JSON with items after nested objects", contentType: "application/json", body: `{"meta": {"items": 1}, "items": []}`, want: fetch.KindJSONFeed},
		{name: "JSON with items after a BOM and space", contentType: "", body: "\ufeff\n  {\"items\": []}", want: fetch.KindJSONFeed},
		{name: "JSON items cut short by the sniff bound", contentType: "application/json", body: `{"items": [` + strings.Repeat(`"x",`, 2000), want: fetch.KindJSONFeed},
		{name: "JSON with items only nested", contentType: "application/json", body: `{"data": {"items": []}}`, want: fetch.KindHTML},
		{name: "JSON without feed signs", contentType: "application/json", body: `{"hello": "world"}`, want: fetch.KindHTML},
		{name: "JSON array", contentType: "application/json", body: `[{"items": []}]`, want: fetch.KindHTML},
		{name: "broken JSON", contentType: "application/json", body: `{items: []}`, want: fetch.KindHTML},

		// Everything else is html.
		{name: "html page", contentType: "text/html; charset=utf-8", body: page, want: fetch.KindHTML},
		{name: "html page as text/plain", contentType: "text/plain", body: page, want: fetch.KindHTML},
		{name: "plain text", contentType: "text/plain", body: "just words", want: fetch.KindHTML},
		{name: "empty body", contentType: "", body: "", want: fetch.KindHTML},
		{name: "unclosed comment", contentType: "text/xml", body: "<!-- <rss>", want: fetch.KindHTML},
		{name: "unclosed declaration", contentType: "text/xml", body: "<?xml <rss>", want: fetch.KindHTML},
		{name: "feed-like name", contentType: "text/xml", body: "<feeds/>", want: fetch.KindHTML},
		{name: "other XML root", contentType: "application/xml", body: `<?xml version="1.0"?><opml version="2.0"/>`, want: fetch.KindHTML},
		{name: "root past the sniff bound", contentType: "text/xml", body: "<!--" + strings.Repeat("x", fetch.SniffLen) + "-->" + rss, want: fetch.KindHTML},
		{name: "unparseable content type", contentType: ";;;", body: rss, want: fetch.KindRSS},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fetch.DetectKind(tt.contentType, []byte(tt.body)); got != tt.want {
				t.Errorf("DetectKind(%q, %.40q) = %q, want %q", tt.contentType, tt.body, got, tt.want)
			}
		})
	}
}

// FuzzDetectKind checks DetectKind never panics and always answers a kind.
func FuzzDetectKind(f *testing.F) {
	seeds := []struct{ contentType, body string }{
		{"text/plain", "NWF1\n"},                                          // signature line
		{"", "\ufeff<?xml version=\"1.0\"?><rss/>"},                       // BOM and declaration
		{"text/xml", "<!DOCTYPE x [<!ENTITY a \"]>\">]><feed/>"},          // bracket inside the subset
		{"application/json", `{"items": [`},                               // cut short
		{"application/octet-stream", "<!-- never closed"},                 // unclosed comment
		{"text/html", "<"},                                                // lone angle bracket
		{"application/rss+xml; charset=\"", ""},                           // broken parameter
		{"", `{"a": {"b": [1, 2, {"c": "jsonfeed"}]}, "items": null}`},    // nesting before items
		{"", "\xef\xbb\xbf\xef\xbb\xbf<rss/>"},                            // two BOMs
		{"", "<rdf:RDF\txmlns:rdf=\"http://www.w3.org/1999/02/22-rdf\">"}, // tab after the name
	}
	for _, s := range seeds {
		f.Add(s.contentType, []byte(s.body))
	}
	valid := map[fetch.DocumentKind]bool{
		fetch.KindNWF: true, fetch.KindAtom: true, fetch.KindRSS: true, fetch.KindRDF: true,
		fetch.KindJSONFeed: true, fetch.KindHTML: true,
	}
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		got := fetch.DetectKind(contentType, body)
		if !valid[got] {
			t.Fatalf("DetectKind(%q, %q) = %q", contentType, body, got)
		}
		if len(body) > fetch.SniffLen {
			if again := fetch.DetectKind(contentType, body[:fetch.SniffLen]); again != got {
				t.Fatalf("the bytes past SniffLen changed the kind: %q, then %q", got, again)
			}
		}
	})
}

// BenchmarkDetectKind shows the cost is bounded by SniffLen, not the body:
// a feed named by its root and a 1 MiB page cost about the same.
func BenchmarkDetectKind(b *testing.B) {
	page := []byte("<!DOCTYPE html><html><body>" + strings.Repeat("<p>words</p>", 1<<16) + "</body></html>")
	bodies := []struct {
		name        string
		contentType string
		body        []byte
	}{
		{name: "content type", contentType: "application/atom+xml", body: page},
		{name: "rss root", contentType: "text/plain", body: []byte(`<?xml version="1.0"?><rss version="2.0"><channel/></rss>`)},
		{name: "json feed", contentType: "application/json", body: []byte(`{"title": "t", "home_page_url": "https://a.test/", "items": []}`)},
		{name: "1 MiB page", contentType: "text/html", body: page},
	}
	for _, bb := range bodies {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				fetch.DetectKind(bb.contentType, bb.body)
			}
		})
	}
}
