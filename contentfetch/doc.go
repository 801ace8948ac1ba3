// Package contentfetch is the content.fetch capability without its Redis
// loop: a Handler turns one decoded content_fetch command into exactly one
// Outcome, the fact to publish and the fate of the command, by fetching it
// with a fetch.Fetcher into a sink. The consume loop that runs it on a
// Redis stream is package contentfetch/worker; `replicator fetch` runs it
// on one command with no Redis at all. docs/taxonomy.md is the contract in
// full.
//
// # Outcomes
//
// Handle checks the command's request options, then fetches it (every
// refusal happens before anything reaches the origin) and maps what
// happened onto the contract's outcomes, through fetch.Classify and the
// reason token of each fetch.Cause:
//
//	refused headers or timeout_seconds      Permanent  invalid_request_options
//	not http(s), no host, an 11th redirect, Permanent  not_fetchable
//	  a host with no ASCII form
//	a refused destination (any hop: the     Permanent  destination_refused
//	  guard or fetch.Options.CheckURL)
//	a body over the size limit              Permanent  too_large
//	a URL robots.txt disallows (any hop;    Permanent  robots_disallowed
//	  fetch.Options.Robots)
//	any other final status (412 included,   Permanent  http_status (+ status_code)
//	  600 and above, a 3xx without a
//	  usable Location)
//	304                                     NotModified, fact not_modified
//	2xx                                     Stored, fact blob_available
//	5xx, 408, 429, network errors,          Transient  (no fact; retried through
//	  timeouts, a body that does not                    the stream's reclaim)
//	  decode, a failed or full store,
//	  parked for politeness, stopping, a
//	  robots.txt that cannot be had
//	a panic; a store refused for good       Unclassified (handler_error at the
//	  (sink.ErrPermanent)                               delivery ceiling)
//
// # Facts
//
// blob_available carries the final response's Content-Type as media_type
// (fetch.MediaType) and content_type_raw (Passthrough), and its validators
// as etag and last_modified (Replayable); fetch_failed is built by
// FailedFact. No fact detail ever carries a header value.
package contentfetch
