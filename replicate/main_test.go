package replicate_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/replicate"
	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/local"
)

// The buckets of the shared fake: two an operator provisioned as
// destinations, the temp store of a gcs-backed worker, and the permanent
// store.
const (
	destBucket  = "replicate-dest"
	otherBucket = "replicate-other"
	tempBucket  = "replicate-temp"
	permBucket  = "replicate-permanent"
)

var fake *testenv.GCS

func TestMain(m *testing.M) {
	testenv.ServeGCSChild()
	var err error
	fake, err = testenv.NewGCS(destBucket, otherBucket, tempBucket, permBucket)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	fake.Close()
	os.Exit(code)
}

// at is the fixed clock of every handler the tests build.
var at = time.Date(2026, 11, 29, 23, 20, 0, 123456000, time.UTC)

var prefixes atomic.Int64

// uniquePrefix gives each test its own root in the shared buckets.
func uniquePrefix() string { return fmt.Sprintf("t%d/reps", prefixes.Add(1)) }

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func newLocal(t testing.TB) *local.Sink {
	t.Helper()
	s, err := local.New(local.Options{Dir: t.TempDir(), Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func store(t testing.TB, s sink.Sink, data []byte) sink.Blob {
	t.Helper()
	b, err := s.Put(context.Background(), bytes.NewReader(data), sink.PutOptions{})
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	return b
}

func newAliases(t testing.TB, m map[string]replicate.Binding) *replicate.Aliases {
	t.Helper()
	a, err := replicate.NewAliases(m)
	if err != nil {
		t.Fatalf("NewAliases: %v", err)
	}
	return a
}

// primary is one gcs alias rooted under a fresh prefix of destBucket.
func primary(t testing.TB) (*replicate.Aliases, replicate.Binding) {
	b := replicate.Binding{Provider: replicate.ProviderGCS, Bucket: destBucket, Prefix: uniquePrefix()}
	return newAliases(t, map[string]replicate.Binding{"primary": b}), b
}

// newHandler builds a Handler on the fixed clock; a nil GCS client means
// the fake's.
func newHandler(t testing.TB, opts replicate.Options) *replicate.Handler {
	t.Helper()
	if opts.GCS == nil {
		opts.GCS = fake.Client
	}
	return build(t, opts)
}

// build is newHandler with opts.GCS taken as given, nil included.
func build(t testing.TB, opts replicate.Options) *replicate.Handler {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = discard()
	}
	h, err := replicate.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	replicate.SetClock(h, func() time.Time { return at })
	return h
}

// slogJSON logs JSON lines to w, without the time, at every level.
func slogJSON(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

// removeBlob deletes a stored blob's file, as the sweep would.
func removeBlob(s *local.Sink, fp string) error { return os.Remove(s.Path(fp)) }

// command is a valid command for alias "primary", adjusted by edits.
func command(blobURI string, edits ...func(*envelope.ContentReplicate)) *envelope.ContentReplicate {
	c := &envelope.ContentReplicate{
		SchemaVersion:     envelope.SchemaVersion,
		OccurredAt:        at.Add(-time.Minute),
		CommandID:         "rep-1",
		BlobURI:           blobURI,
		MediaType:         "application/pdf",
		Provider:          replicate.ProviderGCS,
		CredentialsAlias:  "primary",
		Destination:       "organizations/x/2026/report.pdf",
		InfoItemRepSpecID: "iirs-1",
		SourceRevisionID:  "rev-1",
		InfoSourceID:      "isrc-1",
	}
	for _, e := range edits {
		e(c)
	}
	return c
}

// objects lists the names stored under prefix in bucket.
func objects(t testing.TB, bucket, prefix string) []string {
	t.Helper()
	list, err := fake.Server.ListObjectsWithOptionsPaginated(bucket, fakestorage.ListOptions{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, o := range list.Objects {
		names = append(names, o.Name)
	}
	return names
}

func object(t testing.TB, bucket, name string) fakestorage.Object {
	t.Helper()
	o, err := fake.Server.GetObject(bucket, name)
	if err != nil {
		t.Fatalf("object %s/%s: %v", bucket, name, err)
	}
	return o
}

// newProxy puts a GCSProxy between a client and the fake, so a test can
// answer a request with the status the fake cannot produce, over a real
// socket.
func newProxy(t *testing.T) *testenv.GCSProxy { return fake.Proxy(t) }

// answer writes a service error of the given status, as GCS shapes one.
func answer(w http.ResponseWriter, r *http.Request, code int) {
	io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"error":{"code":%d,"message":"injected by the test proxy"}}`, code)
}

func isUpload(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/upload/")
}

func isMetadataGet(r *http.Request) bool {
	return r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/storage/v1/b/") && strings.Contains(r.URL.Path, "/o/")
}
