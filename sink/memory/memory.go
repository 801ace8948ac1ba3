// Package memory is an in-memory sink.Sink, for tests and for programs that
// embed the fetcher and consume bodies in the same process.
//
// Blobs are held in a map from fingerprint to bytes and are named
// "mem://<sha256>". With a TTL, a blob not re-referenced within it is
// treated as gone: Open reports sink.ErrNotFound and a later Put stores it
// afresh. Expired blobs are dropped when touched or by Sweep, so a process
// that embeds this sink with a TTL should call Sweep now and then.
package memory

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/replicator-go/replicator/sink"
)

// Options configures a Sink. The zero value is a sink that never expires
// anything.
type Options struct {
	// TTL is how long a blob lives after its last Put. Zero (the default)
	// means forever, and Blob.ExpiresAt is then zero.
	TTL time.Duration
}

// Sink is an in-memory content-addressed store. Create one with New.
//
// A Sink is safe for concurrent use.
type Sink struct {
	ttl time.Duration
	now func() time.Time // seam for tests

	mu    sync.Mutex
	blobs map[string]*entry
}

type entry struct {
	data      []byte
	mediaType string
	touched   time.Time
}

var _ sink.Sink = (*Sink)(nil)

// New returns an empty Sink.
func New(opts Options) *Sink {
	return &Sink{ttl: opts.TTL, now: time.Now, blobs: make(map[string]*entry)}
}

// URI returns the name Put gives the blob with this fingerprint.
func URI(fingerprint string) string { return "mem://" + fingerprint }

// URI is the package's URI as a method, so a memory Sink can stand wherever
// a backend's URI mapping is asked for (the replicate source guard).
func (s *Sink) URI(fingerprint string) string { return URI(fingerprint) }

// Put implements sink.Sink. The bytes are read into memory before the blob
// becomes visible, so a failed or cancelled Put leaves nothing behind. A
// new blob keeps opts.MediaType (sink.DefaultMediaType when empty), which
// MediaType reports; a re-referenced one keeps the type it was first
// stored with.
func (s *Sink) Put(ctx context.Context, r io.Reader, opts sink.PutOptions) (sink.Blob, error) {
	return s.PutAt(ctx, s.now(), r, opts)
}

// PutAt is Put with the store's start time given explicitly; ExpiresAt is
// now+TTL and the blob's retention clock restarts at now.
func (s *Sink) PutAt(ctx context.Context, now time.Time, r io.Reader, opts sink.PutOptions) (sink.Blob, error) {
	// A declared size within the limit is allocated at once: a body that
	// arrives as announced is read into its final slice, never grown or
	// copied.
	buf := new(bytes.Buffer)
	if opts.Size > 0 && opts.Limit > 0 && opts.Size <= opts.Limit {
		buf = bytes.NewBuffer(make([]byte, 0, opts.Size))
	}
	fp, n, err := sink.Copy(ctx, buf, r, opts.Limit)
	if err != nil {
		return sink.Blob{}, fmt.Errorf("memory: put: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return sink.Blob{}, err
	}
	b := sink.Blob{Fingerprint: fp, Size: n, URI: URI(fp)}
	if s.ttl > 0 {
		b.ExpiresAt = now.Add(s.ttl)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.blobs[fp]; ok && !s.expired(e, now) {
		if now.After(e.touched) {
			e.touched = now
		}
		return b, nil
	}
	mediaType := opts.MediaType
	if mediaType == "" {
		mediaType = sink.DefaultMediaType
	}
	data := buf.Bytes()
	if cap(data) > len(data) {
		// So the map never pins a larger buffer than the blob.
		data = bytes.Clone(data)
	}
	s.blobs[fp] = &entry{data: data, mediaType: mediaType, touched: now}
	b.Created = true
	return b, nil
}

// Open implements sink.Sink. The returned reader shares the stored bytes,
// which are never modified.
func (s *Sink) Open(ctx context.Context, fingerprint string) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := sink.CheckFingerprint(fingerprint); err != nil {
		return nil, fmt.Errorf("memory: open: %w", err)
	}
	now := s.now()
	s.mu.Lock()
	e, ok := s.blobs[fingerprint]
	if ok && s.expired(e, now) {
		delete(s.blobs, fingerprint)
		ok = false
	}
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("memory: open %s: %w", fingerprint, sink.ErrNotFound)
	}
	return io.NopCloser(bytes.NewReader(e.data)), nil
}

// MediaType returns the media type a held blob was stored with, and
// whether the sink holds it.
func (s *Sink) MediaType(fingerprint string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.blobs[fingerprint]
	if !ok {
		return "", false
	}
	return e.mediaType, true
}

// Sweep drops every blob whose TTL has run out and returns how many it
// dropped. It does nothing when the sink has no TTL.
func (s *Sink) Sweep() int { return s.SweepAt(s.now()) }

// SweepAt is Sweep with the current time given explicitly.
func (s *Sink) SweepAt(now time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for fp, e := range s.blobs {
		if s.expired(e, now) {
			delete(s.blobs, fp)
			n++
		}
	}
	return n
}

// Len returns the number of blobs held, expired or not.
func (s *Sink) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.blobs)
}

func (s *Sink) expired(e *entry, now time.Time) bool {
	return s.ttl > 0 && !now.Before(e.touched.Add(s.ttl))
}
