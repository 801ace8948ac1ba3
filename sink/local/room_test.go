package local

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/sinktest"
)

// countingReader counts the reads made of it.
type countingReader struct {
	r     io.Reader
	reads atomic.Int32
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.reads.Add(1)
	return c.r.Read(p)
}

// pipePut runs a Put fed through a pipe, so the test decides when each
// byte arrives. wait returns its result once the pipe is closed.
func pipePut(t *testing.T, s *Sink, opts sink.PutOptions) (pw *io.PipeWriter, wait func() (sink.Blob, error)) {
	t.Helper()
	pr, pw := io.Pipe()
	type result struct {
		b   sink.Blob
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := s.Put(context.Background(), pr, opts)
		pr.CloseWithError(err)
		done <- result{b, err}
	}()
	return pw, func() (sink.Blob, error) {
		r := <-done
		return r.b, r.err
	}
}

// send writes n bytes of seed into pw; it returns once the store has read
// them all.
func send(t *testing.T, pw *io.PipeWriter, seed uint64, n int) {
	t.Helper()
	if _, err := pw.Write(sinktest.Bytes(seed, n)); err != nil {
		t.Fatalf("feeding the store: %v", err)
	}
}

// room checks s.Room(need) against want (nil or sink.ErrNoRoom).
func room(t *testing.T, s *Sink, need int64, want error) {
	t.Helper()
	if err := s.Room(need); !errors.Is(err, want) || (want == nil) != (err == nil) {
		t.Errorf("Room(%d) = %v, want %v", need, err, want)
	}
}

// TestRoomCountsStoresInProgress: the ceiling counts what the stores in
// progress claim (their declared size) and, past it, what they write, so
// stores that begin at once cannot all count on the same space; a declared
// size that does not fit is refused before a byte is read (docs/storage.md,
// local: Room).
func TestRoomCountsStoresInProgress(t *testing.T) {
	s := newSink(t, Options{MaxTotalBytes: 100_000, MinFreeBytes: None})

	// A store declaring 60,000 bytes: claimed before it reads.
	pw, wait := pipePut(t, s, sink.PutOptions{Size: 60_000})
	send(t, pw, 1, 10)
	room(t, s, 0, nil)
	room(t, s, 40_000, nil)
	room(t, s, 40_001, sink.ErrNoRoom)

	// A second one that does not fit beside it is refused unread.
	body := &countingReader{r: bytes.NewReader(sinktest.Bytes(2, 50_000))}
	if _, err := s.Put(context.Background(), body, sink.PutOptions{Size: 50_000}); !errors.Is(err, sink.ErrNoRoom) {
		t.Fatalf("Put of 50,000 declared bytes beside 60,000 claimed of 100,000 = %v, want sink.ErrNoRoom", err)
	}
	if n := body.reads.Load(); n != 0 {
		t.Errorf("the refused store read its body %d times, want none", n)
	}

	// The first writes more than it declared: what it writes counts.
	send(t, pw, 1, 69_990)
	send(t, pw, 3, 1) // read once the 70,000 before it are written
	room(t, s, 29_999, nil)
	room(t, s, 30_001, sink.ErrNoRoom)
	pw.Close()
	b, err := wait()
	if err != nil {
		t.Fatalf("the first store: %v", err)
	}
	if b.Size != 70_001 || s.Usage() != 70_001 || s.claimed.Load() != 0 || s.written.Load() != 0 {
		t.Errorf("after the store: size %d, Usage %d, claimed %d, written %d; want 70001, 70001, 0, 0",
			b.Size, s.Usage(), s.claimed.Load(), s.written.Load())
	}
	room(t, s, 29_999, nil)
	room(t, s, 30_000, sink.ErrNoRoom)

	// A body of unknown size streams, counted as it is written.
	pw, wait = pipePut(t, s, sink.PutOptions{})
	send(t, pw, 4, 20_000)
	send(t, pw, 5, 1)
	if got := s.claimed.Load(); got < 20_000 || got > 20_001 {
		t.Errorf("a streamed store of 20,000 bytes so far claims %d", got)
	}
	room(t, s, 0, sink.ErrNoRoom) // 70,001 + 20,000 of 100,000: 9,999 left, fewer than the 50,000 refused
	pw.Close()
	if _, err := wait(); err != nil {
		t.Fatal(err)
	}
	if s.claimed.Load() != 0 || s.written.Load() != 0 {
		t.Errorf("claims left after every store ended: %d claimed, %d written", s.claimed.Load(), s.written.Load())
	}
	if got := tree(t, s.Dir()); hasTemp(got) {
		t.Errorf("a temp was left behind: %v", got)
	}
}

