package fetch_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/internal/hosts"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/policy"
	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/memory"
)

// Test hostnames all resolve to the loopback origin; metadata.test resolves
// to the cloud metadata address, which the guard must refuse.
var testHosts = map[string][]netip.Addr{
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

var quiet = slog.New(slog.DiscardHandler)

// testGuard allows loopback (the test origins) and nothing else private.
func testGuard() *guard.Guard {
	return guard.New(guard.Options{
		Allow:    []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Resolver: hosts.Resolver{Table: testHosts},
	})
}

type harness struct {
	origin  *testenv.Origin
	sink    *memory.Sink
	pacer   *policy.Local
	fetcher *fetch.Fetcher
	handler *fetch.Handler
}

type harnessOptions struct {
	interval time.Duration // pacing floor for every host; 0 = none
	fetch    fetch.Options // Guard and Pacer are filled in when nil
}

func newHarness(t *testing.T, h http.Handler, o harnessOptions) *harness {
	t.Helper()
	hs := &harness{origin: testenv.StartOrigin(t, h), sink: memory.New(memory.Options{TTL: time.Hour})}
	interval := o.interval
	hs.pacer = policy.NewLocal(policy.LocalOptions{DefaultInterval: spacing(interval)})
	opts := o.fetch
	if opts.Guard == nil {
		opts.Guard = testGuard()
	}
	if opts.Pacer == nil {
		opts.Pacer = hs.pacer
	}
	if opts.Logger == nil {
		opts.Logger = quiet
	}
	hs.fetcher = fetch.New(opts)
	t.Cleanup(hs.fetcher.Close)
	hs.handler = fetch.NewHandler(fetch.HandlerOptions{Fetcher: hs.fetcher, Sink: hs.sink, Logger: quiet})
	return hs
}

// url returns a URL on the origin under the given test hostname.
func (h *harness) url(host, path string) string { return h.origin.URLFor(host, path) }

func (h *harness) handle(t *testing.T, cmd *envelope.ContentFetch) fetch.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return h.handler.Handle(ctx, cmd)
}

func command(url string) *envelope.ContentFetch {
	return &envelope.ContentFetch{
		SchemaVersion: envelope.SchemaVersion,
		OccurredAt:    time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC),
		CommandID:     "01JCMD",
		URL:           url,
		InfoSourceID:  "source-7",
	}
}

// stored returns the bytes a sink holds for a fingerprint.
func stored(t *testing.T, s sink.Sink, fingerprint string) []byte {
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

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// spacing is d as a policy.LocalOptions.DefaultInterval: None when d is
// zero, so a zero interval means no spacing as the tests intend.
func spacing(d time.Duration) time.Duration {
	if d == 0 {
		return policy.None
	}
	return d
}
