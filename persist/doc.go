// Package persist is the content.persist capability without Redis: keep the
// bytes whose sha256 is a command's content_fingerprint, permanently
// (docs/persist.md). It is off unless an operator turns it on.
//
// # The capability
//
// Handler implements engine/capability's Handler: it decodes
// content_persist commands, handles each into one capability.Outcome and
// builds the persist_failed facts the engine owns (handler_error,
// unsupported_schema_version). Capability registers a Handler under the
// default stream, group, facts, dead-letter and dedupe names.
//
// # The rules, in order
//
//  1. content_fingerprint is 64 lower-case hex digits, and the digest
//     blob_uri spells (if any) is the same one: else invalid_source.
//  2. blob_uri is exactly the URI the temp store or the permanent store
//     mints for that fingerprint, rebuilt and compared byte for byte; it is
//     never parsed into a path: else invalid_source.
//  3. A blob already kept under the digest is a success, read from the
//     permanent store's metadata alone.
//  4. Otherwise the temp blob is read (gone: blob_expired) and streamed
//     into the permanent store, hashed on the way, and created only if the
//     bytes hash to the digest (else source_corrupt) and nothing is there
//     yet. A store that refuses for good is store_refused; a 5xx, 408, 429
//     or a failure with no status is retried with no fact.
//  5. Then blob_persisted, with the digest and the kept size.
//
// # Stores
//
// Store is the permanent store as this package consumes it; GCSStore (a
// bucket, gs://<bucket>/blobs/<sha256>.bin, create-if-absent, no
// customTime, the media type and the sink.ContentStampKey stamp on the
// first write) and LocalStore (a sharded directory tree) implement it.
// Source is the temp store: sink/local, sink/gcs and sink/memory satisfy
// it. No blob is ever held whole in memory.
package persist
