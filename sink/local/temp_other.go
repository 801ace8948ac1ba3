//go:build !unix

package local

import (
	"os"
	"time"
)

// tempFile is a temp blob being written.
type tempFile struct{ *os.File }

// openExclusive creates name with mode (less the umask), failing if it
// exists.
func openExclusive(name string, mode uint32) (*tempFile, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, os.FileMode(mode))
	if err != nil {
		return nil, err
	}
	return &tempFile{f}, nil
}

// Stamp sets the file's times by its name.
func (f *tempFile) Stamp(t time.Time) error { return os.Chtimes(f.Name(), t, t) }
