// Package robots reads robots.txt as RFC 9309 defines it and remembers what
// each origin's says: the matcher (Parse, Rules.Allowed, Rules.CrawlDelay)
// and the per-origin Cache a fetch.Fetcher consults before every hop when
// fetch.Options.Robots is set (docs/politeness.md, robots.txt).
//
// # Matching
//
// The group is chosen by the product token of the User-Agent sent
// (ProductToken), compared case-insensitively with each user-agent line's
// leading run of letters, '_' and '-'; every group naming it is combined,
// else every "*" group, else nothing applies. Among the group's allow and
// disallow rules the longest pattern that matches wins, allow winning a tie;
// "*" matches any run of octets and a final "$" the end of the path. Paths
// and patterns are compared percent-encoded: octets outside ASCII are
// encoded, %xx of an unreserved character is decoded and other %xx are
// upper-cased, and a literal "*" or "$" in a URL compares as %2A or %24.
// /robots.txt itself is always allowed. Lines end with LF, CR or CRLF; a
// UTF-8 byte order mark (or part of one) before the first line is skipped;
// a line without a colon is read when it is a key and a value separated by
// white space; common misspellings of the keys are accepted.
//
// # Fetching
//
// A Cache holds one parsed robots.txt per origin (scheme://host:port),
// asked for as the first request's User-Agent and answering every agent
// after it, for at most MaxTTL, less when the answer's Cache-Control or
// Expires says less, but at least MinTTL. A 2xx body is parsed (at most
// MaxBytes of it); a 4xx other than 429, or a redirect chain that cannot be
// followed, allows everything; a 429, a 5xx or an unreachable host
// disallows everything until a back-off (MinBackoff doubling to
// MaxBackoff) has passed, then robots.txt is asked for again. A group's
// Crawl-delay, capped at Options.MaxCrawlDelay, becomes its host's pacing
// floor through Cache.Floors when it is larger than the floor in force;
// agents of different groups share the host, so the floor is the largest
// Crawl-delay of the groups of the agents that have asked.
package robots
