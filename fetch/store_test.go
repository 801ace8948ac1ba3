package fetch_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/internal/testenv/fetchenv"
	"github.com/replicator-go/replicator/policy"
	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/gcs"
)

// refusingGCS is a fake-gcs-server behind a real HTTP proxy on loopback
// that answers every upload with the status in refuse (0 passes it on), as
// a bucket that lost a grant or a service having a bad minute would.
func refusingGCS(t *testing.T, bucket string, refuse *atomic.Int64) *gcs.Sink {
	t.Helper()
	p := testenv.StartGCS(t, bucket).Proxy(t)
	p.Answer(func(r *http.Request) int {
		if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/upload/") {
			return int(refuse.Load())
		}
		return 0
	})
	client := p.Client
	s, err := gcs.New(context.Background(), client, gcs.Options{Bucket: bucket, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestHandleStoreRefusedForGood: a bucket that answers 403 (or 401, 404,
// 400) to the upload makes the command Unclassified, so the worker closes it
// as handler_error at the delivery ceiling instead of retrying it silently
// for ever; a 503 stays Transient, and neither is a Permanent fact, since
// the origin did nothing wrong.
func TestHandleStoreRefusedForGood(t *testing.T) {
	origin := testenv.StartOrigin(t, testenv.Status(200, map[string]string{"Content-Type": "text/plain"}, "body to keep"))
	var refuse atomic.Int64
	blobs := refusingGCS(t, "refusing", &refuse)
	f := fetch.New(fetch.Options{Guard: fetchenv.Guard(), Pacer: policy.NewLocal(policy.LocalOptions{DefaultInterval: policy.None}), Logger: fetchenv.Quiet})
	t.Cleanup(f.Close)
	h := contentfetch.NewHandler(contentfetch.HandlerOptions{Fetcher: f, Sink: blobs, Logger: fetchenv.Quiet})

	tests := []struct {
		status        int
		wantKind      string
		wantPermanent bool
	}{
		{status: http.StatusForbidden, wantKind: fetchenv.Unclassified, wantPermanent: true},
		{status: http.StatusUnauthorized, wantKind: fetchenv.Unclassified, wantPermanent: true},
		{status: http.StatusNotFound, wantKind: fetchenv.Unclassified, wantPermanent: true},
		{status: http.StatusBadRequest, wantKind: fetchenv.Unclassified, wantPermanent: true},
		{status: http.StatusServiceUnavailable, wantKind: fetchenv.Transient},
		{status: http.StatusTooManyRequests, wantKind: fetchenv.Transient},
		{status: 0, wantKind: contentfetch.Stored},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			refuse.Store(int64(tt.status))
			cmd := fetchenv.Command(origin.URLFor("origin.test", fmt.Sprintf("/doc/%d", tt.status)))
			out := h.Fetch(fetchenv.Ctx(t), cmd, nil)
			if out.Name() != tt.wantKind {
				t.Fatalf("kind = %v (%v), want %v", out.Name(), out.Err, tt.wantKind)
			}
			if tt.wantKind == contentfetch.Stored {
				return
			}
			if out.Fact != nil || out.Reason != "" {
				t.Errorf("fact = %v, reason = %q; a store failure publishes nothing itself", out.Fact, out.Reason)
			}
			if !errors.Is(out.Err, fetch.ErrStore) || errors.Is(out.Err, sink.ErrPermanent) != tt.wantPermanent {
				t.Errorf("err = %v; want fetch.ErrStore, and sink.ErrPermanent: %v", out.Err, tt.wantPermanent)
			}
			if fetch.Retryable(out.Err) {
				t.Errorf("Retryable(%v) = true; Get would retry a store failure seconds apart", out.Err)
			}
		})
	}
}

// TestClassifyStoreFailures pins the rows of the classification table for
// stores: neither permanent nor worth retrying soon (the content.fetch
// handler waits out the delivery ceiling for one refused for good).
func TestClassifyStoreFailures(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want fetch.Class
	}{
		{name: "refused for good", err: fmt.Errorf("%w: %w", fetch.ErrStore, fmt.Errorf("gcs: upload: %w: 403", sink.ErrPermanent)),
			want: fetch.Class{}},
		{name: "any other store failure", err: fmt.Errorf("%w: disk full", fetch.ErrStore), want: fetch.Class{}},
		{name: "the ceiling", err: fetch.ErrStorageFull, want: fetch.Class{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fetch.Classify(tt.err); got != tt.want {
				t.Errorf("Classify(%v) = %+v, want %+v", tt.err, got, tt.want)
			}
		})
	}
}
