package main

import (
	"os"

	"github.com/replicator-go/replicator/engine"
)

// derivedConsumerName is a worker's name in group when no override is set:
// the group with its dots as dashes, then the slot "-1", as the Python
// worker derives it (replicator.fetch → replicator-fetch-1). The name is the
// same on every restart and every host, so a restart reuses its
// registration instead of leaving one behind per hostname; a second worker
// in the group takes another slot through REPLICATOR_CONSUMER_NAME and
// REPLICATOR_REPLICATE_CONSUMER_NAME (docs/operations.md, Consumer names).
func derivedConsumerName(group string) string { return engine.ConsumerName(group) }

// consumerNameFor is the name this worker registers in group: the group's
// own override when set, else the derivation. The override is chosen by
// group, which is why the two groups must differ (loadConfig refuses them
// equal).
func consumerNameFor(override, group string) string {
	if override != "" {
		return override
	}
	return derivedConsumerName(group)
}

// oldConsumerName is the name earlier versions of this worker registered
// under in both groups, replicator@<hostname>. A variable so tests can pin
// it.
var oldConsumerName = func() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return "replicator@" + host
}
