// Package sinktest is the conformance suite every sink.Sink backend runs,
// so that the fetcher can treat them as interchangeable.
//
// A backend's test calls Run with a constructor for a fresh, empty sink:
//
//	func TestConformance(t *testing.T) {
//		sinktest.Run(t, func(t *testing.T) sink.Sink {
//			return memory.New(memory.Options{TTL: sinktest.TTL})
//		})
//	}
package sinktest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/replicator-go/replicator/sink"
)

// TTL is the retention a constructor passed to Run should give its sink
// (a backend that never reaps may ignore it and report a zero ExpiresAt).
// The suite checks ExpiresAt against it.
const TTL = time.Hour

// Run runs the conformance suite against sinks made by newSink, each
// subtest on a fresh one. newSink should register any cleanup with t.
func Run(t *testing.T, newSink func(t *testing.T) sink.Sink) {
	t.Helper()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s sink.Sink)
	}{
		{"StoreAndOpen", testStoreAndOpen},
		{"SameBytesTwice", testSameBytesTwice},
		{"DifferentBytes", testDifferentBytes},
		{"EmptyBody", testEmptyBody},
		{"Limit", testLimit},
		{"ReaderFailsHalfway", testReaderFails},
		{"ConcurrentSameBytes", testConcurrentSameBytes},
		{"CancelledContext", testCancelled},
		{"OpenMissing", testOpenMissing},
		{"URIMapping", testURIMapping},
		{"MediaType", testMediaType},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newSink(t)) })
	}
}

// Bytes returns n pseudo-random bytes derived from seed, so every call with
// the same arguments yields the same blob.
func Bytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// Fingerprint is the lowercase hex sha256 of b.
func Fingerprint(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ignoreVolatile leaves out the fields each test checks on its own.
var ignoreVolatile = cmpopts.IgnoreFields(sink.Blob{}, "URI", "ExpiresAt")

func put(t *testing.T, s sink.Sink, data []byte, limit int64) sink.Blob {
	t.Helper()
	before := time.Now()
	// HalfReader makes the backend cope with short reads.
	b, err := s.Put(context.Background(), iotest.HalfReader(bytes.NewReader(data)), sink.PutOptions{Limit: limit})
	after := time.Now()
	if err != nil {
		t.Fatalf("Put(%d bytes): %v", len(data), err)
	}
	checkExpiry(t, b, before, after)
	return b
}

// checkExpiry holds ExpiresAt between before+TTL and after+TTL: it is
// derived from a time read during the store, so the announced horizon is
// never later than the real reap.
func checkExpiry(t *testing.T, b sink.Blob, before, after time.Time) {
	t.Helper()
	if b.ExpiresAt.IsZero() {
		return
	}
	if b.ExpiresAt.Before(before.Add(TTL)) || b.ExpiresAt.After(after.Add(TTL)) {
		t.Errorf("ExpiresAt = %v, want within [%v, %v] (time of the store + TTL)",
			b.ExpiresAt, before.Add(TTL), after.Add(TTL))
	}
}

func readAll(t *testing.T, s sink.Sink, fp string) []byte {
	t.Helper()
	rc, err := s.Open(context.Background(), fp)
	if err != nil {
		t.Fatalf("Open(%s): %v", fp, err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %s: %v", fp, err)
	}
	return got
}

func wantNotFound(t *testing.T, s sink.Sink, fp string) {
	t.Helper()
	rc, err := s.Open(context.Background(), fp)
	if err == nil {
		rc.Close()
		t.Fatalf("Open(%s) succeeded, want an error wrapping sink.ErrNotFound", fp)
	}
	if !errors.Is(err, sink.ErrNotFound) {
		t.Fatalf("Open(%s) = %v, want an error wrapping sink.ErrNotFound", fp, err)
	}
}

func testStoreAndOpen(t *testing.T, s sink.Sink) {
	data := Bytes(1, 300_001)
	fp := Fingerprint(data)
	got := put(t, s, data, 0)
	want := sink.Blob{Fingerprint: fp, Size: int64(len(data)), Created: true}
	if diff := cmp.Diff(want, got, ignoreVolatile); diff != "" {
		t.Errorf("Put blob mismatch (-want +got):\n%s", diff)
	}
	if !strings.HasSuffix(got.URI, fp+".bin") && !strings.HasSuffix(got.URI, fp) {
		t.Errorf("URI = %q, want it to end in the fingerprint", got.URI)
	}
	if !bytes.Equal(readAll(t, s, fp), data) {
		t.Errorf("Open returned different bytes than were stored")
	}
}

func testSameBytesTwice(t *testing.T, s sink.Sink) {
	data := Bytes(2, 4096)
	first := put(t, s, data, 0)
	second := put(t, s, data, 0)
	want := first
	want.Created = false
	if diff := cmp.Diff(want, second, cmpopts.IgnoreFields(sink.Blob{}, "ExpiresAt")); diff != "" {
		t.Errorf("second Put of the same bytes (-want +got):\n%s", diff)
	}
	if second.ExpiresAt.Before(first.ExpiresAt) {
		t.Errorf("re-reference moved ExpiresAt back: %v < %v", second.ExpiresAt, first.ExpiresAt)
	}
	if !bytes.Equal(readAll(t, s, first.Fingerprint), data) {
		t.Errorf("Open returned different bytes than were stored")
	}
}

func testDifferentBytes(t *testing.T, s sink.Sink) {
	a, b := Bytes(3, 1000), Bytes(4, 1000)
	ba, bb := put(t, s, a, 0), put(t, s, b, 0)
	if !ba.Created || !bb.Created {
		t.Errorf("Created = %v, %v; want true, true", ba.Created, bb.Created)
	}
	if ba.Fingerprint == bb.Fingerprint || ba.URI == bb.URI {
		t.Errorf("different bytes share a blob: %+v and %+v", ba, bb)
	}
	if !bytes.Equal(readAll(t, s, ba.Fingerprint), a) || !bytes.Equal(readAll(t, s, bb.Fingerprint), b) {
		t.Errorf("Open returned different bytes than were stored")
	}
}

func testEmptyBody(t *testing.T, s sink.Sink) {
	got := put(t, s, nil, 0)
	want := sink.Blob{
		Fingerprint: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		Created:     true,
	}
	if diff := cmp.Diff(want, got, ignoreVolatile); diff != "" {
		t.Errorf("Put(empty) (-want +got):\n%s", diff)
	}
	if b := readAll(t, s, want.Fingerprint); len(b) != 0 {
		t.Errorf("Open(empty blob) returned %d bytes", len(b))
	}
}

func testLimit(t *testing.T, s sink.Sink) {
	for _, tc := range []struct {
		name    string
		size    int
		limit   int64
		wantErr error
	}{
		{name: "under", size: 1000, limit: 1001},
		{name: "exact", size: 70_000, limit: 70_000},
		{name: "one over", size: 70_001, limit: 70_000, wantErr: sink.ErrTooLarge},
		{name: "far over", size: 500_000, limit: 1, wantErr: sink.ErrTooLarge},
		{name: "zero means none", size: 200_000, limit: 0},
		{name: "negative means none", size: 10, limit: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := Bytes(uint64(100+tc.size)+uint64(tc.limit), tc.size)
			b, err := s.Put(context.Background(), bytes.NewReader(data), sink.PutOptions{Limit: tc.limit})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Put(%d bytes, limit %d) error = %v, want %v", tc.size, tc.limit, err, tc.wantErr)
			}
			if tc.wantErr != nil {
				wantNotFound(t, s, Fingerprint(data))
				return
			}
			if b.Size != int64(tc.size) || !bytes.Equal(readAll(t, s, b.Fingerprint), data) {
				t.Errorf("stored blob differs from the %d bytes put", tc.size)
			}
		})
	}
}

