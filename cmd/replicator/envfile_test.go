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
		deny []string // none may appear on stderr
	}{
		{name: "the Python worker's deployed env file: a blank consumer name, the floor, notify and persist settings",
			env: []string{"REPLICATOR_CONSUMER_NAME=", "REPLICATOR_BLOB_BACKEND=local", "REPLICATOR_BLOB_TTL_SECONDS=604800",
				"REPLICATOR_REDIS_FLOOR_TIMEOUT=5", "REPLICATOR_REDIS_FLOOR_WAIT=30",
				"REPLICATOR_NOTIFY_URL=http://notifier:9000/api/v1/dispatch", "REPLICATOR_NOTIFY_MODE=notifier",
				"REPLICATOR_NOTIFY_TOKEN=nk_secret", "REPLICATOR_NOTIFY_TIMEOUT_SECONDS=10",
				"REPLICATOR_NOTIFY_TEMPLATE_ID=01J9Z8Y7X6W5V4T3S2R1Q0P9N8", "REPLICATOR_NOTIFY_CHANNEL_IDS=01J9Z8Y7X6W5V4T3S2R1Q0P9N7",
				"REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS=120", "REPLICATOR_MAX_FETCH_SECONDS=120",
				"REPLICATOR_BLOCKED_DESTINATIONS=0.0.0.0/8,10.0.0.0/8,100.64.0.0/10,127.0.0.0/8,169.254.0.0/16,172.16.0.0/12,192.168.0.0/16,224.0.0.0/4,240.0.0.0/4,::/128,::1/128,fc00::/7,fe80::/10,ff00::/8",
				"REPLICATOR_PERSIST_ENABLED=false", "REPLICATOR_PERMANENT_BUCKET=co-gcs-replicator",
				"REPLICATOR_WHEELHOUSE_CREDENTIALS=/etc/replicator/co-pypi-reader.json", "BUILD_ID=a85fe5a"},
			want: []string{`"msg":"worker ready"`, `"consumer":"replicator-fetch-1"`, `"replicate_consumer":"replicator-replicate-1"`, `"build":"a85fe5a"`},
			deny: []string{`"level":"WARN","msg":"REPLICATOR_`, "is not a setting of this worker", "nk_secret"}},
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
			for _, s := range tt.deny {
				if strings.Contains(w.stderr.String(), s) {
					t.Errorf("stderr contains %s:\n%s", s, tail(w.stderr.String(), 3000))
				}
			}
		})
	}
}
