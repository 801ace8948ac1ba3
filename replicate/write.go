package replicate

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"net/http"
	"net/url"
	"strings"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/sink"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// goneDetail is the detail of blob_expired for a blob no store holds.
const goneDetail = "the blob for this command is no longer stored"

// digests of the blob, taken in a first read so the write can send them:
// the provider then refuses a corrupted upload instead of keeping it, and
// a precondition failure is settled without reading the blob again.
type digests struct {
	size   int64
	md5    []byte
	crc32c uint32
}

// digest reads the blob once, checking it still hashes to its fingerprint.
func (h *Handler) digest(ctx context.Context, cmd *envelope.ContentReplicate, fp string) (digests, Outcome, bool) {
	rc, err := h.source.Open(ctx, fp)
	if err != nil {
		return digests{}, h.sourceFailure(cmd, "open", err), false
	}
	defer rc.Close()
	sha, m, c := sha256.New(), md5.New(), crc32.New(castagnoli)
	n, err := io.Copy(io.MultiWriter(sha, m, c), &ctxReader{ctx: ctx, r: rc})
	if err != nil {
		return digests{}, h.sourceFailure(cmd, "read", err), false
	}
	if got := hex.EncodeToString(sha.Sum(nil)); got != fp {
		// Copying it would make a permanent artifact of damaged bytes, and
		// a fresh fetch would find the damaged file and keep it.
		return digests{}, unclassified(fmt.Errorf("replicate: the stored blob %s no longer hashes to its fingerprint (sha256 %s)", fp, got)), false
	}
	return digests{size: n, md5: m.Sum(nil), crc32c: c.Sum32()}, Outcome{}, true
}

// write streams the blob into w and maps the result onto an outcome.
func (h *Handler) write(ctx context.Context, cmd *envelope.ContentReplicate, w writer, fp string, o object, d digests) Outcome {
	rc, err := h.source.Open(ctx, fp)
	if err != nil {
		return h.sourceFailure(cmd, "open", err)
	}
	defer rc.Close()
	body := &sourceReader{r: &ctxReader{ctx: ctx, r: rc}, crc: crc32.New(castagnoli)}
	wctx, cancel := context.WithTimeout(ctx, h.writeTimeout)
	defer cancel()
	res := w.write(wctx, o, body)

	switch {
	case body.err != nil:
		return h.sourceFailure(cmd, "read", body.err)
	case res.err != nil && ctx.Err() == nil && wctx.Err() == nil &&
		statusOf(res.err) == http.StatusBadRequest && body.n == d.size && body.crc.Sum32() != d.crc32c:
		// The refusal is the checksum's: the blob changed between reads.
		return unclassified(fmt.Errorf("replicate: the stored blob %s changed while it was copied", fp))
	}
	return h.settle(ctx, wctx, cmd, o, res)
}

// copy copies a blob in a bucket to w's bucket server side, bounded by the
// write timeout, and maps the result onto an outcome.
func (h *Handler) copy(ctx context.Context, cmd *envelope.ContentReplicate, w writer, o object, srcBucket, srcObject string) Outcome {
	wctx, cancel := context.WithTimeout(ctx, h.writeTimeout)
	defer cancel()
	return h.settle(ctx, wctx, cmd, o, w.copy(wctx, o, srcBucket, srcObject))
}

// settle maps a write's result onto an outcome; wctx is the write's
// context, ctx the handling's.
func (h *Handler) settle(ctx, wctx context.Context, cmd *envelope.ContentReplicate, o object, res writeResult) Outcome {
	switch {
	case res.err == nil:
	case ctx.Err() != nil:
		return transient(fmt.Errorf("replicate: write of %s abandoned: %w", shownKey(o.key), ctx.Err()))
	case wctx.Err() != nil:
		return transient(fmt.Errorf("replicate: write of %s timed out after %v: %w", shownKey(o.key), h.writeTimeout, safeErr(res.err)))
	default:
		status := statusOf(res.err)
		if reason, ok := providerReason(status); ok {
			return h.refuse(cmd, reason, fmt.Sprintf("the provider refused the write of %s (%d): %v", shownKey(o.key), status, safeErr(res.err)))
		}
		return transient(fmt.Errorf("replicate: write of %s failed: %w", shownKey(o.key), safeErr(res.err)))
	}

	switch res.outcome {
	case wrote:
		return h.complete(cmd, res.publicURL, true)
	case identical:
		return h.complete(cmd, res.publicURL, false)
	case differs:
		return h.refuse(cmd, envelope.ReplicateReasonDestinationConflict,
			fmt.Sprintf("the destination %s already holds different bytes: %s", shownKey(o.key), res.detail))
	case gone:
		return h.refuse(cmd, envelope.ReplicateReasonBlobExpired, goneDetail)
	default:
		// A precondition failure with no object behind it is a race (a
		// delete, an unfinished upload), not a conflict: the next attempt
		// may well create it.
		return transient(fmt.Errorf("replicate: the conditional create of %s could not be settled: %s", shownKey(o.key), res.detail))
	}
}

// sourceFailure maps a failure to open or read the blob. Gone is
// blob_expired. A provider status that will not change on a retry (the
// temp store's grant) matches no replicate reason, which all describe the
// destination, so it is left Unclassified for the delivery ceiling; the
// rest (a disk, a 5xx, a network failure) is this host's trouble and
// transient.
func (h *Handler) sourceFailure(cmd *envelope.ContentReplicate, op string, err error) Outcome {
	if errors.Is(err, sink.ErrNotFound) {
		return h.refuse(cmd, envelope.ReplicateReasonBlobExpired, goneDetail)
	}
	err = fmt.Errorf("replicate: %s the blob: %w", op, safeErr(err))
	if _, terminal := providerReason(statusOf(err)); terminal {
		return unclassified(err)
	}
	return transient(err)
}

// providerReason maps a provider's HTTP status onto the refusal it means:
// 400 is the command's own input, any other 4xx but 408 and 429 is this
// host's credential or bucket. Everything else (5xx, 408, 429, no status)
// is not a refusal.
func providerReason(status int) (envelope.ReplicateReason, bool) {
	switch {
	case status == http.StatusBadRequest:
		return envelope.ReplicateReasonInvalidDestination, true
	case status >= 400 && status < 500 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests:
		return envelope.ReplicateReasonProviderDisabled, true
	}
	return "", false
}

// statusOf returns the HTTP status a provider error carries, or 0.
func statusOf(err error) int {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	var hc interface{ HTTPCode() int }
	if errors.As(err, &hc) && hc.HTTPCode() > 0 {
		return hc.HTTPCode()
	}
	if errors.Is(err, storage.ErrObjectNotExist) || errors.Is(err, storage.ErrBucketNotExist) {
		return http.StatusNotFound
	}
	return 0
}

// sourceReader remembers the blob's own read error, so a write that fails
// because the source did is not blamed on the provider, and checksums what
// it passed on.
type sourceReader struct {
	r   io.Reader
	crc hash.Hash32
	n   int64
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.crc.Write(p[:n])
	s.n += int64(n)
	if err != nil && err != io.EOF && s.err == nil {
		s.err = err
	}
	return n, err
}

// ctxReader stops a read of a store that ignores ctx (a local file).
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// safeErr returns err with any request URL in its text cut to scheme, host
// and path: a client configured with an API key sends it in the query.
// errors.Is and As still see err.
func safeErr(err error) error {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	plain := "<unparseable URL>"
	if u, perr := url.Parse(ue.URL); perr == nil {
		u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
		plain = u.String()
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), ue.URL, plain), err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

func shownKey(key string) string { return quoteBounded(key) }
