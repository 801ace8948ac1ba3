package replicate_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"cloud.google.com/go/storage"

	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/replicate"
	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/gcs"
)

// rewriteTarget returns the destination bucket and object of a rewrite
// request, and whether r is one.
func rewriteTarget(r *http.Request) (bucket, object string, ok bool) {
	_, dst, ok := strings.Cut(r.URL.EscapedPath(), "/rewriteTo/b/")
	if r.Method != http.MethodPost || !ok {
		return "", "", false
	}
	bucket, escaped, ok := strings.Cut(dst, "/o/")
	if !ok {
		return "", "", false
	}
	object, err := url.PathUnescape(escaped)
	return bucket, object, err == nil
}

// gcsProxy is a proxy in front of the fake that refuses a rewrite onto an
// existing object with a 412 when the request asks ifGenerationMatch=0, as
// GCS does (the fake itself ignores the precondition on a rewrite), and
// fails the test on a rewrite without it. then, when set, sees every
// other request first, as a Hook does.
func gcsProxy(t *testing.T, then func(w http.ResponseWriter, r *http.Request) bool) *testenv.GCSProxy {
	p := newProxy(t)
	p.Hook(func(w http.ResponseWriter, r *http.Request) bool {
		if bucket, object, ok := rewriteTarget(r); ok {
			if r.URL.Query().Get("ifGenerationMatch") != "0" {
				t.Errorf("a rewrite without ifGenerationMatch=0: %s", r.URL)
			}
			if _, err := fake.Server.GetObject(bucket, object); err == nil {
				answer(w, r, http.StatusPreconditionFailed)
				return true
			}
		}
		return then != nil && then(w, r)
	})
	return p
}

