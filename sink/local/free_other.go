//go:build !linux

package local

import (
	"errors"
	"syscall"
)

var errNoStatfs = errors.New("local: free space is not read on this system")

// freeSpace is not read here: only the ceiling bounds the sink.
func freeSpace(string) (int64, error) { return 0, errNoStatfs }

// noSpace reports whether err says the disk is full.
func noSpace(err error) bool { return errors.Is(err, syscall.ENOSPC) }
