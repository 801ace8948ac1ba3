package fetch

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

// zstdMaxWindow is the largest zstd window accepted: the 8 MB RFC 8878
// allows a decoder to insist on for the HTTP content coding, and what
// browsers insist on. It bounds a zstd body's memory.
const zstdMaxWindow = 8 << 20

// contentCodings returns the codings a Content-Encoding field lists (its
// lines joined, as RFC 9110 combines them) in the order they were applied:
// lower-cased, trimmed, empty elements and identity dropped, x-gzip read
// as gzip (RFC 9110 section 8.4.1.3).
func contentCodings(values []string) []string {
	var out []string
	for _, v := range values {
		for c := range strings.SplitSeq(v, ",") {
			c = strings.ToLower(strings.Trim(c, " \t"))
			switch c {
			case "", "identity":
				continue
			case "x-gzip":
				c = "gzip"
			}
			out = append(out, c)
		}
	}
	return out
}

// decodable reports whether the fetcher removes coding.
func decodable(coding string) bool {
	switch coding {
	case "gzip", "deflate", "br", "zstd":
		return true
	}
	return false
}

// encodedLimit bounds the encoded bytes read for a body whose decoded
// bytes are bounded by limit: a sane encoder expands incompressible bytes
// by a few percent at most, so twice the limit (and 64 KiB for the
// headers of small limits) only stops streams built to decode to little
// from much, such as endless empty gzip members.
func encodedLimit(limit int64) int64 {
	const slack = 64 << 10
	if limit > (1<<62)-slack {
		return 1<<63 - 1
	}
	return 2*limit + slack
}

// decoder removes a response's content codings while the sink reads it.
// It records what went wrong so that the fetcher can tell a corrupt
// stream (ErrContentCoding) from a failed read of the body, which the
// timedBody underneath records, and from an encoded body over
// encodedLimit.
type decoder struct {
	r       io.Reader
	raw     *countingReader
	removed []string // the codings removed, outermost first
	closers []func()
	now     func() time.Time // stamps doneAt; nil when no one reads it
	err     error            // the first decoding failure
	doneAt  time.Time        // when the decoded body ended
}

// newDecoder layers decoders over body for the trailing codings it knows,
// the last applied first, stopping at the first it does not know: what
// is left is stored as the origin sent it. It returns nil when nothing
// would be removed.
func newDecoder(body io.Reader, codings []string, limit int64, now func() time.Time) *decoder {
	n := 0
	for i := len(codings) - 1; i >= 0 && decodable(codings[i]); i-- {
		n++
	}
	if n == 0 {
		return nil
	}
	d := &decoder{raw: &countingReader{r: body, max: encodedLimit(limit)}, now: now}
	var r io.Reader = d.raw
	for i := len(codings) - 1; i >= len(codings)-n; i-- {
		l := &layer{coding: codings[i], src: r}
		d.closers = append(d.closers, l.close)
		d.removed = append(d.removed, codings[i])
		r = l
	}
	d.r = r
	return d
}

func (d *decoder) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	switch {
	case err == io.EOF:
		if d.now != nil {
			d.doneAt = d.now()
		}
	case err != nil && d.err == nil && !d.raw.failed:
		d.err = err
	}
	return n, err
}

// over reports whether the encoded body ran past encodedLimit.
func (d *decoder) over() bool { return d.raw.over }

// close releases the decoders (zstd's hold buffers until closed).
func (d *decoder) close() {
	for _, c := range d.closers {
		c()
	}
}

// errEncodedTooLarge ends the raw stream at encodedLimit.
var errEncodedTooLarge = errors.New("fetch: encoded body over its limit")

// countingReader stops the encoded stream at max bytes and notes whether a
// failure came from below it (the body's own read, or the limit), so the
// decoder does not mistake it for corruption.
type countingReader struct {
	r      io.Reader
	n, max int64
	over   bool
	failed bool
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.n >= c.max {
		c.over, c.failed = true, true
		return 0, errEncodedTooLarge
	}
	if int64(len(p)) > c.max-c.n {
		p = p[:c.max-c.n]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF {
		c.failed = true
	}
	return n, err
}

// layer removes one coding. It starts its decoder at the first read, so a
// stream whose header is corrupt fails the read like any later corruption
// does; an encoded body that is empty decodes to nothing, as httpx has it.
type layer struct {
	coding string
	src    io.Reader
	r      io.Reader
	done   func()
	err    error
}

func (l *layer) Read(p []byte) (int, error) {
	if l.r == nil {
		if l.err != nil {
			return 0, l.err
		}
		if l.err = l.start(); l.err != nil {
			return 0, l.err
		}
	}
	return l.r.Read(p)
}

func (l *layer) start() error {
	br := bufio.NewReaderSize(l.src, 512)
	head, err := br.Peek(2)
	if len(head) == 0 {
		if err == io.EOF {
			l.r = eofReader{}
			return nil
		}
		return err
	}
	switch l.coding {
	case "gzip":
		zr, err := gzip.NewReader(br)
		if err != nil {
			return err
		}
		// One member, as httpx decodes: bytes after it are ignored.
		zr.Multistream(false)
		l.r, l.done = zr, func() { zr.Close() }
	case "deflate":
		// RFC 9110's deflate is zlib-wrapped; some origins send the raw
		// stream, which httpx accepts too.
		if len(head) == 2 && zlibHeader(head[0], head[1]) {
			zr, err := zlib.NewReader(br)
			if err != nil {
				return err
			}
			l.r, l.done = zr, func() { zr.Close() }
		} else {
			fr := flate.NewReader(br)
			l.r, l.done = fr, func() { fr.Close() }
		}
	case "br":
		l.r = brotli.NewReader(br)
	case "zstd":
		zr, err := zstd.NewReader(br,
			zstd.WithDecoderConcurrency(1), // in the reading goroutine, no read-ahead
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxWindow(zstdMaxWindow))
		if err != nil {
			return err
		}
		l.r, l.done = zr, zr.Close
	}
	return nil
}

func (l *layer) close() {
	if l.done != nil {
		l.done()
	}
}

// zlibHeader reports whether two bytes open a zlib stream (RFC 1950): the
// deflate method and a header check that is a multiple of 31.
func zlibHeader(cmf, flg byte) bool {
	return cmf&0x0f == 8 && cmf>>4 <= 7 && (uint16(cmf)<<8|uint16(flg))%31 == 0
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