// newTemp is a gcs-backed temp store under a fresh prefix of tempBucket.
func newTemp(t testing.TB) *gcs.Sink {
	t.Helper()
	s, err := gcs.New(context.Background(), fake.Client, gcs.Options{Bucket: tempBucket, Prefix: uniquePrefix(), Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// persisted stores data in the permanent store as persist does, at
// blobs/<sha256>.bin, and returns its URI.
func persisted(t testing.TB, data []byte) (fp, uri string) {
	t.Helper()
	sum := sha256.Sum256(data)
	fp = hex.EncodeToString(sum[:])
	w := fake.Client.Bucket(permBucket).Object("blobs/" + fp + ".bin").NewWriter(context.Background())
	w.ContentType = "application/octet-stream"
	w.Metadata = sink.ContentStamp(fp)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return fp, gcs.URI(permBucket, fp)
}

func unique(s string) []byte { return fmt.Appendf(nil, "%s %d", s, prefixes.Add(1)) }

// A blob_uri naming the permanent store is a source: copied server side,
// with the command's metadata and the stamp, and no expiry asked about.
func TestAPermanentSource(t *testing.T) {
	data := unique("a persisted blob")
	fp, uri := persisted(t, data)
	aliases, b := primary(t)
	p := gcsProxy(t, nil)
	h := newHandler(t, replicate.Options{Source: newLocal(t), PermanentBucket: permBucket, Aliases: aliases, GCS: p.Client})
	cmd := command(uri, func(c *envelope.ContentReplicate) {
		c.MediaType = "text/plain"
		c.ObjectOptions = map[string]any{"cache_control": "no-cache", "content_disposition": "inline"}
	})

	out := h.Replicate(context.Background(), cmd)

	key := b.Prefix + "/" + cmd.Destination
	wantComplete(t, out, cmd, true, "https://storage.googleapis.com/"+destBucket+"/"+key)
	if out.Method != replicate.MethodCopy {
		t.Errorf("method %q, want copy", out.Method)
	}
	got := object(t, destBucket, key)
	if !bytes.Equal(got.Content, data) {
		t.Errorf("object holds %q, want %q", got.Content, data)
	}
	if got.ContentType != "text/plain" || got.CacheControl != "no-cache" || got.ContentDisposition != "inline" {
		t.Errorf("object attrs %q %q %q", got.ContentType, got.CacheControl, got.ContentDisposition)
	}
	if got.Metadata[sink.ContentStampKey] != fp || len(got.Metadata) != 1 {
		t.Errorf("object metadata %v, want only the stamp %s", got.Metadata, fp)
	}

	// Redelivered: the same bytes are there, the same fact again.
	again := h.Replicate(context.Background(), cmd)
	wantComplete(t, again, cmd, false, "https://storage.googleapis.com/"+destBucket+"/"+key)
}

// The permanent store is recognised only by the exact URI it mints, and
// only when this host has one.
func TestPermanentURIs(t *testing.T) {
	data := unique("a persisted blob, named several ways")
	fp, uri := persisted(t, data)
	aliases, _ := primary(t)
	temp := newTemp(t)
	for _, tc := range []struct {
		name      string
		permanent string
		src       replicate.Source
		uri       string
		reason    envelope.ReplicateReason
		detail    string
	}{
		{"no permanent store, gcs backend", "", temp, uri, envelope.ReplicateReasonInvalidSource, "not a reference this store minted"},
		{"no permanent store, local backend", "", newLocal(t), uri, envelope.ReplicateReasonBlobExpired, "no longer reads"},
		{"another folder", permBucket, temp, "gs://" + permBucket + "/other/" + fp + ".bin", envelope.ReplicateReasonInvalidSource, "not a reference"},
		{"no .bin", permBucket, temp, "gs://" + permBucket + "/blobs/" + fp, envelope.ReplicateReasonInvalidSource, "not a reference"},
		{"upper-case hex", permBucket, temp, "gs://" + permBucket + "/blobs/" + strings.ToUpper(fp) + ".bin", envelope.ReplicateReasonInvalidSource, "not a reference"},
		{"a query", permBucket, temp, uri + "?generation=1", envelope.ReplicateReasonInvalidSource, "not a reference"},
		{"traversal", permBucket, temp, "gs://" + permBucket + "/blobs/../blobs/" + fp + ".bin", envelope.ReplicateReasonInvalidSource, "not a reference"},
		{"a stranger's bucket", permBucket, temp, "gs://" + otherBucket + "/blobs/" + fp + ".bin", envelope.ReplicateReasonInvalidSource, "not a reference"},
		{"gone from the permanent store", permBucket, temp, gcs.URI(permBucket, strings.Repeat("e", 64)), envelope.ReplicateReasonBlobExpired, "no longer stored"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHandler(t, replicate.Options{Source: tc.src, PermanentBucket: tc.permanent, Aliases: aliases})
			cmd := command(tc.uri)
			wantRefused(t, h.Replicate(context.Background(), cmd), cmd, tc.reason, tc.detail)
		})
	}
}

// A gcs temp store is copied from too; a local one is streamed, and both
// writes carry the stamp.
func TestMethodAndStamp(t *testing.T) {
	for _, tc := range []struct {
		name   string
		src    func(t *testing.T) sink.Sink
		method string
	}{
		{"gcs temp store", func(t *testing.T) sink.Sink { return newTemp(t) }, replicate.MethodCopy},
		{"local temp store", func(t *testing.T) sink.Sink { return newLocal(t) }, replicate.MethodUpload},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.src(t)
			blob := store(t, src, unique("stamped"))
			p := gcsProxy(t, nil)
			aliases, b := primary(t)
			h := newHandler(t, replicate.Options{Source: src.(replicate.Source), Aliases: aliases, GCS: p.Client})
			cmd := command(blob.URI)
			out := h.Replicate(context.Background(), cmd)
			key := b.Prefix + "/" + cmd.Destination
			wantComplete(t, out, cmd, true, "https://storage.googleapis.com/"+destBucket+"/"+key)
			if out.Method != tc.method {
				t.Errorf("method %q, want %q", out.Method, tc.method)
			}
			got := object(t, destBucket, key)
			if got.Metadata[sink.ContentStampKey] != blob.Fingerprint {
				t.Errorf("metadata %v, want the stamp %s", got.Metadata, blob.Fingerprint)
			}
			if !got.CustomTime.IsZero() {
				t.Errorf("the copy carries customTime %v", got.CustomTime)
			}
			rewrites, uploads := p.Count("POST /storage/v1/b/"+tempBucket+"/o/"), p.Count("POST /upload/")
			if tc.method == replicate.MethodCopy && (rewrites != 1 || uploads != 0) ||
				tc.method == replicate.MethodUpload && (rewrites != 0 || uploads != 1) {
				t.Errorf("%d rewrites, %d uploads", rewrites, uploads)
			}
			// A refusal before the write names no method.
			bad := command(blob.URI, func(c *envelope.ContentReplicate) { c.Destination = "../up" })
			if out := h.Replicate(context.Background(), bad); out.Method != "" {
				t.Errorf("a refused command's method %q", out.Method)
			}
		})
	}
}

