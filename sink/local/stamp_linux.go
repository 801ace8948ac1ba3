package local

import (
	"os"
	"syscall"
	"time"
	"unsafe"
)

// Stamp sets the file's times through its descriptor (futimens), with no
// path to resolve.
func (f *tempFile) Stamp(t time.Time) error {
	ts := [2]syscall.Timespec{syscall.NsecToTimespec(t.UnixNano()), syscall.NsecToTimespec(t.UnixNano())}
	_, _, errno := syscall.Syscall6(syscall.SYS_UTIMENSAT, uintptr(f.fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if errno != 0 {
		return &os.PathError{Op: "futimens", Path: f.name, Err: errno}
	}
	return nil
}
