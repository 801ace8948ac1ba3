// Package replicate copies a blob this worker stored (the temp store) or
// persisted (the permanent store, Options.PermanentBucket) to a publication
// store an operator provisioned under an alias, and says what came of it: the
// handling of one content_replicate command, minus the Redis loop. The
// Handler is the capability's capability.Handler: the engine decodes a frame
// with Handler.Decode, calls Handler.Handle, and acts on the outcome's fate;
// Capability registers it in one call. Handler.Replicate handles one
// command directly.
// docs/replicate.md is the contract in full.
//
// # Trust
//
// A command names an alias, never a credential. Aliases come from the
// operator's alias file (LoadAliases), named by the rule CheckAliasName
// applies, and bind a provider and a root (for gcs, a bucket and a
// prefix); the credentials are the host's: those the storage client the
// caller passes in resolves (Application Default Credentials), or the
// service-account key file a binding names (Binding.CredentialsFile), from
// which New builds the alias a client of its own. No alias may bind a
// bucket this host stores blobs in. Every refusal is decided from host
// configuration and the command alone, before any client is used, in this
// order:
//
//	alias_unknown        the alias is not provisioned here
//	provider_disabled    the command's provider is not the alias's, or the
//	                     alias has no writer (gdrive and ia never do; gcs
//	                     needs a client)
//	invalid_destination  ObjectKey refuses the destination under the
//	                     alias's prefix, or a gcs object option is not a
//	                     string free of control characters
//	invalid_source       the blob_uri is not what the Source, or the
//	                     permanent store, mints for the fingerprint it
//	                     ends in
//	blob_expired         the blob is gone, or the blob_uri is a plain URI
//	                     of the other storage backend
//
// The blob_uri is never opened as a path: the one thing taken from it is a
// 64-hex lower-case fingerprint, the Source (then the permanent store,
// gs://<bucket>/blobs/<sha256>.bin) rebuilds the URI from that, and the two
// must match exactly. A permanent blob never expires.
//
// # The write
//
// A blob in a bucket (a Source minting gs:// URIs, or the permanent store)
// is copied server side as the alias's identity: one create-if-absent
// rewrite (ifGenerationMatch=0) of the object the store minted, bounded by
// Options.WriteTimeout; a source gone is blob_expired. Any other blob is
// read twice through the Source, in constant memory: once for its sha256
// (it must still match its fingerprint), md5 and crc32c, then streamed into
// a single-request create-if-absent upload that carries those digests.
// Outcome.Method says which (MethodCopy, MethodUpload). The copy's content
// type is the command's media_type; cache_control, content_disposition and
// storage_class come from object_options, and other options are ignored;
// its one metadata entry is the content stamp (sink.ContentStampKey). A
// precondition failure is settled by md5 (for a copy, the source's):
//
//	absent            written; replication_complete
//	same md5          nothing written; the same replication_complete again
//	other md5 (none)  destination_conflict; nothing overwritten
//	no object at all  transient: a race, the next attempt settles it
//
// A provider status of 400 is invalid_destination; 401, 403, 404 and every
// other 4xx but 408 and 429 are provider_disabled; 5xx, 408, 429, a timeout
// and a failure without a status are transient, retried without bound.
//
// Reading the blob can fail too. Gone (sink.ErrNotFound) is blob_expired.
// A temp store answering a status that will not change (its grant: a 4xx
// but 408 and 429) matches no replicate reason, all of which describe the
// destination, and is Unclassified; so is a blob whose bytes no longer hash
// to its fingerprint, or that changes between the two reads. Every other
// read failure (a disk, a 5xx, the network) is transient.
//
// public_url is PublicURLBase + "/" + bucket + "/" + the key quoted as
// Python's urllib.parse.quote(key, safe="/~") does, and is formed only for
// an object known to exist.
package replicate
