package local

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

// createTemp creates a new temp file in dir, named so the sweep knows it
// (tempPrefix, random digits, tempSuffix), readable and writable by its
// owner only until Put gives it the blob's mode.
func createTemp(dir string) (*os.File, error) {
	for range 10000 {
		name := filepath.Join(dir, tempPrefix+strconv.FormatUint(rand.Uint64(), 36)+tempSuffix)
		f, err := openExclusive(name)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, err
	}
	return nil, &fs.PathError{Op: "createtemp", Path: filepath.Join(dir, tempPrefix+"*"+tempSuffix), Err: fs.ErrExist}
}
