package local

import (
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"time"
)

// temp is a temp file being written.
type temp interface {
	io.Writer
	Name() string
	Chmod(fs.FileMode) error
	// Stamp sets its access and modification times to t.
	Stamp(t time.Time) error
	Sync() error
	Close() error
}

// createTemp creates a new temp file in dir with mode (less the umask),
// named so the sweep knows it (tempPrefix, random digits, tempSuffix).
func createTemp(dir string, mode uint32) (temp, error) {
	for range 10000 {
		name := filepath.Join(dir, tempPrefix+strconv.FormatUint(rand.Uint64(), 36)+tempSuffix)
		f, err := openExclusive(name, mode)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, err
	}
	return nil, &fs.PathError{Op: "createtemp", Path: filepath.Join(dir, tempPrefix+"*"+tempSuffix), Err: fs.ErrExist}
}
