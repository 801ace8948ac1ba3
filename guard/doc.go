// Package guard decides what an untrusted command may ask for and where it
// may go: for content.fetch, the request-options sanitizer and the
// destination (address) guard; for content.replicate, the object key guard.
// It is pure — the standard library and golang.org/x/net (httpguts, idna)
// only — so an issuer can embed the same rules the worker applies.
//
// # Request options
//
// SanitizeOptions, SanitizeHeaders and SanitizeTimeout check a command's
// headers and timeout_seconds. Everything they object to is refused, never
// adjusted, with an *OptionsError that wraps ErrInvalidOptions and names the
// rule (Rule* constants) and the header as the issuer spelled it. Only two
// things change on the way through: names are lower-cased, so an issuer's
// header replaces the default of the same name rather than joining it, and
// surrounding white space is trimmed from values. Refused: hop-by-hop names,
// host, content-length, proxy-*; names that are not RFC 9110 tokens; names
// equal after lower-casing; values with a byte outside \x20-\x7e; more than
// MaxHeaders headers or MaxHeaderBytes bytes; a timeout that is not a positive
// finite number of seconds within the ceiling. Header values never appear in
// an error message.
//
// # Validator screening for issuers
//
// A refusal is terminal and decided from the command alone, so an issuer
// that replays a stored validator the worker will not send is refused on
// every cycle, forever. SendableValidator answers "would this etag or
// last_modified be sent back?" and ScreenHeaders runs the full header rules
// at mint time: drop what fails and mint an unconditional command instead.
//
// # Destination guard
//
// A Guard refuses any destination that is not globally reachable unicast:
// every IPv4 and IPv6 range of docs/security.md, Destinations, plus 3fff::/20 (documentation,
// RFC 9637). A refusal is a *RefusedError wrapping ErrRefused whose Range
// names the entry and its RFC; a resolver failure wraps ErrResolve instead,
// since DNS trouble is transient while a refusal is permanent. Options.Allow
// is the only way to loosen the guard.
//
// One address is judged in this order: zone stripped; inside Allow → passes;
// an IPv6 address carrying an IPv4 (IPv4-mapped, NAT64 64:ff9b::/96 and
// 64:ff9b:1::/48, 6to4, Teredo) → judged by that IPv4 alone; otherwise
// refused if the deny table of its family holds it.
//
// A destination is judged three times on the way to a socket: CheckURL or
// CheckHost before anything is sent (the host is first converted to the
// ASCII name net/http will dial, with the same IDNA profile, and one that
// does not convert fails with ErrInvalidHost; IP literals in every spelling
// — decimal, hex, octal, short forms, zones, fullwidth or other Unicode
// digits — are read as the address they mean; a name is resolved and every
// answer judged); DialContext, which the fetcher's
// http.Transport uses, resolves again and judges again; and Control, the
// dialer's hook, judges the exact ip:port being connected. The last check is
// what closes DNS rebinding and covers every redirect hop, whatever resolved
// the name.
//
// # Replicate object keys
//
// A content_replicate command names its destination as a rendered object
// key relative to an alias's root. CheckDestination refuses, never repairs,
// a key that is not already in its one plain form: any '%', white space at
// either end, a leading or trailing '/', a '\', a drive qualifier, an empty,
// "." or ".." segment, and in a segment anything but A-Z a-z 0-9 and
// ._-+=@,()[]~ and space (so braces, NUL, control characters and non-ASCII
// too). ObjectKey joins the alias's prefix (operator configuration, checked
// by CheckPrefix) with the destination, so no command can name a key outside
// the root. Refusals wrap ErrInvalidDestination; the worker reports them as
// invalid_destination. An issuer can run the same check before minting.
//
// # Showing a URL
//
// A command's URL may carry credentials in its userinfo. RedactURL is the
// one form in which the worker, its tools and the examples show a URL to a
// person: the userinfo, name and password, becomes "xxxxx".
//
// # What it does not claim
//
// The guard judges addresses, not intent. It does not stop a public origin
// that proxies requests onward, nor traffic to a private network that an
// operator's routing makes reachable through a public address. It judges
// only the IPv4 that NAT64, 6to4 and Teredo addresses carry in their
// standard positions; other translation schemes inside 2000::/3 pass as
// ordinary global unicast. Proxies configured on the transport are outside
// its view: the fetcher must dial origins directly. Scheme, URL syntax, port
// policy, redirects and credentials are the fetcher's rules.
package guard
