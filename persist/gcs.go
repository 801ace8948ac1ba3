package persist

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"

	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/gcs"
)

// ObjectPrefix is the folder a permanent bucket keeps its blobs under:
// gs://<bucket>/blobs/<sha256>.bin (docs/persist.md).
const ObjectPrefix = "blobs/"

// GCSStore is the permanent store in a GCS bucket. Create one with
// NewGCSStore. It is safe for concurrent use.
type GCSStore struct {
	bucket *storage.BucketHandle
	name   string
}

var _ Store = (*GCSStore)(nil)

// NewGCSStore returns the permanent store in bucket after checking, with a
// one-object listing under ObjectPrefix, that the bucket exists and may be
// listed; the error then wraps ErrStoreUnusable. The client carries the
// identity that writes (create and get, never update or delete).
func NewGCSStore(ctx context.Context, client *storage.Client, bucket string) (*GCSStore, error) {
	if client == nil {
		return nil, errors.New("persist: nil storage client")
	}
	if bucket == "" {
		return nil, errors.New("persist: no permanent bucket given")
	}
	s := &GCSStore{bucket: client.Bucket(bucket), name: bucket}
	q := &storage.Query{Prefix: ObjectPrefix}
	if err := q.SetAttrSelection([]string{"Name"}); err != nil {
		return nil, fmt.Errorf("persist: %w", err)
	}
	it := s.bucket.Objects(ctx, q)
	it.PageInfo().MaxSize = 1
	if _, err := it.Next(); err != nil && !errors.Is(err, iterator.Done) {
		return nil, fmt.Errorf("%w: listing gs://%s/%s: %w", ErrStoreUnusable, bucket, ObjectPrefix, err)
	}
	return s, nil
}

// Object returns the object name of the blob with this fingerprint.
func (s *GCSStore) Object(fingerprint string) string { return ObjectPrefix + fingerprint + ".bin" }

// URI returns gs://<bucket>/blobs/<fingerprint>.bin.
func (s *GCSStore) URI(fingerprint string) string {
	return "gs://" + s.name + "/" + s.Object(fingerprint)
}

// Size implements Store with one metadata read.
func (s *GCSStore) Size(ctx context.Context, fingerprint string) (int64, error) {
	if err := sink.CheckFingerprint(fingerprint); err != nil {
		return 0, fmt.Errorf("persist: %w", err)
	}
	attrs, err := s.bucket.Object(s.Object(fingerprint)).Attrs(ctx)
	if errors.Is(err, storage.ErrObjectNotExist) {
		return 0, fmt.Errorf("persist: %s: %w", s.URI(fingerprint), sink.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("persist: stat %s: %w", s.URI(fingerprint), gcs.Permanent(err))
	}
	return attrs.Size, nil
}

// Keep implements Store. The bytes stream through one create-if-absent
// resumable upload (ifGenerationMatch=0), hashed on the way. An upload is
// committed only by its last chunk, which the writer sends once it is
// closed; Keep closes it only once the bytes have hashed to fingerprint.
// Bytes that do not are never committed: the upload is cancelled and never
// closed, so its last chunk is never sent and no object appears. (A
// single-request upload would not do: aborting one ends its multipart body
// cleanly, and the service may commit what was sent.) One chunk of
// googleapi.MinUploadChunkSize is buffered per upload, so the client
// retries a failed chunk itself within ctx.
//
// The object gets mediaType as its content type (sink.DefaultMediaType when
// empty), sink.ContentStampKey=<fingerprint> in its metadata and no
// customTime: a permanent blob has no retention clock.
func (s *GCSStore) Keep(ctx context.Context, fingerprint string, r io.Reader, mediaType string) (Kept, error) {
	if err := sink.CheckFingerprint(fingerprint); err != nil {
		return Kept{}, fmt.Errorf("persist: %w", err)
	}
	if mediaType == "" {
		mediaType = sink.DefaultMediaType
	}
	// Cancelling is how a storage.Writer is aborted.
	uctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := s.bucket.Object(s.Object(fingerprint)).If(storage.Conditions{DoesNotExist: true}).NewWriter(uctx)
	// The smallest chunk that keeps the upload resumable (the default
	// would hold 16 MiB per upload).
	w.ChunkSize = googleapi.MinUploadChunkSize
	w.ContentType = mediaType
	w.Metadata = sink.ContentStamp(fingerprint)
	got, n, err := sink.Copy(uctx, w, r, 0)
	if err == nil && got != fingerprint {
		err = fmt.Errorf("%w: %s holds bytes hashing to %s", ErrCorrupt, fingerprint, got)
	}
	if err != nil {
		// Abort. Cancelling makes the writer close its pipe with an error,
		// so the last chunk is never sent and nothing is committed. Close
		// must not be called: run before the writer sees the cancel, it
		// would end the stream cleanly and commit what was sent.
		cancel()
		if gcs.Status(err) == http.StatusPreconditionFailed {
			// The create was refused as soon as it began: the blob is
			// already kept. Its size is the stored one.
			return s.existing(ctx, fingerprint)
		}
		var se *sourceError
		if errors.Is(err, ErrCorrupt) || errors.As(err, &se) {
			return Kept{}, err
		}
		return Kept{}, fmt.Errorf("persist: upload %s: %w", s.URI(fingerprint), gcs.Permanent(err))
	}
	if err := w.Close(); err != nil {
		if gcs.Status(err) == http.StatusPreconditionFailed {
			return Kept{Size: n}, nil
		}
		return Kept{}, fmt.Errorf("persist: upload %s: %w", s.URI(fingerprint), gcs.Permanent(err))
	}
	return Kept{Size: n, Created: true}, nil
}

// existing describes the blob a refused create found.
func (s *GCSStore) existing(ctx context.Context, fingerprint string) (Kept, error) {
	n, err := s.Size(ctx, fingerprint)
	if err != nil {
		return Kept{}, err
	}
	return Kept{Size: n}, nil
}
