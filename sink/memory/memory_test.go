package memory_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/memory"
	"github.com/replicator-go/replicator/sink/sinktest"
)

func TestConformance(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) sink.Sink {
		return memory.New(memory.Options{TTL: sinktest.TTL})
	})
}

func TestConformanceNoTTL(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) sink.Sink { return memory.New(memory.Options{}) })
}

// TestMediaType: a blob keeps the media type its first store gave it.
func TestMediaType(t *testing.T) {
	s := memory.New(memory.Options{})
	ctx := t.Context()
	b, err := s.Put(ctx, strings.NewReader("<p>"), sink.PutOptions{MediaType: "text/html"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, strings.NewReader("<p>"), sink.PutOptions{MediaType: "text/plain"}); err != nil {
		t.Fatal(err)
	}
	if got, ok := s.MediaType(b.Fingerprint); !ok || got != "text/html" {
		t.Errorf("MediaType = %q, %v; want text/html, true", got, ok)
	}
	plain, err := s.Put(ctx, strings.NewReader("bytes"), sink.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := s.MediaType(plain.Fingerprint); got != sink.DefaultMediaType {
		t.Errorf("MediaType after Put = %q, want %q", got, sink.DefaultMediaType)
	}
	if _, ok := s.MediaType(sinktest.Fingerprint([]byte("never"))); ok {
		t.Errorf("MediaType reports a blob never stored")
	}
}

// TestDeclaredSize: the declared size only sizes the buffer; a body
// shorter, longer or without one is stored as it arrived, and one over the
// limit is refused whatever it declared.
func TestDeclaredSize(t *testing.T) {
	const body = "twelve bytes"
	for _, size := range []int64{0, 1, 12, 13, 1 << 20} {
		s := memory.New(memory.Options{})
		b, err := s.Put(t.Context(), strings.NewReader(body), sink.PutOptions{Limit: 64, Size: size})
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		r, err := s.Open(t.Context(), b.Fingerprint)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(r)
		if string(got) != body || b.Size != int64(len(body)) {
			t.Errorf("size %d: stored %q (%d bytes), want %q", size, got, b.Size, body)
		}
	}
	s := memory.New(memory.Options{})
	if _, err := s.Put(t.Context(), strings.NewReader(body), sink.PutOptions{Limit: 11, Size: 11}); !errors.Is(err, sink.ErrTooLarge) {
		t.Errorf("over the limit: err = %v, want sink.ErrTooLarge", err)
	}
}
