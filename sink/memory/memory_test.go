package memory_test

import (
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
