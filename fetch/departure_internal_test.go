package fetch

import (
	"crypto/tls"
	"io"
	"net"
	"sync/atomic"
	"testing"
)

// TestDepartureConnRunsItsHookAfterTheWrite blocks a write (a pipe writes
// only as fast as its peer reads) and checks the hook waits for it, then
// runs once.
func TestDepartureConnRunsItsHookAfterTheWrite(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	dc := &departureConn{Conn: client}
	var runs atomic.Int32
	dc.onNextWrite(func() { runs.Add(1) })

	written := make(chan error, 1)
	go func() {
		_, err := dc.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
		written <- err
	}()
	buf := make([]byte, 4)
	if _, err := io.ReadFull(server, buf); err != nil {
		t.Fatal(err)
	}
	// The write is still blocked on the rest of the request.
	if n := runs.Load(); n != 0 {
		t.Fatalf("hook ran %d times before the write returned", n)
	}
	if _, err := io.ReadAll(io.LimitReader(server, 14)); err != nil {
		t.Fatal(err)
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("hook ran %d times after the write, want 1", n)
	}
	go io.Copy(io.Discard, server)
	if _, err := dc.Write([]byte("more")); err != nil {
		t.Fatal(err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("hook ran %d times after a second write, want still 1", n)
	}
}

func TestDepartureConnOfFindsItUnderTLS(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	dc := &departureConn{Conn: client}
	if got := departureConnOf(dc); got != dc {
		t.Errorf("plain: got %p, want %p", got, dc)
	}
	if got := departureConnOf(tls.Client(dc, &tls.Config{ServerName: "x"})); got != dc {
		t.Errorf("under TLS: got %p, want %p", got, dc)
	}
	if got := departureConnOf(client); got != nil {
		t.Errorf("a connection not dialed by the fetcher: got %p, want nil", got)
	}
}
