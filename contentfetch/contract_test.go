package contentfetch_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/internal/testenv/fetchenv"
	"github.com/replicator-go/replicator/policy"
	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/memory"
)

// TestHandleRefusesDeclaredLengthBeforeReading checks docs/taxonomy.md, Body size: "a
// Content-Length over REPLICATOR_MAX_BLOB_BYTES is refused before reading a
// byte". The origin declares a length over the limit, sends a few bytes and
// then stalls; with a 30 s per-operation timeout, only refusing on the
// header can end the fetch quickly. The outcome is permanent too_large, the
// sink is never handed the body, nothing is stored, and the connection is
// let go rather than held open.
func TestHandleRefusesDeclaredLengthBeforeReading(t *testing.T) {
	tests := []struct {
		name     string
		limit    int64 // fetch.Options.MaxBodyBytes; 0 = the default
		declared int64
	}{
		{name: "one byte over", limit: 1 << 20, declared: 1<<20 + 1},
		{name: "far over", limit: 1 << 20, declared: 1 << 62},
		{name: "over the default limit", declared: fetch.DefaultMaxBodyBytes + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clientGone := make(chan struct{})
			origin := startWireOrigin(t, func(conn net.Conn, _ string) {
				fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\nabc", tt.declared)
				// Stall until the client goes away.
				io.Copy(io.Discard, conn)
				close(clientGone)
			})
			spy := &putSpy{Sink: memory.New(memory.Options{TTL: time.Hour})}
			h := specHandler(t, fetch.Options{MaxBodyBytes: tt.limit, DefaultTimeout: 30 * time.Second, MaxFetchTime: 60 * time.Second}, spy)
			cmd := fetchenv.Command(origin.url("origin.test", "/huge"))

			// The caller's deadline is shorter than the operation timeout only so
			// that a fetcher which reads on fails in 10 s rather than 30.
			start := time.Now()
			out := h.Fetch(specCtx(t, 10*time.Second), cmd, nil)
			took := time.Since(start)

			if out.Fate != capability.Close || out.Reason != string(envelope.ReasonTooLarge) || !errors.Is(out.Err, fetch.ErrTooLarge) {
				t.Fatalf("outcome = %v/%q (%v), want permanent/too_large", out.Name(), out.Reason, out.Err)
			}
			// Far below the 30 s operation timeout: the refusal came from the
			// header, not from a read that timed out.
			if took > 5*time.Second {
				t.Errorf("took %v, want the refusal well before the 30 s timeout", took)
			}
			fact, ok := out.Fact.(*envelope.FetchFailed)
			if !ok || fact.Reason != envelope.ReasonTooLarge || !fact.Terminal {
				t.Errorf("fact = %#v, want a terminal fetch_failed/too_large", out.Fact)
			}
			if n := spy.puts.Load(); n != 0 {
				t.Errorf("the body was handed to the sink %d times, want 0 (refused before reading)", n)
			}
			if n := spy.Sink.Len(); n != 0 {
				t.Errorf("sink holds %d blobs, want none", n)
			}
			select {
			case <-clientGone:
			case <-time.After(5 * time.Second):
				t.Errorf("the fetcher still holds the connection to the stalled origin")
			}
		})
	}
}

