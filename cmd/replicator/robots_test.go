package main

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
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

// TestFetchCommandRobotsAgent: `replicator fetch --robots -H 'User-Agent:
// …'` asks for robots.txt as that agent and obeys that agent's group, for
// every case of testenv.RobotsAgentCases (the RFC 9309 5.1 example and
// Google's user-agent cases): an allowed path is stored, a disallowed one
// ends robots_disallowed, and the origin's log holds robots.txt and the
// allowed path only, each request carrying the agent. Each path is one
// run of the binary against an origin of its own; the runs go eight at a
// time, since each spends most of its second waiting for the host's
// interval.
func TestFetchCommandRobotsAgent(t *testing.T) {
	type run struct {
		tc      testenv.RobotsAgentCase
		path    string
		allowed bool
		origin  *testenv.Origin
		out     result
		err     error
	}
	var runs []*run
	for _, tc := range testenv.RobotsAgentCases {
		for _, p := range tc.Allowed {
			runs = append(runs, &run{tc: tc, path: p, allowed: true})
		}
		for _, p := range tc.Disallowed {
			runs = append(runs, &run{tc: tc, path: p})
		}
	}
	slots := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, r := range runs {
		r.origin = testenv.StartOrigin(t, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.URL.Path == "/robots.txt" {
				fmt.Fprint(w, r.tc.Robots)
				return
			}
			fmt.Fprint(w, "page")
		}))
		args := []string{"fetch", "--blob-dir", t.TempDir(), "--allow-cidr", "127.0.0.1/32", "--robots",
			"-H", "User-Agent: " + r.tc.Agent, r.origin.URL + r.path}
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			r.out, r.err = execBinary(t.Context(), nil, args...)
		})
	}
	wg.Wait()
	for _, r := range runs {
		t.Run(r.tc.Name+" "+r.path, func(t *testing.T) {
			if r.err != nil {
				t.Fatal(r.err)
			}
			wantCode, wantOut, wantPaths := 1, `"reason": "robots_disallowed"`, []string{"/robots.txt"}
			if r.allowed {
				wantCode, wantOut, wantPaths = 0, `"event_type": "blob_available"`, []string{"/robots.txt", r.path}
			}
			if r.out.code != wantCode || !strings.Contains(r.out.stdout, wantOut) {
				t.Errorf("%s as %q: exit %d, want %d with %s\nstdout:\n%s\nstderr:\n%s", r.path, r.tc.Agent, r.out.code, wantCode, wantOut, r.out.stdout, r.out.stderr)
			}
			var got []string
			for _, s := range r.origin.Requests() {
				got = append(got, s.Path)
				if ua := s.Header.Values("User-Agent"); len(ua) != 1 || ua[0] != r.tc.Agent {
					t.Errorf("%s arrived with User-Agent %q, want %q", s.Path, ua, r.tc.Agent)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(wantPaths) {
				t.Errorf("origin saw %v, want %v", got, wantPaths)
			}
		})
	}
}

// TestWorkerRobots: with REPLICATOR_ROBOTS unset the worker never asks an
// origin for /robots.txt, even for a URL it disallows; with obey it asks
// once, ends a disallowed command fetch_failed robots_disallowed, stores an
// allowed one and counts both on /metrics. A command sending its own
// User-Agent is judged by that agent's group of the same file: FooBot may
// fetch /private, not /foo-only, and the origin never sees /foo-only.
func TestWorkerRobots(t *testing.T) {
	origin := testenv.StartOrigin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			fmt.Fprint(w, "User-agent: *\nDisallow: /private\n\nUser-agent: FooBot\nDisallow: /foo-only\n")
			return
		}
		fmt.Fprint(w, "page")
	}))
	seed := func(t *testing.T, srv *testenv.Redis, path string, header ...string) string {
		t.Helper()
		args := []string{"seed", "--production", "--info-source-id", "src-robots", "--watch", "--watch-timeout", "30s"}
		for _, h := range header {
			args = append(args, "-H", h)
		}
		r := runBinary(t, []string{"REPLICATOR_REDIS_URL=" + srv.URL()}, append(args, origin.URL+path)...)
		return r.stdout
	}
	requested := func(path string) bool {
		for _, s := range origin.Requests() {
			if s.Path == path {
				return true
			}
		}
		return false
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
			if out := seed(t, srv, "/private/foo", "User-Agent: FooBot/1.0"); !strings.Contains(out, "blob_available") {
				t.Errorf("/private/foo as FooBot: seed printed %q, want blob_available", out)
			}
			out = seed(t, srv, "/foo-only/"+tt.name, "User-Agent: FooBot/1.0")
			if obey := tt.name == "obey"; strings.Contains(out, "reason=robots_disallowed") != obey || requested("/foo-only/"+tt.name) == obey {
				t.Errorf("/foo-only/%s as FooBot: seed printed %q, origin asked for it: %v", tt.name, out, requested("/foo-only/"+tt.name))
			}
			if got := robotsRequests() - before; got != tt.wantRobots {
				t.Errorf("the origin was asked for /robots.txt %d times, want %d", got, tt.wantRobots)
			}
			_, metrics := httpGet(t, "http://"+addr+"/metrics")
			for _, series := range []string{
				`replicator_robots_fetches_total{result="parsed"} 1`,
				`replicator_robots_refusals_total{reason="disallowed"} 2`,
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