// The copy is create-if-absent: what is there is settled by md5, as an
// upload's is, never overwritten.
func TestTheCopyNeverOverwrites(t *testing.T) {
	temp := newTemp(t)
	data := unique("copied once")
	blob := store(t, temp, data)
	p := gcsProxy(t, nil)
	aliases, b := primary(t)
	h := newHandler(t, replicate.Options{Source: temp, Aliases: aliases, GCS: p.Client})
	cmd := command(blob.URI)
	key := b.Prefix + "/" + cmd.Destination
	public := "https://storage.googleapis.com/" + destBucket + "/" + key

	wantComplete(t, h.Replicate(context.Background(), cmd), cmd, true, public)
	wantComplete(t, h.Replicate(context.Background(), cmd), cmd, false, public)

	other := store(t, temp, unique("other bytes"))
	clash := command(other.URI)
	wantRefused(t, h.Replicate(context.Background(), clash), clash, envelope.ReplicateReasonDestinationConflict, "already holds different bytes")
	if got := object(t, destBucket, key); !bytes.Equal(got.Content, data) || got.Metadata[sink.ContentStampKey] != blob.Fingerprint {
		t.Errorf("the object was overwritten: %q, stamp %v", got.Content, got.Metadata)
	}
}

// The provider's answers to a copy are classified as an upload's are; a
// 404 is blob_expired only when the source is gone.
func TestCopyStatuses(t *testing.T) {
	temp := newTemp(t)
	blob := store(t, temp, unique("a blob the provider refuses to copy"))
	for _, tc := range []struct {
		status int
		want   verdict
		detail string
	}{
		{http.StatusBadRequest, verdict{Fate: capability.Close, Reason: envelope.ReplicateReasonInvalidDestination}, "(400)"},
		{http.StatusForbidden, verdict{Fate: capability.Close, Reason: envelope.ReplicateReasonProviderDisabled}, "(403)"},
		{http.StatusNotFound, verdict{Fate: capability.Close, Reason: envelope.ReplicateReasonProviderDisabled}, "(404)"},
		{http.StatusTooManyRequests, verdict{Fate: capability.Retry}, "429"},
		{http.StatusServiceUnavailable, verdict{Fate: capability.Retry}, "503"},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			p := gcsProxy(t, func(w http.ResponseWriter, r *http.Request) bool {
				if _, _, ok := rewriteTarget(r); ok {
					answer(w, r, tc.status)
					return true
				}
				return false
			})
			aliases, b := primary(t)
			h := newHandler(t, replicate.Options{Source: temp, Aliases: aliases, GCS: p.Client})
			cmd := command(blob.URI)
			out := h.Replicate(context.Background(), cmd)
			if tc.want.Fate == capability.Close {
				wantRefused(t, out, cmd, tc.want.Reason, tc.detail)
			} else {
				wantTransient(t, out, tc.detail)
			}
			if out.Method != replicate.MethodCopy {
				t.Errorf("method %q", out.Method)
			}
			if got := objects(t, destBucket, b.Prefix); len(got) != 0 {
				t.Errorf("objects %v after a refused copy", got)
			}
		})
	}
	t.Run("the source is gone", func(t *testing.T) {
		gone := store(t, temp, unique("swept before the copy"))
		if err := fake.Client.Bucket(tempBucket).Object(temp.Object(gone.Fingerprint)).Delete(context.Background()); err != nil {
			t.Fatal(err)
		}
		aliases, _ := primary(t)
		cmd := command(gone.URI)
		out := newHandler(t, replicate.Options{Source: temp, Aliases: aliases}).Replicate(context.Background(), cmd)
		wantRefused(t, out, cmd, envelope.ReplicateReasonBlobExpired, "no longer stored")
	})
	t.Run("the destination bucket is gone", func(t *testing.T) {
		aliases := newAliases(t, map[string]replicate.Binding{
			"primary": {Provider: replicate.ProviderGCS, Bucket: "no-such-bucket", Prefix: uniquePrefix()},
		})
		cmd := command(blob.URI)
		out := newHandler(t, replicate.Options{Source: temp, Aliases: aliases}).Replicate(context.Background(), cmd)
		wantRefused(t, out, cmd, envelope.ReplicateReasonProviderDisabled, "(404)")
	})
}

