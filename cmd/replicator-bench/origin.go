//go:build linux

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// origin is a loopback HTTP server that answers for any number of host
// names. It records, per host, when each request arrived, so the report
// can give the smallest gap between two requests to one host as the
// origin saw them (the politeness the world would see), and per path how
// often it was asked (re-fetches).
//
// An origin is safe for concurrent use.
type origin struct {
	srv  *http.Server
	ln   net.Listener
	port string

	mu        sync.Mutex
	hosts     map[string]*hostLog
	paths     map[string]int
	conns     int // connections accepted
	unstamped int // requests timed by the handler for want of a kernel stamp
}

// hostLog is what the origin saw of one host.
type hostLog struct {
	n           int
	first, last time.Time     // kernel receive times
	minGap      time.Duration // between kernel receive times; -1 until a second request
	// minGapHandler is the same gap timed when the handler ran, which
	// scheduling delays in the origin process can shorten.
	minGapHandler time.Duration
	lastHandled   time.Time
	recent        [8]time.Time // the latest kernel stamps, a ring
	// lastStatus is the status of the latest answered request; a request
	// arriving after a 429 or 503 is timed separately.
	lastStatus     int
	minGapRefused  time.Duration // smallest gap after a 429/503; -1 when none
	arrivals       []arrivalRec  // kept only when keepArrivals
	keepArrivals   bool
	refusedAnswers int
}

// startOrigin serves h on 127.0.0.1 until ctx ends or close is called.
// keepArrivals keeps every arrival time (for rates), not only the gaps.
func startOrigin(h http.Handler, keepArrivals bool) (*origin, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	o := &origin{ln: ln, hosts: map[string]*hostLog{}, paths: map[string]int{}}
	_, o.port, _ = net.SplitHostPort(ln.Addr().String())
	o.srv = &http.Server{
		Handler:           o.record(h, keepArrivals),
		ConnContext:       withConn,
		ReadHeaderTimeout: 30 * time.Second,
		// The server's own complaints about hostile exchanges are expected.
		ErrorLog: log.New(io.Discard, "", 0),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				o.mu.Lock()
				o.conns++
				o.mu.Unlock()
			}
		},
	}
	go o.srv.Serve(newStampListener(ln))
	return o, nil
}

func (o *origin) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := o.srv.Shutdown(ctx); err != nil {
		o.srv.Close()
	}
}

// url returns http://host:PORT/path on this origin.
func (o *origin) url(host, path string) string {
	return "http://" + net.JoinHostPort(host, o.port) + path
}

// hostOf is the request's host name, lower-cased, without the port.
func hostOf(r *http.Request) string {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.ToLower(host)
}

func (o *origin) record(h http.Handler, keepArrivals bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handled := time.Now()
		now, kernel := arrival(r.Context())
		host := hostOf(r)
		o.mu.Lock()
		l := o.hosts[host]
		if l == nil {
			l = &hostLog{minGap: -1, minGapHandler: -1, minGapRefused: -1, keepArrivals: keepArrivals}
			o.hosts[host] = l
		}
		if !kernel {
			o.unstamped++
		}
		if l.n > 0 {
			// Two requests can reach the socket in one order and the
			// handlers in the other; the recent stamps catch that.
			for _, t := range l.recent {
				if gap := absDuration(now.Sub(t)); !t.IsZero() && (l.minGap < 0 || gap < l.minGap) {
					l.minGap = gap
				}
			}
			if now.Before(l.first) {
				l.first = now
			}
			gap := absDuration(now.Sub(l.last))
			if hg := absDuration(handled.Sub(l.lastHandled)); l.minGapHandler < 0 || hg < l.minGapHandler {
				l.minGapHandler = hg
			}
			if l.lastStatus == http.StatusTooManyRequests || l.lastStatus == http.StatusServiceUnavailable {
				if l.minGapRefused < 0 || gap < l.minGapRefused {
					l.minGapRefused = gap
				}
			}
		} else {
			l.first = now
		}
		l.recent[l.n%len(l.recent)] = now
		l.n++
		if now.After(l.last) {
			l.last = now
		}
		l.lastHandled = handled
		l.lastStatus = 0
		if l.keepArrivals {
			l.arrivals = append(l.arrivals, arrivalRec{at: now, handled: handled, path: r.URL.Path, remote: r.RemoteAddr, kernel: kernel})
		}
		o.paths[host+r.URL.Path]++
		o.mu.Unlock()
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		if sw.status == http.StatusTooManyRequests || sw.status == http.StatusServiceUnavailable {
			o.mu.Lock()
			l.lastStatus = sw.status
			l.refusedAnswers++
			o.mu.Unlock()
		}
	})
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// arrivalRec is one request as the origin saw it.
type arrivalRec struct {
	at      time.Time // kernel receive time
	handled time.Time // handler start
	path    string
	remote  string
	kernel  bool // at is the kernel's stamp, not the handler's clock
}

