package fetch

import (
	"bytes"
	"encoding/json"
	"strings"
)

// DocumentKind classifies a fetched document before any parser runs; the
// zero value "" means not classified (DetectKind never returns it).
type DocumentKind string

// The kinds DetectKind tells apart.
const (
	// KindNWF is a Neurowire feed: text/x-neurowire, or an NWF1 first line.
	KindNWF DocumentKind = "nwf"
	// KindAtom is an Atom feed: application/atom+xml, or a <feed> root.
	KindAtom DocumentKind = "atom"
	// KindRSS is an RSS 0.9x/2.0 feed: application/rss+xml, or an <rss> root.
	KindRSS DocumentKind = "rss"
	// KindRDF is an RSS 1.0 feed: an rdf:RDF root.
	KindRDF DocumentKind = "rdf"
	// KindJSONFeed is a JSON Feed: application/feed+json, or a JSON object
	// naming jsonfeed.org or having a top-level "items" key.
	KindJSONFeed DocumentKind = "jsonfeed"
	// KindHTML is everything else: a page to look for feed links in.
	KindHTML DocumentKind = "html"
)

// SniffLen is the most of a body DetectKind looks at: feeds name themselves
// in their first bytes.
const SniffLen = 4 << 10

// kindByMediaType are the Content-Types that settle the kind on their own.
var kindByMediaType = map[string]DocumentKind{
	"text/x-neurowire":      KindNWF,
	"application/atom+xml":  KindAtom,
	"application/rss+xml":   KindRSS,
	"application/feed+json": KindJSONFeed,
}

// DetectKind classifies a document by its Content-Type header value and the
// start of its body; only the first SniffLen bytes of body are read.
//
// A Content-Type naming a feed type decides alone. Otherwise (many hosts
// serve feeds as text/plain, application/octet-stream or even text/html) the
// body decides, after a UTF-8 byte order mark, as each kind says: a first
// line "NWF1" (alone or followed by a space or tab), a JSON object, or an
// XML root element, with or without a namespace prefix, found by skipping
// white space, the XML declaration, processing instructions, comments and a
// doctype. Anything else is html.
//
// DetectKind is a pure function, safe for concurrent use.
func DetectKind(contentType string, body []byte) DocumentKind {
	if k, ok := kindByMediaType[MediaType(contentType)]; ok {
		return k
	}
	if len(body) > SniffLen {
		body = body[:SniffLen]
	}
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
	if isNWF(body) {
		return KindNWF
	}
	rest := bytes.TrimLeft(body, " \t\r\n")
	if len(rest) > 0 && rest[0] == '{' {
		if isJSONFeed(rest) {
			return KindJSONFeed
		}
		return KindHTML
	}
	switch string(xmlRoot(rest)) { // compared without allocating
	case "feed":
		return KindAtom
	case "rss":
		return KindRSS
	case "RDF":
		return KindRDF
	}
	return KindHTML
}

// isNWF reports whether the first line is the NWF1 signature.
func isNWF(b []byte) bool {
	rest, ok := bytes.CutPrefix(b, []byte("NWF1"))
	return ok && (len(rest) == 0 || strings.IndexByte(" \t\r\n", rest[0]) >= 0)
}

// isJSONFeed reads the top-level keys of a JSON object, stopping at the
// first sign of a feed. A body cut short at SniffLen simply ends the scan.
func isJSONFeed(b []byte) bool {
	if bytes.Contains(b, []byte("jsonfeed.org")) {
		return true
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return false
		}
		if key == "items" {
			return true
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return false
		}
	}
	return false
}

// xmlRoot returns the local name of the first element in b, skipping
// white space, processing instructions (the XML declaration among them),
// comments and a doctype. It returns nil when b holds no element start.
func xmlRoot(b []byte) []byte {
	for {
		b = bytes.TrimLeft(b, " \t\r\n")
		switch {
		case bytes.HasPrefix(b, []byte("<?")):
			b = after(b, "?>")
		case bytes.HasPrefix(b, []byte("<!--")):
			b = after(b[4:], "-->")
		case bytes.HasPrefix(b, []byte("<!")):
			b = afterDoctype(b)
		case bytes.HasPrefix(b, []byte("<")):
			return localName(b[1:])
		default:
			return nil
		}
		if b == nil {
			return nil
		}
	}
}

// after returns what follows the first end in b, or nil when there is none.
func after(b []byte, end string) []byte {
	_, rest, ok := bytes.Cut(b, []byte(end))
	if !ok {
		return nil
	}
	return rest
}

// afterDoctype skips a <!DOCTYPE …> declaration, internal subset included.
func afterDoctype(b []byte) []byte {
	depth := 0
	for i, c := range b {
		switch c {
		case '[':
			depth++
		case ']':
			depth--
		case '>':
			if depth <= 0 {
				return b[i+1:]
			}
		}
	}
	return nil
}

// localName reads an element name up to white space, '>' or '/', and
// drops a namespace prefix.
func localName(b []byte) []byte {
	end := bytes.IndexAny(b, " \t\r\n>/")
	if end < 0 {
		return nil
	}
	name := b[:end]
	if i := bytes.LastIndexByte(name, ':'); i >= 0 {
		name = name[i+1:]
	}
	return name
}
