//go:build !linux

package local

// renameNoReplace renames oldpath to newpath unless newpath exists.
func renameNoReplace(oldpath, newpath string) error {
	return renameUnlessExists(oldpath, newpath)
}
