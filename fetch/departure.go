package fetch

import (
	"crypto/tls"
	"net"
	"sync/atomic"
)

// departureConn is a dialed connection that tells a request when its first
// bytes have left: the write to the socket has returned. For HTTP/1,
// net/http's own hooks (WroteHeaders, WroteRequest) run while the request
// still sits in the connection's buffer, before the flush; a writer
// descheduled between the hook and the flush would let a fleet grant the
// host's next slot from a departure that had not happened yet.
type departureConn struct {
	net.Conn
	hook atomic.Pointer[func()]
}

// Write writes to the connection, then runs the armed hook, if any, once.
func (c *departureConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if h := c.hook.Swap(nil); h != nil {
		(*h)()
	}
	return n, err
}

// onNextWrite arms fn to run after the connection's next Write returns.
func (c *departureConn) onNextWrite(fn func()) { c.hook.Store(&fn) }

// departureConnOf returns the departureConn under a connection the
// transport handed a request (directly, or under its TLS), nil if none.
func departureConnOf(c net.Conn) *departureConn {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	dc, _ := c.(*departureConn)
	return dc
}
