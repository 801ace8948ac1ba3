package gcs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/google/go-cmp/cmp"

	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/sinktest"
)

const bucket = "replicator-test"

// fake is shared by the package's tests; each test stores under its own
// prefix so every sink starts empty.
var fake *testenv.GCS

func TestMain(m *testing.M) {
	testenv.ServeGCSChild()
	var err error
	fake, err = testenv.NewGCS(bucket)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	fake.Close()
	os.Exit(code)
}

var prefixes atomic.Int64

func uniquePrefix() string { return fmt.Sprintf("t%d/blobs", prefixes.Add(1)) }

func newSink(t testing.TB, client *storage.Client, opts Options) *Sink {
	t.Helper()
	if client == nil {
		client = fake.Client
	}
	if opts.Bucket == "" {
		opts.Bucket = bucket
	}
	if opts.Prefix == "" {
		opts.Prefix = uniquePrefix()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := New(context.Background(), client, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	s.backoff = time.Millisecond
	return s
}

func TestConformance(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) sink.Sink {
		return newSink(t, nil, Options{TTL: sinktest.TTL, TempDir: t.TempDir()})
	})
}

// newProxy puts a GCSProxy between a client and the fake, so tests can see
// requests and inject the service's failures.
func newProxy(t *testing.T) *testenv.GCSProxy { return fake.Proxy(t) }

func isUpload(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/upload/")
}

func attrs(t *testing.T, s *Sink, fp string) *storage.ObjectAttrs {
	t.Helper()
	a, err := fake.Client.Bucket(bucket).Object(s.Object(fp)).Attrs(context.Background())
	if err != nil {
		t.Fatalf("attrs of %s: %v", s.Object(fp), err)
	}
	return a
}

