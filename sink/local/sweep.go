package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// SweepStats is what one sweep did and what it left. The populations stay
// separate so a growing pile of temps cannot hide inside a healthy blob
// count.
type SweepStats struct {
	BlobsReaped    int   // *.bin files older than TTL removed
	TempsReaped    int   // temps older than TempGrace removed
	ShardsRemoved  int   // empty shard directories removed
	BytesReclaimed int64 // blobs and temps together

	// What the tree held when the sweep finished: blobs and temps, counted
	// and measured apart.
	BlobsRemaining     int
	BlobBytesRemaining int64
	TempsRemaining     int
	TempBytesRemaining int64

	// Failures counts entries that could not be examined or removed;
	// FailureSample describes the first. A failure is counted, not logged
	// one by one: a permissions problem usually affects the whole tree.
	Failures      int
	FailureSample string
}

// BytesRemaining is what the tree still holds, blobs and temps: the figure
// the ceiling compares against MaxTotalBytes.
func (st SweepStats) BytesRemaining() int64 { return st.BlobBytesRemaining + st.TempBytesRemaining }

// entry is one file or shard found by the walk.
type entry struct {
	path  string
	shard string // top-level shard name, for the lock; "" at the root
	size  int64
	mtime time.Time
}

// Sweep reaps the tree against the current time; see SweepAt.
func (s *Sink) Sweep(ctx context.Context) (SweepStats, error) {
	return s.SweepAt(ctx, s.now())
}

// SweepAt removes *.bin files whose mtime is older than now-TTL, then temp
// files older than now-TempGrace, then empty shard directories, and sets
// Usage to the bytes left. A file that vanishes mid-sweep (another process
// sweeping the same tree) is not a failure. The returned error is ctx.Err()
// when the sweep was cancelled, in which case Usage is left as it was, or
// an error reading the root; failures on single entries are only counted.
// A sweep that returns nil has measured the tree (see WaitMeasured).
func (s *Sink) SweepAt(ctx context.Context, now time.Time) (SweepStats, error) {
	var st SweepStats
	s.usageMu.Lock()
	mark := s.added
	s.usageMu.Unlock()

	blobs, temps, shards, err := s.walk(ctx, &st)
	if err != nil {
		if ctx.Err() == nil {
			s.usageMu.Lock()
			if !s.measured {
				s.sweepErr = err
			}
			s.usageMu.Unlock()
			s.sweptOnce.Do(func() { close(s.swept) })
		}
		return st, err
	}
	s.reapBlobs(blobs, now.Add(-s.ttl), &st)
	s.reapTemps(temps, now.Add(-s.tempGrace), &st)
	// Last: a shard is only safely empty once nothing is about to be
	// renamed into it, and the blob and temp passes may have emptied it.
	for _, d := range shards {
		mu := s.shardLock(d.shard)
		mu.Lock()
		err := syscall.Rmdir(d.path) // rmdir only: refuses a non-empty shard
		if err == nil {
			st.ShardsRemoved++
		}
		mu.Unlock()
	}

	s.usageMu.Lock()
	s.base = st.BytesRemaining()
	s.added -= mark // keep what was created while the sweep ran
	s.short = 0     // room is measured anew: a refused store may fit now
	s.measured, s.sweepErr = true, nil
	s.usageMu.Unlock()
	s.sweptOnce.Do(func() { close(s.swept) })

	attrs := []any{
		slog.Int("blobs_reaped", st.BlobsReaped),
		slog.Int("temps_reaped", st.TempsReaped),
		slog.Int("shards_removed", st.ShardsRemoved),
		slog.Int64("bytes_reclaimed", st.BytesReclaimed),
		slog.Int("blobs_remaining", st.BlobsRemaining),
		slog.Int("temps_remaining", st.TempsRemaining),
		slog.Int64("bytes_remaining", st.BytesRemaining()),
	}
	if st.Failures > 0 {
		attrs = append(attrs, slog.Int("failures", st.Failures), slog.String("failure_sample", st.FailureSample))
		s.log.Warn("local: blob sweep could not remove everything", attrs...)
	} else {
		s.log.Debug("local: blob sweep", attrs...)
	}
	return st, nil
}

