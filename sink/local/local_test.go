package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/sinktest"
)

var quiet = slog.New(slog.DiscardHandler)

func newSink(t testing.TB, opts Options) *Sink {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = filepath.Join(t.TempDir(), "blobs")
	}
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	s, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	// Plenty of free space, whatever the disk the tests run on holds; the
	// tests of Room set their own.
	s.freeSpace = func(string) (int64, error) { return 1 << 50, nil }
	return s
}

// full reports whether s has no room for a store of unknown size.
func full(s *Sink) bool { return errors.Is(s.Room(0), sink.ErrNoRoom) }

func TestConformance(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) sink.Sink {
		return newSink(t, Options{TTL: sinktest.TTL})
	})
}

// tree lists every file and directory under dir, relative and sorted, with
// "/" after directories.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			rel += "/"
		}
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func mustPut(t *testing.T, s *Sink, now time.Time, data []byte) sink.Blob {
	t.Helper()
	b, err := s.PutAt(context.Background(), now, bytes.NewReader(data), sink.PutOptions{})
	if err != nil {
		t.Fatalf("PutAt: %v", err)
	}
	return b
}

func TestLayoutModesAndURI(t *testing.T) {
	// Not parallel: the umask is process-wide. A restrictive umask is what
	// hides a missing chmod.
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)

	root := filepath.Join(t.TempDir(), "a dir", "blobs")
	s := newSink(t, Options{Dir: root})
	data := []byte("hello")
	fp := sinktest.Fingerprint(data)
	b := mustPut(t, s, time.Now(), data)

	want := []string{fp[0:2] + "/", fp[0:2] + "/" + fp[2:4] + "/", fp[0:2] + "/" + fp[2:4] + "/" + fp + ".bin"}
	if diff := cmp.Diff(want, tree(t, root)); diff != "" {
		t.Errorf("tree (-want +got):\n%s", diff)
	}
	path := filepath.Join(root, fp[0:2], fp[2:4], fp+".bin")
	u, err := url.Parse(b.URI)
	if err != nil || u.Scheme != "file" || u.Path != path {
		t.Errorf("URI %q does not parse back to file %q (err %v)", b.URI, path, err)
	}
	if !strings.Contains(b.URI, "a%20dir") {
		t.Errorf("URI %q: want the space percent-encoded", b.URI)
	}
	for _, tc := range []struct {
		path string
		mode fs.FileMode
	}{
		{filepath.Dir(root), 0o755},
		{root, 0o755},
		{filepath.Join(root, fp[0:2]), 0o755},
		{filepath.Join(root, fp[0:2], fp[2:4]), 0o755},
		{path, 0o644},
	} {
		fi, err := os.Stat(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != tc.mode {
			t.Errorf("mode of %s = %#o, want %#o", tc.path, got, tc.mode)
		}
	}
}

func TestExistingDirectoriesKeepTheirMode(t *testing.T) {
	root := filepath.Join(t.TempDir(), "blobs")
	if err := os.Mkdir(root, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o750); err != nil {
		t.Fatal(err)
	}
	s := newSink(t, Options{Dir: root})
	mustPut(t, s, time.Now(), []byte("x"))
	fi, _ := os.Stat(root)
	if fi.Mode().Perm() != 0o750 {
		t.Errorf("root re-moded to %#o, want it left at 0750", fi.Mode().Perm())
	}
}

func TestDirIsMadeAbsolute(t *testing.T) {
	t.Chdir(t.TempDir())
	s := newSink(t, Options{Dir: "blobs"})
	cwd, _ := os.Getwd()
	if want := filepath.Join(cwd, "blobs"); s.Dir() != want {
		t.Errorf("Dir() = %q, want %q", s.Dir(), want)
	}
	b := mustPut(t, s, time.Now(), []byte("x"))
	if !strings.HasPrefix(b.URI, "file://"+filepath.ToSlash(cwd)+"/blobs/") {
		t.Errorf("URI = %q, want it absolute under %s", b.URI, cwd)
	}
}

