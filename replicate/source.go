package replicate

import (
	"context"
	"io"
	"net/url"
	"strings"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/gcs"
)

// Source is the blob store a replicated blob is read from: the sink this
// worker's fetches store into. sink/local, sink/gcs and sink/memory satisfy
// it. URI must return exactly the blob_uri Put announces for a fingerprint,
// stored or not (the sinktest suite checks this).
type Source interface {
	// Open returns the stored bytes of a fingerprint, or an error wrapping
	// sink.ErrNotFound.
	Open(ctx context.Context, fingerprint string) (io.ReadCloser, error)
	// URI returns the blob_uri of a fingerprint.
	URI(fingerprint string) string
}

// blobSchemes are the schemes of the two storage backends. A well-formed
// URI of the one this worker does not run is a blob from before a switch of
// backend: gone for this worker, but a fresh fetch brings it back.
var blobSchemes = []string{"file", "gs"}

// located is a blob a command may be copied from: its fingerprint, and the
// URI a store of this host minted for it (equal to the command's blob_uri).
type located struct {
	fp        string
	uri       string
	permanent bool // the permanent store's, not the temp store's
}

// locate returns the blob blobURI names, or the refusal. The URI is never
// opened or resolved as a path: the only candidate taken from it is a
// 64-hex lower-case fingerprint, each store this host reads rebuilds the
// URI from that (the temp store first, then the permanent store when
// permanentBucket is set), and one must be equal byte for byte. So
// traversal, percent-encoding, upper-case hex, a query and a stranger's
// bucket all fail the comparison, with nothing to enumerate.
func locate(blobURI string, src Source, permanentBucket string) (located, envelope.ReplicateReason, string) {
	fp := fingerprintIn(blobURI)
	if fp != "" {
		minted := src.URI(fp)
		if minted == blobURI {
			return located{fp: fp, uri: minted}, "", ""
		}
		if permanentBucket != "" && gcs.URI(permanentBucket, fp) == blobURI {
			return located{fp: fp, uri: blobURI, permanent: true}, "", ""
		}
		if otherBackend(blobURI, minted) {
			return located{}, envelope.ReplicateReasonBlobExpired,
				"blob_uri names a blob of a storage backend this worker no longer reads"
		}
	}
	return located{}, envelope.ReplicateReasonInvalidSource,
		"blob_uri is not a reference this store minted: " + shown(blobURI)
}

// gcsObjectOf splits a gs:// URI a store of this host minted (never a
// command's) into its bucket and object name; ok is false for any other
// URI, whose blob is read through its Source instead.
func gcsObjectOf(minted string) (bucket, object string, ok bool) {
	rest, ok := strings.CutPrefix(minted, "gs://")
	if !ok {
		return "", "", false
	}
	bucket, object, ok = strings.Cut(rest, "/")
	return bucket, object, ok && bucket != "" && object != ""
}

// hostBucket is the bucket the temp store keeps its blobs in, or "" when it
// is not a bucket (the local backend).
func hostBucket(src Source) string {
	bucket, _, _ := gcsObjectOf(src.URI(strings.Repeat("0", 64)))
	return bucket
}

// fingerprintIn returns the fingerprint the URI's last path segment spells
// (<sha256> or <sha256>.bin), or "".
func fingerprintIn(blobURI string) string {
	u, err := url.Parse(blobURI)
	if err != nil || u.Opaque != "" || !isBlobScheme(u.Scheme) {
		return ""
	}
	p := u.EscapedPath()
	stem := strings.TrimSuffix(p[strings.LastIndexByte(p, '/')+1:], ".bin")
	if sink.CheckFingerprint(stem) != nil {
		return ""
	}
	return stem
}

// otherBackend reports whether blobURI is a plain URI of a known backend
// other than the one that minted minted: the scheme written in lower case,
// no userinfo, query or fragment, a bucket for gs and no host for file, and
// a path ending in .bin whose segments, decoded, are neither empty nor dot
// segments and hold no separator. (The caller has already found a
// fingerprint in it.) Anything looser stays invalid_source, so a stray
// value is never read as "fetch it again".
func otherBackend(blobURI, minted string) bool {
	u, err := url.Parse(blobURI)
	if err != nil || u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" ||
		strings.ContainsAny(blobURI, "?#") {
		return false
	}
	scheme, _, _ := strings.Cut(minted, ":")
	if u.Scheme == scheme || !strings.HasPrefix(blobURI, u.Scheme+"://") {
		return false
	}
	switch u.Scheme {
	case "gs":
		if u.Host == "" || u.Port() != "" {
			return false
		}
	case "file":
		if u.Host != "" {
			return false
		}
	}
	p := u.EscapedPath()
	if !strings.HasSuffix(p, ".bin") || !strings.HasPrefix(p, "/") {
		return false
	}
	for seg := range strings.SplitSeq(p[1:], "/") {
		dec, err := url.PathUnescape(seg)
		if err != nil || dec == "" || dec == "." || dec == ".." || strings.ContainsAny(dec, "/\\") {
			return false
		}
	}
	return true
}

func isBlobScheme(s string) bool {
	for _, b := range blobSchemes {
		if s == b {
			return true
		}
	}
	return false
}

// shown is a command's URI fit for a fact's detail: userinfo redacted,
// bounded.
func shown(s string) string {
	return quoteBounded(guard.RedactURL(s))
}
