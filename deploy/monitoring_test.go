package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replicator-go/replicator/internal/testenv"
)

// binary is the replicator binary, built once for the package's tests.
var binary string

func TestMain(m *testing.M) { testenv.MainWithBinary(m, "../cmd/replicator", &binary) }

// tool finds a Prometheus program on PATH. Debian's prometheus package
// installs both promtool and prometheus; .ci/run installs it when missing.
// A missing tool fails the test: it is never skipped.
func tool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not on PATH: install Debian's prometheus package (apt-get install prometheus), as .ci/run does", name)
	}
	return path
}

// TestAlertingRules checks the rules and runs their unit tests with
// promtool, as .ci/run does.
func TestAlertingRules(t *testing.T) {
	promtool := tool(t, "promtool")
	rules, _ := filepath.Glob("prometheus/*_test.yml")
	if len(rules) == 0 {
		t.Fatal("no rule tests in deploy/prometheus")
	}
	for _, args := range [][]string{
		{"check", "rules", "prometheus/replicator-rules.yml"},
		append([]string{"test", "rules"}, rules...),
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// dashboard is what the test reads of the Grafana dashboard.
type dashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// TestDashboardQueriesReturnSeries runs a worker under a small load (a Redis
// outage, fetches that store and one that is dead-lettered, a replicate
// command refused), scrapes it with a real Prometheus on loopback, and
// checks that every query of every dashboard panel returns at least one
// series, and that every metric the alerting rules name is exported.
func TestDashboardQueriesReturnSeries(t *testing.T) {
	prometheus := tool(t, "prometheus")
	var d dashboard
	raw, err := os.ReadFile("grafana/replicator-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &d); err != nil || len(d.Panels) == 0 {
		t.Fatalf("dashboard: %v (%d panels)", err, len(d.Panels))
	}

	mux := http.NewServeMux()
	mux.HandleFunc("/ok/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "stored\n") })
	origin := testenv.StartOrigin(t, mux)
	srv := testenv.StartRedis(t)
	metrics := freeAddr(t)
	start(t, binary, "worker",
		"REPLICATOR_REDIS_URL="+srv.URL(),
		"REPLICATOR_ALLOW_CIDRS=127.0.0.0/8",
		"REPLICATOR_BLOB_DIR="+t.TempDir(),
		"REPLICATOR_BLOB_MAX_TOTAL_BYTES=1000000000",
		"REPLICATOR_READ_BLOCK_MS=1000",
		"REPLICATOR_MIN_HOST_INTERVAL_SECONDS=0.01",
		"REPLICATOR_ERROR_BACKOFF_BASE_SECONDS=0.2",
		"REPLICATOR_ERROR_BACKOFF_MAX_SECONDS=1",
		"REPLICATOR_METRICS_ADDR="+metrics,
	)
	healthy := func() bool {
		code, _ := get(t, "http://"+metrics+"/healthz")
		return code == http.StatusOK
	}
	testenv.Eventually(t, 30*time.Second, "the worker's /healthz", healthy)

	// A short Redis outage: the broker failures the dashboard shows.
	srv.Stop()
	testenv.Eventually(t, 30*time.Second, "a broker failure counted", func() bool {
		_, body := get(t, "http://"+metrics+"/metrics")
		return strings.Contains(body, "replicator_broker_failures_total{")
	})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the worker's /healthz after the outage", healthy)

	// Two fetches stored, one dead-lettered (404), one replicate refused.
	seed := exec.Command(binary, "seed", "--redis-url", srv.URL(), "--production", "--info-source-id", "ops",
		"--watch", "--watch-timeout", "60s", origin.URL+"/ok/1", origin.URL+"/ok/2", origin.URL+"/missing")
	seed.Env = baseEnv()
	if out, _ := seed.CombinedOutput(); !bytes.Contains(out, []byte("[3/3]")) {
		t.Fatalf("seed did not see three outcomes:\n%s", out)
	}
	repl := exec.Command(binary, "seed", "replicate", "--redis-url", srv.URL(), "--production", "--info-source-id", "ops",
		"--alias", "nowhere", "--destination", "a/b", "--watch", "--watch-timeout", "60s", "file:///nowhere/blob.bin")
	repl.Env = baseEnv()
	if out, _ := repl.CombinedOutput(); !bytes.Contains(out, []byte("[1/1]")) {
		t.Fatalf("seed replicate did not see its outcome:\n%s", out)
	}

	api := startPrometheus(t, prometheus, metrics)
	var missing []string
	testenv.Eventually(t, 90*time.Second, "every dashboard query to return a series", func() bool {
		missing = missing[:0]
		for _, p := range d.Panels {
			for _, target := range p.Targets {
				expr := strings.ReplaceAll(target.Expr, "$__rate_interval", "1m")
				if n := series(t, api, expr); n == 0 {
					missing = append(missing, fmt.Sprintf("%s: %s", p.Title, expr))
				}
			}
		}
		return len(missing) == 0
	})
	if t.Failed() {
		t.Logf("queries with no series:\n%s", strings.Join(missing, "\n"))
	}

	// Every metric the rules name is one the worker exports.
	rules, _ := os.ReadFile("prometheus/replicator-rules.yml")
	_, exported := get(t, "http://"+metrics+"/metrics")
	for _, name := range slices.Compact(slices.Sorted(slices.Values(regexp.MustCompile(`replicator_[a-z_]+`).FindAllString(string(rules), -1)))) {
		if !strings.Contains(exported, "\n"+name) && !strings.Contains(exported, "# TYPE "+name+" ") {
			t.Errorf("the rules name %s, which the worker does not export", name)
		}
	}
}

// startPrometheus runs prometheus on a free loopback port with a temporary
// configuration and storage, scraping target every second, and returns its
// base URL once it is ready.
func startPrometheus(t *testing.T, bin, target string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: replicator
    static_configs:
      - targets: [%q]
`, target)), 0o644); err != nil {
		t.Fatal(err)
	}
	listen := freeAddr(t)
	start(t, bin, "", "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+listen)
	base := "http://" + listen
	testenv.Eventually(t, 60*time.Second, "prometheus to be ready", func() bool {
		code, _ := get(t, base+"/-/ready")
		return code == http.StatusOK
	})
	return base
}

// series runs an instant query and returns how many series it answered.
func series(t *testing.T, api, expr string) int {
	t.Helper()
	code, body := get(t, api+"/api/v1/query?query="+url.QueryEscape(expr))
	if code != http.StatusOK {
		t.Fatalf("query %s: HTTP %d: %s", expr, code, body)
	}
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || r.Status != "success" {
		t.Fatalf("query %s: %v %s", expr, err, body)
	}
	return len(r.Data.Result)
}

// start runs bin in the background (a subcommand first unless empty),
// with env added to this process's environment less its REPLICATOR_*
// variables, and kills it when the test ends.
func start(t *testing.T, bin, subcommand string, args ...string) *os.Process {
	t.Helper()
	var env, argv []string
	for _, a := range args {
		if strings.HasPrefix(a, "REPLICATOR_") {
			env = append(env, a)
		} else {
			argv = append(argv, a)
		}
	}
	if subcommand != "" {
		argv = append([]string{subcommand}, argv...)
	}
	cmd := exec.Command(bin, argv...)
	cmd.Env = append(baseEnv(), env...)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("%s %s output (tail):\n%s", filepath.Base(bin), subcommand, tailOf(logs.String(), 3000))
		}
	})
	return cmd.Process
}

func baseEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REPLICATOR_") {
			out = append(out, kv)
		}
	}
	return out
}

func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(port)
}

// get returns a GET's status and body; status 0 when nothing answered.
func get(t *testing.T, u string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func tailOf(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// TestEveryAlertHasARunbook checks that deploy/README.md has a runbook
// section for every alert, and each alert's runbook annotation points at it.
func TestEveryAlertHasARunbook(t *testing.T) {
	rules, err := os.ReadFile("prometheus/replicator-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	alerts := regexp.MustCompile(`(?m)^\s*- alert: (\w+)$`).FindAllStringSubmatch(string(rules), -1)
	runbooks := regexp.MustCompile(`runbook: "deploy/README.md#(\w+)"`).FindAllStringSubmatch(string(rules), -1)
	if len(alerts) == 0 || len(alerts) != len(runbooks) {
		t.Fatalf("%d alerts, %d runbook annotations", len(alerts), len(runbooks))
	}
	for i, a := range alerts {
		if !strings.Contains(string(readme), "\n### "+a[1]+"\n") {
			t.Errorf("deploy/README.md has no runbook section for %s", a[1])
		}
		if runbooks[i][1] != strings.ToLower(a[1]) {
			t.Errorf("%s's runbook annotation points at #%s", a[1], runbooks[i][1])
		}
	}
}
