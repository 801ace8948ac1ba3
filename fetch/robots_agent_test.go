package fetch_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/fetch/robots"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/internal/testenv/fetchenv"
)

// agentRoutes are the ways a caller's User-Agent reaches the fetcher: a
// Request's lower-cased header, Get's header as the caller spells it, and
// a content.fetch command's header (the worker's and the CLI's way). Each
// fetches one path as agent and reports whether robots.txt refused it.
var agentRoutes = []struct {
	name  string
	fetch func(t *testing.T, h *fetchenv.Harness, agent, path string) (refused bool)
}{
	{"Fetch", func(t *testing.T, h *fetchenv.Harness, agent, path string) bool {
		req := fetch.Request{URL: h.URL("origin.test", path), Headers: map[string]string{"user-agent": agent}}
		_, err := h.Fetcher.Fetch(fetchenv.Ctx(t), req, h.Sink)
		return refused(t, path, err)
	}},
	{"Get", func(t *testing.T, h *fetchenv.Harness, agent, path string) bool {
		opts := fetch.GetOptions{Backoff: fetch.None, Headers: map[string]string{"User-Agent": agent}}
		_, err := h.Fetcher.Get(fetchenv.Ctx(t), h.URL("origin.test", path), opts)
		return refused(t, path, err)
	}},
	{"content.fetch", func(t *testing.T, h *fetchenv.Harness, agent, path string) bool {
		cmd := fetchenv.Command(h.URL("origin.test", path))
		cmd.Headers = map[string]string{"User-Agent": agent}
		out := h.Handle(t, cmd)
		switch {
		case out.Label == contentfetch.Stored:
			return false
		case out.Fate == capability.Close && out.Reason == string(envelope.ReasonRobotsDisallowed):
			return true
		}
		t.Fatalf("%s: outcome %v/%q (%v), want stored or robots_disallowed", path, out.Name(), out.Reason, out.Err)
		return false
	}},
}

// refused reports whether err is robots.txt's refusal, failing t on any
// other error.
func refused(t *testing.T, path string, err error) bool {
	t.Helper()
	switch {
	case err == nil:
		return false
	case errors.Is(err, fetch.ErrRobotsDisallowed):
		return true
	}
	t.Fatalf("%s: %v, want success or ErrRobotsDisallowed", path, err)
	return false
}

// TestRobotsAgentSent: robots.txt is asked for and judged as the
// User-Agent the request sends, not the fetcher's own (which the RFC 9309
// example's "*" group would judge otherwise): for each case of
// testenv.RobotsAgentCases, by each route, the origin is asked for
// robots.txt once, then for the allowed paths and nothing else, every
// request carrying the agent.
func TestRobotsAgentSent(t *testing.T) {
	for _, route := range agentRoutes {
		for _, tc := range testenv.RobotsAgentCases {
			t.Run(route.name+"/"+tc.Name, func(t *testing.T) {
				h := robotsHarness(t, robotsSite(tc.Robots), newFakeClock(), robots.Options{}, nil)
				for _, p := range tc.Allowed {
					if route.fetch(t, h, tc.Agent, p) {
						t.Errorf("%s refused for %q", p, tc.Agent)
					}
				}
				for _, p := range tc.Disallowed {
					if !route.fetch(t, h, tc.Agent, p) {
						t.Errorf("%s not refused for %q", p, tc.Agent)
					}
				}
				want := append([]string{"/robots.txt"}, tc.Allowed...)
				var got []string
				for _, s := range h.Origin.Requests() {
					got = append(got, s.Path)
					if ua := s.Header.Values("User-Agent"); len(ua) != 1 || ua[0] != tc.Agent {
						t.Errorf("%s arrived with User-Agent %q, want %q", s.Path, ua, tc.Agent)
					}
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("origin saw %v, want %v", got, want)
				}
			})
		}
	}
}

// TestRobotsAgentsShareOneFile: requests with different User-Agents to
// one origin share its robots.txt, asked for once by the first of them,
// and each is judged by its own group; a request without one is sent, and
// judged, as the fetcher's own agent; an empty one sends none and is
// judged by the "*" group.
func TestRobotsAgentsShareOneFile(t *testing.T) {
	site := "User-agent: *\nDisallow: /star/\n\nUser-agent: FooBot\nDisallow: /foo/\n\n" +
		"User-agent: replicator-go\nDisallow: /own/\n"
	h := robotsHarness(t, robotsSite(site), newFakeClock(), robots.Options{}, nil)
	own := fetch.DefaultUserAgent()
	steps := []struct {
		agent   *string // nil: no user-agent header
		path    string
		refused bool
	}{
		{ptr("FooBot/1.0"), "/star/a", false},
		{ptr("FooBot/1.0"), "/foo/a", true},
		{ptr("BarBot"), "/foo/b", false},
		{ptr("BarBot"), "/star/b", true},
		{nil, "/star/c", false},
		{nil, "/own/c", true},
		{ptr(""), "/own/d", false},
		{ptr(""), "/star/d", true},
	}
	var want []string
	for _, s := range steps {
		req := fetch.Request{URL: h.URL("origin.test", s.path)}
		agent := own
		if s.agent != nil {
			req.Headers = map[string]string{"user-agent": *s.agent}
			agent = *s.agent
		}
		_, err := h.Fetcher.Fetch(fetchenv.Ctx(t), req, h.Sink)
		if got := refused(t, s.path, err); got != s.refused {
			t.Errorf("%s as %q: refused %v, want %v", s.path, agent, got, s.refused)
		}
		if len(want) == 0 {
			want = append(want, fmt.Sprintf("/robots.txt as %q", agent))
		}
		if !s.refused {
			want = append(want, fmt.Sprintf("%s as %q", s.path, agent))
		}
	}
	var got []string
	for _, s := range h.Origin.Requests() {
		got = append(got, fmt.Sprintf("%s as %q", s.Path, s.Header.Get("User-Agent")))
		if _, sent := s.Header["User-Agent"]; !sent && s.Path != "/own/d" {
			t.Errorf("%s arrived without a User-Agent", s.Path)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("origin saw\n%v\nwant\n%v", got, want)
	}
}

func ptr(s string) *string { return &s }

// TestHopHeaderAgentSpelling: a hand-built Request that spells the
// user-agent name several ways sends, and is judged as, one of them
// whatever the map's order: the first in byte order.
func TestHopHeaderAgentSpelling(t *testing.T) {
	h := robotsHarness(t, robotsSite("User-agent: BarBot\nDisallow: /\n"), newFakeClock(), robots.Options{}, nil)
	for range 20 {
		req := fetch.Request{URL: h.URL("origin.test", "/page"), Headers: map[string]string{"User-Agent": "BarBot", "USER-AGENT": "FooBot", "User-agent": "BazBot"}}
		if _, err := h.Fetcher.Fetch(fetchenv.Ctx(t), req, h.Sink); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range h.Origin.Requests() {
		if ua := s.Header.Values("User-Agent"); len(ua) != 1 || ua[0] != "FooBot" {
			t.Fatalf("%s arrived with User-Agent %q, want FooBot", s.Path, ua)
		}
	}
}
