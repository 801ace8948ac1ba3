// Package gcs is the gs:// sink.Sink, on Google Cloud Storage.
//
// A blob is the object "<prefix>/<sha256>.bin" in one bucket, announced as
// "gs://<bucket>/<prefix>/<sha256>.bin". The namespace is flat: a bucket
// has no directories to keep small, so the local backend's shards would be
// cargo.
//
// # Writing
//
// The fingerprint is known only once the whole body has been read, so Put
// first spools the body to a local temp file, hashing it (sha256 for the
// name, CRC32C for the upload) and enforcing the limit as it goes. It then
// creates the object only if absent (ifGenerationMatch=0), with customTime
// set to the time the store began and the media type of its options as its
// content type (application/octet-stream when they name none). A 412
// means the blob already exists: Put re-stamps its customTime instead
// (Created is false; the content type stays the first store's), because
// the bucket's lifecycle rule reaps on days since customTime and a
// re-fetched blob must not be reaped as if it were old. If the object vanishes between
// the 412 and the re-stamp, Put creates it again.
//
// The upload is one request streamed from the spool file (Writer.ChunkSize
// 0), so a store holds no more than a copy buffer in memory whatever the
// blob's size; sixteen concurrent 64 MiB stores need well under a megabyte
// of heap for their bodies. Without chunking the client cannot retry, so Put
// retries itself on transient failures (storage.ShouldRetry) by re-reading
// the spool from the start; the create-if-absent condition makes that safe.
// The CRC32C computed while spooling is sent with the upload, so bytes that
// change on the way are rejected rather than stored. The spool file is
// unlinked as soon as it is created (on systems that allow it) and removed
// in every case when Put returns.
//
// A refusal that retrying will not heal (400, 401, 403, a 404 for a bucket
// that is gone, any other 4xx but 408 and 429) wraps sink.ErrPermanent, so
// the fetcher can stop treating the store as passing trouble; timeouts,
// 408, 429, 5xx and failures without a status do not.
//
// # Retention
//
// There is no sweep and no total ceiling: the bucket's lifecycle rule
// (daysSinceCustomTime) reaps. Blob.ExpiresAt is the time the store began
// plus Options.TTL, the floor of the real reap since lifecycle rules act
// with up to a day's delay.
//
// # Start-up
//
// New lists at most one object under the prefix and fails, naming the
// bucket, if that is refused: a missing bucket or a missing permission is a
// configuration error to report at boot, not at the first fetch. Listing
// proves the bucket exists and is readable by this identity; write access
// is left to the first Put.
package gcs
