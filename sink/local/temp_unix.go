//go:build unix

package local

import (
	"os"
	"syscall"
)

// openExclusive creates name, failing if it exists. A file made by
// os.OpenFile is first offered to the network poller, which costs a
// regular file five wasted system calls (fcntl twice each way and a
// refused epoll_ctl); os.NewFile of a blocking descriptor skips that, and
// a blob store makes one file per command.
func openExclusive(name string) (*os.File, error) {
	fd, err := syscall.Open(name, syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}
