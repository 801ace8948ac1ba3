package sink

// ContentStampKey is the object metadata key that links a written copy to
// the blob it came from: its value is the lowercase hex sha256 of the
// object's bytes. Every content.replicate and content.persist write sets it
// with the create itself, so it needs no grant beyond the create
// (docs/replicate.md, The write). An object written before the stamp
// existed has none.
const ContentStampKey = "co-content-sha256"

// ContentStamp returns the metadata a write sets on a new object holding
// the bytes of fingerprint: ContentStampKey mapped to it. Each call returns
// a fresh map the caller may extend.
func ContentStamp(fingerprint string) map[string]string {
	return map[string]string{ContentStampKey: fingerprint}
}