func TestNewRejects(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"dir is a file", Options{Dir: file}},
		{"dir under a file", Options{Dir: filepath.Join(file, "blobs")}},
		{"negative TTL", Options{Dir: t.TempDir(), TTL: -time.Second}},
		{"negative grace", Options{Dir: t.TempDir(), TempGrace: -time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Logger = quiet
			if _, err := New(tc.opts); err == nil {
				t.Errorf("New(%+v) succeeded, want an error", tc.opts)
			}
		})
	}
}

// temps counts the temps a Sink makes, through its temp-writer seam.
func temps(s *Sink) *atomic.Int64 {
	var n atomic.Int64
	s.wrapTemp = func(w io.Writer) io.Writer { n.Add(1); return w }
	return &n
}

func TestReReferenceTouchesAndDropsTheTemp(t *testing.T) {
	small := []byte("same bytes")
	large := sinktest.Bytes(7, 16<<10+1)
	for _, tc := range []struct {
		name string
		data []byte
		// reopen puts the second time through a new Sink on the same
		// tree.
		reopen bool
	}{
		{name: "small body this Sink stored", data: small},
		{name: "small body another Sink stored", data: small, reopen: true},
		{name: "large body", data: large},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSink(t, Options{})
			t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
			first := mustPut(t, s, t0, tc.data)
			path := s.Path(first.Fingerprint)
			old := t0.Add(-48 * time.Hour)
			if err := os.Chtimes(path, old, old); err != nil {
				t.Fatal(err)
			}
			if tc.reopen {
				s = newSink(t, Options{Dir: s.Dir()})
			}
			made := temps(s)

			second := mustPut(t, s, t0, tc.data)
			if second.Created || second.URI != first.URI || second.Size != int64(len(tc.data)) {
				t.Errorf("second Put = %+v, want Created=false, URI %q, size %d", second, first.URI, len(tc.data))
			}
			if want := t0.Add(DefaultTTL); !second.ExpiresAt.Equal(want) {
				t.Errorf("ExpiresAt = %v, want %v", second.ExpiresAt, want)
			}
			if got := made.Load(); got != 1 {
				t.Errorf("the second Put made %d temps, want 1", got)
			}
			touched := t0.Add(touchLead)
			fi, _ := os.Stat(path)
			if !fi.ModTime().Equal(touched) {
				t.Errorf("mtime = %v, want it touched to %v", fi.ModTime(), touched)
			}

			// Re-references within the lead, and older ones, leave it.
			mustPut(t, s, t0.Add(touchLead/2), tc.data)
			mustPut(t, s, t0.Add(-time.Hour), tc.data)
			fi, _ = os.Stat(path)
			if !fi.ModTime().Equal(touched) {
				t.Errorf("mtime = %v after re-references within the lead, want %v", fi.ModTime(), touched)
			}
			// One after the lead moves it on.
			later := t0.Add(2 * touchLead)
			mustPut(t, s, later, tc.data)
			fi, _ = os.Stat(path)
			if want := later.Add(touchLead); !fi.ModTime().Equal(want) {
				t.Errorf("mtime = %v after a later re-reference, want %v", fi.ModTime(), want)
			}
			if got := tree(t, s.Dir()); len(got) != 3 {
				t.Errorf("tree = %v, want only the blob and its two shards", got)
			}
		})
	}
}

