// Package fleet makes a fleet of workers as polite as one, through Redis: a
// [Pacer] shares each host's spacing and escalation between workers, and a
// [Reader] keeps every worker's [policy.Table] in step with the floors
// published on content.fetch-policy. The rules themselves (floors, spacing,
// leases, escalation) are package policy's; this package only shares them.
//
// # The policy stream
//
// A [Reader] fills a policy.Table: it replays the stream from its first
// entry in batches, signals [Reader.Replayed] (the worker waits for it
// before consuming commands, so it never paces against an empty table), then
// tails the stream with blocking XREAD. There is no consumer group, no ack
// and no dead-letter queue: every worker needs every frame, and a policy
// frame has nothing to answer. Frames of other types or schema versions are
// ignored; frames that never decode are skipped and counted. The reader
// absorbs its own failures, so a policy-stream outage degrades politeness
// to the last known table rather than stopping fetches.
//
// # The fleet pacer
//
// Several workers share per-host spacing and escalation through a [Pacer]:
// one key per host, "replicator:pace:{host}" (the host is the hash tag, so
// it works on Redis Cluster), holding the last request's instant and the
// escalation in force. A single-key Lua script makes each decision
// atomically, timed by the Redis server's clock so workers on different
// machines agree; each worker maps the server's clock to its own (NTP-style,
// from the quickest round trip) so the wait it sleeps does not include the
// reply's latency. A host with no floor has no key until a refusal
// escalates it, so while it has none one lookup decides instead of the
// script; with a client that caches (rueidis's server-assisted client-side
// caching, which Redis invalidates when any worker writes the key) that
// lookup is usually answered without a round trip. Keys expire once their
// spacing and escalation have lapsed (plus a minute's grace), so idle hosts
// vanish. If Redis fails, decisions fall back to a [policy.Local] pacer that
// has been following the fleet's decisions ([policy.Local.Follow]), logged
// once on the way down (WARN) and once on the way back (INFO): degraded
// pacing, never no pacing. The same Local supplies each host's floor and the
// lease, so the fleet and its fallback always pace alike.
package fleet
