package replicate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"cloud.google.com/go/storage"

	"github.com/replicator-go/replicator/sink"
)

// PublicURLBase is where public_url points: the form the reference's GCS
// client gives an object (Blob.public_url), whether or not the object is
// publicly readable.
const PublicURLBase = "https://storage.googleapis.com"

// The object_options a gcs write reads. Any other member is another
// provider's or an issuer's own, and is ignored, not forwarded.
const (
	optionCacheControl       = "cache_control"
	optionContentDisposition = "content_disposition"
	optionStorageClass       = "storage_class"
)

// object is one write: its key and metadata, and the digests the provider
// checks the upload against.
type object struct {
	key                string
	contentType        string
	cacheControl       string
	contentDisposition string
	storageClass       string
	metadata           map[string]string // the content stamp
	md5                []byte            // for an upload; a copy reads its source's
	crc32c             uint32
}

// gcsObject reads the command's metadata for a gcs write. A known option
// must be a string or null; a string holding a control character is refused
// too, since the provider later serves these as response headers.
func gcsObject(key, mediaType string, opts map[string]any) (object, error) {
	o := object{key: key, contentType: mediaType}
	if o.contentType == "" {
		// An empty media_type: the provider must never guess one.
		o.contentType = sink.DefaultMediaType
	}
	for _, opt := range [...]struct {
		name string
		dst  *string
	}{
		{optionCacheControl, &o.cacheControl},
		{optionContentDisposition, &o.contentDisposition},
		{optionStorageClass, &o.storageClass},
	} {
		name, dst := opt.name, opt.dst
		v, ok := opts[name]
		if !ok || v == nil {
			continue
		}
		s, ok := v.(string)
		if !ok {
			return object{}, fmt.Errorf("object_options.%s is not a string", name)
		}
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < 0x20 || c == 0x7f {
				return object{}, fmt.Errorf("object_options.%s holds a control character", name)
			}
		}
		*dst = s
	}
	return o, nil
}

// What a conditional create found.
type writeOutcome int

const (
	wrote     writeOutcome = iota + 1 // the object was absent and is now written
	identical                         // present with the same md5
	differs                           // present with other bytes, or none to compare
	vanished                          // precondition failed, yet no object is there
	gone                              // the copy's source object is not there
)

type writeResult struct {
	outcome   writeOutcome
	publicURL string // set for wrote and identical: an object known to exist
	detail    string
	err       error // the provider's failure; outcome is then zero
}

// gcsWriter writes into one bucket: the bucket of one alias, as the
// alias's identity (client), which also reads a copy's source.
type gcsWriter struct {
	client *storage.Client
	bucket *storage.BucketHandle
	name   string
}

// write creates o.key from body only if absent (ifGenerationMatch=0). On a
// precondition failure it reads the object's md5 to tell a redelivery
// (identical) from a conflict.
func (g *gcsWriter) write(ctx context.Context, o object, body *sourceReader) writeResult {
	obj := g.bucket.Object(o.key)
	if err := g.create(ctx, obj, o, body); err != nil {
		if statusOf(err) != http.StatusPreconditionFailed {
			return writeResult{err: err}
		}
	} else {
		return writeResult{outcome: wrote, publicURL: publicURL(g.name, o.key)}
	}
	return g.existing(ctx, obj, o)
}