// TestReStoreChecksTheBlobIsThere: a blob this Sink stored, then removed
// behind its back, is written again, and a final name that is no longer a
// regular file is refused, never announced.
func TestReStoreChecksTheBlobIsThere(t *testing.T) {
	s := newSink(t, Options{})
	data := []byte("removed by hand")
	b := mustPut(t, s, time.Now(), data)
	path := s.Path(b.Fingerprint)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	again := mustPut(t, s, time.Now(), data)
	if !again.Created {
		t.Errorf("Put after the blob was removed = %+v, want it created again", again)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
		t.Errorf("blob = %q, want %q", got, data)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Put(context.Background(), bytes.NewReader(data), sink.PutOptions{}); err == nil {
		t.Errorf("Put over a directory = %+v, want an error", got)
	}
}

// TestTempIsMadeInTheRoot: every Put streams into a temp in the root of
// the tree, where the sweep finds it if the process dies.
func TestTempIsMadeInTheRoot(t *testing.T) {
	for _, data := range [][]byte{[]byte("a small body"), sinktest.Bytes(3, 16<<10+1)} {
		s := newSink(t, Options{})
		var names []string
		s.wrapTemp = func(w io.Writer) io.Writer {
			names = append(names, w.(temp).Name())
			return w
		}
		mustPut(t, s, time.Now(), data)
		if len(names) != 1 || filepath.Dir(names[0]) != s.Dir() ||
			!strings.HasPrefix(filepath.Base(names[0]), tempPrefix) || !strings.HasSuffix(names[0], tempSuffix) {
			t.Errorf("Put of %d bytes made temps %q, want one %s*%s in %q", len(data), names, tempPrefix, tempSuffix, s.Dir())
		}
	}
}

// TestPutMakesASweptShardAgain: a shard this Sink made and another
// process's sweep removed is made again for the rename into it.
func TestPutMakesASweptShardAgain(t *testing.T) {
	for _, data := range [][]byte{[]byte("its shard swept away"), sinktest.Bytes(5, 16<<10+1)} {
		s := newSink(t, Options{})
		b := mustPut(t, s, time.Now(), data)
		path := s.Path(b.Fingerprint)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Dir(path)); err != nil {
			t.Fatal(err)
		}
		again := mustPut(t, s, time.Now(), data)
		if !again.Created {
			t.Errorf("Put of %d bytes after its shard was removed = %+v, want it created again", len(data), again)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
			t.Errorf("blob of %d bytes = %d bytes on disk, want them all", len(data), len(got))
		}
	}
}

// TestSmallBodyOverTheLimit: a body one byte over the limit stores
// nothing and leaves no temp.
func TestSmallBodyOverTheLimit(t *testing.T) {
	s := newSink(t, Options{})
	_, err := s.Put(context.Background(), bytes.NewReader(make([]byte, 101)), sink.PutOptions{Limit: 100})
	if !errors.Is(err, sink.ErrTooLarge) {
		t.Fatalf("Put = %v, want ErrTooLarge", err)
	}
	if got := tree(t, s.Dir()); len(got) != 0 {
		t.Errorf("tree = %v, want it empty", got)
	}
}

// diskFull fails with ENOSPC once more than room bytes have been written.
type diskFull struct {
	w    io.Writer
	room int
}

func (d *diskFull) Write(p []byte) (int, error) {
	if len(p) > d.room {
		n, _ := d.w.Write(p[:d.room])
		d.room = 0
		return n, &fs.PathError{Op: "write", Path: "temp", Err: syscall.ENOSPC}
	}
	d.room -= len(p)
	return d.w.Write(p)
}

func TestFailuresLeaveNothingBehind(t *testing.T) {
	data := sinktest.Bytes(42, 300_000)
	for _, tc := range []struct {
		name    string
		full    bool
		body    io.Reader
		limit   int64
		wantErr error
	}{
		{name: "disk full", full: true, body: bytes.NewReader(data), wantErr: syscall.ENOSPC},
		{name: "too large", body: bytes.NewReader(data), limit: 1000, wantErr: sink.ErrTooLarge},
		{name: "reader fails", body: io.MultiReader(bytes.NewReader(data[:1000]), errReader{errBroken}), wantErr: errBroken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSink(t, Options{})
			if tc.full {
				s.wrapTemp = func(w io.Writer) io.Writer { return &diskFull{w: w, room: 100_000} }
			}
			_, err := s.Put(context.Background(), tc.body, sink.PutOptions{Limit: tc.limit})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Put = %v, want an error wrapping %v", err, tc.wantErr)
			}
			if !strings.HasPrefix(err.Error(), "local: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			if got := tree(t, s.Dir()); len(got) != 0 {
				t.Errorf("tree after a failed Put = %v, want it empty", got)
			}
		})
	}
}

var errBroken = errors.New("broken body")

