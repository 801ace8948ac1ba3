package gcs

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"

	"github.com/replicator-go/replicator/sink"
)

// Defaults for the zero fields of Options.
const (
	DefaultPrefix  = "blobs"
	DefaultTimeout = 30 * time.Second // REPLICATOR_BLOB_TIMEOUT_SECONDS
)

// maxAttempts bounds the uploads one Put makes for transient failures.
const maxAttempts = 4

// ErrBucket means the start-up listing of the bucket failed: it does not
// exist, or this identity may not list it. The wrapped error carries the
// service's answer.
var ErrBucket = errors.New("gcs: bucket not usable")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Options configures a Sink.
type Options struct {
	// Bucket is the bucket name. Required.
	Bucket string
	// Prefix is the "folder" objects are named under, without slashes at
	// either end. Default "blobs"; "/" names objects at the bucket root.
	Prefix string
	// TTL is the retention the bucket's lifecycle rule applies, used only
	// to compute Blob.ExpiresAt. Zero leaves ExpiresAt zero.
	TTL time.Duration
	// Timeout bounds each operation: a whole Put's upload with its
	// retries and re-stamp, an Open including the read of the body, and
	// the start-up listing. Default 30 s.
	Timeout time.Duration
	// TempDir is where bodies are spooled before upload. Default
	// os.TempDir().
	TempDir string
	// Logger receives retries and re-references. Default slog.Default().
	Logger *slog.Logger
}

// Sink stores blobs as objects in a GCS bucket. Create one with New.
//
// A Sink is safe for concurrent use.
type Sink struct {
	bucket  *storage.BucketHandle
	name    string
	prefix  string // "" or "<prefix>/"
	ttl     time.Duration
	timeout time.Duration
	tempDir string
	log     *slog.Logger

	now     func() time.Time // test seam
	backoff time.Duration    // first retry delay, doubled per attempt
}

var _ sink.Sink = (*Sink)(nil)

