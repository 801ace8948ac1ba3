package contentfetch

import (
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/guard"
)

// MaxPassthroughLength bounds a response header value copied onto a fact,
// in characters (code points), not bytes. A longer value is dropped, never
// truncated: a truncated ETag is a validator that can never match.
const MaxPassthroughLength = 1024

// MaxDetailLength bounds a fetch_failed detail, in bytes.
const MaxDetailLength = envelope.MaxDetailLength

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
	return passthrough(textOf(value))
}

// textOf is one header value as text: as it is when valid UTF-8, else read
// as ISO-8859-1, each byte one character (fetch.Result.HeaderText reads a
// whole response's headers the same way).
func textOf(value string) string {
	if utf8.ValidString(value) {
		return value
	}
	b := make([]byte, 0, len(value)*2)
	for i := 0; i < len(value); i++ {
		b = utf8.AppendRune(b, rune(value[i]))
	}
	return string(b)
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
	return replayable(value, value)
}

// replayable is Replayable for a header value whose bytes are raw and which
// reads as text in its response (fetch.Result.HeaderText). A value that is
// not valid UTF-8 is nil outright. The reference would decode it as ISO-8859-1 and strip a
// no-break space (\xa0) or NEL (\x85) byte at its ends, publishing the
// rest; we keep the byte rule of docs/streams.md, blob_available, on the bytes the origin sent.
func replayable(raw, text string) *string {
	if !utf8.ValidString(raw) {
		return nil
	}
	v := passthrough(text)
	// Checked on the value published: v is stripped as guard strips, so the
	// guard's verdict is the byte rule on exactly these bytes.
	if v == nil || !guard.SendableValidator(*v) {
		return nil
	}
	return v
}

// isPySpace is Python's str.isspace, the white space the reference's
// str.strip removes: Go's unicode.IsSpace plus the separators \x1c-\x1f.
func isPySpace(r rune) bool {
	return unicode.IsSpace(r) || (0x1c <= r && r <= 0x1f)
}

// blobFact builds the success fact for a stored 2xx.
func blobFact(cmd *envelope.ContentFetch, res *fetch.Result, now time.Time) *envelope.BlobAvailable {
	contentType := res.HeaderText("Content-Type")
	fact := &envelope.BlobAvailable{
		SchemaVersion:      envelope.SchemaVersion,
		OccurredAt:         now,
		ContentFingerprint: res.Blob.Fingerprint,
		BlobURI:            res.Blob.URI,
		SizeBytes:          res.Blob.Size,
		MediaType:          fetch.MediaType(contentType),
		URL:                cmd.URL,
		CommandID:          cmd.CommandID,
		InfoSourceID:       cmd.InfoSourceID,
		StatusCode:         new(res.StatusCode),
		ContentTypeRaw:     passthrough(contentType),
		ETag:               replayable(res.Header.Get("ETag"), res.HeaderText("ETag")),
		LastModified:       replayable(res.Header.Get("Last-Modified"), res.HeaderText("Last-Modified")),
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
