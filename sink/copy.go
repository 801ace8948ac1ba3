package sink

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"sync"
)

// copyBufSize is the read size of Copy: large enough that a 64 MiB body
// costs about a thousand reads, small enough that sixteen concurrent stores
// hold only a megabyte of buffers between them.
const copyBufSize = 64 << 10

var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// Copy reads r to EOF, writing every byte to w and hashing it on the way,
// and returns the lowercase hex sha256 and the number of bytes copied. It is
// the streaming core every backend shares, so they all agree on fingerprints
// and on the limit.
//
// A limit > 0 bounds the bytes accepted: as soon as r yields more than limit
// bytes Copy stops reading and returns an error wrapping ErrTooLarge, and
// the bytes past the limit are never written to w. A body of exactly limit
// bytes passes. A limit <= 0 means no limit.
//
// ctx is checked between reads, so a cancelled store stops within one read
// even when r itself ignores ctx; Copy then returns ctx.Err(). Copy holds one
// pooled 64 KiB buffer whatever the size of the stream.
func Copy(ctx context.Context, w io.Writer, r io.Reader, limit int64) (fingerprint string, n int64, err error) {
	h := sha256.New()
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	for {
		if err := ctx.Err(); err != nil {
			return "", n, err
		}
		m, rerr := r.Read(buf)
		if m > 0 {
			if limit > 0 && n+int64(m) > limit {
				return "", n, tooLarge(limit)
			}
			h.Write(buf[:m])
			if _, werr := w.Write(buf[:m]); werr != nil {
				return "", n, werr
			}
			n += int64(m)
		}
		if rerr == io.EOF {
			return hex.EncodeToString(h.Sum(nil)), n, nil
		}
		if rerr != nil {
			return "", n, fmt.Errorf("sink: read body: %w", rerr)
		}
	}
}

func tooLarge(limit int64) error { return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit) }

// validFingerprint reports whether s has the shape of a fingerprint: 64
// lowercase hex digits.
func validFingerprint(s string) bool {
	if len(s) != sha256.Size*2 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// CheckFingerprint returns nil when s has the shape of a fingerprint, 64
// lowercase hex digits, and otherwise an error wrapping ErrNotFound: a
// malformed fingerprint names no blob. Backends check it before turning a
// fingerprint into a path or an object name, so a caller-supplied string
// can never name anything but a blob.
func CheckFingerprint(s string) error {
	if validFingerprint(s) {
		return nil
	}
	return fmt.Errorf("%w: malformed fingerprint %q", ErrNotFound, truncate(s, 80))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
