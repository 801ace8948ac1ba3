package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replicator-go/replicator/sink"
)

// Defaults for the zero fields of Options; they match the REPLICATOR_BLOB_*
// settings of the same names.
const (
	DefaultDir           = "blobs"
	DefaultTTL           = 604800 * time.Second
	DefaultTempGrace     = 3600 * time.Second
	DefaultMaxTotalBytes = 2 << 30
	DefaultMinFreeBytes  = 1 << 20
	DefaultSweepInterval = 900 * time.Second
)

const (
	blobMode = 0o644 // read by other services through the file:// URI
	dirMode  = 0o755

	blobSuffix = ".bin"
	tempPrefix = ".put."
	tempSuffix = ".tmp"

	// touchLead is how far past the store's start a re-referenced blob's
	// mtime is moved; see touch.
	touchLead = time.Second
)

// None, given to an option that documents it, turns that bound off. Every
// package of the module spells "none" this way; zero always means the
// documented default.
const None = -1

// Options configures a Sink. The zero value stores into ./blobs with the
// default retention and ceiling.
type Options struct {
	// Dir is the root of the blob tree, made absolute by New (so a later
	// chdir moves nothing). Default "blobs". It is created, with any
	// missing parents, if absent.
	Dir string
	// TTL is how long a blob survives after its last Put. Default 7 days.
	TTL time.Duration
	// TempGrace is how old a temp file must be before the sweep treats it
	// as debris from a crashed write. Default 1 hour.
	TempGrace time.Duration
	// MaxTotalBytes is the ceiling on the bytes the tree holds, blobs and
	// temps together, and the stores in progress: Room refuses a store
	// once it is reached. Default 2 GiB; None disables the ceiling.
	MaxTotalBytes int64
	// MinFreeBytes is the free space kept on the file system of Dir: Room
	// refuses a store that would leave less. Default 1 MiB; None disables
	// the check. The free space is read on Linux only.
	MinFreeBytes int64
	// Logger receives the start-up traversal warning and sweep summaries.
	// Default slog.Default().
	Logger *slog.Logger
}

// Sink stores blobs as files under one directory. Create one with New.
//
// A Sink is safe for concurrent use; several processes may share a tree.
type Sink struct {
	dir       string
	ttl       time.Duration
	tempGrace time.Duration
	maxTotal  int64
	minFree   int64
	log       *slog.Logger

	// pathPrefix and uriPrefix are dir with a trailing separator, as a
	// path and as a file:// URI, so a blob's names are one concatenation.
	pathPrefix string
	uriPrefix  string

	// Test seams: the clock, a wrapper around the temp file's writer
	// through which tests simulate a full disk, and the free space of the
	// file system (freeSpace).
	now       func() time.Time
	wrapTemp  func(io.Writer) io.Writer
	freeSpace func(dir string) (int64, error)

	// One lock per top-level shard ("00".."ff"), held around publishing a
	// blob and around the sweep's stat-and-unlink and rmdir in that shard.
	shards [256]sync.Mutex

	usageMu  sync.Mutex
	base     int64 // bytes measured by the last sweep
	added    int64 // bytes of blobs created since that sweep began
	measured bool  // a sweep has measured the tree
	sweepErr error // the last sweep's failure, while none has measured

	// The stores in progress (see claim): the bytes they claim, declared
	// or written, and the bytes they have written, which the file system's
	// free space already shows. Claims are made under usageMu.
	claimed atomic.Int64
	written atomic.Int64
	// short is the least the last store refused for want of room needed
	// (see Room), until a sweep; 0 when none was refused. Guarded by
	// usageMu.
	short int64

	// swept is closed when the first sweep ends, measured or failed (not
	// cancelled), for WaitMeasured.
	swept     chan struct{}
	sweptOnce sync.Once
}

var (
	_ sink.Sink = (*Sink)(nil)
	_ sink.Room = (*Sink)(nil)
)