// errReader fails every read with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// place writes a file of size bytes at rel under dir with the given mtime.
func place(t *testing.T, dir, rel string, size int, mtime time.Time) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func TestSweepPopulations(t *testing.T) {
	now := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	ttl, grace := 24*time.Hour, time.Hour
	s := newSink(t, Options{TTL: ttl, TempGrace: grace})
	fpOld := strings.Repeat("ab", 32)
	fpNew := strings.Repeat("cd", 32)
	fpEdge := "abcd" + strings.Repeat("0", 60)
	old, fresh := now.Add(-ttl-time.Second), now.Add(-ttl+time.Second)

	// Expired blob alone in ab/ab: both shards go once it is reaped.
	place(t, s.Dir(), "ab/ab/"+fpOld+".bin", 100, old)
	// A blob exactly TTL old survives (reaped only when strictly older).
	place(t, s.Dir(), "ab/cd/"+fpEdge+".bin", 10, now.Add(-ttl))
	// Fresh blob.
	place(t, s.Dir(), "cd/cd/"+fpNew+".bin", 200, fresh)
	// A temp older than the grace but younger than the TTL is debris.
	place(t, s.Dir(), ".put.111.tmp", 30, now.Add(-grace-time.Second))
	// A fresh temp at the root is an in-flight write.
	place(t, s.Dir(), ".put.222.tmp", 40, now.Add(-time.Minute))
	// The reference's temps, in a shard: one old, one in flight. The shard
	// holding the fresh one must survive the rmdir pass.
	place(t, s.Dir(), "ee/ee/."+strings.Repeat("e", 64)+".x1.tmp", 50, now.Add(-2*grace))
	place(t, s.Dir(), "ff/ff/."+strings.Repeat("f", 64)+".x2.tmp", 60, now)
	// An old temp alone: its shard goes in the same sweep.
	place(t, s.Dir(), "99/99/."+strings.Repeat("9", 64)+".x3.tmp", 70, old)
	// Not ours: never touched, however old.
	place(t, s.Dir(), "README", 5, old)
	place(t, s.Dir(), "notashard/x.bin", 5, old)
	place(t, s.Dir(), "ab/cd/.hidden.bin", 5, old)
	if err := os.MkdirAll(filepath.Join(s.Dir(), "12", "34"), 0o755); err != nil {
		t.Fatal(err) // an empty shard pair left by an earlier crash
	}

	st, err := s.SweepAt(context.Background(), now)
	if err != nil {
		t.Fatal(err)
	}
	wantStats := SweepStats{
		BlobsReaped:        1,
		TempsReaped:        3,
		ShardsRemoved:      7, // ab/ab ee/ee 99/99 12/34, then ee 99 12 (ab keeps cd)
		BytesReclaimed:     100 + 30 + 50 + 70,
		BlobsRemaining:     2,
		BlobBytesRemaining: 10 + 200,
		TempsRemaining:     2,
		TempBytesRemaining: 40 + 60,
	}
	if diff := cmp.Diff(wantStats, st); diff != "" {
		t.Errorf("SweepStats (-want +got):\n%s", diff)
	}
	wantTree := []string{
		".put.222.tmp",
		"README",
		"ab/",
		"ab/cd/",
		"ab/cd/.hidden.bin",
		"ab/cd/" + fpEdge + ".bin",
		"cd/",
		"cd/cd/",
		"cd/cd/" + fpNew + ".bin",
		"ff/",
		"ff/ff/",
		"ff/ff/." + strings.Repeat("f", 64) + ".x2.tmp",
		"notashard/",
		"notashard/x.bin",
	}
	if diff := cmp.Diff(wantTree, tree(t, s.Dir())); diff != "" {
		t.Errorf("tree after sweep (-want +got):\n%s", diff)
	}
	if got, want := s.Usage(), st.BytesRemaining(); got != want {
		t.Errorf("Usage() = %d, want the sweep's %d", got, want)
	}
}

func TestSweepMissingRoot(t *testing.T) {
	s := newSink(t, Options{})
	if err := os.Remove(s.Dir()); err != nil {
		t.Fatal(err)
	}
	st, err := s.Sweep(context.Background())
	if err != nil || st != (SweepStats{}) {
		t.Errorf("Sweep of a missing root = %+v, %v; want zero stats and no error", st, err)
	}
	// Put recreates the root.
	if _, err := s.Put(context.Background(), strings.NewReader("x"), sink.PutOptions{}); err != nil {
		t.Errorf("Put after the root vanished: %v", err)
	}
}