// TestFailedFactDetailIsBounded checks docs/streams.md, Payloads: a fetch_failed detail has a
// "bounded length". However long the detail given, the fact's detail is at
// most contentfetch.MaxDetailLength bytes and valid UTF-8, also when the bound
// falls inside a multi-byte character, and it keeps the start of the text.
func TestFailedFactDetailIsBounded(t *testing.T) {
	cmd := fetchenv.Command("http://origin.test/")
	at := time.Date(2026, 11, 30, 0, 0, 1, 0, time.UTC)
	var tests []struct {
		name   string
		detail string
	}
	add := func(name, detail string) {
		tests = append(tests, struct {
			name   string
			detail string
		}{name, detail})
	}
	add("ascii at the bound", strings.Repeat("a", contentfetch.MaxDetailLength))
	add("ascii one over", strings.Repeat("a", contentfetch.MaxDetailLength+1))
	add("ascii very long", strings.Repeat("a", 100*contentfetch.MaxDetailLength))
	// Shift each multi-byte character across the bound so that every byte
	// offset inside it is, for some row, where a cut would fall.
	for _, r := range []string{"é", "€", "𝄞"} {
		for shift := range 8 {
			prefix := strings.Repeat("a", contentfetch.MaxDetailLength-8+shift)
			add(fmt.Sprintf("%q shifted %d", r, shift), prefix+strings.Repeat(r, contentfetch.MaxDetailLength))
		}
	}
	add("all four-byte", strings.Repeat("𝄞", contentfetch.MaxDetailLength))

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fact := contentfetch.FailedFact(cmd, envelope.ReasonHandlerError, tt.detail, 0, 0, at)
			if fact.Detail == nil {
				t.Fatal("detail = null, want the bounded text")
			}
			got := *fact.Detail
			if len(got) > contentfetch.MaxDetailLength {
				t.Errorf("detail is %d bytes, want at most %d", len(got), contentfetch.MaxDetailLength)
			}
			if !utf8.ValidString(got) {
				t.Errorf("detail is not valid UTF-8: ...%q", got[max(0, len(got)-8):])
			}
			if len(tt.detail) <= contentfetch.MaxDetailLength {
				if got != tt.detail {
					t.Errorf("a detail within the bound was changed: %d bytes -> %d", len(tt.detail), len(got))
				}
				return
			}
			// Bounded, not emptied: most of the text's start survives.
			if common := commonPrefixLen(got, tt.detail); common < contentfetch.MaxDetailLength/2 {
				t.Errorf("detail keeps only %d bytes of the text's start", common)
			}
		})
	}

	// The same bound holds on a fact the Handler builds from a long error:
	// a 404 for a very long URL names that URL in its detail.
	t.Run("through the handler", func(t *testing.T) {
		h := fetchenv.New(t, testenv.Status(http.StatusNotFound, nil, "gone"), fetchenv.Options{})
		out := h.Handle(t, fetchenv.Command(h.URL("origin.test", "/"+strings.Repeat("p", 8*contentfetch.MaxDetailLength))))
		fact, ok := out.Fact.(*envelope.FetchFailed)
		if out.Fate != capability.Close || !ok {
			t.Fatalf("outcome = %v (%v), want permanent with a fact", out.Name(), out.Err)
		}
		if fact.Detail == nil || len(*fact.Detail) > contentfetch.MaxDetailLength || !utf8.ValidString(*fact.Detail) {
			t.Errorf("detail = %d bytes (nil %v), want at most %d of valid UTF-8", len(deref(fact.Detail)), fact.Detail == nil, contentfetch.MaxDetailLength)
		}
	})
}