// hasTemp reports whether any name in the tree is a temp.
func hasTemp(names []string) bool {
	for _, n := range names {
		if strings.Contains(n, tempPrefix) {
			return true
		}
	}
	return false
}

// TestRoomKeepsFreeSpace: with the free space of the file system given by
// the seam, Room refuses a store that would leave less than MinFreeBytes,
// counting what the stores in progress have claimed but not yet written;
// a declared size refused is remembered for stores of unknown size until
// room for it is free or the next sweep.
func TestRoomKeepsFreeSpace(t *testing.T) {
	s := newSink(t, Options{MaxTotalBytes: None, MinFreeBytes: 1000})
	var free atomic.Int64
	s.freeSpace = func(dir string) (int64, error) {
		if dir != s.Dir() {
			t.Errorf("free space asked of %q, want the root %q", dir, s.Dir())
		}
		return free.Load(), nil
	}

	free.Store(999)
	room(t, s, 0, sink.ErrNoRoom)
	free.Store(1000)
	room(t, s, 0, nil)
	room(t, s, 1, sink.ErrNoRoom)
	free.Store(6000)
	room(t, s, 5000, nil)
	room(t, s, 5001, sink.ErrNoRoom)

	// 3,000 claimed and at most 10 written yet (the store may still hold
	// them in its buffer): the free space does not show the rest.
	pw, wait := pipePut(t, s, sink.PutOptions{Size: 3000})
	send(t, pw, 1, 10)
	room(t, s, 2000, nil)
	room(t, s, 2011, sink.ErrNoRoom)
	send(t, pw, 1, 2990)
	pw.Close()
	if _, err := wait(); err != nil {
		t.Fatal(err)
	}
	room(t, s, 5000, nil)

	// A declared size that does not fit is refused, and a store of unknown
	// size waits until it would.
	body := &countingReader{r: bytes.NewReader(sinktest.Bytes(2, 5500))}
	if _, err := s.Put(context.Background(), body, sink.PutOptions{Size: 5500}); !errors.Is(err, sink.ErrNoRoom) || body.reads.Load() != 0 {
		t.Fatalf("Put of 5,500 declared bytes with 5,000 to spare = %v after %d reads, want sink.ErrNoRoom unread", err, body.reads.Load())
	}
	room(t, s, 0, sink.ErrNoRoom)
	room(t, s, 100, nil) // a known size stands for itself
	free.Store(6500)
	room(t, s, 0, nil)
	free.Store(6000)
	room(t, s, 0, sink.ErrNoRoom)
	if _, err := s.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	room(t, s, 0, nil)

	off := newSink(t, Options{MaxTotalBytes: None, MinFreeBytes: None})
	off.freeSpace = func(string) (int64, error) { return 0, nil }
	room(t, off, 0, nil)
	if def := newSink(t, Options{}); def.minFree != DefaultMinFreeBytes {
		t.Errorf("default MinFreeBytes = %d, want %d", def.minFree, int64(DefaultMinFreeBytes))
	}
}

// TestDiskFullMidBody: a store that runs out of space part way through
// fails with sink.ErrNoRoom beside the ENOSPC, removes its temp, and Room
// then refuses stores of unknown size until more space is free, beyond the
// margin, than that store had written.
func TestDiskFullMidBody(t *testing.T) {
	s := newSink(t, Options{MaxTotalBytes: None, MinFreeBytes: 1000})
	var free atomic.Int64
	free.Store(100_000)
	s.freeSpace = func(string) (int64, error) { return free.Load(), nil }
	s.wrapTemp = func(w io.Writer) io.Writer { return &diskFull{w: w, room: 100_000} }

	room(t, s, 0, nil)
	_, err := s.Put(context.Background(), bytes.NewReader(sinktest.Bytes(1, 300_000)), sink.PutOptions{})
	if !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, sink.ErrNoRoom) {
		t.Fatalf("Put on a full disk = %v, want ENOSPC and sink.ErrNoRoom", err)
	}
	if !strings.HasPrefix(err.Error(), "local: ") {
		t.Errorf("error %q lacks the package prefix", err)
	}
	if got := tree(t, s.Dir()); len(got) != 0 {
		t.Errorf("tree after the disk filled up = %v, want it empty", got)
	}
	if s.claimed.Load() != 0 || s.written.Load() != 0 {
		t.Errorf("claims left: %d claimed, %d written", s.claimed.Load(), s.written.Load())
	}
	// The temp is gone, so the 100,000 bytes are free again; the body
	// needs more than that.
	room(t, s, 0, sink.ErrNoRoom)
	free.Store(101_000) // 100,000 beyond the margin
	room(t, s, 0, sink.ErrNoRoom)
	free.Store(101_001)
	room(t, s, 0, nil)
}
