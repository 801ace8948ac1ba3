// Package fetch fetches untrusted URLs safely and politely and streams the
// bodies into a content-addressed sink. It is a library: it compiles no
// Redis and no Prometheus code. Two layers, each usable on its own:
//
//   - Fetcher performs one guarded, paced GET, following redirects itself.
//     Fetcher.Fetch is one attempt; Fetcher.Get adds what a library caller
//     wants on top (retries with jittered backoff, a conditional cache,
//     document kind detection, a per-hop CheckURL); Fetcher.GetFeed finds
//     and fetches the feed a page advertises.
//   - Handler turns one decoded content_fetch command into exactly one
//     Outcome: the fact to publish and the fate of the command.
//
// The consume loop that runs the Handler on a Redis stream is package
// fetch/worker.
//
// # One fetch
//
// For every hop, redirects included, in this order and before anything
// reaches the origin: the URL must be http or https with a host
// (ErrNotFetchable); the fetcher's Options.CheckURL, then the request's,
// judge the URL (ErrURLRefused, never retried); the destination guard judges the host and every
// address it resolves to (guard.ErrRefused), and judges again, at dial time,
// the exact address being connected; before the first request only, a sink
// with no room (sink.Room) parks the fetch (ErrParked with ErrStorageFull);
// the host's politeness window is waited for (a wait longer than
// Options.MaxWait parks the command: ErrParked). Up to Options.MaxRedirects
// redirects are followed (10, so 11 requests in all); authorization and
// cookie go to a hop only while every hop so far is on the requested URL's
// origin. A 2xx body streams into the sink while it is hashed, up to
// Options.MaxBodyBytes counted after its content codings are removed
// (ErrTooLarge, nothing stored); its declared length is given to the sink,
// which may refuse it unread for want of room (parked as above). A 429 or
// 503 escalates the host's spacing.
//
// # Classification
//
// Classify is the one classification of failures, shared by the Handler,
// the worker and Get's retries (docs/taxonomy.md). The Handler maps what
// happened onto the contract's outcomes:
//
//	refused headers or timeout_seconds      Permanent  invalid_request_options
//	not http(s), no host, an 11th redirect, Permanent  not_fetchable
//	  a host with no ASCII form
//	a refused destination (any hop: the     Permanent  destination_refused
//	  guard or Options.CheckURL)
//	a body over the size limit              Permanent  too_large
//	any other final status (412 included,   Permanent  http_status (+ status_code)
//	  600 and above, a 3xx without a
//	  usable Location)
//	304                                     NotModified, fact not_modified
//	2xx                                     Stored, fact blob_available
//	5xx, 408, 429, network errors,          Transient  (no fact; retried through
//	  timeouts, a body that does not                    the stream's reclaim, or
//	  decode, a failed store, parked                    held until due when
//	  (politeness, or no room to store)                 parked)
//	a panic; a store refused for good       Unclassified (handler_error at the
//	  (sink.ErrPermanent)                               delivery ceiling)
//
// # Feed discovery
//
// Fetcher.GetFeed fetches a page with Get. A page that is already a feed
// (any kind but html) is the answer. Otherwise its first
// FeedOptions.MaxPageBytes (1 MiB) are tokenized as they stream back from
// the sink for <link rel="alternate"> elements whose type is a feed's
// (Atom, RSS, RDF, JSON Feed, NWF); hrefs resolve against the first
// <base href>, or the page's final URL; duplicates and anything but
// http(s) are dropped, and at most MaxFeedLinks are kept. Up to
// FeedOptions.MaxCandidates (3) links are tried in FeedOptions.Prefer's
// order (atom, rss, jsonfeed, rdf, nwf), each a full Get, until one is a
// feed. Credentials go to a link only when the page asked for, the page
// found and the link share one origin. No link: ErrNoFeed; every link
// failing: a *FeedError naming each link and its error.
//
// # Compression
//
// The fetcher removes content codings itself: unless the request sets
// accept-encoding (or range) it asks for gzip, and whatever it asked for it
// removes gzip, deflate (zlib-wrapped or raw), br and zstd, stacks of them
// in reverse order of Content-Encoding, stopping at the first coding it does
// not know (the rest is stored as sent; identity is nothing). The bytes
// stored, hashed and counted against Options.MaxBodyBytes are the decoded
// ones, so a compression bomb stops at the ceiling; decoders stream, and
// zstd windows over 8 MB are refused. A declared Content-Length refuses a
// body unread only when nothing is to be decoded; encoded bytes are bounded
// at twice the ceiling. A 206 is stored as sent: a range of an encoded
// representation cannot be decoded on its own. A stream that does not
// decode is ErrContentCoding, transient.
//
// # Errors and logs
//
// Errors wrap the package's sentinels (and guard's and sink's) with detail;
// check them with errors.Is and errors.As, and use Retryable to decide
// whether another attempt may help. No error, log line or fact detail ever
// carries a header value, and URLs are logged with their userinfo redacted.
package fetch
