package feed

import (
	"io"
	"net/url"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"

	"github.com/replicator-go/replicator/fetch"
)

// Link is one feed a page advertises with <link rel="alternate">.
type Link struct {
	// URL is the link's href resolved against the page's base URL, its
	// fragment dropped: always an absolute http or https URL with a host.
	URL string
	// Type is the link's type attribute as a media type: lower-cased,
	// parameters dropped.
	Type string
	// Kind is the kind Type names; never fetch.KindHTML.
	Kind fetch.DocumentKind
	// Title is the link's title attribute, trimmed and cut to MaxTitle
	// bytes; "" when absent.
	Title string
}

// Bounds of the link extraction. A page is untrusted: whatever it holds,
// discovery keeps a bounded number of short strings.
const (
	// MaxLinks is the most feed links read from one page, after
	// duplicates are dropped; links past it are ignored.
	MaxLinks = 64
	// MaxTitle is the longest Link.Title kept, in bytes.
	MaxTitle = 256
)

// maxRawLinks bounds the links held before the page's base URL is known
// (it may come last): enough for MaxLinks distinct ones among duplicates
// and unusable hrefs.
const maxRawLinks = 16 * MaxLinks

// linkKind is the kind a link's media type names: the Content-Types
// fetch.DetectKind settles on alone, and application/rdf+xml, as RSS 1.0
// feeds are advertised.
func linkKind(mediaType string) (fetch.DocumentKind, bool) {
	if k := fetch.DetectKind(mediaType, nil); k != fetch.KindHTML {
		return k, true
	}
	if mediaType == "application/rdf+xml" {
		return fetch.KindRDF, true
	}
	return "", false
}

type rawLink struct {
	href, mediaType, title string
	kind                   fetch.DocumentKind
}

// feedLinks reads an HTML page from r with a tokenizer, so the page is
// never held whole, and returns its feed links in document order: <link>
// elements whose rel has the token alternate and whose type names a feed
// kind, each href resolved against the document's base URL, fragments
// dropped, duplicates and links back to the page itself dropped, at most
// MaxLinks. The base URL is the first <base href>'s, resolved against
// page, as browsers take it (wherever it stands, it applies to every
// link); page when there is none or it is unusable. Only http and https
// links with a host are kept. Malformed HTML is read as browsers read it;
// a read error ends the page there.
func feedLinks(r io.Reader, page *url.URL) []Link {
	z := html.NewTokenizer(r)
	var (
		raw      []rawLink
		baseHref string
		haveBase bool
	)
	for len(raw) < maxRawLinks || !haveBase {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		name, hasAttr := z.TagName()
		if !hasAttr {
			continue
		}
		switch string(name) {
		case "base":
			if haveBase {
				continue
			}
			if href, ok := tagAttrs(z)["href"]; ok {
				baseHref, haveBase = href, true
			}
		case "link":
			if len(raw) >= maxRawLinks {
				continue
			}
			attrs := tagAttrs(z)
			href, ok := attrs["href"]
			if !ok || !hasToken(attrs["rel"], "alternate") {
				continue
			}
			mt := fetch.MediaType(attrs["type"])
			kind, ok := linkKind(mt)
			if !ok {
				continue
			}
			raw = append(raw, rawLink{href: href, mediaType: mt, title: linkTitle(attrs["title"]), kind: kind})
		}
	}
	return resolveLinks(raw, page, baseHref, haveBase)
}

// tagAttrs returns the current tag's attributes of interest to discovery,
// the first of each name winning, as in a parsed document.
func tagAttrs(z *html.Tokenizer) map[string]string {
	attrs := make(map[string]string, 4)
	for more := true; more; {
		var key, val []byte
		key, val, more = z.TagAttr()
		switch k := string(key); k {
		case "href", "rel", "type", "title":
			if _, seen := attrs[k]; !seen {
				attrs[k] = string(val)
			}
		}
	}
	return attrs
}

// resolveLinks turns the raw links into Links against the document's base
// URL.
func resolveLinks(raw []rawLink, page *url.URL, baseHref string, haveBase bool) []Link {
	base := page
	if haveBase {
		// As browsers do, a base that does not parse, or is data: or
		// javascript:, leaves the page's URL as the base.
		if b, err := page.Parse(cleanHref(baseHref)); err == nil && b.Scheme != "data" && b.Scheme != "javascript" {
			base = b
		}
	}
	self := linkKey(page)
	seen := map[string]bool{self: true}
	var links []Link
	for _, l := range raw {
		href := cleanHref(l.href)
		if href == "" {
			continue // an empty href makes no link
		}
		u, err := base.Parse(href)
		if err != nil {
			continue
		}
		u.Fragment, u.RawFragment = "", ""
		if fetch.Fetchable(u) != nil {
			continue
		}
		// Resolving is looser than parsing: "//::0" resolves to a URL whose
		// text does not parse again, and a link is handed on as text.
		text := u.String()
		if _, err := url.Parse(text); err != nil {
			continue
		}
		if k := linkKey(u); !seen[k] {
			seen[k] = true
			links = append(links, Link{URL: text, Type: l.mediaType, Kind: l.kind, Title: l.title})
			if len(links) == MaxLinks {
				break
			}
		}
	}
	return links
}

// linkKey is a URL as duplicates are told apart: scheme and host are
// case-insensitive, the fragment never reaches the origin.
func linkKey(u *url.URL) string {
	k := *u
	k.Scheme, k.Host = strings.ToLower(k.Scheme), strings.ToLower(k.Host)
	k.Fragment, k.RawFragment = "", ""
	return k.String()
}

// cleanHref strips what the URL standard strips before parsing: leading
// and trailing C0 controls and spaces, and every tab and newline.
func cleanHref(s string) string {
	s = strings.TrimFunc(s, func(r rune) bool { return r <= 0x20 })
	if strings.ContainsAny(s, "\t\n\r") {
		s = strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(s)
	}
	return s
}

// hasToken reports whether a space-separated token list (rel) holds
// token, compared ASCII case-insensitively.
func hasToken(list, token string) bool {
	for _, t := range strings.FieldsFunc(list, isHTMLSpace) {
		if asciiEqualFold(t, token) {
			return true
		}
	}
	return false
}

// asciiEqualFold compares ASCII case-insensitively: unlike
// strings.EqualFold, no other letter folds onto an ASCII one.
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// isHTMLSpace is ASCII white space as HTML defines it.
func isHTMLSpace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\f' || r == '\r'
}

// linkTitle trims a title and cuts it to MaxTitle bytes on a character
// boundary.
func linkTitle(s string) string {
	s = strings.ToValidUTF8(strings.TrimFunc(s, isHTMLSpace), "\uFFFD")
	if len(s) <= MaxTitle {
		return s
	}
	cut := MaxTitle
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
