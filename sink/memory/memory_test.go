package memory_test

import (
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
