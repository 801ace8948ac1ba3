package main

import (
	"os"
	"strings"
	"testing"
)

// referenceNames are the REPLICATOR_* variables the Python worker
// documents (its environment, deployment and failure-notification docs and
// its persist contract), as of the version this worker is compared with.
// Add a name when the reference documents a new one.
var referenceNames = []string{
	"REPLICATOR_REDIS_URL", "REPLICATOR_REDIS_FLOOR_TIMEOUT", "REPLICATOR_REDIS_FLOOR_WAIT",
	"REPLICATOR_BLOB_BACKEND", "REPLICATOR_BLOB_BUCKET", "REPLICATOR_BLOB_PREFIX", "REPLICATOR_BLOB_TIMEOUT_SECONDS",
	"REPLICATOR_BLOB_DIR", "REPLICATOR_BLOB_TTL_SECONDS", "REPLICATOR_BLOB_SWEEP_INTERVAL_SECONDS",
	"REPLICATOR_BLOB_TEMP_GRACE_SECONDS", "REPLICATOR_BLOB_MAX_TOTAL_BYTES",
	"REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS", "REPLICATOR_MAX_FETCH_SECONDS", "REPLICATOR_MAX_BLOB_BYTES",
	"REPLICATOR_BLOCKED_DESTINATIONS",
	"REPLICATOR_CONSUMER_GROUP", "REPLICATOR_CONSUMER_NAME", "REPLICATOR_REPLICATE_CONSUMER_NAME",
	"REPLICATOR_CONSUMER_START_ID", "REPLICATOR_READ_BLOCK_MS", "REPLICATOR_MIN_HOST_INTERVAL_SECONDS",
	"REPLICATOR_CLAIM_MIN_IDLE_MS", "REPLICATOR_MAX_DELIVERY_ATTEMPTS",
	"REPLICATOR_ERROR_BACKOFF_BASE_SECONDS", "REPLICATOR_ERROR_BACKOFF_MAX_SECONDS",
	"REPLICATOR_MAX_CONSECUTIVE_CYCLE_FAILURES", "REPLICATOR_DEDUPE_TTL_SECONDS",
	"REPLICATOR_NOTIFY_URL", "REPLICATOR_NOTIFY_TOKEN", "REPLICATOR_NOTIFY_TIMEOUT_SECONDS",
	"REPLICATOR_NOTIFY_MODE", "REPLICATOR_NOTIFY_TEMPLATE_ID", "REPLICATOR_NOTIFY_CHANNEL_IDS",
	"REPLICATOR_REPLICATE_CONSUMER_GROUP", "REPLICATOR_REPLICATE_WRITE_TIMEOUT_SECONDS",
	"REPLICATOR_REPLICATION_ALIASES_FILE", "REPLICATOR_WHEELHOUSE_CREDENTIALS", "REPLICATOR_LOG_LEVEL",
	"REPLICATOR_ALLOW_ANY_CHECKOUT", "REPLICATOR_PERSIST_ENABLED", "REPLICATOR_PERMANENT_BUCKET",
	"REPLICATOR_TEST_REDIS_URL", "REPLICATOR_TEST_GCS_BUCKET", "REPLICATOR_TEST_BLOB_BUCKET",
	"REPLICATOR_TEST_GCS_CREDENTIALS",
}

// TestReferenceNamesAccountedFor fails when a variable the reference
// documents is neither a setting here (read, or known and not read) nor
// named in docs/differences.md, which says why it is not.
func TestReferenceNamesAccountedFor(t *testing.T) {
	b, err := os.ReadFile("../../docs/differences.md")
	if err != nil {
		t.Fatal(err)
	}
	diffs := string(b)
	table := map[string]bool{}
	for _, s := range settings {
		table[s.name] = true
	}
	for _, name := range referenceNames {
		if !table[name] && !strings.Contains(diffs, "`"+name+"`") {
			t.Errorf("%s: the reference documents it; make it a setting here or say in docs/differences.md why it is not", name)
		}
	}
}
