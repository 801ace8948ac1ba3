//go:build unix

package local

import (
	"os"
	"syscall"
)

// tempFile is a temp blob being written: a blocking descriptor written with
// plain system calls. An *os.File would first be offered to the network
// poller (fcntl calls and a refused epoll_ctl) or, through os.NewFile, cost
// an fcntl asking whether it blocks; a blob store makes one per command.
type tempFile struct {
	fd   int
	name string
}

// openExclusive creates name with mode (less the umask), failing if it
// exists.
func openExclusive(name string, mode uint32) (*tempFile, error) {
	fd, err := syscall.Open(name, syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC, mode)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return &tempFile{fd: fd, name: name}, nil
}

func (f *tempFile) Name() string { return f.name }

// Write writes all of p, as os.File does.
func (f *tempFile) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := syscall.Write(f.fd, p[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return n, &os.PathError{Op: "write", Path: f.name, Err: err}
		}
		n += m
	}
	return n, nil
}

func (f *tempFile) Chmod(mode os.FileMode) error {
	if err := syscall.Fchmod(f.fd, uint32(mode.Perm())); err != nil {
		return &os.PathError{Op: "chmod", Path: f.name, Err: err}
	}
	return nil
}

func (f *tempFile) Sync() error {
	if err := syscall.Fsync(f.fd); err != nil {
		return &os.PathError{Op: "fsync", Path: f.name, Err: err}
	}
	return nil
}

// Close closes the descriptor; a second call is a no-op.
func (f *tempFile) Close() error {
	if f.fd < 0 {
		return nil
	}
	err := syscall.Close(f.fd)
	f.fd = -1
	if err != nil {
		return &os.PathError{Op: "close", Path: f.name, Err: err}
	}
	return nil
}
