package fetch_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"

	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/fetch/robots"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/policy"
)

// An http.Client for a library that takes one: every request it sends,
// each redirect hop included, is guarded, paced per host and bounded. Here
// the origin redirects to the cloud metadata address, and the hop is
// refused before anything is sent to it.
func ExampleNewClient() {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
			return
		}
		fmt.Fprint(w, "hello")
	}))
	defer origin.Close()

	c := fetch.NewClient(fetch.Options{
		// The origin is on loopback, which the guard refuses unless allowed.
		Guard:        guard.New(guard.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}),
		Pacer:        policy.NewLocal(policy.LocalOptions{}), // 1 s between requests to a host
		MaxBodyBytes: 1 << 20,
		Logger:       slog.New(slog.DiscardHandler),
	})
	defer c.CloseIdleConnections()

	resp, err := c.Get(origin.URL + "/")
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body))

	_, err = c.Get(origin.URL + "/moved")
	fmt.Println("refused:", errors.Is(err, guard.ErrRefused))
	fmt.Println("cause:", fetch.Classify(err).Cause)
	// Output:
	// 200 hello
	// refused: true
	// cause: refused
}

// A Transport goes where a library wants an http.RoundTripper (a
// crawler's WithTransport, a retrying client's HTTPClient). With Robots
// set, a URL its origin's robots.txt disallows for the request's own
// User-Agent fails with ErrRobotsDisallowed, unsent.
func ExampleNewTransport() {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			fmt.Fprint(w, "User-agent: examplebot\nDisallow: /drafts/\n")
			return
		}
		fmt.Fprint(w, "page")
	}))
	defer origin.Close()

	rt := fetch.NewTransport(fetch.Options{
		Guard:  guard.New(guard.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}),
		Pacer:  policy.NewLocal(policy.LocalOptions{DefaultInterval: policy.None}),
		Robots: robots.New(robots.Options{}),
		Logger: slog.New(slog.DiscardHandler),
	})
	defer rt.CloseIdleConnections()
	c := &http.Client{Transport: rt}

	for _, path := range []string{"/posts/1", "/drafts/2"} {
		req, _ := http.NewRequest(http.MethodGet, origin.URL+path, nil)
		req.Header.Set("User-Agent", "examplebot/1.0")
		resp, err := c.Do(req)
		if err != nil {
			fmt.Println(path, "disallowed:", errors.Is(err, fetch.ErrRobotsDisallowed))
			continue
		}
		resp.Body.Close()
		fmt.Println(path, resp.StatusCode)
	}
	// Output:
	// /posts/1 200
	// /drafts/2 disallowed: true
}

// Behind an egress proxy: HTTP_PROXY, HTTPS_PROXY and NO_PROXY choose the
// proxy, which must lie in the prefixes given; the guard still judges
// every target before the proxy is asked, and an https target is
// tunnelled to the address it judged.
func ExampleEnvironmentProxy() {
	os.Setenv("HTTPS_PROXY", "http://10.0.0.8:3128")
	os.Setenv("NO_PROXY", "direct.example")
	defer os.Unsetenv("HTTPS_PROXY")
	defer os.Unsetenv("NO_PROXY")

	p := fetch.EnvironmentProxy([]netip.Prefix{netip.MustParsePrefix("10.0.0.8/32")})
	for _, target := range []string{"https://example.com/", "https://direct.example/"} {
		u, _ := url.Parse(target)
		proxy, _ := p.For(u)
		fmt.Println(target, "via", proxy)
	}
	c := fetch.NewClient(fetch.Options{Proxy: p})
	defer c.CloseIdleConnections()
	// Output:
	// https://example.com/ via http://10.0.0.8:3128
	// https://direct.example/ via <nil>
}
