// Package feed finds and fetches the feed a web page advertises, through a
// fetch.Fetcher. Like fetch, it compiles no Redis and no Prometheus code.
//
// Get fetches a page with Fetcher.Get. A page that is already a feed (any
// kind but html) is the answer. Otherwise its first Options.MaxPageBytes
// (1 MiB) are tokenized as they stream back from the sink for
// <link rel="alternate"> elements whose type is a feed's (Atom, RSS, RDF,
// JSON Feed, NWF); hrefs resolve against the first <base href>, or the
// page's final URL; duplicates and anything but http(s) are dropped, and at
// most MaxLinks are kept. Up to Options.MaxCandidates (3) links are tried in
// Options.Prefer's order (atom, rss, jsonfeed, rdf, nwf), each a full Get,
// until one is a feed. Credentials go to a link only when the page's fetch
// never left the origin asked for and the link is on it too. No link:
// ErrNoLink; every link failing: an *Error naming each link and its error.
package feed
