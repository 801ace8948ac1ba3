package fetch

import (
	"context"
	"errors"
	"io"

	"github.com/replicator-go/replicator/sink"
)

// Document is one fetched document, as Fetcher.Get returns it: where it was
// found, what it says it is, and its body stored in a sink. Get never
// modifies a Document after returning it, so goroutines (and a Cache) may
// share one.
type Document struct {
	// URL is the final URL, after redirects. For a NotModified document it
	// is the URL the cached body came from.
	URL string
	// StatusCode is the final response's status: 200 or another 2xx, or 304
	// when NotModified.
	StatusCode int
	// ContentType is the response's Content-Type header, trimmed; "" when
	// absent.
	ContentType string
	// Kind is the document's kind by DetectKind, from ContentType and the
	// first SniffLen bytes of the body (seen as they streamed past, so
	// detection costs no extra read).
	Kind DocumentKind
	// Blob is the stored body. Read it with Open.
	Blob sink.Blob
	// ETag and LastModified are the response's validators, trimmed; ""
	// when absent.
	ETag         string
	LastModified string
	// NotModified is true when the origin answered 304 to a conditional
	// request and every field but StatusCode and Attempts comes from the
	// cached document.
	NotModified bool
	// Attempts is how many attempts this Get made, the last included.
	Attempts int
	// LeftOrigin is the fetch's Result.LeftOrigin: a redirect left the
	// origin asked for, so the body's links deserve no credentials either.
	LeftOrigin bool

	sink sink.Sink
}

// ErrNoBody is returned by Document.Open for a Document that has no sink
// behind it (one not made by Fetcher.Get).
var ErrNoBody = errors.New("fetch: document has no stored body")

// Open returns the document's body from the sink it was stored in. With a
// sink that reaps blobs (a TTL), a document kept longer than that, such as
// one held by a Cache, can report sink.ErrNotFound.
func (d *Document) Open(ctx context.Context) (io.ReadCloser, error) {
	if d.sink == nil {
		return nil, ErrNoBody
	}
	return d.sink.Open(ctx, d.Blob.Fingerprint)
}

// sniffSink is a sink that keeps the first SniffLen bytes of what it stores,
// so the kind can be detected without reading the blob back.
type sniffSink struct {
	sink.Sink
	head []byte
}

// Put forwards the options to the underlying sink, so wrapping it never
// loses the media type or the declared size.
func (s *sniffSink) Put(ctx context.Context, r io.Reader, opts sink.PutOptions) (sink.Blob, error) {
	return s.Sink.Put(ctx, &headReader{r: r, s: s}, opts)
}

// Room forwards the underlying sink's, if it has one, so wrapping it never
// hides a full store from Fetch.
func (s *sniffSink) Room(need int64) error {
	if r, ok := s.Sink.(sink.Room); ok {
		return r.Room(need)
	}
	return nil
}

type headReader struct {
	r io.Reader
	s *sniffSink
}

func (h *headReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	if room := SniffLen - len(h.s.head); room > 0 && n > 0 {
		h.s.head = append(h.s.head, p[:min(n, room)]...)
	}
	return n, err
}
