package fetch_test

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/internal/testenv/fetchenv"
	"github.com/replicator-go/replicator/sink"
)

// encode applies codings to b in order, as an origin would before naming
// them in Content-Encoding.
func encode(t testing.TB, b []byte, codings ...string) []byte {
	t.Helper()
	for _, c := range codings {
		var out bytes.Buffer
		var w io.WriteCloser
		switch c {
		case "gzip":
			w = gzip.NewWriter(&out)
		case "deflate":
			w = zlib.NewWriter(&out)
		case "raw-deflate":
			w, _ = flate.NewWriter(&out, flate.DefaultCompression)
		case "br":
			w = brotli.NewWriter(&out)
		case "zstd":
			zw, err := zstd.NewWriter(&out)
			if err != nil {
				t.Fatal(err)
			}
			w = zw
		default:
			t.Fatalf("no encoder for %q", c)
		}
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		b = out.Bytes()
	}
	return b
}

// encodedOrigin answers every request with body and the given
// Content-Encoding field lines (none when empty), declaring its length.
func encodedOrigin(body []byte, status int, contentEncoding ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, v := range contentEncoding {
			w.Header().Add("Content-Encoding", v)
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(status)
		w.Write(body)
	})
}

// TestHandleStoresDecodedBodies checks that every coding the fetcher knows
// is removed before the bytes are hashed, counted and stored, stacks in
// reverse order of the header, whatever accept-encoding the command sent;
// and that what it does not know is stored as sent.
func TestHandleStoresDecodedBodies(t *testing.T) {
	decoded := bytes.Repeat([]byte("the representation, decoded\n"), 500)
	compress := []byte("stand-in bytes of a coding the fetcher does not know")
	tests := []struct {
		name     string
		body     []byte
		header   []string // Content-Encoding field lines
		status   int
		want     []byte
		wantSent string // Accept-Encoding the origin must see; "" none
	}{
		{name: "gzip", body: encode(t, decoded, "gzip"), header: []string{"gzip"}, want: decoded},
		{name: "deflate, zlib-wrapped", body: encode(t, decoded, "deflate"), header: []string{"deflate"}, want: decoded},
		{name: "deflate, raw", body: encode(t, decoded, "raw-deflate"), header: []string{"deflate"}, want: decoded},
		{name: "br", body: encode(t, decoded, "br"), header: []string{"br"}, want: decoded},
		{name: "zstd", body: encode(t, decoded, "zstd"), header: []string{"zstd"}, want: decoded},
		{name: "zstd frame declaring the largest window accepted, 8 MB", header: []string{"zstd"}, want: []byte("hello"),
			body: []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, (23 - 10) << 3, 0x29, 0x00, 0x00, 'h', 'e', 'l', 'l', 'o'}},
		{name: "x-gzip and case", body: encode(t, decoded, "gzip"), header: []string{"X-GZip"}, want: decoded},
		{name: "stacked: gzip then br", body: encode(t, decoded, "gzip", "br"), header: []string{"gzip, br"}, want: decoded},
		{name: "stacked over three field lines", body: encode(t, decoded, "deflate", "zstd", "gzip"),
			header: []string{"deflate", " zstd ,", "gzip"}, want: decoded},
		{name: "identity is nothing", body: encode(t, decoded, "gzip"), header: []string{"identity, gzip"}, want: decoded},
		{name: "identity alone", body: decoded, header: []string{"identity"}, want: decoded},
		{name: "unknown coding stored as sent", body: compress, header: []string{"compress"}, want: compress},
		{name: "known coding over an unknown one: only it is removed", body: encode(t, compress, "gzip"),
			header: []string{"compress, gzip"}, want: compress},
		{name: "unknown coding applied last: stored as sent", body: append([]byte("x"), encode(t, decoded, "gzip")...),
			header: []string{"gzip, compress"}, want: append([]byte("x"), encode(t, decoded, "gzip")...)},
		{name: "empty gzip body", body: nil, header: []string{"gzip"}, want: []byte{}},
		{name: "bytes after the gzip member are ignored, as httpx does", body: append(encode(t, decoded, "gzip"), "trailing"...),
			header: []string{"gzip"}, want: decoded},
		{name: "a 206 is a range of the encoded representation: stored as sent", body: encode(t, decoded, "gzip"),
			header: []string{"gzip"}, status: http.StatusPartialContent, want: encode(t, decoded, "gzip")},
	}
	for _, tt := range tests {
		for _, ae := range []string{"", "br, zstd"} {
			name := tt.name
			if ae != "" {
				name += "/issuer accept-encoding"
			}
			t.Run(name, func(t *testing.T) {
				status := tt.status
				if status == 0 {
					status = http.StatusOK
				}
				h := fetchenv.New(t, encodedOrigin(tt.body, status, tt.header...), fetchenv.Options{})
				cmd := fetchenv.Command(h.URL("origin.test", "/doc"))
				wantAE := "gzip"
				if ae != "" {
					cmd.Headers = map[string]string{"Accept-Encoding": ae}
					wantAE = ae
				}
				out := h.Handle(t, cmd)
				if out.Label != contentfetch.Stored {
					t.Fatalf("kind = %v (%v), want stored", out.Name(), out.Err)
				}
				fact := out.Fact.(*envelope.BlobAvailable)
				if got := fetchenv.Stored(t, h.Sink, fact.ContentFingerprint); !bytes.Equal(got, tt.want) {
					t.Errorf("stored %d bytes %.20q…, want %d bytes %.20q…", len(got), got, len(tt.want), tt.want)
				}
				if fact.ContentFingerprint != fetchenv.SHA(tt.want) || fact.SizeBytes != int64(len(tt.want)) {
					t.Errorf("fact announces %s, %d bytes; want %s, %d", fact.ContentFingerprint, fact.SizeBytes, fetchenv.SHA(tt.want), len(tt.want))
				}
				if mt, _ := h.Sink.MediaType(fact.ContentFingerprint); mt != "text/plain" || fact.MediaType != mt {
					t.Errorf("sink recorded media type %q, fact announces %q; want text/plain for both", mt, fact.MediaType)
				}
				if fact.FetchedAt == nil || fact.FetchedAt.IsZero() {
					t.Errorf("fetched_at = %v, want the time the body ended", fact.FetchedAt)
				}
				if got := h.Origin.Requests()[0].Header.Get("Accept-Encoding"); got != wantAE {
					t.Errorf("Accept-Encoding sent = %q, want %q", got, wantAE)
				}
			})
		}
	}
}

