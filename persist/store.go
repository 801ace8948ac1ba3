package persist

import (
	"context"
	"errors"
	"io"
)

// Errors of the stores, wrapped with detail; check them with errors.Is.
// A store also returns errors wrapping sink.ErrNotFound (no blob under the
// fingerprint) and sink.ErrPermanent (a refusal trying again will not heal).
var (
	// ErrCorrupt means the bytes given to Keep do not hash to the
	// fingerprint they were to be kept under. Nothing was stored.
	ErrCorrupt = errors.New("persist: bytes do not hash to their fingerprint")
	// ErrStoreUnusable means a store could not be opened: the bucket does
	// not exist or may not be listed, or the directory cannot be made.
	ErrStoreUnusable = errors.New("persist: permanent store not usable")
)

// Store is the permanent store: blobs kept by digest, with no retention
// clock, never overwritten. GCSStore and LocalStore implement it; both are
// safe for concurrent use, and so must any other implementation be.
type Store interface {
	// URI returns the blob_uri this store mints for a fingerprint, kept
	// or not.
	URI(fingerprint string) string
	// Size returns the length of the blob kept under fingerprint, or an
	// error wrapping sink.ErrNotFound.
	Size(ctx context.Context, fingerprint string) (int64, error)
	// Keep reads r once to EOF, hashing the bytes as it writes them, and
	// creates the blob named fingerprint if none exists yet, recording
	// mediaType where the backend keeps metadata. Bytes that do not hash to
	// fingerprint never appear under it: Keep returns an error wrapping
	// ErrCorrupt instead. When a blob already exists under the name it is
	// left as it is (it holds these bytes by construction) and Created is
	// false. A refusal trying again will not heal wraps sink.ErrPermanent;
	// any other error is worth retrying.
	Keep(ctx context.Context, fingerprint string, r io.Reader, mediaType string) (Kept, error)
}

// Kept describes a blob Keep stored or found.
type Kept struct {
	// Size is the number of bytes kept.
	Size int64
	// Created is true when this call wrote the blob.
	Created bool
}

// Source is the temp store: the sink this host's fetches store into.
// sink/local, sink/gcs and sink/memory satisfy it. URI must return exactly
// the blob_uri the sink announces for a fingerprint, stored or not.
type Source interface {
	// Open returns the stored bytes of a fingerprint, or an error wrapping
	// sink.ErrNotFound.
	Open(ctx context.Context, fingerprint string) (io.ReadCloser, error)
	// URI returns the blob_uri of a fingerprint.
	URI(fingerprint string) string
}

// sourceError marks a failure reading the source, so that it is not taken
// for the store's.
type sourceError struct{ err error }

func (e *sourceError) Error() string { return "reading the source: " + e.err.Error() }
func (e *sourceError) Unwrap() error { return e.err }

// sourceReader tags the errors of the reader it wraps as sourceErrors.
type sourceReader struct{ r io.Reader }

func (s sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		err = &sourceError{err}
	}
	return n, err
}
