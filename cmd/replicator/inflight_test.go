package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/persist"
)

// TestStatusInflight: the patching gate's count is this worker's pending
// entries, its current names' and its old name's, in its groups (persist's
// only when it is on); read as
// the worker's user or an operator's; and fails closed.
func TestStatusInflight(t *testing.T) {
	srv := testenv.StartRedis(t)
	admin := redisClient(t, srv)
	host, _ := os.Hostname()
	leavePending(t, admin, streamCommands, "replicator.fetch", "replicator-fetch-1", 2)
	leavePending(t, admin, streamCommands, "replicator.fetch", "replicator-fetch-2", 5) // another worker's
	leavePending(t, admin, streamCommands, "replicator.fetch", "replicator@"+host, 1)   // left by an earlier version
	leavePending(t, admin, streamReplicate, "replicator.replicate", "replicator-replicate-1", 1)
	leavePending(t, admin, persist.DefaultStream, persist.DefaultGroup, "replicator-persist-1", 3) // counted while persist is on

	dir := t.TempDir()
	envFile := func(name string, lines ...string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	asWorker := envFile("worker.env", "# the worker's", "REPLICATOR_REDIS_URL="+aclUser(t, srv, "replicator", workerGrant...),
		"REPLICATOR_CONSUMER_NAME=", `REPLICATOR_LOG_LEVEL="INFO"`)
	for _, tt := range []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{name: "as the worker's user", args: []string{"--env-file", asWorker}, want: "4\n"},
		{name: "as an operator's user", args: []string{"--env-file", asWorker, "--redis-url", aclUser(t, srv, "brokeradmin", operatorGrant...)}, want: "4\n"},
		{name: "an override names the consumer counted", args: []string{"--env-file", asWorker},
			env: []string{"REPLICATOR_CONSUMER_NAME=replicator-fetch-2"}, want: "7\n"},
		{name: "persist on counts its group", args: []string{"--env-file", asWorker},
			env: []string{"REPLICATOR_PERSIST_ENABLED=true", "REPLICATOR_PERMANENT_BUCKET=p"}, want: "7\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := runBinary(t, tt.env, append([]string{"status", "inflight"}, tt.args...)...)
			if res.code != 0 || res.stdout != tt.want {
				t.Errorf("exit %d, stdout %q, want 0 and %q:\n%s", res.code, res.stdout, tt.want, res.stderr)
			}
		})
	}

	port, _ := testenv.FreePort()
	for _, tt := range []struct{ name, file string }{
		{"Redis unreachable", envFile("down.env", "REPLICATOR_REDIS_URL=redis://127.0.0.1:"+strconv.Itoa(port)+"/0")},
		{"no env file", filepath.Join(dir, "absent.env")},
		{"a setting the worker refuses", envFile("bad.env", "REPLICATOR_REDIS_URL="+srv.URL(), "REPLICATOR_READ_BLOCK_MS=0")},
		{"a credential refused", envFile("wrongpass.env", "REPLICATOR_REDIS_URL=redis://replicator:wrong@"+srv.Addr+"/0")},
	} {
		t.Run("fails closed: "+tt.name, func(t *testing.T) {
			res := runBinary(t, nil, "status", "inflight", "--env-file", tt.file)
			if res.code == 0 || res.stdout != "" {
				t.Errorf("exit %d, stdout %q: want non-zero and nothing printed", res.code, res.stdout)
			}
			if strings.Contains(res.stderr, "pw-replicator") {
				t.Errorf("a password reached stderr: %s", res.stderr)
			}
		})
	}
}

// TestCheckRedis: the floor met, and a Redis that cannot be reached or
// refuses the credential leaves the floor unverified without blocking.
func TestCheckRedis(t *testing.T) {
	srv := testenv.StartRedis(t)
	port, _ := testenv.FreePort()
	for _, tt := range []struct {
		name   string
		env    []string
		stdout string
		stderr string
	}{
		{name: "met", env: []string{"REPLICATOR_REDIS_URL=" + aclUser(t, srv, "replicator", workerGrant...)}, stdout: "meets the 7.0 floor"},
		{name: "unreachable", env: []string{"REPLICATOR_REDIS_URL=redis://127.0.0.1:" + strconv.Itoa(port) + "/0", "REPLICATOR_REDIS_FLOOR_WAIT=1"},
			stderr: "unreachable after 1s of retrying; 7.0 floor UNVERIFIED"},
		{name: "credential refused", env: []string{"REPLICATOR_REDIS_URL=redis://replicator:wrong@" + srv.Addr + "/0", "REPLICATOR_REDIS_FLOOR_WAIT=30"},
			stderr: "could not authenticate"},
		{name: "a bad wait is named", env: []string{"REPLICATOR_REDIS_URL=" + srv.URL(), "REPLICATOR_REDIS_FLOOR_WAIT=half a minute"},
			stderr: `REPLICATOR_REDIS_FLOOR_WAIT="half a minute" is not a whole number of seconds; using the default, 30`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := runBinary(t, tt.env, "check-redis")
			if res.code != 0 || !strings.Contains(res.stdout, tt.stdout) || !strings.Contains(res.stderr, tt.stderr) {
				t.Errorf("exit %d, want 0;\nstdout %s\nstderr %s", res.code, res.stdout, res.stderr)
			}
		})
	}
	for info, want := range map[string]floorVerdict{
		"# Server\r\nredis_version:6.2.14\r\n": floorBelow,
		"redis_version:7.0.0\r\n":              floorMet,
		"redis_version:10.1\r\n":               floorMet,
		"# Server\r\n":                         floorUnknown,
	} {
		if _, got := floorOf(info); got != want {
			t.Errorf("floorOf(%q) = %v, want %v", info, got, want)
		}
	}
}
