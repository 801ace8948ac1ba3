package fetch

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/replicator-go/replicator/guard"
)

// parseTarget accepts an absolute http or https URL with a host.
func parseTarget(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %s does not parse", ErrNotFetchable, guard.RedactURL(raw))
	}
	return u, Fetchable(u)
}

// Fetchable returns nil for a URL a Fetcher fetches (http or https, with a
// host), otherwise an error wrapping ErrNotFetchable.
func Fetchable(u *url.URL) error {
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	default:
		return fmt.Errorf("%w: scheme %q is not http or https", ErrNotFetchable, u.Scheme)
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return fmt.Errorf("%w: %s has no host", ErrNotFetchable, shown(u))
	}
	return nil
}

type redirectNext struct {
	url *url.URL
	err error
}

// redirectTarget reports whether resp is a redirect to follow. A 3xx
// without a usable Location (absent, empty or unparseable) is not one: it
// is classified by its status like any other final response. A Location
// that parses but is not an http(s) URL with a host is a redirect to
// something unfetchable.
func (f *Fetcher) redirectTarget(current *url.URL, resp *http.Response) (redirectNext, bool) {
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
	default:
		return redirectNext{}, false
	}
	loc := strings.TrimSpace(resp.Header.Get("Location"))
	if loc == "" {
		return redirectNext{}, false
	}
	next, err := current.Parse(loc)
	if err != nil {
		return redirectNext{}, false
	}
	next.Fragment, next.RawFragment = "", ""
	if err := Fetchable(next); err != nil {
		return redirectNext{err: fmt.Errorf("redirect from %s: %w", shown(current), err)}, true
	}
	return redirectNext{url: next}, true
}

// originOf is scheme://host:port with the default port made explicit, so
// http://a/ and http://a:80/ are one origin.
func originOf(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// SameOrigin reports whether a and b share an origin, the credentials'
// bound (docs/security.md): scheme, host and port, case-insensitive, no
// port meaning the scheme's default.
func SameOrigin(a, b *url.URL) bool { return originOf(a) == originOf(b) }

// WithoutCredentials returns a copy of headers without authorization,
// proxy-authorization and cookie, in any spelling: what may leave the
// credentials' origin.
func WithoutCredentials(headers map[string]string) map[string]string {
	out := make(map[string]string, len(headers))
	for name, value := range headers {
		if !credentialHeaders[strings.ToLower(name)] {
			out[name] = value
		}
	}
	return out
}

// credentialHeaders go to a hop only while the chain has stayed on the
// request URL's origin. proxy-authorization cannot reach here (the sanitizer
// refuses every proxy-* name) but is listed so a caller building a Request
// by hand cannot leak one either.
var credentialHeaders = map[string]bool{
	"authorization":       true,
	"proxy-authorization": true,
	"cookie":              true,
}

// hopHeader builds one hop's request header: the defaults (user-agent, and
// accept-encoding gzip), then the request's headers over them, one field
// line per name. A request that sets range is not offered gzip: a byte range
// of an encoded representation cannot be decoded on its own.
func (f *Fetcher) hopHeader(headers map[string]string, onOrigin bool) http.Header {
	h := make(http.Header, len(headers)+2)
	h.Set("User-Agent", f.agentFor(headers))
	h.Set("Accept-Encoding", "gzip")
	for name := range headers {
		if strings.EqualFold(name, "range") {
			h.Del("Accept-Encoding")
		}
	}
	for name, value := range headers {
		if credentialHeaders[strings.ToLower(name)] && !onOrigin || strings.EqualFold(name, "user-agent") {
			continue
		}
		h.Set(name, value)
	}
	return h
}

// agentFor is the User-Agent a request with headers sends: its own when it
// has one, else the fetcher's. robots.txt is asked for and judged with the
// same one, so the group obeyed is the agent on the wire
// (docs/politeness.md, robots.txt). Names are lower-cased by contract; a
// hand-built map with several spellings of the name gives the first in
// byte order, so the choice never depends on map order.
func (f *Fetcher) agentFor(headers map[string]string) string {
	if v, ok := headers["user-agent"]; ok {
		return v
	}
	agent, chosen := f.userAgent, ""
	for name, value := range headers {
		if strings.EqualFold(name, "user-agent") && (chosen == "" || name < chosen) {
			agent, chosen = value, name
		}
	}
	return agent
}

// shown is u as logs and errors show it, its userinfo hidden
// (guard.RedactURL).
func shown(u *url.URL) string { return guard.RedactURL(u.String()) }
