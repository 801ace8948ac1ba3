//go:build !unix

package local

import "os"

// openExclusive creates name with mode (less the umask), failing if it
// exists.
func openExclusive(name string, mode uint32) (*os.File, error) {
	return os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, os.FileMode(mode))
}

// processUmask is unknown here: modes are always set explicitly.
func processUmask() (uint32, bool) { return 0, false }