// TestHandleFetchedAtIsWhenTheBodyEnded checks docs/streams.md, Payloads: blob_available's
// fetched_at is "when the body finished arriving, not publish time". The
// origin trickles its body over 300 ms after the headers, and the sink
// holds on for 300 ms after reading the last byte before it returns, so the
// three candidate times (headers, end of body, publish) are far apart.
// The Handler's clock is not injectable from outside the package, so the
// bounds are on the wall clock with margins.
func TestHandleFetchedAtIsWhenTheBodyEnded(t *testing.T) {
	const (
		every   = 150 * time.Millisecond
		chunks  = 5
		trickle = every * chunks // the body ends no sooner than this after the request
		linger  = 750 * time.Millisecond
		// margin absorbs scheduling delays on a loaded machine under -race;
		// the times it tells apart are trickle and linger apart.
		margin = 250 * time.Millisecond
	)
	h := fetchenv.New(t, testenv.Trickle([]byte("slow "), every, chunks), fetchenv.Options{})
	spy := &putSpy{Sink: h.Sink, afterEOF: linger}
	handler := contentfetch.NewHandler(contentfetch.HandlerOptions{Fetcher: h.Fetcher, Sink: spy, Logger: fetchenv.Quiet})

	start := time.Now().Round(0) // wall clock, as the fact's times are
	out := handler.Fetch(specCtx(t, 30*time.Second), fetchenv.Command(h.URL("origin.test", "/slow")), nil)
	if out.Label != contentfetch.Stored {
		t.Fatalf("kind = %v (%v), want stored", out.Name(), out.Err)
	}
	fact := out.Fact.(*envelope.BlobAvailable)
	if fact.FetchedAt == nil {
		t.Fatal("fetched_at = null, want when the body finished arriving")
	}
	fetched := *fact.FetchedAt
	if earliest := start.Add(trickle - margin); fetched.Before(earliest) {
		t.Errorf("fetched_at = %v, %v after the request began; want at least %v (the body was still arriving)",
			fetched, fetched.Sub(start), trickle-margin)
	}
	if fetched.After(fact.OccurredAt) {
		t.Errorf("fetched_at %v is after occurred_at %v", fetched, fact.OccurredAt)
	}
	// The body ended before the sink's linger began; publish came after it.
	if gap := fact.OccurredAt.Sub(fetched); gap < linger-margin {
		t.Errorf("occurred_at - fetched_at = %v, want at least %v: fetched_at looks like publish time", gap, linger-margin)
	}
	if eof := spy.eofAt(); !eof.IsZero() && (fetched.Before(eof.Add(-margin)) || fetched.After(eof.Add(margin))) {
		t.Errorf("fetched_at = %v, want about when the sink read EOF (%v)", fetched, eof)
	}
}

// TestHandleNetworkErrorsAreTransient checks docs/taxonomy.md, Classifying the final response: "network errors
// (DNS, connect, reset, TLS) → transient". Each is a Retry outcome with
// no fact, and nothing is stored. An untrusted certificate is included on
// purpose: Retryable treats it as not worth retrying within one Get, but
// docs/taxonomy.md classifies every TLS failure as transient for a command.
func TestHandleNetworkErrorsAreTransient(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("/ok", testenv.Status(http.StatusOK, nil, "never stored"))
	mux.Handle("/reset", resetMidBody(64<<10, 1<<10))
	h := fetchenv.New(t, mux, fetchenv.Options{})
	// An https origin whose certificate nothing trusts; its log of the
	// refused handshake is expected noise.
	untrusted := httptest.NewUnstartedServer(testenv.Status(http.StatusOK, nil, "never stored"))
	untrusted.Config.ErrorLog = log.New(io.Discard, "", 0)
	untrusted.StartTLS()
	t.Cleanup(untrusted.Close)
	_, untrustedPort, _ := net.SplitHostPort(untrusted.Listener.Addr().String())

	tests := []struct {
		name    string
		url     string
		wantErr error // also wrapped, when set
	}{
		{name: "DNS: name the resolver does not know", url: "http://nowhere.test:" + h.Origin.Port() + "/ok", wantErr: guard.ErrResolve},
		{name: "connect: refused", url: "http://origin.test:" + specClosedPort(t) + "/ok", wantErr: fetch.ErrNetwork},
		{name: "TLS: https to a plain HTTP origin", url: "https://origin.test:" + h.Origin.Port() + "/ok", wantErr: fetch.ErrNetwork},
		{name: "TLS: untrusted certificate", url: "https://example.com:" + untrustedPort + "/ok", wantErr: fetch.ErrNetwork},
		{name: "reset mid-body", url: h.URL("origin.test", "/reset"), wantErr: fetch.ErrNetwork},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := h.Handle(t, fetchenv.Command(tt.url))
			if out.Fate != capability.Retry {
				t.Fatalf("outcome = %v/%q (%v), want transient", out.Name(), out.Reason, out.Err)
			}
			if out.Fact != nil {
				t.Errorf("transient outcome carries a fact: %#v", out.Fact)
			}
			if out.Reason != "" {
				t.Errorf("reason = %q, want none", out.Reason)
			}
			t.Logf("err: %v", out.Err)
			if tt.wantErr != nil && !errors.Is(out.Err, tt.wantErr) {
				t.Errorf("err = %v, want it to wrap %v", out.Err, tt.wantErr)
			}
		})
	}
	if n := h.Sink.Len(); n != 0 {
		t.Errorf("sink holds %d blobs, want none", n)
	}
}

