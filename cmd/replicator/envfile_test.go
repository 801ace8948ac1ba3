package main

import (
	"strings"
	"testing"
	"time"

	"github.com/replicator-go/replicator/internal/testenv"
)

// TestWorkerBootsWithReferenceEnvFiles runs the binary with env files the
// reference boots with, in its spellings: each boots (the consumer group is
// made), logs what it took leniently, and stops cleanly on SIGTERM.
func TestWorkerBootsWithReferenceEnvFiles(t *testing.T) {
	srv := testenv.StartRedis(t)
	tests := []struct {
		name string
		env  []string
		want []string // each must appear on stderr
	}{
		{name: "only the timeout ceiling raised: the whole-fetch bound follows it",
			env: []string{"REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS=300"}},
		{name: "pydantic's number forms",
			env: []string{"REPLICATOR_READ_BLOCK_MS=+1_000.0", "REPLICATOR_CLAIM_MIN_IDLE_MS=0060000", "REPLICATOR_BLOB_TTL_SECONDS=1e3",
				"REPLICATOR_MAX_DELIVERY_ATTEMPTS=0", "REPLICATOR_MAX_BLOB_BYTES=1_048_576", "REPLICATOR_MIN_HOST_INTERVAL_SECONDS=.5",
				"REPLICATOR_ERROR_BACKOFF_BASE_SECONDS=5", "REPLICATOR_ERROR_BACKOFF_MAX_SECONDS=2"},
			want: []string{"backing off by the base"}},
		{name: "lower-case names, an unknown level and a setting this worker does not read",
			env: []string{"replicator_log_level=verbose", "replicator_consumer_group=replicator.lower",
				"REPLICATOR_SHINY_NEW_SETTING=/nonexistent/aliases.json"},
			want: []string{`"level":"WARN"`, `REPLICATOR_LOG_LEVEL=\"verbose\" is not a level name; logging at INFO`,
				"REPLICATOR_SHINY_NEW_SETTING is not a setting of this worker", `"group":"replicator.lower"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := append([]string{"REPLICATOR_REDIS_URL=" + srv.URL(), "REPLICATOR_BLOB_DIR=" + t.TempDir()}, tt.env...)
			w := startBinary(t, env, "worker")
			testenv.Eventually(t, 30*time.Second, "the consumer group", func() bool {
				if w.exited() {
					t.Fatalf("worker exited with %d:\n%s", w.code, w.stderr.String())
				}
				return strings.Contains(w.stderr.String(), "consumer group ready")
			})
			if code := w.stop(t, 30*time.Second); code != 0 {
				t.Errorf("worker exited %d after SIGTERM, want 0", code)
			}
			for _, s := range tt.want {
				if !strings.Contains(w.stderr.String(), s) {
					t.Errorf("stderr does not contain %s:\n%s", s, tail(w.stderr.String(), 3000))
				}
			}
		})
	}
}
