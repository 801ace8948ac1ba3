// Package fetch fetches untrusted URLs safely and politely and streams the
// bodies into a content-addressed sink. It is a library: it compiles no
// Redis and no Prometheus code.
//
// A Fetcher performs one guarded, paced GET, following redirects itself.
// Fetcher.Fetch is one attempt; Fetcher.Get adds what a library caller
// wants on top (retries with jittered backoff, a conditional cache,
// document kind detection, a per-hop CheckURL). Feed discovery is package
// fetch/feed.
//
// The content.fetch command semantics built on it (the handler, its
// outcomes and facts) are package contentfetch; its consume loop is
// contentfetch/worker.
//
// # One fetch
//
// For every hop, redirects included, in this order and before anything
// reaches the origin: the URL must be http or https with a host
// (ErrNotFetchable); the fetcher's Options.CheckURL, then the request's,
// judge the URL (ErrURLRefused, never retried); the destination guard
// judges the host and every address it resolves to (guard.ErrRefused), and
// judges again, at dial time, the exact address being connected; before the
// first request only, a sink over its ceiling refuses the fetch
// (ErrStorageFull); the host's politeness window is waited for (or spent by
// Request.PacingWait). Up to Options.MaxRedirects redirects are followed
// (10, so 11 requests in all); authorization and cookie go to a hop only
// while every hop so far is on the requested URL's origin. A 2xx body
// streams into the sink while it is hashed, up to Options.MaxBodyBytes
// counted after its content codings are removed (ErrTooLarge, nothing
// stored). A 429 or 503 escalates the host's spacing.
//
// # Classification
//
// Classify is the one classification of failures, shared by Get's
// retries and the content.fetch handler (docs/taxonomy.md): Permanent with
// the contract's reason token (a refused destination, a URL that is not
// fetchable, a body over the limit, a final status that will not heal),
// worth retrying soon (5xx, 408, 429, failures on the wire, timeouts), or
// neither (a failure of this process, or one that heals only later).
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
