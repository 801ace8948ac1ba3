package sink

// ContentStampKey is the object metadata key a written copy carries its
// raw bytes' sha256 under ("co-content-sha256=<fingerprint>"), so a reader
// can tell what an object holds without hashing it (docs/persist.md).
const ContentStampKey = "co-content-sha256"