// New opens (creating if needed) the blob tree at opts.Dir. It logs a
// warning for every directory level from / down to the root that others
// cannot traverse (no o+x), because blobs stored there could not be read by
// the services their URIs are announced to.
func New(opts Options) (*Sink, error) {
	if opts.Dir == "" {
		opts.Dir = DefaultDir
	}
	if opts.TTL < 0 || opts.TempGrace < 0 {
		return nil, fmt.Errorf("local: negative TTL (%v) or TempGrace (%v)", opts.TTL, opts.TempGrace)
	}
	if opts.TTL == 0 {
		opts.TTL = DefaultTTL
	}
	if opts.TempGrace == 0 {
		opts.TempGrace = DefaultTempGrace
	}
	if opts.MaxTotalBytes == 0 {
		opts.MaxTotalBytes = DefaultMaxTotalBytes
	}
	if opts.MinFreeBytes == 0 {
		opts.MinFreeBytes = DefaultMinFreeBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("local: blob dir: %w", err)
	}
	if err := ensureDir(dir); err != nil {
		return nil, err
	}
	prefix := dir
	if !strings.HasSuffix(prefix, string(filepath.Separator)) {
		prefix += string(filepath.Separator)
	}
	s := &Sink{
		dir:        dir,
		pathPrefix: prefix,
		uriPrefix:  (&url.URL{Scheme: "file", Path: filepath.ToSlash(prefix)}).String(),
		ttl:        opts.TTL,
		tempGrace:  opts.TempGrace,
		maxTotal:   opts.MaxTotalBytes,
		minFree:    opts.MinFreeBytes,
		log:        opts.Logger,
		now:        time.Now,
		freeSpace:  freeSpace,
		swept:      make(chan struct{}),
	}
	s.warnIfUnreachable()
	return s, nil
}

// Dir returns the absolute root of the blob tree.
func (s *Sink) Dir() string { return s.dir }

// Path returns the file a blob with this fingerprint is stored at. The
// fingerprint must be valid (see sink.CheckFingerprint).
func (s *Sink) Path(fingerprint string) string {
	const sep = string(filepath.Separator)
	return s.pathPrefix + fingerprint[0:2] + sep + fingerprint[2:4] + sep + fingerprint + blobSuffix
}

// URI returns the file:// URI Put announces for a fingerprint: the Path,
// percent-encoded where needed (only the root can need it: a fingerprint
// is hex).
func (s *Sink) URI(fingerprint string) string {
	return s.uriPrefix + fingerprint[0:2] + "/" + fingerprint[2:4] + "/" + fingerprint + blobSuffix
}

// Put implements sink.Sink; see the package documentation for the steps.
// opts.Size is claimed before a byte is read, refused with an error
// wrapping sink.ErrNoRoom when Room has none for it. A file keeps no media
// type.
func (s *Sink) Put(ctx context.Context, r io.Reader, opts sink.PutOptions) (sink.Blob, error) {
	return s.put(ctx, s.now(), r, opts)
}

// PutAt is Put with the time the store began given explicitly. ExpiresAt
// is now+TTL, and the blob's mtime, which the sweep ages it by, is set to
// now when it is created and moved forward past now when it is
// re-referenced, so the announced expiry never outruns the sweep.
func (s *Sink) PutAt(ctx context.Context, now time.Time, r io.Reader, opts sink.PutOptions) (sink.Blob, error) {
	return s.put(ctx, now, r, opts)
}

// put is Put at now. A store that finds the disk full fails with an
// error wrapping sink.ErrNoRoom as well, and Room remembers how far it got.
// The temp is removed either way.
func (s *Sink) put(ctx context.Context, now time.Time, r io.Reader, opts sink.PutOptions) (sink.Blob, error) {
	if err := ctx.Err(); err != nil {
		return sink.Blob{}, err
	}
	var c claim
	if opts.Size > 0 {
		if err := s.reserve(&c, opts.Size); err != nil {
			return sink.Blob{}, err
		}
	}
	defer s.release(&c)
	b, err := s.write(ctx, now, r, opts.Limit, &c)
	if err != nil && noSpace(err) {
		return b, s.ranOut(err, c.written)
	}
	return b, err
}

