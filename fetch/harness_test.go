package fetch_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"testing"
	"time"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/sink"
)

// The harness itself, shared with fetch/feed's tests, is
// internal/testenv/fetchenv.

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
