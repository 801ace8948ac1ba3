package local

import (
	"fmt"
	"io"

	"github.com/replicator-go/replicator/sink"
)

// Room implements sink.Room. A store of need more bytes has no room, and
// Room returns an error wrapping sink.ErrNoRoom, when:
//
//   - the ceiling: the bytes the tree holds (Usage) plus what the stores in
//     progress have claimed or written reach MaxTotalBytes, or would pass
//     it with need more;
//   - the disk: the free space of the root's file system, less what the
//     stores in progress have claimed but not yet written, is short of
//     MinFreeBytes plus need.
//
// A need of 0 (a body of unknown size) stands for what the last store
// refused for want of room needed at least: its declared size, or more
// than it had written when the disk filled up. So a body that did not fit
// is not fetched again before room for it is free; the next sweep forgets
// it. Where the free space cannot be read (not Linux), only the ceiling
// applies.
func (s *Sink) Room(need int64) error {
	free := s.readFree()
	s.usageMu.Lock()
	defer s.usageMu.Unlock()
	return s.roomLocked(need, free)
}

// readFree reads the file system's free space for roomLocked, or -1 when
// it is not needed or cannot be read. It is read before usageMu is taken:
// the system call need not hold up every other store's accounting, and the
// reading is a snapshot either way.
func (s *Sink) readFree() int64 {
	if s.minFree <= 0 {
		return -1
	}
	free, err := s.freeSpace(s.dir)
	if err != nil {
		return -1 // unknown: the store itself will say if the disk is full
	}
	return free
}

// roomLocked is Room under usageMu, so that a claim is checked and made in
// one step; free is readFree's reading.
func (s *Sink) roomLocked(need, free int64) error {
	what := "asked for"
	if need <= 0 {
		need, what = s.short, "needed by a store refused lately"
	}
	claimed, written := s.claimed.Load(), s.written.Load()
	if s.maxTotal > 0 {
		held := s.base + s.added + claimed
		if held >= s.maxTotal || held+need > s.maxTotal {
			return fmt.Errorf("local: %w: the tree holds %d bytes, stores in progress included, and %d more are %s, against a ceiling of %d",
				sink.ErrNoRoom, held, need, what, s.maxTotal)
		}
	}
	if free < 0 {
		return nil
	}
	if unwritten := claimed - written; free-unwritten-s.minFree < need {
		return fmt.Errorf("local: %w: %d bytes free on the file system of %s, %d of them claimed by stores in progress; %d more are %s and %d kept free",
			sink.ErrNoRoom, free, s.dir, unwritten, need, what, s.minFree)
	}
	return nil
}

// claim is one store's share of the bounds while it is in progress: its
// declared size until it has written more, then what it has written.
type claim struct {
	size    int64 // counted in Sink.claimed: max(declared, written)
	written int64 // counted in Sink.written
}

// reserve claims size bytes for a store about to begin, or refuses with an
// error wrapping sink.ErrNoRoom, claims nothing, and remembers the size for
// Room.
func (s *Sink) reserve(c *claim, size int64) error {
	free := s.readFree()
	s.usageMu.Lock()
	defer s.usageMu.Unlock()
	if err := s.roomLocked(size, free); err != nil {
		if s.maxTotal <= 0 || size <= s.maxTotal {
			s.short = size // not a body that could never fit, which would block every other
		}
		return err
	}
	c.size = size
	s.claimed.Add(size)
	return nil
}

// wrote counts n bytes written by c's store. It never refuses: once a body
// streams, it is stored whole or not at all.
func (s *Sink) wrote(c *claim, n int64) {
	c.written += n
	s.written.Add(n)
	if c.written > c.size {
		s.claimed.Add(c.written - c.size)
		c.size = c.written
	}
}

// release gives back c's claim when its store ends. A blob it created is
// counted in Usage by then.
func (s *Sink) release(c *claim) {
	s.claimed.Add(-c.size)
	s.written.Add(-c.written)
	*c = claim{}
}

// ranOut records that a store found the disk full after writing written
// bytes, and returns err marked with sink.ErrNoRoom.
func (s *Sink) ranOut(err error, written int64) error {
	s.usageMu.Lock()
	s.short = written + 1
	s.usageMu.Unlock()
	return fmt.Errorf("%w (%w)", err, sink.ErrNoRoom)
}

// claimWriter counts the bytes a store writes against its claim.
type claimWriter struct {
	w io.Writer
	s *Sink
	c *claim
}

func (w *claimWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	w.s.wrote(w.c, int64(n))
	return n, err
}
