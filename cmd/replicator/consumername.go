package main

import (
	"os"

	"github.com/replicator-go/replicator/engine"
)

// consumerNameFor is the name this worker registers in group: the group's
// own override when set, else the same name on every restart and every
// host, derived from the group (engine.ConsumerName), as the Python worker
// derives it; a second worker in a group takes another slot through
// REPLICATOR_CONSUMER_NAME or REPLICATOR_REPLICATE_CONSUMER_NAME
// (docs/operations.md, Consumer names). The override is chosen by
// group, which is why the two groups must differ (loadConfig refuses them
// equal).
func consumerNameFor(override, group string) string {
	if override != "" {
		return override
	}
	return engine.ConsumerName(group)
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