// TestHandleDefaultHeadersOnTheWire checks docs/taxonomy.md, Request headers and compression, on the request bytes
// themselves (the parsed header merges nothing, but the raw head is the
// contract): "user-agent names the project and its version", "exactly one
// line per header goes on the wire", an issuer's user-agent replaces the
// default, and, unless the issuer set accept-encoding, the worker asks for
// gzip; either way it stores the decoded bytes (size_bytes counts decoded
// bytes), as docs/storage.md, Bodies are stored decoded, has it.
// TestHandleDecompression and TestHandleHeadersOnTheWire cover the parsed
// side; this adds the wire, the size and byte-exact storage.
func TestHandleDefaultHeadersOnTheWire(t *testing.T) {
	decoded := bytes.Repeat([]byte("feed item "), 2000)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(decoded)
	zw.Close()
	encoded := gz.Bytes()

	if ua, want := fetch.DefaultUserAgent(), "replicator-go/"+fetch.Version()+" (+https://github.com/replicator-go/replicator)"; ua != want {
		t.Errorf("DefaultUserAgent() = %q, want %q", ua, want)
	}

	origin := startWireOrigin(t, func(conn net.Conn, _ string) {
		fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", len(encoded))
		conn.Write(encoded)
	})
	mem := memory.New(memory.Options{TTL: time.Hour})
	h := specHandler(t, fetch.Options{}, mem)

	tests := []struct {
		name        string
		headers     map[string]string
		wantUA      string
		wantAE      string
		wantStored  []byte
		description string
	}{
		{name: "defaults", wantUA: fetch.DefaultUserAgent(), wantAE: "gzip", wantStored: decoded, description: "decoded"},
		{name: "issuer user-agent, lower-case", headers: map[string]string{"user-agent": "issuer-bot/2.1"},
			wantUA: "issuer-bot/2.1", wantAE: "gzip", wantStored: decoded, description: "decoded"},
		{name: "issuer user-agent, mixed case", headers: map[string]string{"User-AGENT": "issuer-bot/2.2"},
			wantUA: "issuer-bot/2.2", wantAE: "gzip", wantStored: decoded, description: "decoded"},
		{name: "issuer accept-encoding", headers: map[string]string{"accept-encoding": "gzip"},
			wantUA: fetch.DefaultUserAgent(), wantAE: "gzip", wantStored: decoded, description: "decoded"},
		{name: "issuer Accept-Encoding, other value", headers: map[string]string{"Accept-Encoding": "gzip, br"},
			wantUA: fetch.DefaultUserAgent(), wantAE: "gzip, br", wantStored: decoded, description: "decoded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(origin.requests())
			cmd := fetchenv.Command(origin.url("origin.test", "/feed"))
			cmd.Headers = tt.headers
			out := h.Fetch(specCtx(t, 30*time.Second), cmd, nil)
			if out.Label != contentfetch.Stored {
				t.Fatalf("kind = %v (%v), want stored", out.Name(), out.Err)
			}
			heads := origin.requests()
			if len(heads) != before+1 {
				t.Fatalf("origin saw %d requests, want 1", len(heads)-before)
			}
			head := heads[len(heads)-1]
			if got := headerLines(head, "User-Agent"); len(got) != 1 || got[0] != tt.wantUA {
				t.Errorf("User-Agent lines on the wire = %q, want exactly [%q]\n%s", got, tt.wantUA, head)
			}
			if got := headerLines(head, "Accept-Encoding"); len(got) != 1 || got[0] != tt.wantAE {
				t.Errorf("Accept-Encoding lines on the wire = %q, want exactly [%q]\n%s", got, tt.wantAE, head)
			}
			fact := out.Fact.(*envelope.BlobAvailable)
			if got := fetchenv.Stored(t, mem, fact.ContentFingerprint); !bytes.Equal(got, tt.wantStored) {
				t.Errorf("stored %d bytes, want the %d bytes %s", len(got), len(tt.wantStored), tt.description)
			}
			if fact.SizeBytes != int64(len(tt.wantStored)) {
				t.Errorf("size_bytes = %d, want %d (%s)", fact.SizeBytes, len(tt.wantStored), tt.description)
			}
			if fact.ContentFingerprint != fetchenv.SHA(tt.wantStored) {
				t.Errorf("content_fingerprint = %s, want the sha256 of the bytes %s", fact.ContentFingerprint, tt.description)
			}
		})
	}
}

