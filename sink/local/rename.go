package local

import (
	"io/fs"
	"os"
)

// renameUnlessExists is renameNoReplace in two steps. Another process can
// slip a blob in between them; it then holds the same bytes (the name is
// their sha256), so replacing it loses nothing.
func renameUnlessExists(oldpath, newpath string) error {
	if _, err := os.Lstat(newpath); err == nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: fs.ErrExist}
	}
	return os.Rename(oldpath, newpath)
}