var errHalfway = errors.New("connection reset halfway")

// failingReader yields data[:n] and then fails.
type failingReader struct {
	r *bytes.Reader
}

func (f *failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, errHalfway
	}
	return n, err
}

func testReaderFails(t *testing.T, s sink.Sink) {
	data := Bytes(5, 200_000)
	half := data[:len(data)/2]
	_, err := s.Put(context.Background(), &failingReader{bytes.NewReader(half)}, sink.PutOptions{})
	if !errors.Is(err, errHalfway) {
		t.Fatalf("Put with a failing reader = %v, want an error wrapping %v", err, errHalfway)
	}
	wantNotFound(t, s, Fingerprint(data))
	wantNotFound(t, s, Fingerprint(half))
}

func testConcurrentSameBytes(t *testing.T, s sink.Sink) {
	data := Bytes(6, 1<<20)
	const n = 8
	var wg sync.WaitGroup
	blobs := make([]sink.Blob, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			blobs[i], errs[i] = s.Put(context.Background(), bytes.NewReader(data), sink.PutOptions{})
		})
	}
	wg.Wait()
	created := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Put #%d: %v", i, errs[i])
		}
		if blobs[i].URI != blobs[0].URI || blobs[i].Fingerprint != Fingerprint(data) {
			t.Errorf("Put #%d = %+v, want the same blob as %+v", i, blobs[i], blobs[0])
		}
		if blobs[i].Created {
			created++
		}
	}
	if created != 1 {
		t.Errorf("%d of %d concurrent Puts report Created, want exactly 1", created, n)
	}
	if !bytes.Equal(readAll(t, s, Fingerprint(data)), data) {
		t.Errorf("blob is not intact after concurrent Puts")
	}
}

// cancellingReader cancels its context once half of the data has been read.
type cancellingReader struct {
	r      *bytes.Reader
	at     int
	cancel context.CancelFunc
	read   int
}

func (c *cancellingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += n
	if c.read >= c.at {
		c.cancel()
	}
	return n, err
}