// specHandler builds a Handler over a fetcher configured by opts, with the
// test guard and no pacing floor unless opts says otherwise, storing into
// dst.
func specHandler(t *testing.T, opts fetch.Options, dst sink.Sink) *contentfetch.Handler {
	t.Helper()
	if opts.Guard == nil {
		opts.Guard = fetchenv.Guard()
	}
	if opts.Logger == nil {
		opts.Logger = fetchenv.Quiet
	}
	if opts.Pacer == nil {
		opts.Pacer = policy.NewLocal(policy.LocalOptions{DefaultInterval: policy.None})
	}
	f := fetch.New(opts)
	t.Cleanup(f.Close)
	return contentfetch.NewHandler(contentfetch.HandlerOptions{Fetcher: f, Sink: dst, Logger: fetchenv.Quiet})
}

func specCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// putSpy counts the bodies handed to a sink and can hold each Put for
// afterEOF once the body has been read to its end, recording when it was.
type putSpy struct {
	*memory.Sink
	afterEOF time.Duration

	puts atomic.Int64
	mu   sync.Mutex
	eof  time.Time
}

func (s *putSpy) Put(ctx context.Context, r io.Reader, opts sink.PutOptions) (sink.Blob, error) {
	s.puts.Add(1)
	body, err := io.ReadAll(r)
	if err != nil {
		return sink.Blob{}, err
	}
	s.mu.Lock()
	s.eof = time.Now().Round(0)
	s.mu.Unlock()
	if s.afterEOF > 0 {
		select {
		case <-time.After(s.afterEOF):
		case <-ctx.Done():
			return sink.Blob{}, ctx.Err()
		}
	}
	return s.Sink.Put(ctx, bytes.NewReader(body), opts)
}

func (s *putSpy) eofAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eof
}

// wireOrigin is a loopback origin speaking HTTP/1.1 by hand: it records
// each request head byte for byte, then lets serve write the response on
// the raw connection. One request per connection; the connection closes
// when serve returns.
type wireOrigin struct {
	ln    net.Listener
	mu    sync.Mutex
	heads []string
	conns map[net.Conn]bool
}

func startWireOrigin(t *testing.T, serve func(conn net.Conn, head string)) *wireOrigin {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &wireOrigin{ln: ln, conns: map[net.Conn]bool{}}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			o.mu.Lock()
			o.conns[conn] = true
			o.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() {
					o.mu.Lock()
					delete(o.conns, conn)
					o.mu.Unlock()
					conn.Close()
				}()
				head, err := readHead(bufio.NewReader(conn))
				if err != nil {
					return
				}
				o.mu.Lock()
				o.heads = append(o.heads, head)
				o.mu.Unlock()
				serve(conn, head)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		o.mu.Lock()
		for c := range o.conns {
			c.Close()
		}
		o.mu.Unlock()
		wg.Wait()
	})
	return o
}

