package main

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// unitValues returns every value name takes in a systemd unit file, in order.
func unitValues(t *testing.T, path, name string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(name)+`=(.*)$`).FindAllStringSubmatch(string(b), -1) {
		out = append(out, strings.TrimSpace(m[1]))
	}
	return out
}

// settingDefault is a setting's default from the table, in seconds.
func settingDefault(t *testing.T, name string) time.Duration {
	t.Helper()
	for _, s := range settings {
		if s.name == name {
			n, err := strconv.Atoi(s.def)
			if err != nil {
				t.Fatalf("%s: default %q", name, s.def)
			}
			return time.Duration(n) * time.Second
		}
	}
	t.Fatalf("no setting %s", name)
	return 0
}

// TestDeployUnits holds deploy/'s units to the subcommands they run: the
// worker's unit checks the floor before it starts and names the failure
// handler; the handler runs the subcommand, cannot fail into itself and
// outlasts the dispatch's own bound.
func TestDeployUnits(t *testing.T) {
	const worker, handler = "../../deploy/replicator.service", "../../deploy/replicator-failure-notify@.service"
	if got := unitValues(t, worker, "OnFailure"); len(got) != 1 || got[0] != "replicator-failure-notify@%n.service" {
		t.Errorf("OnFailure= %q, want the handler template instantiated with %%n", got)
	}
	pre := unitValues(t, worker, "ExecStartPre")
	if len(pre) != 1 || pre[0] != "/usr/local/bin/replicator check-redis" {
		t.Errorf("ExecStartPre= %q, want the floor check, unprefixed so its exit 1 stops the start", pre)
	}
	// Every ExecStartPre shares the start timeout (systemd's 90 s default):
	// the check's wait and a last probe keep to half of it.
	if len(unitValues(t, worker, "TimeoutStartSec")) != 0 {
		t.Error("the unit sets TimeoutStartSec: compare the floor check against it")
	}
	if worst := settingDefault(t, "REPLICATOR_REDIS_FLOOR_WAIT") + settingDefault(t, "REPLICATOR_REDIS_FLOOR_TIMEOUT"); worst > 45*time.Second {
		t.Errorf("the floor check may take %s of the 90 s start budget", worst)
	}

	if got := unitValues(t, handler, "ExecStart"); len(got) != 1 || got[0] != "/usr/local/bin/replicator notify-failure %i" {
		t.Errorf("handler ExecStart= %q", got)
	}
	if got := unitValues(t, handler, "OnFailure"); len(got) != 0 {
		t.Errorf("the handler names OnFailure= %q: a failing notification would chain", got)
	}
	if got := unitValues(t, handler, "Type"); len(got) != 1 || got[0] != "oneshot" {
		t.Errorf("handler Type= %q, want oneshot", got)
	}
	if got := unitValues(t, handler, "SyslogIdentifier"); len(got) != 1 || got[0] == "" {
		t.Error("the handler sets no SyslogIdentifier: its records are only under a doubled-suffix unit name")
	}
	if got := unitValues(t, handler, "EnvironmentFile"); len(got) != 1 || got[0] != "-"+defaultEnvFile {
		t.Errorf("handler EnvironmentFile= %q, want the worker's settings file, optional", got)
	}
	if got := unitValues(t, worker, "EnvironmentFile"); len(got) != 1 || got[0] != defaultEnvFile {
		t.Errorf("worker EnvironmentFile= %q, want %s, where status inflight reads it", got, defaultEnvFile)
	}
	start := unitValues(t, handler, "TimeoutStartSec")
	if n, err := strconv.Atoi(strings.Join(start, "")); err != nil || time.Duration(n)*time.Second <= notifyTimeoutMax*time.Second {
		t.Errorf("handler TimeoutStartSec= %q, want whole seconds above the dispatch ceiling, %d s", start, notifyTimeoutMax)
	}
}