// statusWriter remembers the status a handler wrote. It passes Flush and
// Hijack through, which the hostile handlers need.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack hands over the plain *net.TCPConn under the timestamping
// wrapper: handlers that write raw responses use its CloseWrite.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("hijacking not supported")
	}
	c, rw, err := h.Hijack()
	if sc, ok := c.(*stampConn); ok {
		return sc.TCPConn, rw, err
	}
	return c, rw, err
}

// originStats summarizes the origin's view.
type originStats struct {
	requests int
	// minGap is the smallest gap between two requests to one host, over
	// every host that got at least two; -1 when none did.
	minGap     time.Duration
	minGapHost string
	// minGapHandler is the smallest gap timed by the handler.
	minGapHandler time.Duration
	unstamped     int
	// refetches counts requests for a path already asked once.
	refetches int
	conns     int
}

func (o *origin) stats() originStats {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := originStats{minGap: -1, minGapHandler: -1, conns: o.conns, unstamped: o.unstamped}
	for host, l := range o.hosts {
		s.requests += l.n
		if l.minGapHandler >= 0 && (s.minGapHandler < 0 || l.minGapHandler < s.minGapHandler) {
			s.minGapHandler = l.minGapHandler
		}
		if l.minGap >= 0 && (s.minGap < 0 || l.minGap < s.minGap) {
			s.minGap, s.minGapHost = l.minGap, host
		}
	}
	for _, n := range o.paths {
		s.refetches += n - 1
	}
	return s
}

// host returns a copy of what the origin saw of host.
func (o *origin) host(host string) hostLog {
	o.mu.Lock()
	defer o.mu.Unlock()
	l := o.hosts[host]
	if l == nil {
		return hostLog{minGap: -1, minGapHandler: -1, minGapRefused: -1}
	}
	c := *l
	c.arrivals = slices.Clone(l.arrivals)
	return c
}

// closePairs lists, for hosts whose arrivals were kept, every two
// consecutive requests less than interval apart: the evidence behind a
// short minimum gap.
func (o *origin) closePairs(interval time.Duration) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for host, l := range o.hosts {
		arr := slices.Clone(l.arrivals)
		slices.SortStableFunc(arr, func(a, b arrivalRec) int { return a.at.Compare(b.at) })
		for i := 1; i < len(arr); i++ {
			a, p := arr[i], arr[i-1]
			if gap := a.at.Sub(p.at); gap < interval {
				out = append(out, fmt.Sprintf("%s: %s from %s then %s from %s, %s apart (kernel stamps %v/%v; handlers %s apart, in that order or not)",
					host, p.path, p.remote, a.path, a.remote, gap, p.kernel, a.kernel, a.handled.Sub(p.handled)))
			}
		}
	}
	slices.Sort(out)
	return out
}

// benchResolve is the REPLICATOR_RESOLVE every mode gives the worker: every
// bench host is a name under .test, answered by the one loopback origin, so
// one wildcard entry serves any number of hosts.
const benchResolve = "*.test=127.0.0.1"

// hostNames returns n host names prefix-0000.test … under the reserved
// .test TLD.
func hostNames(prefix string, n int) []string {
	hosts := make([]string, n)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("%s-%04d.test", prefix, i)
	}
	return hosts
}

// fixedBody serves a body of size bytes that starts with the request path
// (so every command stores distinct bytes), padded with a repeated
// pattern.
func fixedBody(size int) http.Handler {
	pad := padding(size)
	return textBody(func(path string) []byte { return bodyFor(path, size, pad) })
}

// sameBody serves one body of size bytes for every path.
func sameBody(size int) http.Handler {
	body := bodyFor("/", size, padding(size))
	return textBody(func(string) []byte { return body })
}

// textBody serves bodyOf(the request path) as text/plain.
func textBody(bodyOf func(path string) []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := bodyOf(r.URL.Path)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	})
}

// padding is at least size bytes of a repeated pattern.
func padding(size int) []byte {
	return []byte(strings.Repeat("replicator-bench body padding. ", 1+size/31))
}

// bodyFor is the body fixedBody serves for path.
func bodyFor(path string, size int, pad []byte) []byte {
	body := make([]byte, 0, max(size, len(path)+1))
	body = append(body, path...)
	body = append(body, '\n')
	for len(body) < size {
		body = append(body, pad[:min(len(pad), size-len(body))]...)
	}
	return body
}
