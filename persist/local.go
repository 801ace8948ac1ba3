package persist

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/replicator-go/replicator/sink"
)

// LocalStore is the permanent store in a directory tree, sharded like the
// temp store's (docs/storage.md):
//
//	file://<abs dir>/<ab>/<cd>/<sha256>.bin
//
// Nothing sweeps it. A path is only ever built from a checked fingerprint
// (64 lower-case hex digits), never from a command's blob_uri. A file keeps
// no media type and no metadata: its name is its digest. Create one with
// NewLocalStore; it is safe for concurrent use, and by several processes
// sharing the tree.
type LocalStore struct {
	dir        string // absolute
	pathPrefix string // dir + separator
	uriPrefix  string // file:// URI of pathPrefix
}

var _ Store = (*LocalStore)(nil)

// NewLocalStore opens (creating if needed) the tree at dir. The error wraps
// ErrStoreUnusable when the directory cannot be made.
func NewLocalStore(dir string) (*LocalStore, error) {
	if dir == "" {
		return nil, errors.New("persist: no permanent directory given")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStoreUnusable, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStoreUnusable, err)
	}
	prefix := abs
	if !strings.HasSuffix(prefix, string(filepath.Separator)) {
		prefix += string(filepath.Separator)
	}
	return &LocalStore{
		dir:        abs,
		pathPrefix: prefix,
		uriPrefix:  (&url.URL{Scheme: "file", Path: filepath.ToSlash(prefix)}).String(),
	}, nil
}

// Dir returns the absolute root of the tree.
func (s *LocalStore) Dir() string { return s.dir }

// Path returns the file a blob with this fingerprint is kept at. The
// fingerprint must be valid (see sink.CheckFingerprint).
func (s *LocalStore) Path(fingerprint string) string {
	const sep = string(filepath.Separator)
	return s.pathPrefix + fingerprint[0:2] + sep + fingerprint[2:4] + sep + fingerprint + ".bin"
}

// URI returns the file:// URI of a fingerprint's Path, percent-encoded
// where needed (only the root can need it: a fingerprint is hex).
func (s *LocalStore) URI(fingerprint string) string {
	return s.uriPrefix + fingerprint[0:2] + "/" + fingerprint[2:4] + "/" + fingerprint + ".bin"
}

// Size implements Store.
func (s *LocalStore) Size(ctx context.Context, fingerprint string) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := sink.CheckFingerprint(fingerprint); err != nil {
		return 0, fmt.Errorf("persist: %w", err)
	}
	fi, err := os.Lstat(s.Path(fingerprint))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, fmt.Errorf("persist: %s: %w", s.URI(fingerprint), sink.ErrNotFound)
	case err != nil:
		return 0, fmt.Errorf("persist: stat: %w", refused(err))
	case !fi.Mode().IsRegular():
		return 0, fmt.Errorf("persist: %s: %w: not a regular file", s.URI(fingerprint), sink.ErrPermanent)
	}
	return fi.Size(), nil
}

// Keep implements Store. The bytes stream into a temp file at the root of
// the tree, hashed on the way, and are synced; only when they hash to
// fingerprint is the temp linked to the blob's name, which fails rather than
// replaces when the name exists. So a blob is only ever seen complete and
// correct, and never overwritten. The temp is removed whatever happens.
// mediaType is not kept.
func (s *LocalStore) Keep(ctx context.Context, fingerprint string, r io.Reader, _ string) (Kept, error) {
	if err := sink.CheckFingerprint(fingerprint); err != nil {
		return Kept{}, fmt.Errorf("persist: %w", err)
	}
	f, err := os.CreateTemp(s.dir, ".keep.*.tmp")
	if err != nil {
		return Kept{}, fmt.Errorf("persist: create temp: %w", refused(err))
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	got, n, err := sink.Copy(ctx, f, r, 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	var se *sourceError
	switch {
	case errors.As(err, &se) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return Kept{}, err
	case err != nil:
		return Kept{}, fmt.Errorf("persist: write temp: %w", refused(err))
	case got != fingerprint:
		return Kept{}, fmt.Errorf("%w: %s holds bytes hashing to %s", ErrCorrupt, fingerprint, got)
	}
	if err := ctx.Err(); err != nil {
		return Kept{}, err
	}
	// CreateTemp makes 0600; a kept blob is read by other services.
	if err := os.Chmod(tmp, 0o644); err != nil {
		return Kept{}, fmt.Errorf("persist: %w", refused(err))
	}
	final := s.Path(fingerprint)
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return Kept{}, fmt.Errorf("persist: make shard: %w", refused(err))
	}
	switch err := os.Link(tmp, final); {
	case err == nil:
		return Kept{Size: n, Created: true}, nil
	case errors.Is(err, fs.ErrExist):
		size, err := s.Size(ctx, fingerprint)
		if err != nil {
			return Kept{}, err
		}
		return Kept{Size: size}, nil
	default:
		return Kept{}, fmt.Errorf("persist: link blob: %w", refused(err))
	}
}

// refused marks a file-system failure an operator must fix (no
// permission, a read-only file system) with sink.ErrPermanent; a full disk
// or an I/O error is worth retrying and is returned as it is.
func refused(err error) error {
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		return fmt.Errorf("%w: %w", sink.ErrPermanent, err)
	}
	return err
}
