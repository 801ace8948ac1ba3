package testenv

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Origin is a loopback HTTP server that records every request it receives
// before handing it to its handler. Many hostnames can point at one Origin
// (through a static resolver); the recorded Host tells them apart.
//
// An Origin is safe for concurrent use.
type Origin struct {
	*httptest.Server

	mu   sync.Mutex
	seen []Seen
}

// Seen is one request as the origin received it.
type Seen struct {
	// Host is the request's Host header without the port, lower-cased.
	Host   string
	Path   string
	Header http.Header
	At     time.Time
}

// StartOrigin starts an Origin serving h on 127.0.0.1 and closes it when
// the test ends.
func StartOrigin(t testing.TB, h http.Handler) *Origin {
	t.Helper()
	o := &Origin{}
	o.Server = httptest.NewServer(o.record(h))
	t.Cleanup(o.Close)
	return o
}

// StartOriginOn is StartOrigin on a listener the test opened, for an
// origin that must come up on a known port.
func StartOriginOn(t testing.TB, l net.Listener, h http.Handler) *Origin {
	t.Helper()
	o := &Origin{}
	o.Server = httptest.NewUnstartedServer(o.record(h))
	o.Server.Listener.Close()
	o.Server.Listener = l
	o.Server.Start()
	t.Cleanup(o.Close)
	return o
}

// StartTLSOrigin is StartOrigin over TLS; use o.Client() or o.Certificate()
// to trust it.
func StartTLSOrigin(t testing.TB, h http.Handler) *Origin {
	t.Helper()
	o := &Origin{}
	o.Server = httptest.NewTLSServer(o.record(h))
	t.Cleanup(o.Close)
	return o
}

func (o *Origin) record(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		o.mu.Lock()
		o.seen = append(o.seen, Seen{Host: strings.ToLower(host), Path: r.URL.Path, Header: r.Header.Clone(), At: time.Now()})
		o.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// Requests returns a copy of every request seen so far, in arrival order.
func (o *Origin) Requests() []Seen {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Seen(nil), o.seen...)
}

// Count returns how many requests have been seen.
func (o *Origin) Count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.seen)
}

// Port returns the port the origin listens on, as a string.
func (o *Origin) Port() string {
	_, port, _ := net.SplitHostPort(o.Listener.Addr().String())
	return port
}

// URLFor returns http(s)://host:PORT/path for this origin.
func (o *Origin) URLFor(host, path string) string {
	scheme := "http"
	if o.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, o.Port()) + path
}

// Hostile responses for tests of a fetcher.

// Body serves n bytes of 'x' with status 200, with or without a
// Content-Length header.
func Body(n int64, contentLength bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if contentLength {
			w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		}
		w.WriteHeader(http.StatusOK)
		writeN(w, n)
	})
}

// Trickle sends chunk every interval, n times, flushing each, then ends.
// It stops early when the client goes away.
func Trickle(chunk []byte, every time.Duration, n int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		for range n {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-time.After(every):
			case <-r.Context().Done():
				return
			}
		}
	})
}

// Hang never answers: it holds the request until the client gives up.
func Hang() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
}

// GzipBomb serves a gzip-encoded body that inflates to decoded bytes of
// zeros, with Content-Encoding: gzip.
func GzipBomb(decoded int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusOK)
		zw, _ := gzip.NewWriterLevel(w, gzip.BestCompression)
		zeros := make([]byte, 64<<10)
		for left := decoded; left > 0; {
			k := min(left, int64(len(zeros)))
			if _, err := zw.Write(zeros[:k]); err != nil {
				return
			}
			left -= k
		}
		zw.Close()
	})
}

// Gzipped serves body gzip-encoded with Content-Encoding: gzip.
func Gzipped(body []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.WriteHeader(http.StatusOK)
		zw := gzip.NewWriter(w)
		zw.Write(body)
		zw.Close()
	})
}

// BadChunked answers with a chunked body whose framing is invalid.
func BadChunked() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		buf.WriteString("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n")
		buf.WriteString("5\r\nhello\r\nZZ-not-a-size\r\nworld\r\n0\r\n\r\n")
		buf.Flush()
	})
}

// Raw writes response bytes verbatim on the hijacked connection, for
// malformed responses.
func Raw(response string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		buf.WriteString(response)
		buf.Flush()
		// Let the client read before the close resets the connection.
		conn.(*net.TCPConn).CloseWrite()
		io.Copy(io.Discard, bufio.NewReader(conn))
	})
}

// ManyHeaders answers 200 "ok" with n extra response headers.
func ManyHeaders(n int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := range n {
			w.Header().Set(fmt.Sprintf("X-Extra-%d", i), strconv.Itoa(i))
		}
		io.WriteString(w, "ok")
	})
}

// Redirect answers status with a Location header (none when location is "").
func Redirect(status int, location string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if location != "" {
			w.Header().Set("Location", location)
		}
		w.WriteHeader(status)
	})
}

// Status answers status with the given headers and body.
func Status(status int, header map[string]string, body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header()[k] = []string{v}
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	})
}

func writeN(w io.Writer, n int64) {
	block := []byte(strings.Repeat("x", 32<<10))
	for n > 0 {
		k := min(n, int64(len(block)))
		if _, err := w.Write(block[:k]); err != nil {
			return
		}
		n -= k
	}
}