// Run sweeps at once and then every interval (DefaultSweepInterval when
// interval <= 0) until ctx ends, and returns ctx.Err(). A failed sweep is
// logged and retried at the next tick: retention is not needed for
// correctness, and the ceiling guards a tree that cannot be reaped.
func (s *Sink) Run(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		interval = DefaultSweepInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("local: blob sweep failed", slog.String("blob_dir", s.dir), slog.String("error", err.Error()))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// walk lists the tree's three populations: blobs (<ab>/<cd>/*.bin), temps
// (.*.tmp at the root, where Put makes them, or in a shard), and shard
// directories, innermost first.
func (s *Sink) walk(ctx context.Context, st *SweepStats) (blobs, temps, shards []entry, err error) {
	top, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil, nil
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("local: sweep: %w", err)
	}
	var outer []entry
	for _, d1 := range top {
		p1 := filepath.Join(s.dir, d1.Name())
		if isTemp(d1) {
			temps = s.appendFile(temps, p1, "", d1, st)
			continue
		}
		if !d1.IsDir() || !isShard(d1.Name()) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, nil, nil, err
		}
		shard := d1.Name()
		outer = append(outer, entry{path: p1, shard: shard})
		mid, err := os.ReadDir(p1)
		if err != nil {
			s.fail(st, p1, err)
			continue
		}
		for _, d2 := range mid {
			p2 := filepath.Join(p1, d2.Name())
			if isTemp(d2) {
				temps = s.appendFile(temps, p2, shard, d2, st)
				continue
			}
			if !d2.IsDir() || !isShard(d2.Name()) {
				continue
			}
			shards = append(shards, entry{path: p2, shard: shard})
			leaf, err := os.ReadDir(p2)
			if err != nil {
				s.fail(st, p2, err)
				continue
			}
			for _, f := range leaf {
				p3 := filepath.Join(p2, f.Name())
				switch {
				case isTemp(f):
					temps = s.appendFile(temps, p3, shard, f, st)
				case f.Type().IsRegular() && strings.HasSuffix(f.Name(), blobSuffix) && !strings.HasPrefix(f.Name(), "."):
					blobs = s.appendFile(blobs, p3, shard, f, st)
				}
			}
		}
	}
	return blobs, temps, append(shards, outer...), nil
}

func (s *Sink) appendFile(list []entry, path, shard string, d fs.DirEntry, st *SweepStats) []entry {
	fi, err := d.Info()
	if errors.Is(err, fs.ErrNotExist) {
		return list // removed since the listing
	}
	if err != nil {
		s.fail(st, path, err)
		return list
	}
	return append(list, entry{path: path, shard: shard, size: fi.Size(), mtime: fi.ModTime()})
}

// reapBlobs re-stats each expired blob under its shard's lock before
// unlinking it, so a Put that re-referenced it after the walk keeps it.
func (s *Sink) reapBlobs(blobs []entry, cutoff time.Time, st *SweepStats) {
	for _, b := range blobs {
		if !b.mtime.Before(cutoff) {
			st.BlobsRemaining++
			st.BlobBytesRemaining += b.size
			continue
		}
		mu := s.shardLock(b.shard)
		mu.Lock()
		removed, size, err := removeIfOlder(b.path, cutoff)
		mu.Unlock()
		switch {
		case err != nil:
			s.fail(st, b.path, err)
			st.BlobsRemaining++ // still on disk, so still the ceiling's problem
			st.BlobBytesRemaining += size
		case removed:
			st.BlobsReaped++
			st.BytesReclaimed += size
		case size >= 0:
			st.BlobsRemaining++
			st.BlobBytesRemaining += size
		}
	}
}

// reapTemps needs no lock: a temp in use is being written, so its mtime
// is fresh, and only one Put ever holds a given temp.
func (s *Sink) reapTemps(temps []entry, cutoff time.Time, st *SweepStats) {
	for _, t := range temps {
		if !t.mtime.Before(cutoff) {
			st.TempsRemaining++
			st.TempBytesRemaining += t.size
			continue
		}
		err := os.Remove(t.path)
		switch {
		case err == nil:
			st.TempsReaped++
			st.BytesReclaimed += t.size
		case errors.Is(err, fs.ErrNotExist):
		default:
			s.fail(st, t.path, err)
			st.TempsRemaining++
			st.TempBytesRemaining += t.size
		}
	}
}

// removeIfOlder unlinks path if its mtime is still before cutoff. size is
// the file's size, or -1 when it no longer exists.
func removeIfOlder(path string, cutoff time.Time) (removed bool, size int64, err error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, -1, nil
	}
	if err != nil {
		return false, 0, err
	}
	if !fi.ModTime().Before(cutoff) {
		return false, fi.Size(), nil
	}
	if err := os.Remove(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, -1, nil
		}
		return false, fi.Size(), err
	}
	return true, fi.Size(), nil
}

func (s *Sink) fail(st *SweepStats, path string, err error) {
	st.Failures++
	if st.FailureSample == "" {
		st.FailureSample = fmt.Sprintf("%s: %v", path, err)
	}
}

// isShard reports whether name is a shard directory name: two lowercase
// hex digits.
func isShard(name string) bool {
	return len(name) == 2 && isHex(name[0]) && isHex(name[1])
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }

// isTemp matches Put's temps (".put.<random>.tmp") and the reference
// implementation's (".<sha256>.<random>.tmp"), so a tree shared with it is
// cleaned too.
func isTemp(d fs.DirEntry) bool {
	n := d.Name()
	return d.Type().IsRegular() && strings.HasPrefix(n, ".") && strings.HasSuffix(n, tempSuffix) && len(n) > len(tempSuffix)+1
}
