package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/replicator-go/replicator/internal/testenv"
)

// TestFetchCommandRobots: `replicator fetch --robots` asks the origin for
// robots.txt first and obeys it: a disallowed URL ends fetch_failed
// robots_disallowed with no request to it; an allowed one is stored, its
// request spaced from robots.txt's by the host's interval (1 s: a real
// wait, the subprocess having no clock to inject); a robots.txt that
// answers 404 allows everything, one that answers 503
// refuses transiently; a redirected robots.txt is followed. Without
// --robots no robots.txt is asked for.
func TestFetchCommandRobots(t *testing.T) {
	site := func(robots http.Handler) *testenv.Origin {
		return testenv.StartOrigin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/robots.txt":
				robots.ServeHTTP(w, r)
			case "/elsewhere.txt":
				fmt.Fprint(w, "User-agent: replicator-go\nDisallow: /moved-away\n")
			default:
				fmt.Fprint(w, "page")
			}
		}))
	}
	rules := testenv.Status(200, nil, "User-agent: *\nDisallow: /private\n\nUser-agent: Replicator-Go\nDisallow: /mine\n")
	tests := []struct {
		name      string
		robots    http.Handler
		path      string
		noRobots  bool
		wantCode  int
		wantOut   string
		wantPaths []string
	}{
		{name: "disallowed for our product token", robots: rules, path: "/mine/x", wantCode: 1,
			wantOut: `"reason": "robots_disallowed"`, wantPaths: []string{"/robots.txt"}},
		{name: "allowed", robots: rules, path: "/private/x", wantCode: 0,
			wantOut: `"event_type": "blob_available"`, wantPaths: []string{"/robots.txt", "/private/x"}},
		{name: "robots.txt 404", robots: testenv.Status(404, nil, "no"), path: "/mine/x", wantCode: 0,
			wantOut: `"event_type": "blob_available"`, wantPaths: []string{"/robots.txt", "/mine/x"}},
		{name: "robots.txt 503", robots: testenv.Status(503, nil, "down"), path: "/page", wantCode: 1,
			wantOut: `"outcome": "transient"`, wantPaths: []string{"/robots.txt"}},
		{name: "robots.txt redirected", robots: testenv.Redirect(http.StatusMovedPermanently, "/elsewhere.txt"), path: "/moved-away", wantCode: 1,
			wantOut: `"reason": "robots_disallowed"`, wantPaths: []string{"/robots.txt", "/elsewhere.txt"}},
		{name: "without --robots", robots: rules, path: "/mine/x", noRobots: true, wantCode: 0,
			wantOut: `"event_type": "blob_available"`, wantPaths: []string{"/mine/x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			origin := site(tt.robots)
			args := []string{"fetch", "--blob-dir", t.TempDir(), "--allow-cidr", "127.0.0.1/32"}
			if !tt.noRobots {
				args = append(args, "--robots")
			}
			r := runBinary(t, nil, append(args, origin.URL+tt.path)...)
			if r.code != tt.wantCode || !strings.Contains(r.stdout, tt.wantOut) {
				t.Fatalf("exit %d, want %d with %s\nstdout:\n%s\nstderr:\n%s", r.code, tt.wantCode, tt.wantOut, r.stdout, r.stderr)
			}
			seen := origin.Requests()
			var got []string
			for _, s := range seen {
				got = append(got, s.Path)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.wantPaths) {
				t.Fatalf("origin saw %v, want %v", got, tt.wantPaths)
			}
			// The handler stamps an arrival late on a loaded machine, so
			// the gap may fall short of the interval by a little; without
			// pacing the page would follow robots.txt within milliseconds.
			const stampLate = 50 * time.Millisecond
			if len(seen) == 2 && seen[0].Path == "/robots.txt" && seen[1].Path == tt.path {
				if gap := seen[1].At.Sub(seen[0].At); gap < time.Second-stampLate {
					t.Errorf("the page arrived %v after robots.txt, want the host's 1 s interval", gap)
				}
			}
		})
	}
}

// TestWorkerRobots: with REPLICATOR_ROBOTS unset the worker never asks an
// origin for /robots.txt, even for a URL it disallows; with obey it asks
// once, ends a disallowed command fetch_failed robots_disallowed, stores an
// allowed one and counts both on /metrics.
func TestWorkerRobots(t *testing.T) {
	origin := testenv.StartOrigin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			fmt.Fprint(w, "User-agent: *\nDisallow: /private\n")
			return
		}
		fmt.Fprint(w, "page")
	}))
	seed := func(t *testing.T, srv *testenv.Redis, path string) string {
		t.Helper()
		r := runBinary(t, []string{"REPLICATOR_REDIS_URL=" + srv.URL()}, "seed", "--production", "--info-source-id", "src-robots",
			"--watch", "--watch-timeout", "30s", origin.URL+path)
		return r.stdout
	}
	robotsRequests := func() int {
		n := 0
		for _, s := range origin.Requests() {
			if s.Path == "/robots.txt" {
				n++
			}
		}
		return n
	}
	for _, tt := range []struct {
		name, env  string
		private    string // the progress line's outcome for /private/doc
		wantRobots int
	}{
		{name: "unset", private: "blob_available", wantRobots: 0},
		{name: "obey", env: "REPLICATOR_ROBOTS=obey", private: "fetch_failed command_id=", wantRobots: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := testenv.StartRedis(t)
			addr := metricsAddr(t)
			env := workerEnv(srv, t.TempDir(), "REPLICATOR_METRICS_ADDR="+addr)
			if tt.env != "" {
				env = append(env, tt.env)
			}
			before := robotsRequests()
			w := startBinary(t, env, "worker")
			testenv.Eventually(t, 30*time.Second, "/healthz to answer 200", func() bool {
				if w.exited() {
					t.Fatalf("worker exited early with %d", w.code)
				}
				code, _ := httpGet(t, "http://"+addr+"/healthz")
				return code == http.StatusOK
			})
			out := seed(t, srv, "/private/doc")
			if !strings.Contains(out, tt.private) {
				t.Errorf("/private/doc: seed printed %q, want %s", out, tt.private)
			}
			if tt.name == "obey" && !strings.Contains(out, "reason=robots_disallowed") {
				t.Errorf("/private/doc: seed printed %q, want reason=robots_disallowed", out)
			}
			if out := seed(t, srv, "/public/doc"); !strings.Contains(out, "blob_available") {
				t.Errorf("/public/doc: seed printed %q, want blob_available", out)
			}
			if got := robotsRequests() - before; got != tt.wantRobots {
				t.Errorf("the origin was asked for /robots.txt %d times, want %d", got, tt.wantRobots)
			}
			_, metrics := httpGet(t, "http://"+addr+"/metrics")
			for _, series := range []string{
				`replicator_robots_fetches_total{result="parsed"} 1`,
				`replicator_robots_refusals_total{reason="disallowed"} 1`,
			} {
				if got := strings.Contains(metrics, series); got != (tt.name == "obey") {
					t.Errorf("/metrics has %s: %v", series, got)
				}
			}
			if code := w.stop(t, 30*time.Second); code != 0 {
				t.Errorf("worker exited %d after SIGTERM, want 0", code)
			}
		})
	}
}
