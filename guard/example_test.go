package guard_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"time"

	"github.com/replicator-go/replicator/guard"
)

// An issuer replaying validators from an earlier blob_available fact screens
// each one before minting: an unsendable value is dropped, and the command
// goes out unconditional (one full fetch) instead of being refused forever.
func ExampleSendableValidator() {
	stored := map[string]string{
		// Published before the worker screened validators: obs-text.
		"If-None-Match":     "\"caf\xe9\"",
		"If-Modified-Since": "Wed, 21 Oct 2015 07:28:00 GMT",
	}
	headers := map[string]string{"Accept": "text/html"}
	for _, name := range []string{"If-None-Match", "If-Modified-Since"} {
		if v, ok := stored[name]; ok && guard.SendableValidator(v) {
			headers[name] = v
		} else {
			fmt.Println("dropping", name)
		}
	}
	fmt.Println(guard.ScreenHeaders(headers))
	// Output:
	// dropping If-None-Match
	// <nil>
}

// ScreenHeaders runs the worker's full header rules at mint time. On a
// refusal the issuer drops its stored validators and mints without them;
// the worker would refuse the command with invalid_request_options.
func ExampleScreenHeaders() {
	headers := map[string]string{
		"Accept":        "text/html",
		"If-None-Match": "\"v1\"\r\nX-Injected: yes",
	}
	err := guard.ScreenHeaders(headers)
	var oe *guard.OptionsError
	if errors.As(err, &oe) {
		fmt.Println("refused:", oe.Rule, oe.Header)
		if oe.Header == "If-None-Match" || oe.Header == "If-Modified-Since" {
			delete(headers, oe.Header)
		}
	}
	fmt.Println(guard.ScreenHeaders(headers))
	// Output:
	// refused: invalid-value If-None-Match
	// <nil>
}

func ExampleSanitizeOptions() {
	timeout := 12.5
	opts, err := guard.SanitizeOptions(map[string]string{"User-Agent": " watcher/1.0 "}, &timeout, 0)
	fmt.Println(opts.Headers, opts.Timeout, err)

	_, err = guard.SanitizeOptions(map[string]string{"Host": "elsewhere.example"}, nil, 0)
	fmt.Println(errors.Is(err, guard.ErrInvalidOptions), err)
	// Output:
	// map[user-agent:watcher/1.0] 12.5s <nil>
	// true guard: invalid request options: header "Host": not a header the fetcher sends on an issuer's behalf (hop-by-hop, derived, or proxy-*)
}

// answers is a guard.Resolver with fixed answers, standing in for DNS.
type answers map[string]netip.Addr

func (a answers) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if addr, ok := a[host]; ok {
		return []netip.Addr{addr}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func ExampleGuard_CheckURL() {
	g := guard.New(guard.Options{Resolver: answers{
		"origin.example":   netip.MustParseAddr("93.184.215.14"),
		"metadata.example": netip.MustParseAddr("169.254.169.254"),
	}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, raw := range []string{
		"https://origin.example/page",
		"http://metadata.example/latest/meta-data/",
		"http://2130706433/",
		"http://[::ffff:7f00:1]/",
	} {
		u, _ := url.Parse(raw)
		fmt.Println(g.CheckURL(ctx, u))
	}
	// Output:
	// <nil>
	// guard: destination refused: "metadata.example" (169.254.169.254) is in 169.254.0.0/16 link-local (RFC 3927)
	// guard: destination refused: "2130706433" (127.0.0.1) is in 127.0.0.0/8 loopback (RFC 1122)
	// guard: destination refused: "::ffff:7f00:1" (::ffff:127.0.0.1) is in 127.0.0.0/8 loopback (RFC 1122), carried by IPv4-mapped ::ffff:0:0/96 (RFC 4291)
}

func ExampleParseIPLiteral() {
	for _, host := range []string{"0x7f.1", "017700000001", "[fe80::1%25eth0]", "example.com"} {
		a, ok := guard.ParseIPLiteral(host)
		fmt.Println(a, ok)
	}
	// Output:
	// 127.0.0.1 true
	// 127.0.0.1 true
	// fe80::1%eth0 true
	// invalid IP false
}

// The guard alone, in a transport of your own: every connection is
// judged on the address actually dialed, so neither a name that resolves
// to a private address nor a redirect there is reached. It brings no
// pacing, robots.txt or size bound (fetch.NewClient adds those).
func ExampleGuard_DialContext() {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "internal")
	}))
	defer origin.Close()

	g := guard.New(guard.Options{}) // public unicast only
	c := &http.Client{Transport: &http.Transport{
		Proxy:       nil, // a proxy would dial out of the guard's sight
		DialContext: g.DialContext,
	}}
	_, err := c.Get(origin.URL) // 127.0.0.1
	fmt.Println(errors.Is(err, guard.ErrRefused))
	// Output: true
}

func ExampleRedactURL() {
	fmt.Println(guard.RedactURL("https://reader:s3cret@origin.example/feed.xml"))
	fmt.Println(guard.RedactURL("https://origin.example/feed.xml"))
	// Output:
	// https://xxxxx@origin.example/feed.xml
	// https://origin.example/feed.xml
}
