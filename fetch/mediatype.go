package fetch

import (
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/replicator-go/replicator/sink"
)

// maxMediaTypeLength bounds a media type, in characters: no real one comes
// near it, and a longer one is replaced by sink.DefaultMediaType.
const maxMediaTypeLength = 1024

// MediaType normalizes a Content-Type header value to the media type a body
// is stored and announced with: the part before ';', stripped of
// surrounding white space and lower-cased; sink.DefaultMediaType when absent,
// blank, parameter-only or over 1024 characters. A value that is not valid
// UTF-8 is read as ISO-8859-1, as Result.HeaderText reads it.
func MediaType(contentType string) string {
	return mediaType(headerText(contentType, !utf8.ValidString(contentType)))
}

func mediaType(text string) string {
	mt, _, _ := strings.Cut(text, ";")
	mt = strings.ToLower(strings.TrimFunc(mt, isPySpace))
	if mt == "" || utf8.RuneCountInString(mt) > maxMediaTypeLength {
		return sink.DefaultMediaType
	}
	return mt
}

// HeaderText returns the final response's value of the named header as
// text, always valid UTF-8: its bytes as they are when every name and value
// of the response is valid UTF-8, otherwise each byte read as one
// ISO-8859-1 character (docs/streams.md, blob_available). "" when absent.
func (r *Result) HeaderText(name string) string {
	if r == nil || r.Header == nil {
		return ""
	}
	return headerText(r.Header.Get(name), latin1Header(r.Header))
}

// isPySpace is Python's str.isspace, the white space the reference strips:
// Go's unicode.IsSpace plus the separators \x1c-\x1f.
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

// latin1Header reports whether a response's headers read as ISO-8859-1:
// UTF-8 only when every name and value is valid UTF-8, so one stray byte in
// any header changes how Content-Type reads.
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

// headerMediaType is the media type a response with header h is stored and
// announced with.
func headerMediaType(h http.Header) string {
	return mediaType(headerText(h.Get("Content-Type"), latin1Header(h)))
}