func (o *wireOrigin) url(host, path string) string {
	_, port, _ := net.SplitHostPort(o.ln.Addr().String())
	return "http://" + net.JoinHostPort(host, port) + path
}

func (o *wireOrigin) requests() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.heads...)
}

// readHead reads a request line and header lines up to the blank line,
// returning them verbatim. A GET has no body to read.
func readHead(r *bufio.Reader) (string, error) {
	var b strings.Builder
	for {
		line, err := r.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			return b.String(), err
		}
		if line == "\r\n" || line == "\n" {
			return b.String(), nil
		}
	}
}

// headerLines returns the values of every field line named name in a raw
// request head, in order, with the optional white space around them removed.
func headerLines(head, name string) []string {
	var out []string
	for _, line := range strings.Split(head, "\r\n")[1:] {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.EqualFold(k, name) {
			out = append(out, strings.Trim(v, " \t"))
		}
	}
	return out
}

// resetMidBody answers 200 declaring length bytes, sends sent of them and
// then resets the connection (RST, not a clean close).
func resetMidBody(length, sent int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " + strconv.Itoa(length) + "\r\n\r\n")
		buf.Write(bytes.Repeat([]byte("r"), sent))
		buf.Flush()
		// Give the client a moment to read the head and the first bytes, so
		// the reset lands mid-body rather than before the response.
		time.Sleep(50 * time.Millisecond)
		if tcp, ok := conn.(*net.TCPConn); ok {
			tcp.SetLinger(0)
		}
	})
}

// specClosedPort returns a loopback port nothing listens on.
func specClosedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	l.Close()
	return port
}

func commonPrefixLen(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// TestRequestLineAndHost: the request goes out with the request-target as
// the command spelled its path and query (escapes kept) and a Host header
// naming the host as net/http dials it, however the URL was written.
func TestRequestLineAndHost(t *testing.T) {
	origin := startWireOrigin(t, func(conn net.Conn, _ string) {
		io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
	})
	h := specHandler(t, fetch.Options{}, memory.New(memory.Options{TTL: time.Hour}))
	_, port, _ := net.SplitHostPort(origin.ln.Addr().String())
	for _, tt := range []struct {
		name, url, wantLine, wantHost string
	}{
		{"escapes kept", origin.url("origin.test", "/a%2Fb/c%20d?q=1&r=%2F"), "GET /a%2Fb/c%20d?q=1&r=%2F HTTP/1.1", "origin.test:" + port},
		{"no path", origin.url("origin.test", ""), "GET / HTTP/1.1", "origin.test:" + port},
		{"internationalised name", origin.url("bücher.test", "/"), "GET / HTTP/1.1", "xn--bcher-kva.test:" + port},
		{"upper case and a fragment", "http://ORIGIN.test:" + port + "/x#frag", "GET /x HTTP/1.1", "ORIGIN.test:" + port},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := len(origin.requests())
			if out := h.Fetch(specCtx(t, 30*time.Second), fetchenv.Command(tt.url), nil); out.Label != contentfetch.Stored {
				t.Fatalf("kind = %v (%v), want stored", out.Name(), out.Err)
			}
			heads := origin.requests()
			if len(heads) != before+1 {
				t.Fatalf("origin saw %d requests, want 1", len(heads)-before)
			}
			head := heads[len(heads)-1]
			if line, _, _ := strings.Cut(head, "\r\n"); line != tt.wantLine {
				t.Errorf("request line = %q, want %q", line, tt.wantLine)
			}
			if got := headerLines(head, "Host"); len(got) != 1 || got[0] != tt.wantHost {
				t.Errorf("Host lines = %q, want exactly [%q]", got, tt.wantHost)
			}
		})
	}
}
