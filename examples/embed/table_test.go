package main

import (
	"log/slog"
	"testing"

	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/sinktest"
)

// TestBlobTableConformance runs the suite every backend passes, so the
// fetcher can treat the table like any other sink.
func TestBlobTableConformance(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) sink.Sink {
		return newBlobTable(slog.New(slog.DiscardHandler))
	})
}