func TestNamesAndPrefix(t *testing.T) {
	fp := sinktest.Fingerprint([]byte("named"))
	for _, tc := range []struct {
		prefix     string
		wantObject string
	}{
		{prefix: "", wantObject: "blobs/" + fp + ".bin"},
		{prefix: "/", wantObject: fp + ".bin"},
		{prefix: "/a/b/", wantObject: "a/b/" + fp + ".bin"},
	} {
		t.Run(fmt.Sprintf("%q", tc.prefix), func(t *testing.T) {
			s, err := New(context.Background(), fake.Client, Options{Bucket: bucket, Prefix: tc.prefix, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			b, err := s.Put(context.Background(), strings.NewReader("named"), sink.PutOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if want := "gs://" + bucket + "/" + tc.wantObject; b.URI != want {
				t.Errorf("URI = %q, want %q", b.URI, want)
			}
			if tc.prefix == "" && URI(bucket, fp) != b.URI {
				t.Errorf("URI(bucket, fp) = %q, want the default-prefix sink's %q", URI(bucket, fp), b.URI)
			}
			if _, err := fake.Server.GetObject(bucket, tc.wantObject); err != nil {
				t.Errorf("object %s not in the bucket: %v", tc.wantObject, err)
			}
			fake.Server.Backend().DeleteObject(bucket, tc.wantObject)
		})
	}
}

func TestPreflight(t *testing.T) {
	p := newProxy(t)
	for _, tc := range []struct {
		name     string
		bucket   string
		inject   int
		wantErr  bool
		wantText []string
	}{
		{name: "usable", bucket: bucket},
		{name: "missing bucket", bucket: "no-such-bucket", wantErr: true,
			wantText: []string{"gcs: bucket not usable", "gs://no-such-bucket/blobs/", "404"}},
		{name: "permission denied", bucket: bucket, inject: http.StatusForbidden, wantErr: true,
			wantText: []string{"gs://" + bucket + "/blobs/", "403"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var query url.Values
			p.Answer(func(r *http.Request) int {
				query = r.URL.Query()
				return tc.inject
			})
			_, err := New(context.Background(), p.Client, Options{Bucket: tc.bucket})
			if got := p.Count("GET /storage/v1/b/"); got != 1 {
				t.Errorf("preflight made %d requests, want one listing", got)
			}
			if query.Get("maxResults") != "1" || query.Get("prefix") != "blobs/" {
				t.Errorf("listing query = %v, want maxResults=1 and prefix=blobs/", query)
			}
			if !tc.wantErr {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrBucket) {
				t.Fatalf("New = %v, want an error wrapping ErrBucket", err)
			}
			for _, w := range tc.wantText {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client *storage.Client
		opts   Options
	}{
		{"no client", nil, Options{Bucket: bucket}},
		{"no bucket", fake.Client, Options{}},
		{"negative timeout", fake.Client, Options{Bucket: bucket, Timeout: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(context.Background(), tc.client, tc.opts); err == nil {
				t.Errorf("New succeeded, want an error")
			}
		})
	}
}

func TestReReferenceRestampsCustomTime(t *testing.T) {
	s := newSink(t, nil, Options{TTL: 24 * time.Hour})
	ctx := context.Background()
	data := sinktest.Bytes(11, 50_000)
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

	first, err := s.PutAt(ctx, t0, bytes.NewReader(data), sink.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a0 := attrs(t, s, first.Fingerprint)
	t1 := t0.Add(36 * time.Hour)
	second, err := s.PutAt(ctx, t1, bytes.NewReader(data), sink.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a1 := attrs(t, s, first.Fingerprint)

	type view struct {
		Created            bool
		ExpiresAt          time.Time
		CustomTime         time.Time
		Generation         int64
		CRC32CMatchesSpool bool
	}
	got := []view{
		{first.Created, first.ExpiresAt, a0.CustomTime, 0, a0.CRC32C != 0},
		{second.Created, second.ExpiresAt, a1.CustomTime, a1.Generation - a0.Generation, a1.CRC32C == a0.CRC32C},
	}
	want := []view{
		{true, t0.Add(24 * time.Hour), t0, 0, true},
		{false, t1.Add(24 * time.Hour), t1, 0, true}, // same generation: not rewritten
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("create then re-reference (-want +got):\n%s", diff)
	}
}

func TestObjectVanishesBeforeRestamp(t *testing.T) {
	p := newProxy(t)
	s := newSink(t, p.Client, Options{})
	ctx := context.Background()
	data := []byte("reaped by lifecycle")
	b, err := s.Put(ctx, bytes.NewReader(data), sink.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The lifecycle rule deletes the object just as the re-stamp arrives.
	p.Answer(func(r *http.Request) int {
		if r.Method == http.MethodPatch {
			fake.Server.Backend().DeleteObject(bucket, s.Object(b.Fingerprint))
		}
		return 0
	})
	again, err := s.Put(ctx, bytes.NewReader(data), sink.PutOptions{})
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	if !again.Created {
		t.Errorf("Created = false, want the vanished blob created again")
	}
	if got := p.Count("POST /upload/"); got != 2 {
		t.Errorf("%d uploads, want 2 (412, then a fresh create)", got)
	}
	rc, err := s.Open(ctx, b.Fingerprint)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer rc.Close()
	if got, _ := io.ReadAll(rc); !bytes.Equal(got, data) {
		t.Errorf("blob = %q, want %q", got, data)
	}
}

func TestUploadFailures(t *testing.T) {
	p := newProxy(t)
	for _, tc := range []struct {
		name          string
		fail          []int // statuses injected on successive uploads
		wantErr       bool
		wantPermanent bool // the error wraps sink.ErrPermanent
		wantUploads   int
	}{
		{name: "one 503 is retried", fail: []int{503}, wantUploads: 2},
		{name: "429 then 500 are retried", fail: []int{429, 500}, wantUploads: 3},
		{name: "408 is retried", fail: []int{408}, wantUploads: 2},
		{name: "persistent 503 gives up, not for good", fail: []int{503, 503, 503, 503, 503}, wantErr: true, wantUploads: maxAttempts},
		{name: "persistent 429 gives up, not for good", fail: []int{429, 429, 429, 429, 429}, wantErr: true, wantUploads: maxAttempts},
		{name: "403 is not retried and is for good", fail: []int{403}, wantErr: true, wantPermanent: true, wantUploads: 1},
		{name: "401 is for good", fail: []int{401}, wantErr: true, wantPermanent: true, wantUploads: 1},
		{name: "404 (the bucket is gone) is for good", fail: []int{404}, wantErr: true, wantPermanent: true, wantUploads: 1},
		{name: "400 is for good", fail: []int{400}, wantErr: true, wantPermanent: true, wantUploads: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spool := t.TempDir()
			s := newSink(t, p.Client, Options{TempDir: spool})
			var n atomic.Int64
			p.Answer(func(r *http.Request) int {
				if !isUpload(r) {
					return 0
				}
				if i := int(n.Add(1)) - 1; i < len(tc.fail) {
					return tc.fail[i]
				}
				return 0
			})
			data := sinktest.Bytes(uint64(len(tc.name)), 100_000)
			_, err := s.Put(context.Background(), bytes.NewReader(data), sink.PutOptions{})
			if (err != nil) != tc.wantErr {
				t.Fatalf("Put error = %v, want error: %v", err, tc.wantErr)
			}
			if errors.Is(err, sink.ErrPermanent) != tc.wantPermanent {
				t.Errorf("Put error = %v; wraps sink.ErrPermanent: %v, want %v", err, errors.Is(err, sink.ErrPermanent), tc.wantPermanent)
			}
			if got := p.Count("POST /upload/"); got != tc.wantUploads {
				t.Errorf("%d uploads, want %d", got, tc.wantUploads)
			}
			_, gerr := fake.Server.GetObject(bucket, s.Object(sinktest.Fingerprint(data)))
			if stored := gerr == nil; stored == tc.wantErr {
				t.Errorf("object stored = %v after Put error %v", stored, err)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "gcs: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			if left, _ := os.ReadDir(spool); len(left) != 0 {
				t.Errorf("spool dir holds %d files after Put, want none", len(left))
			}
		})
	}
}

// TestContentTypeIsTheMediaType: the object a Put creates carries the
// body's media type as its content type, as the reference stores it; an
// empty type gives application/octet-stream; a re-reference under
// another type leaves the object's type as created.
func TestContentTypeIsTheMediaType(t *testing.T) {
	s := newSink(t, nil, Options{})
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		put  func(data []byte) (sink.Blob, error)
		want string
	}{
		{name: "Put text/html", want: "text/html", put: func(d []byte) (sink.Blob, error) {
			return s.Put(ctx, bytes.NewReader(d), sink.PutOptions{MediaType: "text/html"})
		}},
		{name: "Put through sink.Sink application/pdf", want: "application/pdf", put: func(d []byte) (sink.Blob, error) {
			var dst sink.Sink = s
			return dst.Put(ctx, bytes.NewReader(d), sink.PutOptions{MediaType: "application/pdf"})
		}},
		{name: "Put without a type", want: "application/octet-stream", put: func(d []byte) (sink.Blob, error) {
			return s.Put(ctx, bytes.NewReader(d), sink.PutOptions{})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte("content typed: " + tc.name)
			b, err := tc.put(data)
			if err != nil {
				t.Fatal(err)
			}
			if got := attrs(t, s, b.Fingerprint).ContentType; got != tc.want {
				t.Errorf("object content type = %q, want %q", got, tc.want)
			}
			if _, err := s.Put(ctx, bytes.NewReader(data), sink.PutOptions{MediaType: "image/png"}); err != nil {
				t.Fatal(err)
			}
			if got := attrs(t, s, b.Fingerprint).ContentType; got != tc.want {
				t.Errorf("after a re-reference as image/png, content type = %q, want %q still", got, tc.want)
			}
		})
	}
}

// TestRestampRefusedForGood: a re-reference whose customTime update is
// refused with 403 (the identity lost storage.objects.update) fails for
// good; a 503 there is retried until it passes.
func TestRestampRefusedForGood(t *testing.T) {
	p := newProxy(t)
	s := newSink(t, p.Client, Options{})
	data := sinktest.Bytes(21, 5000)
	if _, err := s.Put(context.Background(), bytes.NewReader(data), sink.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	isPatch := func(r *http.Request) bool { return r.Method == http.MethodPatch }
	var patches atomic.Int64
	p.Answer(func(r *http.Request) int {
		if isPatch(r) && patches.Add(1) == 1 {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	if _, err := s.Put(context.Background(), bytes.NewReader(data), sink.PutOptions{}); err != nil {
		t.Fatalf("re-reference through one 503: %v", err)
	}
	p.Answer(func(r *http.Request) int {
		if isPatch(r) {
			return http.StatusForbidden
		}
		return 0
	})
	_, err := s.Put(context.Background(), bytes.NewReader(data), sink.PutOptions{})
	if !errors.Is(err, sink.ErrPermanent) || !strings.Contains(err.Error(), "403") {
		t.Fatalf("re-reference refused with 403 = %v, want an error wrapping sink.ErrPermanent naming 403", err)
	}
}

func TestUploadTimeout(t *testing.T) {
	p := newProxy(t)
	s := newSink(t, p.Client, Options{Timeout: 300 * time.Millisecond})
	released := make(chan struct{})
	t.Cleanup(func() { close(released) }) // runs before the proxy closes
	p.Answer(func(r *http.Request) int {
		if isUpload(r) {
			// A stalled service: takes the body and never answers.
			io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-released:
			}
			return http.StatusServiceUnavailable
		}
		return 0
	})
	data := sinktest.Bytes(12, 10_000)
	_, err := s.Put(context.Background(), bytes.NewReader(data), sink.PutOptions{})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("Put = %v, want a timeout wrapping context.DeadlineExceeded", err)
	}
	if errors.Is(err, sink.ErrPermanent) {
		t.Errorf("Put = %v: a timeout is not a refusal for good", err)
	}
	if _, err := fake.Server.GetObject(bucket, s.Object(sinktest.Fingerprint(data))); err == nil {
		t.Errorf("object stored despite the timeout")
	}
}

func TestCorruptedUploadIsRejected(t *testing.T) {
	// Bytes changed on the way fail the CRC32C the spool computed, and the
	// service stores nothing.
	p := newProxy(t)
	s := newSink(t, p.Client, Options{})
	p.Answer(func(r *http.Request) int {
		if isUpload(r) {
			body, _ := io.ReadAll(r.Body)
			body[len(body)-1000] ^= 0xff // inside the content part
			r.Body = io.NopCloser(bytes.NewReader(body))
			r.ContentLength = int64(len(body))
		}
		return 0
	})
	data := sinktest.Bytes(13, 50_000)
	if _, err := s.Put(context.Background(), bytes.NewReader(data), sink.PutOptions{}); err == nil {
		t.Fatalf("Put of a corrupted upload succeeded")
	}
	if _, err := fake.Server.GetObject(bucket, s.Object(sinktest.Fingerprint(data))); err == nil {
		t.Errorf("corrupted object stored")
	}
}

func TestSpoolIsNeverLeftBehind(t *testing.T) {
	p := newProxy(t)
	spool := t.TempDir()
	s := newSink(t, p.Client, Options{TempDir: spool})
	var during []os.DirEntry
	p.Answer(func(r *http.Request) int {
		if isUpload(r) {
			during, _ = os.ReadDir(spool)
		}
		return 0
	})
	for _, tc := range []struct {
		name  string
		body  io.Reader
		limit int64
	}{
		{"stored", strings.NewReader("spooled"), 0},
		{"too large", strings.NewReader("spooled and too long"), 5},
		{"reader fails", io.MultiReader(strings.NewReader("part"), iotestErr{}), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.Put(context.Background(), tc.body, sink.PutOptions{Limit: tc.limit})
			if left, _ := os.ReadDir(spool); len(left) != 0 {
				t.Errorf("spool dir holds %v after Put", left)
			}
		})
	}
	if len(during) != 0 {
		t.Errorf("spool visible in %s during the upload: %v; want it unlinked at once", spool, during)
	}
}

type iotestErr struct{}

func (iotestErr) Read([]byte) (int, error) { return 0, errors.New("broken body") }

func TestOpenTimeoutCoversTheRead(t *testing.T) {
	s := newSink(t, nil, Options{Timeout: time.Minute})
	b, err := s.Put(context.Background(), strings.NewReader("read me"), sink.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := s.Open(context.Background(), b.Fingerprint)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	if err != nil || string(got) != "read me" {
		t.Errorf("read = %q, %v", got, err)
	}
	if err := rc.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}
