// Package deploy_test checks the deployment files against the code they
// deploy, so a default changed in one place fails here rather than in
// production.
package deploy_test

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/engine"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/sink/gcs"
)

// keyValues reads the "key=value" lines of a systemd unit or an environment
// file, skipping comments, blank lines and section headers. A key set twice
// keeps its last value, as systemd does.
func keyValues(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kv := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: line %q is not key=value", path, line)
		}
		kv[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return kv
}

// setting returns an environment file's value for name converted by unit,
// or def when the file leaves it unset.
func setting(t *testing.T, env map[string]string, name string, unit, def time.Duration) time.Duration {
	t.Helper()
	v, ok := env[name]
	if !ok || v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		t.Fatalf("replicator.env: %s=%q is not a number", name, v)
	}
	return time.Duration(f * float64(unit))
}

// TestShutdownBudget holds TimeoutStopSec above the longest clean shutdown
// the worker can take with the settings in replicator.env: a blocking read
// in progress, the drain of in-flight fetches (the whole-fetch bound plus
// the margin to publish their facts) and a blob store under way. Past it
// systemd kills the worker mid-fetch and those commands wait for a reclaim.
func TestShutdownBudget(t *testing.T) {
	unit := keyValues(t, "replicator.service")
	env := keyValues(t, "replicator.env")

	stop, err := strconv.Atoi(unit["TimeoutStopSec"])
	if err != nil {
		t.Fatalf("TimeoutStopSec=%q: want a whole number of seconds", unit["TimeoutStopSec"])
	}
	readBlock := setting(t, env, "REPLICATOR_READ_BLOCK_MS", time.Millisecond, engine.DefaultReadBlock)
	maxFetch := setting(t, env, "REPLICATOR_MAX_FETCH_SECONDS", time.Second, fetch.DefaultMaxFetchTime)
	blob := setting(t, env, "REPLICATOR_BLOB_TIMEOUT_SECONDS", time.Second, gcs.DefaultTimeout)
	need := readBlock + maxFetch + contentfetch.DrainMargin + blob
	if got := time.Duration(stop) * time.Second; got <= need {
		t.Errorf("TimeoutStopSec=%d is not above the shutdown budget %v (read block %v + max fetch %v + drain margin %v + blob timeout %v)",
			stop, need, readBlock, maxFetch, contentfetch.DrainMargin, blob)
	}
}

func TestUnit(t *testing.T) {
	unit := keyValues(t, "replicator.service")
	for key, want := range map[string]string{
		"ExecStart":                "/usr/local/bin/replicator worker",
		"KillSignal":               "SIGTERM",
		"Restart":                  "on-failure",
		"RestartPreventExitStatus": "2",
		"EnvironmentFile":          "/etc/replicator/replicator.env",
	} {
		if unit[key] != want {
			t.Errorf("%s=%q, want %q", key, unit[key], want)
		}
	}
	if _, ok := unit["DynamicUser"]; ok {
		t.Errorf("DynamicUser hides the blob tree under /var/lib/private from the services that read it")
	}
}