// New returns a Sink on client after checking, with a one-object listing
// under the prefix, that the bucket exists and may be listed. The error
// then wraps ErrBucket and names the bucket.
func New(ctx context.Context, client *storage.Client, opts Options) (*Sink, error) {
	if client == nil {
		return nil, errors.New("gcs: nil client")
	}
	if opts.Bucket == "" {
		return nil, errors.New("gcs: no bucket given")
	}
	if opts.TTL < 0 || opts.Timeout < 0 {
		return nil, fmt.Errorf("gcs: negative TTL (%v) or Timeout (%v)", opts.TTL, opts.Timeout)
	}
	prefix := strings.Trim(opts.Prefix, "/")
	switch {
	case opts.Prefix == "":
		prefix = DefaultPrefix + "/"
	case prefix != "":
		prefix += "/"
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.TempDir == "" {
		opts.TempDir = os.TempDir()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Sink{
		bucket:  client.Bucket(opts.Bucket),
		name:    opts.Bucket,
		prefix:  prefix,
		ttl:     opts.TTL,
		timeout: opts.Timeout,
		tempDir: opts.TempDir,
		log:     opts.Logger,
		now:     time.Now,
		backoff: 200 * time.Millisecond,
	}
	if err := s.preflight(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// preflight lists rather than asks whether an object exists: an existence
// check reports a missing bucket as a missing object, and that is the
// misconfiguration to catch.
func (s *Sink) preflight(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	q := &storage.Query{Prefix: s.prefix}
	if err := q.SetAttrSelection([]string{"Name"}); err != nil {
		return fmt.Errorf("gcs: %w", err)
	}
	it := s.bucket.Objects(ctx, q)
	it.PageInfo().MaxSize = 1
	if _, err := it.Next(); err != nil && !errors.Is(err, iterator.Done) {
		return fmt.Errorf("%w: listing gs://%s/%s: %w", ErrBucket, s.name, s.prefix, err)
	}
	return nil
}

// URI returns the gs:// URI of the blob with this fingerprint in bucket
// under DefaultPrefix: what a Sink with the default prefix mints, and the
// address of a blob in the permanent store (REPLICATOR_PERMANENT_BUCKET,
// gs://<bucket>/blobs/<sha256>.bin). It checks neither argument.
func URI(bucket, fingerprint string) string {
	return "gs://" + bucket + "/" + DefaultPrefix + "/" + fingerprint + ".bin"
}

// Object returns the object name of the blob with this fingerprint.
func (s *Sink) Object(fingerprint string) string { return s.prefix + fingerprint + ".bin" }

// URI returns the gs:// URI Put announces for a fingerprint.
func (s *Sink) URI(fingerprint string) string {
	return "gs://" + s.name + "/" + s.Object(fingerprint)
}

// Put implements sink.Sink; see the package documentation for the steps.
// A created object's content type is opts.MediaType
// (sink.DefaultMediaType when empty); a re-referenced one keeps the type it
// was created with.
func (s *Sink) Put(ctx context.Context, r io.Reader, opts sink.PutOptions) (sink.Blob, error) {
	return s.PutAt(ctx, s.now(), r, opts)
}

// PutAt is Put with the time the store began given explicitly: customTime
// is set (or re-stamped) to now and ExpiresAt is now+TTL.
func (s *Sink) PutAt(ctx context.Context, now time.Time, r io.Reader, opts sink.PutOptions) (sink.Blob, error) {
	if err := ctx.Err(); err != nil {
		return sink.Blob{}, err
	}
	spool, err := os.CreateTemp(s.tempDir, "replicator-gcs-*.spool")
	if err != nil {
		return sink.Blob{}, fmt.Errorf("gcs: create spool: %w", err)
	}
	// Unlinked at once where the system allows it, so not even a crash
	// leaves a spool behind; removed again below where it does not.
	name := spool.Name()
	os.Remove(name)
	defer func() {
		spool.Close()
		os.Remove(name)
	}()

	crc := crc32.New(castagnoli)
	fp, n, err := sink.Copy(ctx, io.MultiWriter(spool, crc), r, opts.Limit)
	if err != nil {
		return sink.Blob{}, fmt.Errorf("gcs: put: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return sink.Blob{}, err
	}
	mediaType := opts.MediaType
	if mediaType == "" {
		mediaType = sink.DefaultMediaType
	}
	created, err := s.store(ctx, spool, n, fp, crc.Sum32(), mediaType, now)
	if err != nil {
		return sink.Blob{}, err
	}
	b := sink.Blob{Fingerprint: fp, Size: n, URI: s.URI(fp), Created: created}
	if s.ttl > 0 {
		b.ExpiresAt = now.Add(s.ttl)
	}
	return b, nil
}

// store creates the object from the spool, or re-stamps the existing one.
func (s *Sink) store(ctx context.Context, spool *os.File, size int64, fp string, crc uint32, mediaType string, now time.Time) (created bool, err error) {
	opCtx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	obj := s.bucket.Object(s.Object(fp))
	delay := s.backoff
	for attempt := 1; ; attempt++ {
		err := s.create(opCtx, obj, io.NewSectionReader(spool, 0, size), crc, mediaType, now)
		if err == nil {
			return true, nil
		}
		if Status(err) == http.StatusPreconditionFailed {
			err = s.restamp(opCtx, obj, now)
			if err == nil {
				s.log.Debug("gcs: blob already stored; customTime re-stamped",
					slog.String("bucket", s.name), slog.String("fingerprint", fp))
				return false, nil
			}
			if !errors.Is(err, storage.ErrObjectNotExist) || attempt >= maxAttempts {
				return false, fmt.Errorf("gcs: re-stamp gs://%s/%s: %w", s.name, s.Object(fp), Permanent(err))
			}
			continue // reaped between the 412 and the re-stamp: create it again
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if opCtx.Err() != nil {
			return false, fmt.Errorf("gcs: upload gs://%s/%s: timed out after %v: %w", s.name, s.Object(fp), s.timeout, err)
		}
		if !storage.ShouldRetry(err) || attempt >= maxAttempts {
			return false, fmt.Errorf("gcs: upload gs://%s/%s (attempt %d): %w", s.name, s.Object(fp), attempt, Permanent(err))
		}
		s.log.Warn("gcs: upload failed; retrying",
			slog.String("bucket", s.name), slog.String("fingerprint", fp),
			slog.Int("attempt", attempt), slog.String("error", err.Error()))
		t := time.NewTimer(delay)
		select {
		case <-opCtx.Done():
			t.Stop()
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			return false, fmt.Errorf("gcs: upload gs://%s/%s: timed out after %v: %w", s.name, s.Object(fp), s.timeout, err)
		case <-t.C:
		}
		delay *= 2
	}
}

// create uploads body as a new object in one request, failing with a 412
// if the object exists.
func (s *Sink) create(ctx context.Context, obj *storage.ObjectHandle, body io.Reader, crc uint32, mediaType string, now time.Time) error {
	// Cancelling is how a storage.Writer is aborted; it also ends the
	// writer's goroutine if the copy fails.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := obj.If(storage.Conditions{DoesNotExist: true}).NewWriter(ctx)
	// Zero: no chunk buffer (the default would be 16 MiB per upload); the
	// spool file is what a retry re-reads.
	w.ChunkSize = 0
	w.ContentType = mediaType
	w.CustomTime = now
	w.CRC32C = crc
	w.SendCRC32C = true
	if _, err := io.Copy(w, body); err != nil {
		cancel()
		w.Close()
		return err
	}
	return w.Close()
}

// restamp moves the object's customTime to now. GCS refuses to move a
// customTime backwards, so a refusal is fine when another writer has
// already stamped it at least as late.
func (s *Sink) restamp(ctx context.Context, obj *storage.ObjectHandle, now time.Time) error {
	// Setting the same customTime twice is harmless, so retry freely.
	obj = obj.Retryer(storage.WithPolicy(storage.RetryAlways))
	_, err := obj.Update(ctx, storage.ObjectAttrsToUpdate{CustomTime: now})
	if err == nil || errors.Is(err, storage.ErrObjectNotExist) {
		return err
	}
	if attrs, aerr := obj.Attrs(ctx); aerr == nil && !attrs.CustomTime.Before(now) {
		return nil
	}
	return err
}

// Open implements sink.Sink. The Timeout covers reading the body too; the
// caller must Close the reader.
func (s *Sink) Open(ctx context.Context, fingerprint string) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := sink.CheckFingerprint(fingerprint); err != nil {
		return nil, fmt.Errorf("gcs: open: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	r, err := s.bucket.Object(s.Object(fingerprint)).NewReader(ctx)
	if err != nil {
		cancel()
		if errors.Is(err, storage.ErrObjectNotExist) {
			return nil, fmt.Errorf("gcs: open %s: %w", s.URI(fingerprint), sink.ErrNotFound)
		}
		return nil, fmt.Errorf("gcs: open %s: %w", s.URI(fingerprint), err)
	}
	return &reader{Reader: r, cancel: cancel}, nil
}

type reader struct {
	*storage.Reader
	cancel context.CancelFunc
}

func (r *reader) Close() error {
	err := r.Reader.Close()
	r.cancel()
	return err
}

// Permanent marks a service error whose status retrying will not change
// with sink.ErrPermanent: a 4xx other than 408 and 429, which is how the
// reference tells a provider's settled answer from a passing one (a 412 is
// consumed by the create-if-absent before it gets here). An error without
// a status, a timeout or a 5xx is returned as it is.
func Permanent(err error) error {
	if c := Status(err); c >= 400 && c < 500 && c != http.StatusRequestTimeout && c != http.StatusTooManyRequests {
		return fmt.Errorf("%w: %w", sink.ErrPermanent, err)
	}
	return err
}

// Status returns the HTTP status of a GCS service error, or 0.
func Status(err error) int {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}