// copy creates o.key from a blob in a bucket, server side (a rewrite,
// looped on its token by the client), only if absent
// (ifGenerationMatch=0), with o's content type, options and stamp; nothing
// of the source's metadata (the temp store's customTime) is asked for. A
// precondition failure is settled as write's is, against the md5 the
// source reports. A 404 is the source's when the source is not there
// (gone), and otherwise the destination's.
func (g *gcsWriter) copy(ctx context.Context, o object, srcBucket, srcObject string) writeResult {
	src := g.client.Bucket(srcBucket).Object(srcObject)
	dst := g.bucket.Object(o.key)
	// No retry inside: a transient failure returns at once and the
	// command comes back through the loop, as an upload's does.
	c := dst.If(storage.Conditions{DoesNotExist: true}).Retryer(storage.WithPolicy(storage.RetryNever)).CopierFrom(src)
	c.ContentType = o.contentType
	c.CacheControl = o.cacheControl
	c.ContentDisposition = o.contentDisposition
	c.StorageClass = o.storageClass
	c.Metadata = o.metadata
	_, err := c.Run(ctx)
	switch status := statusOf(err); {
	case err == nil:
		return writeResult{outcome: wrote, publicURL: publicURL(g.name, o.key)}
	case status == http.StatusNotFound:
		if _, serr := src.Attrs(ctx); errors.Is(serr, storage.ErrObjectNotExist) {
			return writeResult{outcome: gone}
		}
		return writeResult{err: err}
	case status != http.StatusPreconditionFailed:
		return writeResult{err: err}
	}
	attrs, err := src.Attrs(ctx)
	switch {
	case errors.Is(err, storage.ErrObjectNotExist):
		return writeResult{outcome: gone}
	case err != nil:
		return writeResult{err: err}
	}
	o.md5 = attrs.MD5
	if len(o.md5) == 0 {
		return writeResult{outcome: differs, detail: "the source reports no md5 to compare (a composite object)"}
	}
	return g.existing(ctx, dst, o)
}

// existing settles a create refused because obj exists: the same md5 as
// o's is the same bytes.
func (g *gcsWriter) existing(ctx context.Context, obj *storage.ObjectHandle, o object) writeResult {
	attrs, err := obj.Attrs(ctx)
	switch {
	case errors.Is(err, storage.ErrObjectNotExist):
		return writeResult{outcome: vanished, detail: "the create was refused as the object exists, but no object is there"}
	case err != nil:
		return writeResult{err: err}
	case len(attrs.MD5) == 0:
		return writeResult{outcome: differs, detail: "the object there has no md5 to compare (a composite object)"}
	case !bytes.Equal(attrs.MD5, o.md5):
		return writeResult{outcome: differs, detail: fmt.Sprintf("md5 %x there, %x in the blob", attrs.MD5, o.md5)}
	}
	return writeResult{outcome: identical, publicURL: publicURL(g.name, o.key)}
}

// create uploads body in one request, streaming: no chunk buffer, so
// memory stays constant whatever the blob's size. The digests go with it,
// so the provider refuses an upload that does not match them rather than
// keep a damaged object nobody may delete.
func (g *gcsWriter) create(ctx context.Context, obj *storage.ObjectHandle, o object, body io.Reader) error {
	// Cancelling is how a storage.Writer is aborted.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := obj.If(storage.Conditions{DoesNotExist: true}).NewWriter(ctx)
	w.ChunkSize = 0
	w.ContentType = o.contentType
	w.CacheControl = o.cacheControl
	w.ContentDisposition = o.contentDisposition
	w.StorageClass = o.storageClass
	w.Metadata = o.metadata
	w.MD5 = o.md5
	w.CRC32C = o.crc32c
	w.SendCRC32C = true
	if _, err := io.Copy(w, body); err != nil {
		cancel()
		if cerr := w.Close(); statusOf(err) == 0 && statusOf(cerr) != 0 {
			return cerr
		}
		return err
	}
	return w.Close()
}

// publicURL is the reference's Blob.public_url: the base, the bucket as
// is, and the key percent-encoded as Python's urllib.parse.quote(key,
// safe="/~") encodes it.
func publicURL(bucket, key string) string {
	const hexUpper = "0123456789ABCDEF"
	b := make([]byte, 0, len(PublicURLBase)+len(bucket)+len(key)*3+2)
	b = append(b, PublicURLBase...)
	b = append(b, '/')
	b = append(b, bucket...)
	b = append(b, '/')
	for i := 0; i < len(key); i++ {
		c := key[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '_' || c == '.' || c == '-' || c == '~' || c == '/' {
			b = append(b, c)
			continue
		}
		b = append(b, '%', hexUpper[c>>4], hexUpper[c&0xf])
	}
	return string(b)
}