// No alias may bind a bucket this host stores blobs in: its commands are
// refused alias_unknown, as if it were never provisioned.
func TestAnAliasCannotBindAHostStore(t *testing.T) {
	temp := newTemp(t)
	blob := store(t, temp, unique("a blob that stays where it is"))
	aliases := newAliases(t, map[string]replicate.Binding{
		"primary":       {Provider: replicate.ProviderGCS, Bucket: destBucket, Prefix: uniquePrefix()},
		"gcs-temp":      {Provider: replicate.ProviderGCS, Bucket: tempBucket},
		"gcs-permanent": {Provider: replicate.ProviderGCS, Bucket: permBucket, Prefix: "blobs"},
	})
	var logs testenv.LogBuffer
	h := newHandler(t, replicate.Options{Source: temp, PermanentBucket: permBucket, Aliases: aliases, Logger: slogJSON(&logs)})
	if got := h.Names(); len(got) != 1 || got[0] != "primary" {
		t.Errorf("Names() = %v, want [primary]", got)
	}
	for _, alias := range []string{"gcs-temp", "gcs-permanent"} {
		cmd := command(blob.URI, func(c *envelope.ContentReplicate) { c.CredentialsAlias = alias })
		wantRefused(t, h.Replicate(context.Background(), cmd), cmd, envelope.ReplicateReasonAliasUnknown, "not provisioned")
		if want := `"level":"ERROR","msg":"replicate: ignoring an alias bound to a bucket this host stores blobs in`; !strings.Contains(logs.String(), want) ||
			!strings.Contains(logs.String(), `"alias":"`+alias+`"`) {
			t.Errorf("logs lack %s for %s:\n%s", want, alias, logs.String())
		}
	}
	if got := objects(t, permBucket, "blobs/organizations"); len(got) != 0 {
		t.Errorf("written into the permanent store: %v", got)
	}
}

func keyFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "writer.json")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A binding naming a credentials file writes through a client of its own,
// built from that file; the others through the host's.
func TestAnAliasWritesAsItsOwnIdentity(t *testing.T) {
	key := keyFile(t, `{"type": "service_account"}`)
	own := newProxy(t)
	var built atomic.Int32
	var files []string
	newGCS := func(ctx context.Context, file string) (*storage.Client, error) {
		built.Add(1)
		files = append(files, file)
		return own.Client, nil
	}
	host := newProxy(t)
	ownPrefix, hostPrefix := uniquePrefix(), uniquePrefix()
	aliases := newAliases(t, map[string]replicate.Binding{
		"gcs-publication": {Provider: replicate.ProviderGCS, Bucket: destBucket, Prefix: ownPrefix, CredentialsFile: key},
		"gcs-second":      {Provider: replicate.ProviderGCS, Bucket: otherBucket, Prefix: ownPrefix, CredentialsFile: key},
		"primary":         {Provider: replicate.ProviderGCS, Bucket: destBucket, Prefix: hostPrefix},
	})
	src := newLocal(t)
	blob := store(t, src, unique("published by its own identity"))
	h := newHandler(t, replicate.Options{Source: src, Aliases: aliases, GCS: host.Client, NewGCS: newGCS})
	if built.Load() != 2 || files[0] != key || files[1] != key {
		t.Fatalf("NewGCS called %d times with %v, want once per binding with the file", built.Load(), files)
	}

	cmd := command(blob.URI, func(c *envelope.ContentReplicate) { c.CredentialsAlias = "gcs-publication" })
	wantComplete(t, h.Replicate(context.Background(), cmd), cmd, true, "https://storage.googleapis.com/"+destBucket+"/"+ownPrefix+"/"+cmd.Destination)
	if own.Count("POST /upload/") != 1 || host.Count("POST /upload/") != 0 {
		t.Errorf("uploads: %d through the alias's client, %d through the host's", own.Count("POST /upload/"), host.Count("POST /upload/"))
	}
	cmd = command(blob.URI)
	wantComplete(t, h.Replicate(context.Background(), cmd), cmd, true, "https://storage.googleapis.com/"+destBucket+"/"+hostPrefix+"/"+cmd.Destination)
	if own.Count("POST /upload/") != 1 || host.Count("POST /upload/") != 1 {
		t.Errorf("uploads: %d through the alias's client, %d through the host's", own.Count("POST /upload/"), host.Count("POST /upload/"))
	}
	if err := h.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// A client that cannot be built from the file leaves the alias without a
// writer: logged with its path, never with what the file holds.
func TestAnUnusableCredentialsFile(t *testing.T) {
	key := keyFile(t, `{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----"}`)
	aliases := newAliases(t, map[string]replicate.Binding{
		"gcs-publication": {Provider: replicate.ProviderGCS, Bucket: destBucket, CredentialsFile: key},
	})
	var logs testenv.LogBuffer
	h := newHandler(t, replicate.Options{
		Source: newLocal(t), Aliases: aliases, Logger: slogJSON(&logs),
		NewGCS: func(ctx context.Context, file string) (*storage.Client, error) {
			return nil, fmt.Errorf("credentials: could not parse %s", file)
		},
	})
	cmd := command("file:///blobs/"+strings.Repeat("a", 64)+".bin", func(c *envelope.ContentReplicate) { c.CredentialsAlias = "gcs-publication" })
	wantRefused(t, h.Replicate(context.Background(), cmd), cmd, envelope.ReplicateReasonProviderDisabled, "no \"gcs\" writer")
	for _, want := range []string{
		`"level":"ERROR","msg":"replicate: could not build a gcs client from the alias's credentials file`,
		`"alias":"gcs-publication"`, `"credentials_file":` + jsonString(key),
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %s:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), "PRIVATE KEY") {
		t.Errorf("logs carry the key:\n%s", logs.String())
	}
}