// write streams r into a new temp in the root, counting what it writes
// against c, then publishes it under its fingerprint.
func (s *Sink) write(ctx context.Context, now time.Time, r io.Reader, limit int64, c *claim) (sink.Blob, error) {
	f, err := s.newTemp()
	if err != nil {
		return sink.Blob{}, fmt.Errorf("local: create temp: %w", err)
	}
	tmp := f.Name()
	keep := false
	defer func() {
		if !keep {
			f.Close()
			os.Remove(tmp)
		}
	}()

	var w io.Writer = f
	if s.wrapTemp != nil {
		w = s.wrapTemp(f)
	}
	fp, n, err := sink.Copy(ctx, &claimWriter{w: w, s: s, c: c}, r, limit)
	if err != nil {
		return sink.Blob{}, fmt.Errorf("local: put: %w", err)
	}
	// The temp was made 0600; chmod ignores the umask.
	if err := f.Chmod(blobMode); err != nil {
		return sink.Blob{}, fmt.Errorf("local: put: %w", err)
	}
	// The blob's retention clock starts when the store began, the time
	// ExpiresAt is computed from: the mtime its writes gave it comes from
	// the kernel's coarse clock, which may be a few milliseconds earlier.
	if err := f.Stamp(now); err != nil {
		return sink.Blob{}, fmt.Errorf("local: put: %w", err)
	}
	// Without the fsync a machine crash could leave the final name holding
	// fewer bytes than its sha256 claims.
	if err := f.Sync(); err != nil {
		return sink.Blob{}, fmt.Errorf("local: put: fsync: %w", err)
	}
	if err := f.Close(); err != nil {
		return sink.Blob{}, fmt.Errorf("local: put: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return sink.Blob{}, err
	}
	created, err := s.publish(tmp, fp, s.Path(fp), now)
	if err != nil {
		return sink.Blob{}, err
	}
	keep = created // the temp is now the blob; otherwise it is still ours to remove
	if created {
		s.usageMu.Lock()
		s.added += n
		s.usageMu.Unlock()
	}
	return s.blob(fp, n, created, now), nil
}

// newTemp makes a Put's temp in the root, named so the sweep knows it.
func (s *Sink) newTemp() (temp, error) {
	f, err := createTemp(s.dir, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		// The root was removed from under us; recreate it once.
		if err = ensureDir(s.dir); err == nil {
			f, err = createTemp(s.dir, 0o600)
		}
	}
	return f, err
}

// blob describes a stored blob, its retention counted from now.
func (s *Sink) blob(fp string, n int64, created bool, now time.Time) sink.Blob {
	return sink.Blob{
		Fingerprint: fp,
		Size:        n,
		URI:         s.URI(fp),
		Created:     created,
		ExpiresAt:   now.Add(s.ttl),
	}
}

// publish moves the finished temp to the blob's final name (s.Path(fp)),
// or, when the blob already exists, touches it instead. It holds the
// shard's lock so the sweep cannot reap the blob between the check and the
// touch, nor remove the shard between its mkdir and the rename.
//
// The rename comes first and refuses to replace: on the common path (a new
// blob in an existing shard) it is the only call on the final name. Its
// failure says what to do: the blob exists (touch it) or a level of the
// shard is missing (make it and try again).
func (s *Sink) publish(tmp, fp, final string, now time.Time) (created bool, err error) {
	mu := s.shardLock(fp[0:2])
	mu.Lock()
	defer mu.Unlock()
	// A few attempts, because another process sharing the tree may sweep
	// the file or its shard away between two of these steps.
	for attempt := 1; ; attempt++ {
		err := renameNoReplace(tmp, final)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, fs.ErrExist):
			err = touch(final, now)
			if err == nil {
				return false, nil
			}
			if !errors.Is(err, fs.ErrNotExist) || attempt >= 3 {
				return false, fmt.Errorf("local: touch blob: %w", err)
			}
			// Reaped since the rename failed: publish ours instead.
		case errors.Is(err, fs.ErrNotExist) && attempt < 3:
			// Another process swept the shard away since this Sink knew it.
			if err := ensureDir(filepath.Dir(final)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return false, err
			}
			// Made, or another process swept a level we just made.
		default:
			return false, fmt.Errorf("local: publish blob: %w", err)
		}
	}
}

// touch moves an existing blob's mtime forward past now, so the sweep
// keeps it at least until the expiry announced for this Put. It moves it
// touchLead past now, so a blob re-referenced many times a second is
// touched about once a second, not once per Put.
func touch(path string, now time.Time) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s exists and is not a regular file", path)
	}
	if !fi.ModTime().Before(now) {
		return nil // touched at least as recently already
	}
	t := now.Add(touchLead)
	return os.Chtimes(path, t, t)
}

