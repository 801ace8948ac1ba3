//go:build unix

package main

import "syscall"

// openFileLimit is the process's soft RLIMIT_NOFILE, 0 when unknown. The Go
// runtime has already raised it to the hard limit at start-up.
func openFileLimit() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	return uint64(lim.Cur)
}