func TestSweepCancelled(t *testing.T) {
	s := newSink(t, Options{})
	mustPut(t, s, time.Now(), []byte("x"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Sweep(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Sweep(cancelled) = %v, want context.Canceled", err)
	}
	if s.Usage() != 1 {
		t.Errorf("Usage() = %d after a cancelled sweep, want the estimate 1 kept", s.Usage())
	}
}

func TestCeiling(t *testing.T) {
	now := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	s := newSink(t, Options{MaxTotalBytes: 1000, TTL: time.Hour, TempGrace: time.Hour})

	type state struct {
		Usage int64
		Full  bool
	}
	check := func(step string, want state) {
		t.Helper()
		if diff := cmp.Diff(want, state{s.Usage(), full(s)}); diff != "" {
			t.Errorf("%s (-want +got):\n%s", step, diff)
		}
	}
	check("empty, unmeasured", state{0, false})

	a := mustPut(t, s, now, sinktest.Bytes(1, 600))
	check("one blob, estimated", state{600, false})
	mustPut(t, s, now, sinktest.Bytes(1, 600))
	check("re-reference adds nothing", state{600, false})
	mustPut(t, s, now, sinktest.Bytes(2, 399))
	check("just under", state{999, false})

	// Debris counts: the sweep measures blobs and temps together.
	place(t, s.Dir(), ".put.9.tmp", 1, now)
	if _, err := s.SweepAt(ctx, now); err != nil {
		t.Fatal(err)
	}
	check("measured with a temp, at the ceiling", state{1000, true})

	// Age the first blob past the TTL: the sweep frees it and the sink
	// takes new bytes again.
	if err := os.Chtimes(s.Path(a.Fingerprint), now.Add(-2*time.Hour), now.Add(-2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SweepAt(ctx, now); err != nil {
		t.Fatal(err)
	}
	check("after reaping", state{400, false})

	off := newSink(t, Options{MaxTotalBytes: None})
	mustPut(t, off, now, sinktest.Bytes(3, 5000))
	if full(off) {
		t.Errorf("no room with the ceiling disabled")
	}
	def := newSink(t, Options{})
	if def.maxTotal != DefaultMaxTotalBytes {
		t.Errorf("default ceiling = %d, want %d", def.maxTotal, int64(DefaultMaxTotalBytes))
	}
}

// TestWaitMeasuredReopenedTreeOverTheCeiling: a Sink opened on a tree that
// already holds more than MaxTotalBytes is not Full until a sweep has
// measured it, and WaitMeasured is how a caller waits for that before its
// first store (docs/storage.md, local: bytes held over the ceiling park new fetches).
func TestWaitMeasuredReopenedTreeOverTheCeiling(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "blobs")
	first := newSink(t, Options{Dir: dir, MaxTotalBytes: 1000})
	mustPut(t, first, time.Now(), sinktest.Bytes(1, 1200))

	s := newSink(t, Options{Dir: dir, MaxTotalBytes: 1000})
	if full(s) {
		t.Fatal("no room before any sweep; the unmeasured figure counts only this Sink's blobs")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := s.WaitMeasured(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitMeasured with no sweep = %v, want context.DeadlineExceeded", err)
	}

	runCtx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx, time.Hour) }()
	defer func() { stop(); <-done }()
	if err := s.WaitMeasured(t.Context()); err != nil {
		t.Fatalf("WaitMeasured: %v", err)
	}
	if got := s.Usage(); got != 1200 || !full(s) {
		t.Errorf("after WaitMeasured: Usage() = %d, no room = %v; want 1200, true", got, full(s))
	}
	// Later calls return at once.
	if err := s.WaitMeasured(t.Context()); err != nil {
		t.Errorf("second WaitMeasured: %v", err)
	}
}

func TestWaitMeasuredSweepOutcomes(t *testing.T) {
	s := newSink(t, Options{})
	mustPut(t, s, time.Now(), []byte("x")) // a shard, where the walk checks ctx

	// A cancelled sweep measured nothing: waiters keep waiting.
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Sweep(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sweep(cancelled) = %v", err)
	}
	short, cancelShort := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancelShort()
	if err := s.WaitMeasured(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitMeasured after a cancelled sweep = %v, want context.DeadlineExceeded", err)
	}

	// A first sweep that cannot read the root is reported, not waited out:
	// the next try is a whole interval away. (A file in place of the root,
	// because permissions do not stop root.)
	if err := os.RemoveAll(s.Dir()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.Dir(), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, sweepErr := s.Sweep(t.Context())
	if sweepErr == nil {
		t.Fatal("Sweep of a root that is a file succeeded")
	}
	if err := s.WaitMeasured(t.Context()); err == nil || err.Error() != sweepErr.Error() {
		t.Fatalf("WaitMeasured after a failed sweep = %v, want the sweep's error %v", err, sweepErr)
	}

	// Once a sweep measures the tree, the failure is history.
	if err := os.Remove(s.Dir()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sweep(t.Context()); err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	if err := s.WaitMeasured(t.Context()); err != nil {
		t.Errorf("WaitMeasured after a measuring sweep = %v, want nil", err)
	}
}

func TestUsageKeepsStoresMadeDuringASweep(t *testing.T) {
	s := newSink(t, Options{})
	now := time.Now()
	mustPut(t, s, now, []byte("before"))
	// Split the sweep around a Put, as a concurrent one would be.
	var st SweepStats
	s.usageMu.Lock()
	mark := s.added
	s.usageMu.Unlock()
	blobs, temps, _, err := s.walk(context.Background(), &st)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, now, []byte("during!"))
	s.reapBlobs(blobs, now.Add(-s.ttl), &st)
	s.reapTemps(temps, now.Add(-s.tempGrace), &st)
	s.usageMu.Lock()
	s.base = st.BytesRemaining()
	s.added -= mark
	s.usageMu.Unlock()
	if got := s.Usage(); got != 6+7 {
		t.Errorf("Usage() = %d, want 13 (6 measured + 7 stored during the walk)", got)
	}
}

func TestSweepSparesABlobReReferencedAfterTheWalk(t *testing.T) {
	t0 := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	s := newSink(t, Options{TTL: time.Hour})
	data := []byte("re-referenced")
	b := mustPut(t, s, t0, data)

	// The walk sees the blob as expired...
	later := t0.Add(2 * time.Hour)
	var st SweepStats
	blobs, _, _, err := s.walk(context.Background(), &st)
	if err != nil {
		t.Fatal(err)
	}
	// ...a Put re-references it before the reap pass reaches it...
	mustPut(t, s, later, data)
	// ...and the reap pass, re-checking under the shard lock, keeps it.
	s.reapBlobs(blobs, later.Add(-s.ttl), &st)
	if st.BlobsReaped != 0 || st.BlobsRemaining != 1 {
		t.Errorf("stats = %+v, want the blob kept", st)
	}
	if _, err := os.Stat(s.Path(b.Fingerprint)); err != nil {
		t.Errorf("re-referenced blob was reaped: %v", err)
	}
}

func TestReReferenceOfABlobReapedMeanwhile(t *testing.T) {
	// Another process sharing the tree unlinks the blob between this
	// Put's stat and its touch: the Put publishes its own copy.
	s := newSink(t, Options{})
	data := []byte("vanishing")
	b := mustPut(t, s, time.Now(), data)
	path := s.Path(b.Fingerprint)
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(s.Dir(), tempPrefix+"*"+tempSuffix)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(data)
	f.Close()
	os.Remove(path)
	os.Remove(filepath.Dir(path))
	created, err := s.publish(f.Name(), b.Fingerprint, s.Path(b.Fingerprint), time.Now())
	if err != nil || !created {
		t.Fatalf("publish = %v, %v; want created", created, err)
	}
	got, _ := os.ReadFile(path)
	if !bytes.Equal(got, data) {
		t.Errorf("blob = %q, want %q", got, data)
	}
}

func TestPutsRacingSweeps(t *testing.T) {
	// A sweep whose clock is far ahead reaps every blob and removes every
	// shard as soon as it can; Puts running alongside must all succeed
	// and never leave a partial blob.
	s := newSink(t, Options{TTL: time.Second, TempGrace: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	var sweeper, writers sync.WaitGroup
	sweeper.Go(func() {
		for ctx.Err() == nil {
			// Every blob is past its TTL, no temp past its grace.
			if _, err := s.SweepAt(ctx, time.Now().Add(time.Minute)); err != nil && ctx.Err() == nil {
				t.Errorf("SweepAt: %v", err)
			}
		}
	})
	for w := range 4 {
		writers.Go(func() {
			for i := range 100 {
				// Few distinct fingerprints, so shards are shared and
				// blobs are re-referenced while being reaped.
				data := fmt.Appendf(nil, "blob %d", (w*100+i)%7)
				b, err := s.Put(context.Background(), bytes.NewReader(data), sink.PutOptions{})
				if err != nil {
					t.Errorf("Put: %v", err)
					return
				}
				if got, err := os.ReadFile(s.Path(b.Fingerprint)); err == nil && !bytes.Equal(got, data) {
					t.Errorf("blob %s holds %q, want %q", b.Fingerprint, got, data)
				}
			}
		})
	}
	writers.Wait()
	cancel()
	sweeper.Wait()
	for _, p := range tree(t, s.Dir()) {
		if strings.HasSuffix(p, ".tmp") {
			t.Errorf("temp %s left behind", p)
		}
	}
}

// recorder is a slog.Handler that keeps records and signals each one.
type recorder struct {
	mu      sync.Mutex
	records []slog.Record
	signal  chan string
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recorder) WithGroup(string) slog.Handler            { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.records = append(r.records, rec)
	r.mu.Unlock()
	if r.signal != nil {
		r.signal <- rec.Message
	}
	return nil
}

func (r *recorder) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, rec := range r.records {
		fmt.Fprintf(&b, "%s %s", rec.Level, rec.Message)
		rec.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
		b.WriteByte('\n')
	}
	return b.String()
}

func TestTraversalWarning(t *testing.T) {
	base := t.TempDir()
	// t.TempDir's parent is made 0700; open it so only our levels count.
	if err := os.Chmod(filepath.Dir(base), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	private := filepath.Join(base, "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(private, 0o710); err != nil { // group may, others may not
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		dir      string
		wantWarn []string
	}{
		{name: "traversable", dir: filepath.Join(base, "open", "blobs")},
		{name: "private parent over a fresh leaf", dir: filepath.Join(private, "blobs"),
			wantWarn: []string{private + " (0710)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			if _, err := New(Options{Dir: tc.dir, Logger: slog.New(rec)}); err != nil {
				t.Fatal(err)
			}
			out := rec.text()
			if len(tc.wantWarn) == 0 {
				if out != "" {
					t.Errorf("unexpected log:\n%s", out)
				}
				return
			}
			if !strings.Contains(out, "WARN") || !strings.Contains(out, "not traversable") {
				t.Errorf("log = %q, want a traversal warning", out)
			}
			for _, w := range tc.wantWarn {
				if !strings.Contains(out, w) {
					t.Errorf("log = %q, want it to name %q", out, w)
				}
			}
			if strings.Contains(out, tc.dir+" (") {
				t.Errorf("log = %q names the fresh 0755 leaf", out)
			}
		})
	}
}

func TestRunSweepsUntilCancelled(t *testing.T) {
	s := newSink(t, Options{TempGrace: time.Hour})
	rec := &recorder{signal: make(chan string, 10)}
	s.log = slog.New(rec) // after New, so its start-up check is not recorded
	old := time.Now().Add(-2 * time.Hour)
	place(t, s.Dir(), ".put.1.tmp", 10, old)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx, time.Hour) }()
	// Run sweeps at once, without waiting for the first tick.
	if msg := <-rec.signal; msg != "local: blob sweep" {
		t.Fatalf("first log = %q, want the sweep summary", msg)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	if got := tree(t, s.Dir()); len(got) != 0 {
		t.Errorf("tree = %v, want the stale temp swept", got)
	}
}

func TestRenameUnlessExists(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, p := range []string{a, b} {
		if err := os.WriteFile(p, []byte(p), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for name, rename := range map[string]func(string, string) error{"portable": renameUnlessExists, "native": renameNoReplace} {
		if err := rename(a, b); !errors.Is(err, fs.ErrExist) {
			t.Errorf("%s: onto an existing name: %v, want ErrExist", name, err)
		}
		if got, _ := os.ReadFile(b); string(got) != b {
			t.Errorf("%s: the existing file was replaced", name)
		}
	}
	if err := renameUnlessExists(a, filepath.Join(dir, "c")); err != nil {
		t.Fatalf("onto a free name: %v", err)
	}
	if err := renameNoReplace(filepath.Join(dir, "c"), filepath.Join(dir, "d")); err != nil {
		t.Fatalf("onto a free name: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "d")); string(got) != a {
		t.Errorf("renamed file holds %q", got)
	}
	if err := renameNoReplace(filepath.Join(dir, "d"), filepath.Join(dir, "missing", "e")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("into a missing directory: %v, want ErrNotExist", err)
	}
}

// TestPutNeverReapsBeforeTheAnnouncedExpiry: a new blob's mtime is the time
// its ExpiresAt was computed from, so the sweep (mtime + TTL) never reaps
// it before then, though the kernel's own file times lag the clock.
func TestPutNeverReapsBeforeTheAnnouncedExpiry(t *testing.T) {
	s := newSink(t, Options{})
	before := time.Now()
	b, err := s.Put(context.Background(), bytes.NewReader([]byte("fresh")), sink.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(s.Path(b.Fingerprint))
	if err != nil {
		t.Fatal(err)
	}
	if reap := fi.ModTime().Add(DefaultTTL); reap.Before(b.ExpiresAt) {
		t.Errorf("the sweep would reap at %v, before the announced %v", reap, b.ExpiresAt)
	}
	if b.ExpiresAt.Before(before.Add(DefaultTTL)) {
		t.Errorf("ExpiresAt = %v, want at least the start of the Put plus the TTL", b.ExpiresAt)
	}
	if fi.Mode().Perm() != blobMode {
		t.Errorf("mode = %v, want %v", fi.Mode().Perm(), os.FileMode(blobMode))
	}
}

// TestShardRemovedBehindTheSinksBack: a shard this Sink made, removed by
// another process, is made again by the next Put into it.
func TestShardRemovedBehindTheSinksBack(t *testing.T) {
	s := newSink(t, Options{})
	first, err := s.Put(context.Background(), bytes.NewReader([]byte("one")), sink.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leaf := filepath.Dir(s.Path(first.Fingerprint))
	if err := os.RemoveAll(filepath.Dir(leaf)); err != nil {
		t.Fatal(err)
	}
	again, err := s.Put(context.Background(), bytes.NewReader([]byte("one")), sink.PutOptions{})
	if err != nil || !again.Created {
		t.Fatalf("Put after the shard was removed = %+v, %v; want the blob made again", again, err)
	}
	if _, err := os.Stat(s.Path(first.Fingerprint)); err != nil {
		t.Errorf("blob missing: %v", err)
	}
}

// TestNamesAreTheRootsNames: a blob's path and URI are the root's,
// joined and escaped as filepath.Join and net/url would make them whole,
// whatever the root's name holds.
func TestNamesAreTheRootsNames(t *testing.T) {
	fp := sinktest.Fingerprint([]byte("named"))
	for _, name := range []string{"blobs", "a dir", "100%", "ü/ñ", "q?x#y", "semi;colon:", "plus+&="} {
		t.Run(name, func(t *testing.T) {
			s := newSink(t, Options{Dir: filepath.Join(t.TempDir(), name)})
			wantPath := filepath.Join(s.Dir(), fp[0:2], fp[2:4], fp+blobSuffix)
			if got := s.Path(fp); got != wantPath {
				t.Errorf("Path = %q, want %q", got, wantPath)
			}
			wantURI := (&url.URL{Scheme: "file", Path: filepath.ToSlash(wantPath)}).String()
			if got := s.URI(fp); got != wantURI {
				t.Errorf("URI = %q, want %q", got, wantURI)
			}
			u, err := url.Parse(s.URI(fp))
			if err != nil || filepath.FromSlash(u.Path) != wantPath {
				t.Errorf("URI %q parses to %q (%v), want the path %q", s.URI(fp), u.Path, err, wantPath)
			}
		})
	}
}