// Open implements sink.Sink. The caller closes the returned *os.File.
func (s *Sink) Open(ctx context.Context, fingerprint string) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := sink.CheckFingerprint(fingerprint); err != nil {
		return nil, fmt.Errorf("local: open: %w", err)
	}
	f, err := os.Open(s.Path(fingerprint))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("local: open %s: %w", fingerprint, sink.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("local: open: %w", err)
	}
	return f, nil
}

// Usage returns the bytes the tree holds: the last sweep's measurement plus
// the size of every blob created since that sweep began. Until a sweep has
// measured the tree it counts only the blobs this Sink created, so a caller
// enforcing the ceiling on a tree that may already hold data waits for
// WaitMeasured first. The stores in progress are not in it; Room counts
// them.
func (s *Sink) Usage() int64 {
	s.usageMu.Lock()
	defer s.usageMu.Unlock()
	return s.base + s.added
}

// WaitMeasured blocks until a sweep has measured the tree, so that Usage and
// Room account for what was on disk before this Sink was opened. It returns
// nil once measured, the error of the first sweep if that one failed (Run
// retries at its next tick, but a caller starting up should not wait a whole
// interval on a tree it cannot read), or ctx.Err() if ctx ends first. It
// does not sweep: Run or Sweep, called concurrently or earlier, does.
func (s *Sink) WaitMeasured(ctx context.Context) error {
	select {
	case <-s.swept:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.usageMu.Lock()
	defer s.usageMu.Unlock()
	if s.measured {
		return nil
	}
	return s.sweepErr
}

func (s *Sink) shardLock(top string) *sync.Mutex {
	i, err := strconv.ParseUint(top, 16, 8)
	if err != nil {
		i = 0 // not a shard name; any fixed lock will do
	}
	return &s.shards[i]
}

// ensureDir creates dir and any missing parents, each 0755: each is
// chmodded to it, because Mkdir's mode is masked by the umask and a 0700
// level anywhere would hide the blobs from other readers. Levels that
// already exist are left as they are (one made concurrently has its
// maker's mode).
func ensureDir(dir string) error {
	for attempt := 1; ; attempt++ {
		err := os.Mkdir(dir, dirMode)
		switch {
		case err == nil:
			if err := os.Chmod(dir, dirMode); err != nil {
				return fmt.Errorf("local: %w", err)
			}
			return nil
		case errors.Is(err, fs.ErrExist):
			fi, err := os.Stat(dir)
			if err != nil {
				return fmt.Errorf("local: %w", err)
			}
			if !fi.IsDir() {
				return fmt.Errorf("local: %s is not a directory", dir)
			}
			return nil
		case errors.Is(err, fs.ErrNotExist) && attempt == 1:
			parent := filepath.Dir(dir)
			if parent == dir {
				return fmt.Errorf("local: %w", err)
			}
			if err := ensureDir(parent); err != nil {
				return err
			}
		default:
			return fmt.Errorf("local: %w", err)
		}
	}
}

// level is one directory that others cannot traverse.
type level struct {
	path string
	mode fs.FileMode
}

// unreachableLevels lists every level from dir up to / lacking o+x.
func unreachableLevels(dir string) ([]level, error) {
	var blocked []level
	for p := dir; ; {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			blocked = append(blocked, level{p, fi.Mode().Perm()})
		}
		parent := filepath.Dir(p)
		if parent == p {
			return blocked, nil
		}
		p = parent
	}
}

// warnIfUnreachable logs, never fails: a single-user deployment where
// nothing else reads the blobs is legitimate.
func (s *Sink) warnIfUnreachable() {
	blocked, err := unreachableLevels(s.dir)
	if err != nil {
		s.log.Warn("local: could not check whether the blob directory is traversable",
			slog.String("blob_dir", s.dir), slog.String("error", err.Error()))
		return
	}
	if len(blocked) == 0 {
		return
	}
	names := make([]string, len(blocked))
	for i, l := range blocked {
		names[i] = fmt.Sprintf("%s (%#o)", l.path, l.mode)
	}
	s.log.Warn("local: blob directory is not traversable by other users; blob URIs will be announced but unreadable to other services",
		slog.String("blob_dir", s.dir), slog.String("blocked_at", strings.Join(names, ", ")))
}