// The default client builder reads the file as a service-account key; under
// STORAGE_EMULATOR_HOST the storage package talks to the emulator without
// credentials, so the alias's writes reach the fake.
func TestTheDefaultClientBuilder(t *testing.T) {
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(fake.URL, "http://"))
	key := keyFile(t, serviceAccountKey(t, "-----BEGIN PRIVATE KEY-----", "writer@p.iam.gserviceaccount.com"))
	prefix := uniquePrefix()
	aliases := newAliases(t, map[string]replicate.Binding{
		"gcs-publication": {Provider: replicate.ProviderGCS, Bucket: destBucket, Prefix: prefix, CredentialsFile: key},
	})
	src := newLocal(t)
	blob := store(t, src, unique("through the default builder"))
	h := build(t, replicate.Options{Source: src, Aliases: aliases})
	defer h.Close()
	cmd := command(blob.URI, func(c *envelope.ContentReplicate) { c.CredentialsAlias = "gcs-publication" })
	wantComplete(t, h.Replicate(context.Background(), cmd), cmd, true, "https://storage.googleapis.com/"+destBucket+"/"+prefix+"/"+cmd.Destination)
}

// serviceAccountKey is a service-account key file's text with a fresh RSA
// key, or with privateKey as its private_key when that is not a PEM header.
func serviceAccountKey(t *testing.T, privateKey, email string) string {
	t.Helper()
	if privateKey == "-----BEGIN PRIVATE KEY-----" {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		privateKey = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	}
	b, err := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "p", "private_key_id": "k", "private_key": privateKey,
		"client_email": email, "client_id": "1", "token_uri": "https://oauth2.googleapis.com/token",
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The default builder refuses, at start, a key file the storage client
// would accept and fail on only at its first token; what it says never
// quotes the file.
func TestTheDefaultClientBuilderChecksTheKey(t *testing.T) {
	for _, tc := range []struct {
		name, content, why string
	}{
		{"not JSON", `-----BEGIN PRIVATE KEY----- MIIE`, "is not JSON"},
		{"another type", `{"type": "authorized_user", "client_email": "a@b"}`, "not a service-account key"},
		{"no client_email", serviceAccountKey(t, "-----BEGIN PRIVATE KEY-----", ""), "not a service-account key"},
		{"a private key that is not PEM", serviceAccountKey(t, "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "a@b"), "private_key is not PEM"},
		{"a private key that does not parse", serviceAccountKey(t, "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkq\n-----END PRIVATE KEY-----\n", "a@b"), "private_key does not parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			aliases := newAliases(t, map[string]replicate.Binding{
				"gcs-publication": {Provider: replicate.ProviderGCS, Bucket: destBucket, CredentialsFile: keyFile(t, tc.content)},
			})
			var logs testenv.LogBuffer
			h := build(t, replicate.Options{Source: newLocal(t), Aliases: aliases, Logger: slogJSON(&logs)})
			cmd := command("file:///blobs/"+strings.Repeat("a", 64)+".bin", func(c *envelope.ContentReplicate) { c.CredentialsAlias = "gcs-publication" })
			wantRefused(t, h.Replicate(context.Background(), cmd), cmd, envelope.ReplicateReasonProviderDisabled, "no \"gcs\" writer")
			if !strings.Contains(logs.String(), tc.why) || strings.Contains(logs.String(), "MIIE") {
				t.Errorf("logs lack %q or quote the key:\n%s", tc.why, logs.String())
			}
		})
	}
}