func testCancelled(t *testing.T, s sink.Sink) {
	t.Run("before", func(t *testing.T) {
		data := Bytes(7, 10_000)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := s.Put(ctx, bytes.NewReader(data), sink.PutOptions{}); !errors.Is(err, context.Canceled) {
			t.Fatalf("Put(cancelled ctx) = %v, want context.Canceled", err)
		}
		wantNotFound(t, s, Fingerprint(data))
	})
	t.Run("midway", func(t *testing.T) {
		data := Bytes(8, 300_000)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r := &cancellingReader{r: bytes.NewReader(data), at: len(data) / 2, cancel: cancel}
		if _, err := s.Put(ctx, r, sink.PutOptions{}); !errors.Is(err, context.Canceled) {
			t.Fatalf("Put cancelled midway = %v, want context.Canceled", err)
		}
		wantNotFound(t, s, Fingerprint(data))
	})
	t.Run("at the end", func(t *testing.T) {
		// The reader sees EOF and only then is the context cancelled: the
		// check before publishing must still refuse.
		data := Bytes(9, 1000)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r := &cancellingReader{r: bytes.NewReader(data), at: len(data) + 1, cancel: cancel}
		eof := readerFunc(func(p []byte) (int, error) {
			n, err := r.Read(p)
			if err == io.EOF {
				cancel()
			}
			return n, err
		})
		if _, err := s.Put(ctx, eof, sink.PutOptions{}); !errors.Is(err, context.Canceled) {
			t.Fatalf("Put cancelled at EOF = %v, want context.Canceled", err)
		}
		wantNotFound(t, s, Fingerprint(data))
	})
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

func testOpenMissing(t *testing.T, s sink.Sink) {
	for _, fp := range []string{
		Fingerprint([]byte("never stored")),
		"../../../../etc/passwd",
		strings.Repeat("A", 64),
		"",
	} {
		t.Run(fmt.Sprintf("%.12q", fp), func(t *testing.T) { wantNotFound(t, s, fp) })
	}
}

// testURIMapping checks, for a backend that exposes URI(fingerprint), that it
// names exactly what Put announces, stored or not: a reader of a blob_uri
// (the replicate command's source guard) rebuilds the URI from the
// fingerprint and compares, rather than parse the URI it was given.
func testURIMapping(t *testing.T, s sink.Sink) {
	m, ok := s.(interface {
		URI(fingerprint string) string
	})
	if !ok {
		return // nothing to check: the backend mints no URI on its own
	}
	data := Bytes(9, 1000)
	fp := Fingerprint(data)
	before := m.URI(fp)
	b := put(t, s, data, 0)
	if b.URI != before || m.URI(fp) != before {
		t.Errorf("URI(fp) = %q before Put and %q after; Put announced %q", before, m.URI(fp), b.URI)
	}
	other := Fingerprint(Bytes(10, 1000))
	if m.URI(other) == before {
		t.Errorf("two fingerprints share the URI %q", before)
	}
	if !strings.Contains(m.URI(other), other) {
		t.Errorf("URI(%s) = %q does not carry the fingerprint", other, m.URI(other))
	}
}

// testMediaType stores with a media type, as the fetcher does: the limit
// holds beside it, the media type changes nothing about the blob, and
// identical bytes are one blob whatever type each store names.
func testMediaType(t *testing.T, s sink.Sink) {
	ctx := context.Background()
	data := Bytes(10, 20_000)
	first, err := s.Put(ctx, iotest.HalfReader(bytes.NewReader(data)), sink.PutOptions{Limit: int64(len(data)), MediaType: "text/html"})
	if err != nil {
		t.Fatalf("Put(text/html): %v", err)
	}
	want := sink.Blob{Fingerprint: Fingerprint(data), Size: int64(len(data)), Created: true}
	if diff := cmp.Diff(want, first, ignoreVolatile); diff != "" {
		t.Errorf("Put(text/html) blob (-want +got):\n%s", diff)
	}
	again, err := s.Put(ctx, bytes.NewReader(data), sink.PutOptions{MediaType: "application/pdf"})
	if err != nil {
		t.Fatalf("Put(application/pdf) again: %v", err)
	}
	want.Created = false
	if diff := cmp.Diff(want, again, ignoreVolatile); diff != "" || again.URI != first.URI {
		t.Errorf("Put of the same bytes under another type (-want +got):\n%s(URI %q, first %q)", diff, again.URI, first.URI)
	}
	if !bytes.Equal(readAll(t, s, first.Fingerprint), data) {
		t.Errorf("Open returned different bytes than were stored")
	}
	over := Bytes(11, 20_001)
	if _, err := s.Put(ctx, bytes.NewReader(over), sink.PutOptions{Limit: 20_000, MediaType: "text/html"}); !errors.Is(err, sink.ErrTooLarge) {
		t.Fatalf("Put(text/html) over its limit = %v, want an error wrapping sink.ErrTooLarge", err)
	}
	wantNotFound(t, s, Fingerprint(over))
}
