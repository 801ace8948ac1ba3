package fetch

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replicator-go/replicator/sink"
)

// FuzzContentCodings checks the Content-Encoding parser on any field value:
// every coding it returns is a lower-case, trimmed, non-empty element that
// is not identity, and parsing its own output again changes nothing.
func FuzzContentCodings(f *testing.F) {
	for _, seed := range []string{
		"gzip",            // the common case
		"gzip, br",        // a stack: gzip applied first
		" GZIP ,\tzstd ,", // case, OWS and an empty element
		"identity",        // nothing at all
		"x-gzip",          // the RFC 9110 alias
		"compress, gzip",  // an unknown coding under a known one
		",,,",             // only empty elements
		"br;q=1",          // a parameter, which codings do not take
		"gzip\x00",        // a control byte
		"déflate",         // non-ASCII
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got := contentCodings([]string{v})
		for _, c := range got {
			if c == "" || c == "identity" || c == "x-gzip" || strings.ContainsAny(c, ",") ||
				strings.Trim(c, " \t") != c || strings.ToLower(c) != c {
				t.Fatalf("contentCodings(%q) returned element %q", v, c)
			}
		}
		if again := contentCodings([]string{strings.Join(got, ", ")}); !slices.Equal(again, got) {
			t.Fatalf("contentCodings(%q) = %q, but its own output parses to %q", v, got, again)
		}
	})
}

// FuzzDecoder feeds arbitrary bytes, under arbitrary codings, through the
// decoder as the fetcher does: it never panics, never yields more than the
// decoded limit to the sink, never reads more than the encoded bound, and
// reports a failure only as one of its three kinds.
func FuzzDecoder(f *testing.F) {
	const limit = 4096
	for _, seed := range []struct {
		codings string
		body    []byte
	}{
		{"gzip", []byte{0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0, 0xff, 0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0}}, // empty gzip
		{"deflate", []byte{0x78, 0x9c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x01}},                            // empty zlib
		{"deflate", []byte{0x00, 0x00, 0x00, 0xff, 0xff}},                                              // an empty stored block, never final
		{"br", []byte{0x06}}, // empty brotli
		{"zstd", []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x68, 0x29, 0x00, 0x00, 'h', 'e', 'l', 'l', 'o'}}, // raw block
		{"gzip, br", []byte("not a stream")}, // garbage under a stack
		{"zstd, gzip, deflate, br", nil},     // empty under a stack
	} {
		f.Add(seed.codings, seed.body)
	}
	f.Fuzz(func(t *testing.T, codings string, body []byte) {
		src := &bodyReader{r: bytes.NewReader(body)}
		d := newDecoder(src, contentCodings([]string{codings}), limit, time.Now)
		if d == nil {
			return
		}
		defer d.close()
		_, n, err := sink.Copy(t.Context(), io.Discard, d, limit)
		if n > limit {
			t.Fatalf("%d decoded bytes passed a limit of %d", n, limit)
		}
		if d.raw.n > encodedLimit(limit) {
			t.Fatalf("read %d encoded bytes, over the bound of %d", d.raw.n, encodedLimit(limit))
		}
		if err != nil && !errors.Is(err, sink.ErrTooLarge) && !d.over() && d.err == nil {
			t.Fatalf("failure %v is neither too large, over the encoded bound nor a decoding error", err)
		}
	})
}

// bodyReader stands in for the response body under the decoder.
type bodyReader struct{ r io.Reader }

func (b *bodyReader) Read(p []byte) (int, error) { return b.r.Read(p) }
