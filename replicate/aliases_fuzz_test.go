package replicate

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseBinding feeds the alias file's entry parser arbitrary JSON. It
// must never panic; a binding it accepts names a provider this host knows,
// a gcs one a valid bucket and a prefix the object-key guard accepts, and
// nothing in it comes from a member the binding does not declare.
func FuzzParseBinding(f *testing.F) {
	for _, seed := range []string{
		`{"provider": "gcs", "bucket": "co-artifacts", "prefix": "replications"}`, // a good one
		`{"provider": "gcs", "bucket": "b-1", "prefix": "/a/b/"}`,                 // slashes at the ends are dropped
		`{"provider": "gdrive", "folder_id": "x"}`,                                // no writer: loads, refused later
		`{"provider": "ia"}`,
		`{"provider": "gcs", "bucket": "b", "key": "secret"}`,       // too short a bucket; an undeclared member
		`{"provider": "gcs", "bucket": "ok-bucket", "token": "s3"}`, // the token is dropped unread
		`{"provider": "gcs", "bucket": "ok-bucket", "prefix": "../up"}`,
		`{"provider": "gcs", "bucket": "Upper"}`,
		`{"provider": 7}`,
		`{"provider": null}`,
		`[]`,
		`"gcs"`,
		`{}`,
		`{"provider": "gcs", "bucket": "ok-bucket", "prefix": null}`,
		`{"provider": "gcs", "bucket": "ok-bucket", "credentials_file": "/"}`, // not a regular file
		`{"provider": "gcs", "bucket": "ok-bucket", "credentials_file": "key.json"}`,
		`{"provider": "gcs", "bucket": "ok-bucket", "credentials_file": 1}`,
		`{"provider": "gdrive", "credentials_file": "/etc/hostname"}`,
	} {
		f.Add("alias", seed)
	}
	f.Fuzz(func(t *testing.T, name, raw string) {
		b, ignored, err := parseBinding(name, json.RawMessage(raw))
		if err != nil {
			return
		}
		switch b.Provider {
		case ProviderGCS:
			if !validBucket(b.Bucket) {
				t.Fatalf("accepted bucket %q", b.Bucket)
			}
			if err := CheckPrefix(b.Prefix); err != nil || strings.HasPrefix(b.Prefix, "/") || strings.HasSuffix(b.Prefix, "/") {
				t.Fatalf("accepted prefix %q (%v)", b.Prefix, err)
			}
			if b.CredentialsFile != "" && !filepath.IsAbs(b.CredentialsFile) {
				t.Fatalf("accepted credentials_file %q", b.CredentialsFile)
			}
		case ProviderGDrive, ProviderIA:
			if b.Bucket != "" || b.Prefix != "" || b.CredentialsFile != "" {
				t.Fatalf("a %s binding kept a root: %+v", b.Provider, b)
			}
		default:
			t.Fatalf("accepted provider %q", b.Provider)
		}
		var members map[string]json.RawMessage
		if json.Unmarshal([]byte(raw), &members) != nil {
			t.Fatalf("accepted %q, which is not a JSON object", raw)
		}
		for _, m := range ignored {
			if m == "provider" || (b.Provider == ProviderGCS && (m == "bucket" || m == "prefix" || m == "credentials_file")) {
				t.Fatalf("a declared member %q reported as ignored", m)
			}
		}
	})
}
