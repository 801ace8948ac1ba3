// Package sink defines the content-addressed blob store the fetcher streams
// bodies into. Identical bytes are one blob; storing them again is a no-op
// that refreshes the blob's retention clock. Backends live in subpackages
// (local, gcs, memory) and all pass the sinktest conformance suite.
package sink

import (
	"context"
	"errors"
	"io"
	"time"
)

// Errors returned by every backend, wrapped with detail; check them with
// errors.Is.
var (
	// ErrTooLarge means the stream held more bytes than the limit allowed.
	// Nothing was stored.
	ErrTooLarge = errors.New("sink: blob exceeds size limit")
	// ErrNotFound means no blob has the fingerprint asked for.
	ErrNotFound = errors.New("sink: blob not found")
	// ErrNoRoom means the store has no room for the bytes now: a bound on
	// what it holds is reached, or its disk is short of free space. Nothing
	// was stored; the same store may succeed once room returns (see Room).
	ErrNoRoom = errors.New("sink: no room")
	// ErrPermanent means the store refused a Put in a way that trying again
	// will not heal: a bucket that is gone or that this identity may no
	// longer write (for GCS, a 4xx other than 408 and 429). Nothing was
	// stored. Other failures (a full disk, a timeout, a 5xx) are worth
	// retrying and do not wrap it.
	ErrPermanent = errors.New("sink: store refused")
)

// Blob describes stored bytes.
type Blob struct {
	// Fingerprint is the lowercase hex sha256 of the bytes.
	Fingerprint string
	// Size is the number of bytes.
	Size int64
	// URI names the blob: file://… or gs://…
	URI string
	// Created is true when these bytes were written by this call, false when
	// identical bytes were already stored and only re-referenced.
	Created bool
	// ExpiresAt is when the backend may reap the blob, computed from a time
	// read before the store began so it is never later than the real reap.
	// Zero when the backend never reaps.
	ExpiresAt time.Time
}

// Sink is a content-addressed blob store.
//
// Implementations are safe for concurrent use.
type Sink interface {
	// Put reads r once to EOF, hashing as it goes, and stores the bytes under
	// their sha256, as opts describes (the zero PutOptions: no limit, size
	// unknown, DefaultMediaType). A stream holding more than opts.Limit
	// bytes returns an error wrapping ErrTooLarge and stores nothing. A blob
	// appears at its final name only complete; an error or a cancelled ctx
	// leaves nothing there.
	Put(ctx context.Context, r io.Reader, opts PutOptions) (Blob, error)
	// Open returns the stored bytes of a fingerprint, or an error wrapping
	// ErrNotFound.
	Open(ctx context.Context, fingerprint string) (io.ReadCloser, error)
}

// DefaultMediaType is the media type of bytes whose type is not known: what
// a blob stored without a media type is recorded as by a backend that
// records one, what blob_available announces for a response with no usable
// Content-Type, and a replicated copy's content type when its command
// names none.
const DefaultMediaType = "application/octet-stream"

// PutOptions describes a store beyond its bytes. The zero value is a store
// with no limit, of unknown size, with no media type.
type PutOptions struct {
	// Limit > 0 bounds the bytes accepted: a stream holding more fails
	// with an error wrapping ErrTooLarge. Zero means no limit.
	Limit int64
	// Size > 0 is the body's declared length, known before it is read (an
	// HTTP Content-Length). A backend that implements Room claims it before
	// reading a byte, and refuses with an error wrapping ErrNoRoom when it
	// does not fit, so stores that begin at once cannot all count on the
	// same space. It need not be exact: the bytes that arrive are counted
	// as they are written. Zero means unknown.
	Size int64
	// MediaType is the body's media type, normalized as blob_available
	// announces it ("text/html"). A backend that keeps metadata with a blob
	// records it when it creates the blob (gcs: the object's content type);
	// a re-reference keeps what the first store recorded, since identical
	// bytes are one blob. Empty means DefaultMediaType.
	MediaType string
}

// Room is implemented by a backend whose space can run out (local). A
// caller asks it before fetching a body, so that nothing is fetched that
// could not be stored, and gives the body's declared length to the store
// (PutOptions.Size) once it is known.
type Room interface {
	// Room returns nil when a store of need more bytes (0 when the size is
	// not known) fits now, counting the stores in progress, and otherwise
	// an error wrapping ErrNoRoom that says which bound is short. It claims
	// nothing.
	Room(need int64) error
}
