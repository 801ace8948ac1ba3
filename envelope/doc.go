// Package envelope is the wire codec: it turns the payload models of the
// three capabilities into the fields of a Redis stream entry and back. It is pure
// (the standard library and the project's bounded quoting, no I/O), so
// issuers can embed it cheaply; every function is safe for concurrent use.
//
// # Models
//
//	content.fetch         ContentFetch (command)
//	content.blobs         BlobAvailable, FetchFailed (facts)
//	content.fetch-policy  FetchPolicyState (config)
//	content.replicate     ContentReplicate (command)
//	content.artifacts     ReplicationComplete, ReplicationFailed (facts)
//	content.persist       ContentPersist (command)
//	content.artifacts     BlobPersisted, PersistFailed (facts)
//
// Every model is schema version 1. The failure facts carry reason tokens
// from three vocabularies, one per capability: Reason for fetch_failed,
// ReplicateReason for replication_failed and PersistReason for
// persist_failed.
//
// # Frames
//
// A frame is a stream entry with exactly six string fields, all derived from
// the model by ToWire:
//
//	key             idempotency key, derived per payload type (below)
//	payload         the model as JSON; every model field lives here
//	event_type      content_fetch, blob_available, fetch_failed, fetch_policy_state,
//	                content_replicate, replication_complete, replication_failed,
//	                content_persist, blob_persisted, persist_failed
//	schema_version  the model's schema version, decimal
//	occurred_at     the model's occurred_at, encoded as below
//	content_type    application/json
//
// The payload is compact JSON in the one shape every producer on these
// streams writes (docs/streams.md, Frames): no spaces, members in the
// model's order, optional fields present as null (never omitted), integral
// floats as 30.0, only '"', '\' and control characters escaped in
// strings. Headers and object_options, Go maps, are written sorted by name.
//
// # Keys
//
//	content_fetch         command_id
//	blob_available        content_fingerprint + ":" + command_id
//	fetch_failed          command_id + ":" + the encoded occurred_at
//	fetch_policy_state    host
//	content_replicate     command_id
//	replication_complete  command_id + ":" + the encoded occurred_at
//	replication_failed    command_id + ":" + the encoded occurred_at
//	content_persist       command_id
//	blob_persisted        command_id + ":" + the encoded occurred_at
//	persist_failed        command_id + ":" + the encoded occurred_at
//
// Each key names one occurrence, so a consumer deduplicating on it never
// collapses two: a command that fails twice, or a replication announced
// again after a redelivery, is two facts. The key is operational (DLQ correlation, sharding); the
// worker dedupes on the payload's command_id, never on the key.
//
// # Time
//
// Every timestamp in every payload, and the frame's occurred_at, is written
// by FormatTime: UTC, six fraction digits, "Z" (2026-11-29T23:18:58.123456Z).
// ParseTime reads any RFC 3339 value with an offset ("Z", "+00:00",
// "+02:00", any fraction length) and normalizes it to UTC. A value without an
// offset is refused, never assumed to be UTC. FromWire truncates decoded
// times to microseconds, the wire's precision, so decoding is stable under
// re-encoding.
//
// # Decoding
//
// FromWire picks the model by the frame's event_type and checks that the
// payload's own event_type agrees. It reads the schema version before
// anything else (from the payload; from the frame's field only when the
// payload has none), so a frame of an unknown version still yields what
// correlation needs, together with ErrUnsupportedVersion. Unknown JSON
// members are ignored; a missing required member, a wrong JSON type, a naive
// time, invalid JSON, an unknown event_type or a frame without a payload is
// ErrMalformedFrame. Optional members absent or null decode to nil.
// DecodeCommand (content.fetch), DecodeReplicateCommand
// (content.replicate) and DecodePersistCommand (content.persist) add
// ErrForeignPayload for a valid frame that is not
// their stream's command.
//
// object_options is the one member of arbitrary shape: any JSON object, or
// null. Its values decode as string, bool, nil, json.Number (numbers keep
// their spelling), []any and map[string]any.
//
// Some producers write a non-finite float as a bare NaN, Infinity or
// -Infinity token. In content_fetch's timeout_seconds such a token decodes
// to the matching float64, so the request guard can refuse the command with
// a fact (invalid_request_options) instead of it being dead-lettered as
// malformed; anywhere else the token is malformed JSON. ToWire refuses to
// write non-finite numbers.
//
// Errors name fields, never header values.
//
// A command's URL may carry credentials in its userinfo: show it to a person
// through guard.RedactURL.
package envelope
