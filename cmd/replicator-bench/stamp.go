//go:build linux

package main

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

// The origin times requests by the kernel's receive timestamp
// (SO_TIMESTAMPNS) of the bytes that carried them, not by when its handler
// ran: on a loaded two-core machine the handler can start milliseconds
// late, which would show as a gap shorter than the worker really left.

// stampListener enables SO_TIMESTAMPNS on every accepted connection.
type stampListener struct{ net.Listener }

// newStampListener turns timestamps on for the listening socket too, so
// the kernel stamps every segment from the first, including the bytes a
// client sends before its connection is accepted.
func newStampListener(ln net.Listener) stampListener {
	if tl, ok := ln.(*net.TCPListener); ok {
		if raw, err := tl.SyscallConn(); err == nil {
			raw.Control(func(fd uintptr) {
				syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
			})
		}
	}
	return stampListener{ln}
}

func (l stampListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c, nil
	}
	var serr error
	raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
	})
	if serr != nil {
		return c, nil
	}
	return &stampConn{TCPConn: tc, raw: raw}, nil
}

// stampConn reads with recvmsg and keeps the receive timestamp of the
// latest bytes read.
type stampConn struct {
	*net.TCPConn
	raw syscall.RawConn

	mu   sync.Mutex
	last time.Time
}

func (c *stampConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var (
		n    int
		rerr error
		oob  [64]byte
	)
	err := c.raw.Read(func(fd uintptr) bool {
		var oobn int
		n, oobn, _, _, rerr = syscall.Recvmsg(int(fd), p, oob[:], 0)
		if rerr == syscall.EAGAIN {
			return false // wait for the poller
		}
		if rerr == nil && n > 0 {
			if at, ok := parseStamp(oob[:oobn]); ok {
				c.mu.Lock()
				c.last = at
				c.mu.Unlock()
			}
		}
		return true
	})
	switch {
	case err != nil: // a deadline or a closed connection
		return 0, err
	case rerr != nil:
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: rerr}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// stamp returns the receive time of the latest bytes read.
func (c *stampConn) stamp() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last, !c.last.IsZero()
}

func parseStamp(oob []byte) (time.Time, bool) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return time.Time{}, false
	}
	for _, m := range msgs {
		if m.Header.Level == syscall.SOL_SOCKET && m.Header.Type == syscall.SCM_TIMESTAMPNS && len(m.Data) >= 16 {
			sec := int64(binary.NativeEndian.Uint64(m.Data[0:8]))
			nsec := int64(binary.NativeEndian.Uint64(m.Data[8:16]))
			return time.Unix(sec, nsec), true
		}
	}
	return time.Time{}, false
}

type connKey struct{}

// withConn is the http.Server's ConnContext: it lets the handler find its
// connection's timestamp.
func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// arrival is when the request's bytes reached the origin's socket, or now
// when the kernel gave no timestamp.
func arrival(ctx context.Context) (at time.Time, kernel bool) {
	if c, ok := ctx.Value(connKey{}).(*stampConn); ok {
		if at, ok := c.stamp(); ok {
			return at, true
		}
	}
	return time.Now(), false
}
