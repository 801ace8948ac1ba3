package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync"
	"time"
)

// headSize is how much of a body Put reads before it makes a temp. A body
// that fits is hashed first, so re-storing a small blob this Sink knows
// (a feed or a page fetched again unchanged) costs one lstat, where a
// temp would cost its create, write, times, fsync, close and unlink.
const headSize = 16 << 10

// touchLead is how far past the store's start a re-referenced blob's mtime
// is moved; see touch.
const touchLead = time.Second

var heads = sync.Pool{New: func() any { b := make([]byte, headSize); return &b }}

// readHead reads r into buf until buf is full (or holds limit+1 bytes,
// when limit > 0, enough to know the body is over it), r ends, or a read
// fails. It returns the bytes read and io.EOF when r ended, nil when buf
// filled first, or the read's error (or ctx's, checked between reads).
func readHead(ctx context.Context, r io.Reader, buf []byte, limit int64) ([]byte, error) {
	if limit > 0 && limit < int64(len(buf)) {
		buf = buf[:limit+1]
	}
	n := 0
	for n < len(buf) {
		if err := ctx.Err(); err != nil {
			return buf[:n], err
		}
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return buf[:n], err
		}
	}
	return buf[:n], nil
}

// errReader fails every read with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// recentSlot is a fingerprint's place in Sink.recent: its first three hex
// digits, so each slot is guarded by the lock of the top-level shard its
// first two name.
func recentSlot(fp string) int { return shardIndex(fp) >> 4 }

// remember records that the blob fp exists, as of a publish that just made
// or touched it. The shard's lock is held.
func (s *Sink) remember(fp string) { s.recent[recentSlot(fp)] = fp }

// reuse touches the blob fp if this Sink published it lately, and reports
// whether it did. A blob removed since (by another process's sweep or by
// hand) is not reused: the caller writes it again.
func (s *Sink) reuse(fp string, now time.Time) (bool, error) {
	mu := s.shardLock(fp[0:2])
	mu.Lock()
	defer mu.Unlock()
	slot := recentSlot(fp)
	if s.recent[slot] != fp {
		return false, nil
	}
	err := touch(s.Path(fp), now)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		s.recent[slot] = ""
		return false, nil
	default:
		return false, fmt.Errorf("local: touch blob: %w", err)
	}
}
