// Package fetchenv is the test harness of the fetch library and of what is
// built on it (feed discovery, the content.fetch handler): a Fetcher and a
// Handler wired to a recording loopback origin reached under test host
// names, an in-memory sink and a pacer.
package fetchenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/internal/hosts"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/policy"
	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/memory"
)

// Hosts are the test host names: all resolve to the loopback origin, but
// metadata.test resolves to the cloud metadata address, which the guard
// must refuse.
var Hosts = map[string][]netip.Addr{
	"origin.test":   {netip.MustParseAddr("127.0.0.1")},
	"a.test":        {netip.MustParseAddr("127.0.0.1")},
	"b.test":        {netip.MustParseAddr("127.0.0.1")},
	"c.test":        {netip.MustParseAddr("127.0.0.1")},
	"example.com":   {netip.MustParseAddr("127.0.0.1")}, // the name on httptest's certificate
	"metadata.test": {netip.MustParseAddr("169.254.169.254")},
	"mixed.test":    {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("10.0.0.1")},
	// bücher.test, as net/http dials it
	"xn--bcher-kva.test": {netip.MustParseAddr("127.0.0.1")},
}

// The names Outcome.Name gives a fetch's outcomes that have no label of
// their own (contentfetch.Stored and contentfetch.NotModified have): its
// fate's name, as the tests' tables expect it.
var (
	Permanent    = capability.Close.String()
	Transient    = capability.Retry.String()
	Parked       = capability.Park.String()
	Unclassified = capability.Unclassified.String()
)

// Quiet is a logger that discards everything.
var Quiet = slog.New(slog.DiscardHandler)

// Guard allows loopback (the test origins) and nothing else private,
// resolving Hosts.
func Guard() *guard.Guard {
	return guard.New(guard.Options{
		Allow:    []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Resolver: hosts.Resolver{Table: Hosts},
	})
}

// Harness is a Fetcher and a Handler over one recording origin.
type Harness struct {
	Stop    <-chan struct{} // passed to every Fetch
	Origin  *testenv.Origin
	Sink    *memory.Sink // the Handler's sink
	Pacer   *policy.Local
	Fetcher *fetch.Fetcher
	Handler *contentfetch.Handler
}

// Options configures New.
type Options struct {
	Interval time.Duration // pacing floor for every host; 0 = none
	Fetch    fetch.Options // Guard, Pacer and Logger are filled in when nil
	MaxWait  time.Duration // the handler's MaxWait
	// ParkAfter is the handler's ParkAfter.
	ParkAfter time.Duration
	Stop      <-chan struct{}
}

// New starts an origin serving h and builds the harness around it; both
// are closed when the test ends.
func New(t *testing.T, h http.Handler, o Options) *Harness {
	t.Helper()
	hs := &Harness{Stop: o.Stop, Origin: testenv.StartOrigin(t, h), Sink: memory.New(memory.Options{TTL: time.Hour})}
	hs.Pacer = policy.NewLocal(policy.LocalOptions{DefaultInterval: spacing(o.Interval)})
	opts := o.Fetch
	if opts.Guard == nil {
		opts.Guard = Guard()
	}
	if opts.Pacer == nil {
		opts.Pacer = hs.Pacer
	}
	if opts.Logger == nil {
		opts.Logger = Quiet
	}
	hs.Fetcher = fetch.New(opts)
	t.Cleanup(hs.Fetcher.Close)
	hs.Handler = contentfetch.NewHandler(contentfetch.HandlerOptions{Fetcher: hs.Fetcher, Sink: hs.Sink, MaxWait: o.MaxWait, ParkAfter: o.ParkAfter, Logger: Quiet})
	return hs
}

// URL returns a URL on the origin under the given test host name.
func (h *Harness) URL(host, path string) string { return h.Origin.URLFor(host, path) }

// Handle runs one command through the Handler, bounded by 30 s.
func (h *Harness) Handle(t *testing.T, cmd *envelope.ContentFetch) contentfetch.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return h.Handler.Fetch(ctx, cmd, h.Stop)
}

// spacing is d as a policy.LocalOptions.DefaultInterval: None when d is
// zero, so a zero interval means no spacing as the tests intend.
func spacing(d time.Duration) time.Duration {
	if d == 0 {
		return policy.None
	}
	return d
}

// NoPacer neither spaces nor escalates, so a test of retries after a 429
// or 503 is not held back by the real pacer's escalated interval.
type NoPacer struct{}

// Reserve grants every request at once.
func (NoPacer) Reserve(ctx context.Context, host string, maxWait time.Duration) (policy.Reservation, error) {
	return policy.Reservation{OK: true}, ctx.Err()
}

// Refused asks for no wait.
func (NoPacer) Refused(ctx context.Context, host string, retryAfter time.Duration) (time.Duration, error) {
	return 0, ctx.Err()
}

// Sent records nothing.
func (NoPacer) Sent(ctx context.Context, host string) error { return ctx.Err() }

// Ctx is a context for one library call, bounded by 30 s and cancelled
// when the test ends.
func Ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// ReadDoc returns a document's stored body.
func ReadDoc(t *testing.T, doc *fetch.Document) string {
	t.Helper()
	rc, err := doc.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// MustURL parses raw, failing the test when it does not parse.
func MustURL(t testing.TB, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// AtomFeed is a minimal Atom feed.
const AtomFeed = `<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom"><title>t</title></feed>`

// Served answers every request with a 200, the Content-Type given and
// body.
func Served(contentType, body string) http.Handler {
	return testenv.Status(200, map[string]string{"Content-Type": contentType}, body)
}

// Command is a content_fetch command for url, as the tests' issuer sends
// it: no headers, no timeout.
func Command(url string) *envelope.ContentFetch {
	return &envelope.ContentFetch{
		SchemaVersion: envelope.SchemaVersion,
		OccurredAt:    time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC),
		CommandID:     "01JCMD",
		URL:           url,
		InfoSourceID:  "source-7",
	}
}

// Stored returns the bytes a sink holds for a fingerprint.
func Stored(t *testing.T, s sink.Sink, fingerprint string) []byte {
	t.Helper()
	rc, err := s.Open(context.Background(), fingerprint)
	if err != nil {
		t.Fatalf("open %s: %v", fingerprint, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// SHA is the lowercase hex sha256 of b: a blob's fingerprint.
func SHA(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// IgnoreFactTimes compares facts without the times a run stamps on them
// (and a fetch_failed's free-text detail).
var IgnoreFactTimes = cmp.Options{
	cmpopts.IgnoreFields(envelope.BlobAvailable{}, "OccurredAt", "FetchedAt", "BlobExpiresAt"),
	cmpopts.IgnoreFields(envelope.FetchFailed{}, "OccurredAt", "Detail"),
}
