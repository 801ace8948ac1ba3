package fetch

import (
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/sink"
)

// MaxPassthroughLength bounds a response header value copied onto a fact,
// in characters (code points), not bytes. A longer
// value is dropped, never truncated: a truncated ETag is a validator that
// can never match.
const MaxPassthroughLength = 1024

// MaxDetailLength bounds a fetch_failed detail, in bytes.
const MaxDetailLength = envelope.MaxDetailLength

// MediaType normalizes a Content-Type header value for blob_available: the
// part before ';', stripped of surrounding white space and lower-cased;
// sink.DefaultMediaType when absent, blank or parameter-only. Parameters never
// matter, however long. The value is read as Passthrough reads it.
func MediaType(contentType string) string {
	return mediaType(headerText(contentType, !utf8.ValidString(contentType)))
}

func mediaType(text string) string {
	mt, _, _ := strings.Cut(text, ";")
	mt = strings.ToLower(strings.TrimFunc(mt, isPySpace))
	// media_type has no null to fall back to, so an absurd type would ride
	// the broadcast stream whole; no real one comes near this bound.
	if mt == "" || utf8.RuneCountInString(mt) > MaxPassthroughLength {
		return sink.DefaultMediaType
	}
	return mt
}

// Passthrough is a response header value as a fact carries it: surrounding
// white space stripped and nothing else touched; nil when blank or longer
// than MaxPassthroughLength characters. It is the whole rule for
// content_type_raw.
//
// The value is read as UTF-8 when its bytes are valid UTF-8, otherwise as
// ISO-8859-1, each byte one character, so the result is always valid UTF-8
// and "caf\xe9" becomes "café"; white space is Unicode's and \x1c-\x1f
// (docs/streams.md, blob_available).
func Passthrough(value string) *string {
	// As the Python worker's httpx reads header values, and its str.strip
	// trims them; httpx decides the encoding once per response, and
	// blob_available is built that way.
	return passthrough(headerText(value, !utf8.ValidString(value)))
}

func passthrough(text string) *string {
	v := strings.TrimFunc(text, isPySpace)
	if v == "" || utf8.RuneCountInString(v) > MaxPassthroughLength {
		return nil
	}
	return &v
}

// Replayable is Passthrough for a validator (etag, last_modified): also nil
// when any byte of the value it would publish is outside \x20-\x7e, so an
// issuer replaying a published validator never has its command refused.
func Replayable(value string) *string {
	return replayable(value, false)
}

// replayable is Replayable for a value from a response whose headers read
// as ISO-8859-1 (latin1) or as UTF-8. A value that is not valid UTF-8 is nil
// outright. The reference would decode it as ISO-8859-1 and strip a
// no-break space (\xa0) or NEL (\x85) byte at its ends, publishing the
// rest; we keep the byte rule of docs/streams.md, blob_available, on the bytes the origin sent.
func replayable(value string, latin1 bool) *string {
	if !utf8.ValidString(value) {
		return nil
	}
	v := passthrough(headerText(value, latin1))
	// Checked on the value published: v is stripped as guard strips, so the
	// guard's verdict is the byte rule on exactly these bytes.
	if v == nil || !guard.SendableValidator(*v) {
		return nil
	}
	return v
}

// isPySpace is Python's str.isspace, the white space the reference's
// str.strip removes: Go's unicode.IsSpace plus the separators \x1c-\x1f.
// It matches guard's trim, so a stripped value is one the guard reads as is.
func isPySpace(r rune) bool {
	return unicode.IsSpace(r) || (0x1c <= r && r <= 0x1f)
}

// headerText is a header value's bytes as text: unchanged when latin1 is
// false (the caller has checked they are UTF-8), else decoded as
// ISO-8859-1, each byte becoming the code point of the same value.
func headerText(value string, latin1 bool) string {
	if !latin1 {
		return value
	}
	b := make([]byte, 0, len(value)+len(value)/2)
	for i := 0; i < len(value); i++ {
		b = utf8.AppendRune(b, rune(value[i]))
	}
	return string(b)
}

// latin1Header reports whether httpx would read h as ISO-8859-1. It picks
// one encoding per response, UTF-8 only when every name and value is valid
// UTF-8, so one stray byte in any header changes how Content-Type reads.
func latin1Header(h http.Header) bool {
	for name, values := range h {
		if !utf8.ValidString(name) {
			return true
		}
		for _, v := range values {
			if !utf8.ValidString(v) {
				return true
			}
		}
	}
	return false
}

// headerMediaType is the media_type a response with header h is announced
// with, which is also what a sink that records one is given.
func headerMediaType(h http.Header) string {
	return mediaType(headerText(h.Get("Content-Type"), latin1Header(h)))
}

// blobFact builds the success fact for a stored 2xx.
func blobFact(cmd *envelope.ContentFetch, res *Result, now time.Time) *envelope.BlobAvailable {
	h := res.Header
	if h == nil {
		h = http.Header{}
	}
	latin1 := latin1Header(h)
	contentType := headerText(h.Get("Content-Type"), latin1)
	fact := &envelope.BlobAvailable{
		SchemaVersion:      envelope.SchemaVersion,
		OccurredAt:         now,
		ContentFingerprint: res.Blob.Fingerprint,
		BlobURI:            res.Blob.URI,
		SizeBytes:          res.Blob.Size,
		MediaType:          mediaType(contentType),
		URL:                cmd.URL,
		CommandID:          cmd.CommandID,
		InfoSourceID:       cmd.InfoSourceID,
		StatusCode:         new(res.StatusCode),
		ContentTypeRaw:     passthrough(contentType),
		ETag:               replayable(h.Get("ETag"), latin1),
		LastModified:       replayable(h.Get("Last-Modified"), latin1),
	}
	if res.FinalURL != nil {
		fact.FinalURL = new(withoutUserinfo(res.FinalURL))
	}
	if !res.FetchedAt.IsZero() {
		fact.FetchedAt = new(res.FetchedAt.UTC())
	}
	if !res.Blob.ExpiresAt.IsZero() {
		fact.BlobExpiresAt = new(res.Blob.ExpiresAt.UTC())
	}
	return fact
}

// FailedFact builds a terminal fetch_failed about cmd. statusCode and
// attempts are set on the fact only when positive. detail is bounded to
// MaxDetailLength; it must never carry a header value.
func FailedFact(cmd *envelope.ContentFetch, reason envelope.Reason, detail string, statusCode, attempts int, now time.Time) *envelope.FetchFailed {
	fact := &envelope.FetchFailed{
		SchemaVersion: envelope.SchemaVersion,
		OccurredAt:    now,
		CommandID:     cmd.CommandID,
		URL:           cmd.URL,
		InfoSourceID:  cmd.InfoSourceID,
		Reason:        reason,
		Terminal:      true,
	}
	if statusCode > 0 {
		fact.StatusCode = new(statusCode)
	}
	if attempts > 0 {
		fact.Attempts = new(attempts)
	}
	if detail != "" {
		fact.Detail = new(envelope.BoundDetail(detail))
	}
	return fact
}

func withoutUserinfo(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}
