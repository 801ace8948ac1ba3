// Package fetch fetches untrusted URLs safely and politely and streams the
// bodies into a content-addressed sink. It is a library: it compiles no
// Redis and no Prometheus code.
//
// A Fetcher performs one guarded, paced GET, following redirects itself:
// Fetcher.Fetch is one attempt, and every hop passes the checks it lists
// before anything reaches the origin. Fetcher.Get adds retries with
// jittered backoff, a conditional Cache, kind detection and a per-hop
// CheckURL; Classify is the one classification of failures, shared with
// the content.fetch handler, which turns a permanent failure's Cause into
// the contract's reason token (docs/taxonomy.md). Feed discovery is package
// fetch/feed; the content.fetch handler is package contentfetch.
//
// No error, log line or fact detail ever carries a header value, and URLs
// are logged with their userinfo redacted.
//
// # Compression
//
// The fetcher removes content codings itself, as docs/differences.md
// details: it asks for gzip unless the request sets accept-encoding or
// range, removes gzip, deflate, br and zstd (stacked, last first, up to the
// first coding it does not know; the rest is stored as sent), and streams
// the decoded bytes into the sink, so the hash and Options.MaxBodyBytes
// count them and a compression bomb stops at the ceiling. Encoded bytes are
// bounded at twice it, a Content-Length refuses a body unread only when
// nothing is to be decoded, zstd windows over 8 MB are refused, a 206 is
// stored as sent, and a stream that does not decode is ErrContentCoding.
package fetch