// TestHandleRangeIsNotOfferedGzip: a command asking for a byte range is
// sent without the default accept-encoding, since a range of a gzip stream
// is no gzip stream.
func TestHandleRangeIsNotOfferedGzip(t *testing.T) {
	h := fetchenv.New(t, encodedOrigin([]byte("part"), http.StatusPartialContent), fetchenv.Options{})
	cmd := fetchenv.Command(h.URL("origin.test", "/doc"))
	cmd.Headers = map[string]string{"Range": "bytes=0-3"}
	if out := h.Handle(t, cmd); out.Label != contentfetch.Stored {
		t.Fatalf("kind = %v (%v), want stored", out.Name(), out.Err)
	}
	if got := h.Origin.Requests()[0].Header.Values("Accept-Encoding"); len(got) != 0 {
		t.Errorf("Accept-Encoding sent = %q with a range request, want none", got)
	}
}

// TestHandleDecodedSizeLimit: the ceiling counts decoded bytes. A declared
// Content-Length counts encoded ones, so it refuses an encoded body unread
// only past the encoded bound, and a stream that decodes to little from
// much stops at that bound.
func TestHandleDecodedSizeLimit(t *testing.T) {
	const limit = 1000
	random := make([]byte, limit)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	var stored0 bytes.Buffer // incompressible: the encoding is larger than the limit
	zw, _ := gzip.NewWriterLevel(&stored0, gzip.NoCompression)
	zw.Write(random)
	zw.Close()
	if stored0.Len() <= limit {
		t.Fatalf("fixture: gzip of %d random bytes is %d bytes, want more than the limit", limit, stored0.Len())
	}
	// Non-final empty stored blocks of raw deflate: 5 bytes each, nothing
	// decoded, never ending.
	empties := bytes.Repeat([]byte{0x00, 0x00, 0x00, 0xff, 0xff}, 40000)
	bomb := encode(t, make([]byte, 100*limit), "gzip", "br")

	tests := []struct {
		name     string
		handler  http.Handler
		wantKind string
	}{
		{name: "encoded length over the limit, decoded within it", handler: encodedOrigin(stored0.Bytes(), 200, "gzip"), wantKind: contentfetch.Stored},
		{name: "decoded over the limit (a stacked bomb)", handler: encodedOrigin(bomb, 200, "gzip, br"), wantKind: fetchenv.Permanent},
		{name: "encoded over its bound, declared", handler: encodedOrigin(empties, 200, "deflate"), wantKind: fetchenv.Permanent},
		{name: "encoded over its bound, undeclared", handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Encoding", "deflate")
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			w.Write(empties)
		}), wantKind: fetchenv.Permanent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := fetchenv.New(t, tt.handler, fetchenv.Options{Fetch: fetch.Options{MaxBodyBytes: limit}})
			out := h.Handle(t, fetchenv.Command(h.URL("origin.test", "/doc")))
			if out.Name() != tt.wantKind {
				t.Fatalf("kind = %v (%v), want %v", out.Name(), out.Err, tt.wantKind)
			}
			if tt.wantKind == fetchenv.Permanent {
				if out.Reason != string(envelope.ReasonTooLarge) || !errors.Is(out.Err, fetch.ErrTooLarge) {
					t.Errorf("reason = %q, err = %v; want too_large", out.Reason, out.Err)
				}
				if n := h.Sink.Len(); n != 0 {
					t.Errorf("sink holds %d blobs, want none", n)
				}
			}
		})
	}
}

