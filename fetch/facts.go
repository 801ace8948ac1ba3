package fetch

import (
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/guard"
)

// DefaultMediaType is announced when a response has no usable Content-Type.
const DefaultMediaType = "application/octet-stream"

// MaxPassthroughLength bounds a response header value copied onto a fact.
// A longer value is dropped, never truncated: a truncated ETag is a
// validator that can never match.
const MaxPassthroughLength = 1024

// MaxDetailLength bounds a fetch_failed detail, in bytes.
const MaxDetailLength = 1024

// MediaType normalizes a Content-Type header for blob_available: the part
// before ';', trimmed and lower-cased; DefaultMediaType when absent, blank,
// parameter-only or over MaxPassthroughLength.
func MediaType(contentType string) string {
	v := Passthrough(contentType)
	if v == nil {
		return DefaultMediaType
	}
	mt, _, _ := strings.Cut(*v, ";")
	if mt = strings.ToLower(strings.TrimSpace(mt)); mt != "" {
		return mt
	}
	return DefaultMediaType
}

// Passthrough is a response header value as a fact carries it: surrounding
// whitespace stripped and nothing else touched; nil when blank or longer
// than MaxPassthroughLength. It is the whole rule for content_type_raw.
func Passthrough(value string) *string {
	v := strings.TrimSpace(value)
	if v == "" || len(v) > MaxPassthroughLength {
		return nil
	}
	return &v
}

// Replayable is Passthrough for a validator (etag, last_modified): also nil
// when the value could not be sent back in a request header, so an issuer
// replaying a published validator never has its command refused.
func Replayable(value string) *string {
	v := Passthrough(value)
	if v == nil || !guard.SendableValidator(*v) {
		return nil
	}
	return v
}

// blobFact builds the success fact for a stored 2xx.
func blobFact(cmd *envelope.ContentFetch, res *Result, now time.Time) *envelope.BlobAvailable {
	h := res.Header
	if h == nil {
		h = http.Header{}
	}
	fact := &envelope.BlobAvailable{
		SchemaVersion:      envelope.SchemaVersion,
		OccurredAt:         now,
		ContentFingerprint: res.Blob.Fingerprint,
		BlobURI:            res.Blob.URI,
		SizeBytes:          res.Blob.Size,
		MediaType:          MediaType(h.Get("Content-Type")),
		URL:                cmd.URL,
		CommandID:          cmd.CommandID,
		InfoSourceID:       cmd.InfoSourceID,
		StatusCode:         envelope.Ptr(res.StatusCode),
		ContentTypeRaw:     Passthrough(h.Get("Content-Type")),
		ETag:               Replayable(h.Get("ETag")),
		LastModified:       Replayable(h.Get("Last-Modified")),
	}
	if res.FinalURL != nil {
		fact.FinalURL = envelope.Ptr(withoutUserinfo(res.FinalURL))
	}
	if !res.FetchedAt.IsZero() {
		fact.FetchedAt = envelope.Ptr(res.FetchedAt.UTC())
	}
	if !res.Blob.ExpiresAt.IsZero() {
		fact.BlobExpiresAt = envelope.Ptr(res.Blob.ExpiresAt.UTC())
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
		fact.StatusCode = envelope.Ptr(statusCode)
	}
	if attempts > 0 {
		fact.Attempts = envelope.Ptr(attempts)
	}
	if detail != "" {
		fact.Detail = envelope.Ptr(boundDetail(detail))
	}
	return fact
}

func boundDetail(s string) string {
	if len(s) <= MaxDetailLength {
		return s
	}
	cut := MaxDetailLength - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func withoutUserinfo(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}
