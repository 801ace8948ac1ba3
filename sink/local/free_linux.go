package local

import (
	"errors"
	"syscall"
)

// freeSpace returns the bytes an unprivileged writer may still use on the
// file system holding dir (statfs: available blocks times their size).
func freeSpace(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// noSpace reports whether err says the disk or the quota is full.
func noSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