// TestHandleCorruptEncoding: a body that does not decode (a corrupt header,
// a stream cut short inside a whole HTTP response, a zstd window over 8 MB)
// is transient, as httpx's decoding errors are for the reference, and
// stores nothing.
func TestHandleCorruptEncoding(t *testing.T) {
	decoded := bytes.Repeat([]byte("abcdefgh"), 4096)
	gz := encode(t, decoded, "gzip")
	// A zstd frame by hand: the encoder shrinks the window to fit what it
	// is given, so this one declares a 32 MiB window (log 25) over one raw
	// block of "hello".
	wide := []byte{
		0x28, 0xb5, 0x2f, 0xfd, // magic
		0x00,             // frame header: no content size, no checksum
		(25 - 10) << 3,   // window descriptor: 2^25 bytes
		0x29, 0x00, 0x00, // last block, raw, 5 bytes
		'h', 'e', 'l', 'l', 'o',
	}
	tests := []struct {
		name   string
		body   []byte
		coding string
	}{
		{name: "not gzip at all", body: []byte("plain text, labelled gzip"), coding: "gzip"},
		{name: "gzip cut short", body: gz[:len(gz)/2], coding: "gzip"},
		{name: "gzip with a bad checksum", body: append(append([]byte{}, gz[:len(gz)-8]...), 0, 0, 0, 0, 0, 0, 0, 0), coding: "gzip"},
		{name: "not brotli", body: []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, coding: "br"},
		{name: "not zstd", body: []byte("plain text, labelled zstd"), coding: "zstd"},
		{name: "zstd window over 8 MB", body: wide, coding: "zstd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := fetchenv.New(t, encodedOrigin(tt.body, 200, tt.coding), fetchenv.Options{})
			out := h.Handle(t, fetchenv.Command(h.URL("origin.test", "/doc")))
			if out.Fate != capability.Retry {
				t.Fatalf("kind = %v (%v), want transient", out.Name(), out.Err)
			}
			if !errors.Is(out.Err, fetch.ErrContentCoding) {
				t.Errorf("err = %v, want it to wrap fetch.ErrContentCoding", out.Err)
			}
			if fetch.Retryable(out.Err) {
				t.Errorf("Retryable(%v) = true; the same stream would come back", out.Err)
			}
			if n := h.Sink.Len(); n != 0 {
				t.Errorf("sink holds %d blobs, want none", n)
			}
			if _, err := h.Sink.Open(t.Context(), fetchenv.SHA(tt.body)); !errors.Is(err, sink.ErrNotFound) {
				t.Errorf("the encoded bytes were stored (Open err = %v)", err)
			}
		})
	}
}
