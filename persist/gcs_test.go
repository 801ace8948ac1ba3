package persist_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/persist"
	"github.com/replicator-go/replicator/sink"
	sinkgcs "github.com/replicator-go/replicator/sink/gcs"
)

const (
	tempBucket = "persist-temp"
	permBucket = "persist-permanent"
)

// gcsStores is a gcs temp sink and a gcs permanent store on one fake, the
// permanent one reached through a proxy that can answer what the fake
// never does.
type gcsStores struct {
	fake  *testenv.GCS
	proxy *testenv.GCSProxy
	temp  *sinkgcs.Sink
	perm  *persist.GCSStore
}

func newGCSStores(t *testing.T) gcsStores {
	t.Helper()
	fake := testenv.StartGCS(t, tempBucket, permBucket)
	proxy := fake.Proxy(t)
	temp, err := sinkgcs.New(context.Background(), fake.Client, sinkgcs.Options{Bucket: tempBucket, Logger: quiet(), TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	perm, err := persist.NewGCSStore(context.Background(), proxy.Client, permBucket)
	if err != nil {
		t.Fatal(err)
	}
	return gcsStores{fake: fake, proxy: proxy, temp: temp, perm: perm}
}

func (s gcsStores) put(t *testing.T, b []byte) string {
	t.Helper()
	blob, err := s.temp.Put(context.Background(), bytes.NewReader(b), sink.PutOptions{MediaType: "text/html"})
	if err != nil {
		t.Fatal(err)
	}
	return blob.URI
}

func (s gcsStores) attrs(t *testing.T, fingerprint string) (*storage.ObjectAttrs, error) {
	t.Helper()
	return s.fake.Client.Bucket(permBucket).Object("blobs/" + fingerprint + ".bin").Attrs(context.Background())
}

func TestGCSATempBlobIsKeptThenKeptAgain(t *testing.T) {
	s := newGCSStores(t)
	h := newHandler(t, s.temp, s.perm)
	uri := s.put(t, data)

	out := h.Handle(context.Background(), command(t, h, "per-1", fp, uri))
	if out.Fate != capability.Complete || out.Name() != "persisted" {
		t.Fatalf("outcome %v %q: %v", out.Fate, out.Name(), out.Err)
	}
	attrs, err := s.attrs(t, fp)
	if err != nil {
		t.Fatal(err)
	}
	if attrs.ContentType != "application/pdf" || attrs.Metadata[sink.ContentStampKey] != fp ||
		!attrs.CustomTime.IsZero() || attrs.Size != int64(len(data)) {
		t.Errorf("object %s: type %q, metadata %v, customTime %v, size %d",
			attrs.Name, attrs.ContentType, attrs.Metadata, attrs.CustomTime, attrs.Size)
	}
	if s.perm.URI(fp) != "gs://"+permBucket+"/blobs/"+fp+".bin" {
		t.Errorf("URI %s", s.perm.URI(fp))
	}

	// Again, under another media type: a success that changes nothing.
	wire, _ := envelope.ToWire(&envelope.ContentPersist{OccurredAt: now, CommandID: "per-2",
		ContentFingerprint: fp, BlobURI: uri, MediaType: "text/plain"})
	cmd, err := h.Decode(wire)
	if err != nil {
		t.Fatal(err)
	}
	out = h.Handle(context.Background(), cmd)
	if out.Fate != capability.Complete || out.Fact.(*envelope.BlobPersisted).SizeBytes != int64(len(data)) {
		t.Fatalf("second persist %v %+v: %v", out.Fate, out.Fact, out.Err)
	}
	again, err := s.attrs(t, fp)
	if err != nil || again.Generation != attrs.Generation || again.ContentType != "application/pdf" {
		t.Errorf("the kept object changed: %+v, %v", again, err)
	}

	// And from the permanent URI itself.
	out = h.Handle(context.Background(), command(t, h, "per-3", fp, s.perm.URI(fp)))
	if out.Fate != capability.Complete {
		t.Fatalf("from the permanent URI %v: %v", out.Fate, out.Err)
	}
}

// Bytes that do not hash to the fingerprint are never committed: the
// upload is cancelled before it ends, so no object appears.
func TestGCSKeepNeverCommitsBytesThatDoNotHashToTheirName(t *testing.T) {
	s := newGCSStores(t)
	for _, size := range []int64{0, 1, 5 << 20} {
		_, err := s.perm.Keep(context.Background(), fp, &counting{n: size}, "text/html")
		if !errors.Is(err, persist.ErrCorrupt) {
			t.Fatalf("%d bytes: %v, want ErrCorrupt", size, err)
		}
		if _, err := s.attrs(t, fp); !errors.Is(err, storage.ErrObjectNotExist) {
			t.Fatalf("%d bytes: an object appeared: %v", size, err)
		}
	}
	// The same store then keeps the right bytes.
	kept, err := s.perm.Keep(context.Background(), fp, bytes.NewReader(data), "")
	if err != nil || !kept.Created || kept.Size != int64(len(data)) {
		t.Fatalf("Keep: %+v, %v", kept, err)
	}
	if attrs, err := s.attrs(t, fp); err != nil || attrs.ContentType != sink.DefaultMediaType {
		t.Errorf("object %+v, %v", attrs, err)
	}
}

func TestGCSACorruptTempBlobIsRefused(t *testing.T) {
	s := newGCSStores(t)
	h := newHandler(t, s.temp, s.perm)
	uri := s.put(t, data)
	s.fake.Server.CreateObject(fakestorage.Object{
		ObjectAttrs: fakestorage.ObjectAttrs{BucketName: tempBucket, Name: "blobs/" + fp + ".bin"},
		Content:     []byte("bit-rotted bytes"),
	})

	out := h.Handle(context.Background(), command(t, h, "per-1", fp, uri))

	wantClosed(t, out, envelope.PersistReasonSourceCorrupt, "per-1", fp)
	if _, err := s.attrs(t, fp); !errors.Is(err, storage.ErrObjectNotExist) {
		t.Errorf("corrupt bytes kept: %v", err)
	}
}

func TestGCSAGoneTempBlobIsExpired(t *testing.T) {
	s := newGCSStores(t)
	h := newHandler(t, s.temp, s.perm)

	out := h.Handle(context.Background(), command(t, h, "per-1", fp, s.temp.URI(fp)))

	wantClosed(t, out, envelope.PersistReasonBlobExpired, "per-1", fp)
}

// The permanent store's answers to the upload: a refusal for good closes
// the command store_refused; a 5xx, 408, 429 or a dropped connection is
// retried with no fact.
func TestGCSStoreAnswers(t *testing.T) {
	tests := []struct {
		code   int
		fate   capability.Fate
		reason envelope.PersistReason
	}{
		{http.StatusForbidden, capability.Close, envelope.PersistReasonStoreRefused},
		{http.StatusNotFound, capability.Close, envelope.PersistReasonStoreRefused},
		{http.StatusUnauthorized, capability.Close, envelope.PersistReasonStoreRefused},
		{http.StatusInternalServerError, capability.Retry, ""},
		{http.StatusServiceUnavailable, capability.Retry, ""},
		{http.StatusRequestTimeout, capability.Retry, ""},
		{http.StatusTooManyRequests, capability.Retry, ""},
	}
	for _, tc := range tests {
		t.Run(http.StatusText(tc.code), func(t *testing.T) {
			s := newGCSStores(t)
			h := shortHandler(t, s)
			uri := s.put(t, data)
			s.proxy.RefuseUploads(tc.code)

			out := h.Handle(context.Background(), command(t, h, "per-1", fp, uri))

			if out.Fate != tc.fate || out.Reason != string(tc.reason) {
				t.Fatalf("outcome %v %q (%v), want %v %q", out.Fate, out.Reason, out.Err, tc.fate, tc.reason)
			}
			if tc.fate == capability.Close {
				wantClosed(t, out, tc.reason, "per-1", fp)
			} else if out.Fact != nil {
				t.Errorf("a fact for a retry: %+v", out.Fact)
			}
			if s.proxy.Count("POST /upload/") == 0 {
				t.Error("no upload reached the proxy")
			}
		})
	}
	t.Run("the connection is gone", func(t *testing.T) {
		s := newGCSStores(t)
		h := shortHandler(t, s)
		uri := s.put(t, data)
		s.proxy.Close()

		out := h.Handle(context.Background(), command(t, h, "per-1", fp, uri))

		if out.Fate != capability.Retry || out.Fact != nil {
			t.Fatalf("outcome %v %+v: %v", out.Fate, out.Fact, out.Err)
		}
	})
}

// shortHandler bounds a persist at a second: the client retries a
// transient answer (a 5xx, 408, 429, a failed dial) itself until the
// persist's bound, and the Handler then says Retry.
func shortHandler(t *testing.T, s gcsStores) *persist.Handler {
	t.Helper()
	h, err := persist.New(persist.Options{Temp: s.temp, Store: s.perm, Timeout: time.Second, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// The existence check's refusal is left to the delivery ceiling.
func TestGCSARefusedCheckIsUnclassified(t *testing.T) {
	s := newGCSStores(t)
	h := newHandler(t, s.temp, s.perm)
	uri := s.put(t, data)
	s.proxy.Answer(func(r *http.Request) int {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/o/") {
			return http.StatusForbidden
		}
		return 0
	})

	out := h.Handle(context.Background(), command(t, h, "per-1", fp, uri))

	if out.Fate != capability.Unclassified || out.Fact != nil {
		t.Fatalf("outcome %v %+v: %v", out.Fate, out.Fact, out.Err)
	}
}

func TestNewGCSStoreRefusesAMissingBucket(t *testing.T) {
	fake := testenv.StartGCS(t, tempBucket)
	if _, err := persist.NewGCSStore(context.Background(), fake.Client, "no-such-bucket"); !errors.Is(err, persist.ErrStoreUnusable) {
		t.Fatalf("NewGCSStore: %v, want ErrStoreUnusable", err)
	}
}

// A large blob streams through both stores.
func TestGCSALargeBlob(t *testing.T) {
	const size = 8 << 20
	s := newGCSStores(t)
	h := newHandler(t, s.temp, s.perm)
	blob, err := s.temp.Put(context.Background(), &counting{n: size}, sink.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}

	out := h.Handle(context.Background(), command(t, h, "per-1", blob.Fingerprint, blob.URI))

	if out.Fate != capability.Complete || out.Fact.(*envelope.BlobPersisted).SizeBytes != size {
		t.Fatalf("outcome %v %+v: %v", out.Fate, out.Fact, out.Err)
	}
	r, err := s.fake.Client.Bucket(permBucket).Object("blobs/" + blob.Fingerprint + ".bin").NewReader(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, _, err := sink.Copy(context.Background(), io.Discard, r, 0)
	if err != nil || got != blob.Fingerprint {
		t.Errorf("kept object hashes to %s, %v", got, err)
	}
}
