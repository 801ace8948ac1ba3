package replicate_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/api/googleapi"

	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/replicate"
	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/gcs"
	"github.com/replicator-go/replicator/sink/sinktest"
)

// verdict is what a test asserts about an Outcome besides its fact.
type verdict struct {
	Fate    capability.Fate
	Reason  envelope.ReplicateReason
	Created bool
}

func verdictOf(out replicate.Outcome) verdict {
	return verdict{Fate: out.Fate, Reason: envelope.ReplicateReason(out.Reason), Created: out.Created}
}

// wantComplete checks a Complete outcome and returns its fact.
func wantComplete(t *testing.T, out replicate.Outcome, cmd *envelope.ContentReplicate, created bool, publicURL string) {
	t.Helper()
	if diff := cmp.Diff(verdict{Fate: capability.Complete, Created: created}, verdictOf(out)); diff != "" {
		t.Fatalf("outcome mismatch (-want +got):\n%s\nerr: %v", diff, out.Err)
	}
	want := &envelope.ReplicationComplete{
		SchemaVersion:     1,
		OccurredAt:        at,
		CommandID:         cmd.CommandID,
		PublicURL:         publicURL,
		InfoItemRepSpecID: cmd.InfoItemRepSpecID,
		SourceRevisionID:  cmd.SourceRevisionID,
		InfoSourceID:      cmd.InfoSourceID,
	}
	if diff := cmp.Diff(envelope.Model(want), out.Fact); diff != "" {
		t.Errorf("fact mismatch (-want +got):\n%s", diff)
	}
}

// wantRefused checks a Close outcome: the reason, a terminal fact that
// echoes the command's ids, and a detail naming why.
func wantRefused(t *testing.T, out replicate.Outcome, cmd *envelope.ContentReplicate, reason envelope.ReplicateReason, detail string) {
	t.Helper()
	if diff := cmp.Diff(verdict{Fate: capability.Close, Reason: reason}, verdictOf(out)); diff != "" {
		t.Fatalf("outcome mismatch (-want +got):\n%s\nerr: %v", diff, out.Err)
	}
	want := &envelope.ReplicationFailed{
		SchemaVersion:     1,
		OccurredAt:        at,
		CommandID:         cmd.CommandID,
		InfoItemRepSpecID: cmd.InfoItemRepSpecID,
		SourceRevisionID:  cmd.SourceRevisionID,
		InfoSourceID:      cmd.InfoSourceID,
		Reason:            reason,
		Terminal:          true,
	}
	if diff := cmp.Diff(envelope.Model(want), out.Fact, cmpopts.IgnoreFields(envelope.ReplicationFailed{}, "Detail")); diff != "" {
		t.Errorf("fact mismatch (-want +got):\n%s", diff)
	}
	f, _ := out.Fact.(*envelope.ReplicationFailed)
	if f == nil || f.Detail == nil || !strings.Contains(*f.Detail, detail) {
		t.Errorf("detail %v does not mention %q", f, detail)
	}
	if out.Err == nil || !strings.Contains(out.Err.Error(), detail) {
		t.Errorf("error %v does not mention %q", out.Err, detail)
	}
}

func wantTransient(t *testing.T, out replicate.Outcome, errText string) {
	t.Helper()
	if diff := cmp.Diff(verdict{Fate: capability.Retry}, verdictOf(out)); diff != "" {
		t.Fatalf("outcome mismatch (-want +got):\n%s\nerr: %v", diff, out.Err)
	}
	if out.Fact != nil {
		t.Errorf("a transient outcome carries the fact %+v", out.Fact)
	}
	if out.Err == nil || !strings.Contains(out.Err.Error(), errText) {
		t.Errorf("error %v does not mention %q", out.Err, errText)
	}
}

func TestAbsentDestinationIsWritten(t *testing.T) {
	src := newLocal(t)
	data := []byte("%PDF-1.4 the artifact\n")
	blob := store(t, src, data)
	aliases, b := primary(t)
	h := newHandler(t, replicate.Options{Source: src, Aliases: aliases})
	cmd := command(blob.URI, func(c *envelope.ContentReplicate) {
		c.Destination = "organizations/x/2026/Q4 report (final).pdf"
		c.ObjectOptions = map[string]any{
			"storage_class":       "NEARLINE",
			"cache_control":       "public, max-age=3600",
			"content_disposition": "inline",
			"folder_id":           "another provider's option, ignored",
		}
	})

	out := h.Replicate(context.Background(), cmd)

	key := b.Prefix + "/organizations/x/2026/Q4 report (final).pdf"
	wantComplete(t, out, cmd, true,
		"https://storage.googleapis.com/"+destBucket+"/"+b.Prefix+"/organizations/x/2026/Q4%20report%20%28final%29.pdf")
	got := object(t, destBucket, key)
	if string(got.Content) != string(data) {
		t.Errorf("object holds %q, want %q", got.Content, data)
	}
	wantAttrs := fakestorage.ObjectAttrs{
		ContentType: "application/pdf", StorageClass: "NEARLINE", CacheControl: "public, max-age=3600",
		ContentDisposition: "inline",
	}
	gotAttrs := fakestorage.ObjectAttrs{
		ContentType: got.ContentType, StorageClass: got.StorageClass, CacheControl: got.CacheControl,
		ContentDisposition: got.ContentDisposition,
	}
	if diff := cmp.Diff(wantAttrs, gotAttrs); diff != "" {
		t.Errorf("object metadata mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{key}, objects(t, destBucket, b.Prefix+"/")); diff != "" {
		t.Errorf("objects under the root (-want +got):\n%s", diff)
	}
}

func TestEmptyMediaTypeIsNeverGuessed(t *testing.T) {
	src := newLocal(t)
	blob := store(t, src, []byte("<html>looks like html</html>"))
	aliases, b := primary(t)
	h := newHandler(t, replicate.Options{Source: src, Aliases: aliases})
	cmd := command(blob.URI, func(c *envelope.ContentReplicate) { c.MediaType, c.Destination = "", "page.html" })

	out := h.Replicate(context.Background(), cmd)

	if out.Fate != capability.Complete {
		t.Fatalf("outcome %v: %v", out.Name(), out.Err)
	}
	if got := object(t, destBucket, b.Prefix+"/page.html").ContentType; got != sink.DefaultMediaType {
		t.Errorf("content type %q, want %q", got, sink.DefaultMediaType)
	}
}

// The overwrite table: absent, identical bytes, different bytes.
func TestOverwriteTable(t *testing.T) {
	data := []byte("%PDF-1.4 the artifact these tests replicate\n")
	tests := []struct {
		name     string
		existing []byte // nil: the destination is absent
		want     verdict
		detail   string
	}{
		{name: "absent: written", want: verdict{Fate: capability.Complete, Created: true}},
		{name: "identical bytes: a no-op announced again", existing: data, want: verdict{Fate: capability.Complete}},
		{
			name:     "different bytes: destination_conflict, nothing overwritten",
			existing: []byte("%PDF-1.4 a different artifact at the same destination\n"),
			want:     verdict{Fate: capability.Close, Reason: envelope.ReplicateReasonDestinationConflict},
			detail:   "already holds different bytes",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := newLocal(t)
			blob := store(t, src, data)
			aliases, b := primary(t)
			h := newHandler(t, replicate.Options{Source: src, Aliases: aliases})
			cmd := command(blob.URI)
			key := b.Prefix + "/" + cmd.Destination
			var generation int64
			if tc.existing != nil {
				fake.Server.CreateObject(fakestorage.Object{
					ObjectAttrs: fakestorage.ObjectAttrs{BucketName: destBucket, Name: key, ContentType: "application/pdf"},
					Content:     tc.existing,
				})
				generation = object(t, destBucket, key).Generation
			}

			out := h.Replicate(context.Background(), cmd)

			url := "https://storage.googleapis.com/" + destBucket + "/" + key
			switch tc.want.Fate {
			case capability.Complete:
				wantComplete(t, out, cmd, tc.want.Created, url)
			default:
				wantRefused(t, out, cmd, tc.want.Reason, tc.detail)
			}
			got := object(t, destBucket, key)
			want := data
			if tc.existing != nil {
				want = tc.existing
				if got.Generation != generation {
					t.Errorf("generation %d, want %d untouched", got.Generation, generation)
				}
			}
			if string(got.Content) != string(want) {
				t.Errorf("object holds %q, want %q", got.Content, want)
			}
		})
	}
}

// A crash between the write and the fact redelivers the command: the
// second handling finds its own object and announces the same copy.
func TestRedeliveryAfterACrashBetweenWriteAndFact(t *testing.T) {
	src := newLocal(t)
	blob := store(t, src, []byte("bytes written before the crash"))
	aliases, b := primary(t)
	cmd := command(blob.URI)

	first := newHandler(t, replicate.Options{Source: src, Aliases: aliases}).Replicate(context.Background(), cmd)
	key := b.Prefix + "/" + cmd.Destination
	generation := object(t, destBucket, key).Generation
	// The worker dies here: no fact, no ack. A new worker reclaims the entry.
	second := newHandler(t, replicate.Options{Source: src, Aliases: aliases}).Replicate(context.Background(), cmd)

	url := "https://storage.googleapis.com/" + destBucket + "/" + key
	wantComplete(t, first, cmd, true, url)
	wantComplete(t, second, cmd, false, url)
	if diff := cmp.Diff([]string{key}, objects(t, destBucket, b.Prefix+"/")); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	if got := object(t, destBucket, key).Generation; got != generation {
		t.Errorf("generation %d after the redelivery, want %d", got, generation)
	}
}

func TestRefusals(t *testing.T) {
	src := newLocal(t)
	blob := store(t, src, []byte("a stored blob"))
	missing := sinktest.Fingerprint([]byte("never stored"))
	gone := store(t, src, []byte("stored, then swept"))
	// A sweep took it: the file is gone, the URI is still one we minted.
	if err := removeBlob(src, gone.Fingerprint); err != nil {
		t.Fatal(err)
	}
	fp := blob.Fingerprint
	dir := src.Dir()
	prefix := uniquePrefix()
	aliases := newAliases(t, map[string]replicate.Binding{
		"primary": {Provider: replicate.ProviderGCS, Bucket: destBucket, Prefix: prefix},
		"drive":   {Provider: replicate.ProviderGDrive},
		"archive": {Provider: replicate.ProviderIA},
	})
	type row struct {
		name   string
		opts   func(*replicate.Options) // GCS set to nil means no client
		edit   func(*envelope.ContentReplicate)
		reason envelope.ReplicateReason
		detail string
	}
	uri := func(u string) func(*envelope.ContentReplicate) {
		return func(c *envelope.ContentReplicate) { c.BlobURI = u }
	}
	dest := func(d string) func(*envelope.ContentReplicate) {
		return func(c *envelope.ContentReplicate) { c.Destination = d }
	}
	options := func(o map[string]any) func(*envelope.ContentReplicate) {
		return func(c *envelope.ContentReplicate) { c.ObjectOptions = o }
	}
	const notOurs = "blob_uri is not a reference this store minted"
	tests := []row{
		// alias_unknown
		{name: "an unprovisioned alias", edit: func(c *envelope.ContentReplicate) { c.CredentialsAlias = "nobody-stood-this-up" },
			reason: envelope.ReplicateReasonAliasUnknown, detail: "not provisioned on this host"},
		{name: "an empty alias", edit: func(c *envelope.ContentReplicate) { c.CredentialsAlias = "" },
			reason: envelope.ReplicateReasonAliasUnknown, detail: "not provisioned on this host"},
		{name: "a host with nothing provisioned", opts: func(o *replicate.Options) { o.Aliases = nil },
			reason: envelope.ReplicateReasonAliasUnknown, detail: "not provisioned on this host"},
		// provider_disabled
		{name: "a provider the alias is not bound to", edit: func(c *envelope.ContentReplicate) { c.Provider = "ia" },
			reason: envelope.ReplicateReasonProviderDisabled, detail: `bound to "gcs", not "ia"`},
		{name: "an unknown provider", edit: func(c *envelope.ContentReplicate) { c.Provider = "dropbox" },
			reason: envelope.ReplicateReasonProviderDisabled, detail: `not "dropbox"`},
		{name: "a provider spelled otherwise", edit: func(c *envelope.ContentReplicate) { c.Provider = "GCS" },
			reason: envelope.ReplicateReasonProviderDisabled, detail: `not "GCS"`},
		{name: "a gdrive alias has no writer", edit: func(c *envelope.ContentReplicate) { c.Provider, c.CredentialsAlias = "gdrive", "drive" },
			reason: envelope.ReplicateReasonProviderDisabled, detail: `no "gdrive" writer`},
		{name: "an ia alias has no writer", edit: func(c *envelope.ContentReplicate) { c.Provider, c.CredentialsAlias = "ia", "archive" },
			reason: envelope.ReplicateReasonProviderDisabled, detail: `no "ia" writer`},
		{name: "a gcs alias without a client", opts: func(o *replicate.Options) { o.GCS = nil },
			reason: envelope.ReplicateReasonProviderDisabled, detail: `no "gcs" writer`},
		// invalid_destination
		{name: "traversal", edit: dest("../../etc/passwd"), reason: envelope.ReplicateReasonInvalidDestination, detail: "relative segment"},
		{name: "percent-encoding", edit: dest("a/b%2Fc.pdf"), reason: envelope.ReplicateReasonInvalidDestination, detail: "percent-encoding"},
		{name: "absolute", edit: dest("/etc/passwd"), reason: envelope.ReplicateReasonInvalidDestination, detail: "absolute"},
		{name: "an unrendered template", edit: dest("{info_item.slug}/r.pdf"), reason: envelope.ReplicateReasonInvalidDestination, detail: "disallowed characters"},
		{name: "a storage_class that is not a string", edit: options(map[string]any{"storage_class": 7}),
			reason: envelope.ReplicateReasonInvalidDestination, detail: "object_options.storage_class is not a string"},
		{name: "a cache_control with a line break", edit: options(map[string]any{"cache_control": "public\r\nX-Injected: 1"}),
			reason: envelope.ReplicateReasonInvalidDestination, detail: "object_options.cache_control holds a control character"},
		{name: "a content_disposition object", edit: options(map[string]any{"content_disposition": map[string]any{}}),
			reason: envelope.ReplicateReasonInvalidDestination, detail: "object_options.content_disposition is not a string"},
		// invalid_source
		{name: "a secret on the host", edit: uri("file:///etc/replicator/co-pypi-reader.json"), reason: envelope.ReplicateReasonInvalidSource, detail: notOurs},
		{name: "/etc/passwd", edit: uri("file:///etc/passwd"), reason: envelope.ReplicateReasonInvalidSource, detail: notOurs},
		{name: "traversal dressed as a fingerprint", edit: uri("file://" + dir + "/../../../etc/" + fp + ".bin"), reason: envelope.ReplicateReasonInvalidSource, detail: notOurs},
		{name: "traversal inside the tree", edit: uri("file://" + dir + "/" + fp[:2] + "/../" + fp[:2] + "/" + fp[2:4] + "/" + fp + ".bin"), reason: envelope.ReplicateReasonInvalidSource, detail: notOurs},
		{name: "the right name under another root", edit: uri("file:///tmp/" + fp[:2] + "/" + fp[2:4] + "/" + fp + ".bin"), reason: envelope.ReplicateReasonInvalidSource, detail: notOurs},
		{name: "percent-encoded fingerprint", edit: uri(strings.Replace(blob.URI, fp+".bin", "%"+fmt.Sprintf("%x", fp[0])+fp[1:]+".bin", 1)), reason: envelope.ReplicateReasonInvalidSource, detail: notOurs},
		{name: "percent-encoded separator", edit: uri(strings.Replace(blob.URI, "/"+fp[2:4]+"/", "%2F"+fp[2:4]+"/", 1)), reason: envelope.ReplicateReasonInvalidSource, detail: notOurs},
		{name: "upper-case hex", edit: uri(strings.ReplaceAll(blob.URI, fp, strings.ToUpper(fp))), reason: envelope.ReplicateReasonInvalidSource, detail: notOurs},
		{name: "a query string", edit: uri(blob.URI + "?generation=1"), reason: envelope.ReplicateReasonInvalidSource, detail: notOurs},
		{name: "an empty query", edit: uri(blob.URI + "?"), reason: envelope.ReplicateReasonInvalidSource, detail: notOurs},
		{name: "a fragment", edit: uri(blob.URI + "#x"), reason: envelope.ReplicateReasonInvalidSource, detail: notOurs},
		{name: "userinfo", edit: uri(strings.Replace(blob.URI, "file://", "file://user:s3cret@", 1)), reason: envelope.ReplicateReasonInvalidSource, detail: "xxxxx@"},
		{name: "a host", edit: uri(strings.Replace(blob.URI, "file://", "file://elsewhere", 1)), reason: envelope.ReplicateReasonInvalidSource, detail: notOurs},
		{name: "the scheme upper-cased", edit: uri(strings.Replace(blob.URI, "file:", "FILE:", 1)), reason: envelope.ReplicateReasonInvalidSource, detail: notOurs},
		{name: "another scheme", edit: uri("https://example.test/" + fp + ".bin"), reason: envelope.ReplicateReasonInvalidSource, detail: notOurs},
		{name: "a memory URI", edit: uri("mem://" + fp), reason: envelope.ReplicateReasonInvalidSource, detail: notOurs},
		{name: "opaque", edit: uri("file:" + fp + ".bin"), reason: envelope.ReplicateReasonInvalidSource, detail: notOurs},
		{name: "no suffix", edit: uri(strings.TrimSuffix(blob.URI, ".bin")), reason: envelope.ReplicateReasonInvalidSource, detail: notOurs},
		{name: "too short", edit: uri("file://" + dir + "/ab/cd/abc.bin"), reason: envelope.ReplicateReasonInvalidSource, detail: notOurs},
		{name: "not hex", edit: uri("file://" + dir + "/zz/zz/" + strings.Repeat("z", 64) + ".bin"), reason: envelope.ReplicateReasonInvalidSource, detail: notOurs},
		{name: "a stranger's bucket with junk", edit: uri("gs://someone-elses-bucket/not-a-fingerprint.bin"), reason: envelope.ReplicateReasonInvalidSource, detail: notOurs},
		{name: "gs with a query", edit: uri("gs://" + tempBucket + "/blobs/" + fp + ".bin?x"), reason: envelope.ReplicateReasonInvalidSource, detail: notOurs},
		{name: "gs with traversal", edit: uri("gs://" + tempBucket + "/blobs/../" + fp + ".bin"), reason: envelope.ReplicateReasonInvalidSource, detail: notOurs},
		{name: "gs with encoded traversal", edit: uri("gs://" + tempBucket + "/blobs/%2e%2e/" + fp + ".bin"), reason: envelope.ReplicateReasonInvalidSource, detail: notOurs},
		{name: "gs without a bucket", edit: uri("gs:///blobs/" + fp + ".bin"), reason: envelope.ReplicateReasonInvalidSource, detail: notOurs},
		{name: "empty", edit: uri(""), reason: envelope.ReplicateReasonInvalidSource, detail: notOurs},
		{name: "garbage", edit: uri("not a uri at all"), reason: envelope.ReplicateReasonInvalidSource, detail: notOurs},
		{name: "unparseable", edit: uri("file://[oops:::1]:notaport/x.bin"), reason: envelope.ReplicateReasonInvalidSource, detail: notOurs},
		{name: "the detail is bounded", edit: uri("file:///" + strings.Repeat("a", 5000)), reason: envelope.ReplicateReasonInvalidSource, detail: `aaaa"...`},
		// blob_expired
		{name: "a blob never stored", edit: uri(src.URI(missing)), reason: envelope.ReplicateReasonBlobExpired, detail: "no longer stored"},
		{name: "a blob swept since", edit: uri(gone.URI), reason: envelope.ReplicateReasonBlobExpired, detail: "no longer stored"},
		{name: "the other backend's URI", edit: uri("gs://" + tempBucket + "/blobs/" + fp + ".bin"), reason: envelope.ReplicateReasonBlobExpired, detail: "no longer reads"},
		{name: "the other backend at its bucket root", edit: uri("gs://" + tempBucket + "/" + fp + ".bin"), reason: envelope.ReplicateReasonBlobExpired, detail: "no longer reads"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Every request reaching the provider fails the test: a refusal
			// happens before any credential is used.
			p := newProxy(t)
			var requests atomic.Int32
			p.Hook(func(w http.ResponseWriter, r *http.Request) bool {
				requests.Add(1)
				answer(w, r, http.StatusTeapot)
				return true
			})
			opts := replicate.Options{Source: src, Aliases: aliases, GCS: p.Client}
			if tc.opts != nil {
				tc.opts(&opts)
			}
			cmd := command(blob.URI)
			if tc.edit != nil {
				tc.edit(cmd)
			}
			out := build(t, opts).Replicate(context.Background(), cmd)
			wantRefused(t, out, cmd, tc.reason, tc.detail)
			if n := requests.Load(); n != 0 {
				t.Errorf("%d requests reached the provider", n)
			}
			if detail := *out.Fact.(*envelope.ReplicationFailed).Detail; len(detail) > 400 || strings.Contains(detail, "s3cret") {
				t.Errorf("detail %q is too long or carries a password", detail)
			}
		})
	}
	if got := objects(t, destBucket, prefix); len(got) != 0 {
		t.Errorf("refused commands left objects: %v", got)
	}
}

// The guards run in a fixed order; where a command breaks two rules, the
// earlier one is reported.
func TestRefusalOrder(t *testing.T) {
	src := newLocal(t)
	blob := store(t, src, []byte("ordered"))
	aliases := newAliases(t, map[string]replicate.Binding{
		"primary": {Provider: replicate.ProviderGCS, Bucket: destBucket, Prefix: uniquePrefix()},
		"drive":   {Provider: replicate.ProviderGDrive},
	})
	h := newHandler(t, replicate.Options{Source: src, Aliases: aliases})
	badDest := func(c *envelope.ContentReplicate) { c.Destination = "../escape" }
	badSource := func(c *envelope.ContentReplicate) { c.BlobURI = "file:///etc/passwd" }
	tests := []struct {
		name  string
		edits []func(*envelope.ContentReplicate)
		want  envelope.ReplicateReason
	}{
		{name: "alias before provider", edits: []func(*envelope.ContentReplicate){
			func(c *envelope.ContentReplicate) { c.CredentialsAlias, c.Provider = "unknown", "ia" }},
			want: envelope.ReplicateReasonAliasUnknown},
		{name: "alias before destination", edits: []func(*envelope.ContentReplicate){
			func(c *envelope.ContentReplicate) { c.CredentialsAlias = "unknown" }, badDest},
			want: envelope.ReplicateReasonAliasUnknown},
		{name: "provider before destination", edits: []func(*envelope.ContentReplicate){
			func(c *envelope.ContentReplicate) { c.Provider = "ia" }, badDest},
			want: envelope.ReplicateReasonProviderDisabled},
		{name: "writer before destination", edits: []func(*envelope.ContentReplicate){
			func(c *envelope.ContentReplicate) { c.CredentialsAlias, c.Provider = "drive", "gdrive" }, badDest, badSource},
			want: envelope.ReplicateReasonProviderDisabled},
		{name: "destination before source", edits: []func(*envelope.ContentReplicate){badDest, badSource},
			want: envelope.ReplicateReasonInvalidDestination},
		{name: "object_options before source", edits: []func(*envelope.ContentReplicate){
			func(c *envelope.ContentReplicate) { c.ObjectOptions = map[string]any{"storage_class": false} }, badSource},
			want: envelope.ReplicateReasonInvalidDestination},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := h.Replicate(context.Background(), command(blob.URI, tc.edits...))
			if diff := cmp.Diff(verdict{Fate: capability.Close, Reason: tc.want}, verdictOf(out)); diff != "" {
				t.Errorf("outcome mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// The ids a command carries are echoed, never read: changing them changes
// no decision.
func TestIdsAreFreight(t *testing.T) {
	src := newLocal(t)
	aliases, _ := primary(t)
	h := newHandler(t, replicate.Options{Source: src, Aliases: aliases})
	a := h.Replicate(context.Background(), command("file:///etc/passwd"))
	b := h.Replicate(context.Background(), command("file:///etc/passwd", func(c *envelope.ContentReplicate) {
		c.InfoItemRepSpecID, c.SourceRevisionID, c.InfoSourceID = "  IIRS/Odd Value  ", "rev::2", "src::3"
	}))
	if a.Err.Error() != b.Err.Error() || a.Reason != b.Reason {
		t.Errorf("outcomes differ: %v / %v", a.Err, b.Err)
	}
	f := b.Fact.(*envelope.ReplicationFailed)
	if got := [3]string{f.InfoItemRepSpecID, f.SourceRevisionID, f.InfoSourceID}; got != [3]string{"  IIRS/Odd Value  ", "rev::2", "src::3"} {
		t.Errorf("ids not echoed verbatim: %q", got)
	}
}

// Two gcs aliases of two buckets: each command lands in its own alias's
// bucket and root, whatever its destination says.
func TestAnAliasCannotWriteOutsideItsBucket(t *testing.T) {
	src := newLocal(t)
	blob := store(t, src, []byte("for the public bucket only"))
	public := replicate.Binding{Provider: replicate.ProviderGCS, Bucket: destBucket, Prefix: uniquePrefix()}
	private := replicate.Binding{Provider: replicate.ProviderGCS, Bucket: otherBucket, Prefix: uniquePrefix()}
	aliases := newAliases(t, map[string]replicate.Binding{"public": public, "private": private})
	h := newHandler(t, replicate.Options{Source: src, Aliases: aliases})
	viaPublic := func(dest string) *envelope.ContentReplicate {
		return command(blob.URI, func(c *envelope.ContentReplicate) { c.CredentialsAlias, c.Destination = "public", dest })
	}

	out := h.Replicate(context.Background(), viaPublic("r.pdf"))
	wantComplete(t, out, viaPublic("r.pdf"), true, "https://storage.googleapis.com/"+destBucket+"/"+public.Prefix+"/r.pdf")
	for _, dest := range []string{
		"../" + private.Prefix + "/r.pdf",
		"../../../" + private.Prefix + "/r.pdf",
		"../../" + otherBucket + "/" + private.Prefix + "/r.pdf",
		"gs:/" + otherBucket + "/r.pdf",
		"/" + otherBucket + "/r.pdf",
	} {
		out := h.Replicate(context.Background(), viaPublic(dest))
		if out.Fate != capability.Close || out.Reason != string(envelope.ReplicateReasonInvalidDestination) ||
			!errors.Is(out.Err, replicate.ErrInvalidDestination) {
			t.Errorf("destination %q: %v %s (%v), want invalid_destination", dest, out.Name(), out.Reason, out.Err)
		}
	}
	if diff := cmp.Diff([]string{public.Prefix + "/r.pdf"}, objects(t, destBucket, public.Prefix+"/")); diff != "" {
		t.Errorf("public bucket (-want +got):\n%s", diff)
	}
	if got := objects(t, otherBucket, ""); len(got) != 0 {
		t.Errorf("the other alias's bucket holds %v", got)
	}
}

// Statuses the provider answers the upload with, over a real socket.
func TestProviderStatuses(t *testing.T) {
	tests := []struct {
		status int
		want   verdict
	}{
		{http.StatusBadRequest, verdict{Fate: capability.Close, Reason: envelope.ReplicateReasonInvalidDestination}},
		{http.StatusUnauthorized, verdict{Fate: capability.Close, Reason: envelope.ReplicateReasonProviderDisabled}},
		{http.StatusForbidden, verdict{Fate: capability.Close, Reason: envelope.ReplicateReasonProviderDisabled}},
		{http.StatusNotFound, verdict{Fate: capability.Close, Reason: envelope.ReplicateReasonProviderDisabled}},
		{http.StatusConflict, verdict{Fate: capability.Close, Reason: envelope.ReplicateReasonProviderDisabled}},
		{http.StatusRequestTimeout, verdict{Fate: capability.Retry}},
		{http.StatusTooManyRequests, verdict{Fate: capability.Retry}},
		{http.StatusInternalServerError, verdict{Fate: capability.Retry}},
		{http.StatusServiceUnavailable, verdict{Fate: capability.Retry}},
		{http.StatusGatewayTimeout, verdict{Fate: capability.Retry}},
	}
	src := newLocal(t)
	blob := store(t, src, []byte("a blob the provider refuses"))
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			p := newProxy(t)
			p.Hook(func(w http.ResponseWriter, r *http.Request) bool {
				if isUpload(r) {
					answer(w, r, tc.status)
					return true
				}
				return false
			})
			aliases, b := primary(t)
			cmd := command(blob.URI)
			out := newHandler(t, replicate.Options{Source: src, Aliases: aliases, GCS: p.Client}).Replicate(context.Background(), cmd)
			if tc.want.Fate == capability.Close {
				wantRefused(t, out, cmd, tc.want.Reason, fmt.Sprintf("(%d)", tc.status))
			} else {
				wantTransient(t, out, fmt.Sprint(tc.status))
			}
			if got := objects(t, destBucket, b.Prefix); len(got) != 0 {
				t.Errorf("objects %v after a refused upload", got)
			}
		})
	}
}

// The read that settles a precondition failure is classified as the write
// is; a precondition failure with no object behind it is a race.
func TestSettlingAPreconditionFailure(t *testing.T) {
	src := newLocal(t)
	data := []byte("the blob being settled")
	blob := store(t, src, data)
	tests := []struct {
		name     string
		existing bool
		hook     func(w http.ResponseWriter, r *http.Request) bool
		check    func(t *testing.T, out replicate.Outcome, cmd *envelope.ContentReplicate)
	}{
		{
			name:     "403 on the read",
			existing: true,
			hook: func(w http.ResponseWriter, r *http.Request) bool {
				if isMetadataGet(r) {
					answer(w, r, http.StatusForbidden)
					return true
				}
				return false
			},
			check: func(t *testing.T, out replicate.Outcome, cmd *envelope.ContentReplicate) {
				wantRefused(t, out, cmd, envelope.ReplicateReasonProviderDisabled, "(403)")
			},
		},
		{
			name: "412 and no object there",
			hook: func(w http.ResponseWriter, r *http.Request) bool {
				if isUpload(r) {
					answer(w, r, http.StatusPreconditionFailed)
					return true
				}
				return false
			},
			check: func(t *testing.T, out replicate.Outcome, cmd *envelope.ContentReplicate) {
				wantTransient(t, out, "could not be settled")
			},
		},
		{
			name:     "an object with no md5",
			existing: true,
			hook: func(w http.ResponseWriter, r *http.Request) bool {
				if isMetadataGet(r) && r.URL.Query().Get("alt") != "media" {
					w.Header().Set("Content-Type", "application/json")
					fmt.Fprintf(w, `{"bucket":%q,"name":"composite","size":"22","generation":"7","componentCount":2}`, destBucket)
					return true
				}
				return false
			},
			check: func(t *testing.T, out replicate.Outcome, cmd *envelope.ContentReplicate) {
				wantRefused(t, out, cmd, envelope.ReplicateReasonDestinationConflict, "no md5 to compare")
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newProxy(t)
			p.Hook(tc.hook)
			aliases, b := primary(t)
			cmd := command(blob.URI)
			if tc.existing {
				fake.Server.CreateObject(fakestorage.Object{
					ObjectAttrs: fakestorage.ObjectAttrs{BucketName: destBucket, Name: b.Prefix + "/" + cmd.Destination},
					Content:     data,
				})
			}
			out := newHandler(t, replicate.Options{Source: src, Aliases: aliases, GCS: p.Client}).Replicate(context.Background(), cmd)
			tc.check(t, out, cmd)
		})
	}
}

// A connection that dies mid-upload has no status: transient.
func TestAFailureWithoutAStatusIsTransient(t *testing.T) {
	src := newLocal(t)
	blob := store(t, src, sinktest.Bytes(1, 256<<10))
	p := newProxy(t)
	p.Hook(func(w http.ResponseWriter, r *http.Request) bool {
		if !isUpload(r) {
			return false
		}
		io.CopyN(io.Discard, r.Body, 1000)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return true
	})
	aliases, b := primary(t)
	out := newHandler(t, replicate.Options{Source: src, Aliases: aliases, GCS: p.Client}).Replicate(context.Background(), command(blob.URI))
	wantTransient(t, out, "write of")
	if got := objects(t, destBucket, b.Prefix); len(got) != 0 {
		t.Errorf("objects %v after a broken upload", got)
	}
}

func TestWriteTimeout(t *testing.T) {
	src := newLocal(t)
	blob := store(t, src, []byte("a write that hangs"))
	p := newProxy(t)
	p.Hook(func(w http.ResponseWriter, r *http.Request) bool {
		if !isUpload(r) {
			return false
		}
		// Read the request, answer nothing, until the client gives up.
		io.Copy(io.Discard, r.Body)
		waitGone(r)
		return true
	})
	aliases, _ := primary(t)
	h := newHandler(t, replicate.Options{Source: src, Aliases: aliases, GCS: p.Client, WriteTimeout: 200 * time.Millisecond})
	out := h.Replicate(context.Background(), command(blob.URI))
	wantTransient(t, out, "timed out after 200ms")
}

func TestCancelledWhileWriting(t *testing.T) {
	src := newLocal(t)
	blob := store(t, src, []byte("a write cut short by shutdown"))
	p := newProxy(t)
	ctx, cancel := context.WithCancel(context.Background())
	p.Hook(func(w http.ResponseWriter, r *http.Request) bool {
		if !isUpload(r) {
			return false
		}
		io.Copy(io.Discard, r.Body)
		cancel()
		waitGone(r)
		return true
	})
	aliases, _ := primary(t)
	out := newHandler(t, replicate.Options{Source: src, Aliases: aliases, GCS: p.Client}).Replicate(ctx, command(blob.URI))
	wantTransient(t, out, "abandoned")
}

// errorURL is an upload failure whose text names a URL with a query, as
// the HTTP client words one.
func TestErrorsDoNotCarryAQuery(t *testing.T) {
	src := newLocal(t)
	blob := store(t, src, []byte("a failure with a URL in it"))
	aliases, _ := primary(t)
	// Nothing listens on the port of a closed server: a dial error.
	p := newProxy(t)
	p.Close()
	out := newHandler(t, replicate.Options{Source: src, Aliases: aliases, GCS: p.Client}).Replicate(context.Background(), command(blob.URI))
	wantTransient(t, out, "write of")
	if strings.Contains(out.Err.Error(), "?") || strings.Contains(out.Err.Error(), "ifGenerationMatch") {
		t.Errorf("error %q carries the request's query", out.Err)
	}
}

// waitGone waits until the client has dropped the request, for at most a
// while, so a broken test fails instead of hanging.
func waitGone(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(10 * time.Second):
	}
}

// testSource is a Source whose reads a test scripts; URI maps like the
// local sink's so locate accepts what it mints.
type testSource struct {
	uri  func(fp string) string
	open func(call int, fp string) (io.ReadCloser, error)
	n    atomic.Int32
}

func (s *testSource) URI(fp string) string { return s.uri(fp) }
func (s *testSource) Open(ctx context.Context, fp string) (io.ReadCloser, error) {
	return s.open(int(s.n.Add(1)), fp)
}

type failingReader struct {
	data []byte
	err  error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

func TestSourceFailures(t *testing.T) {
	data := []byte("the blob, as stored")
	fp := sinktest.Fingerprint(data)
	other := []byte("the blob, but other")
	good := func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(string(data))), nil }
	tests := []struct {
		name  string
		open  func(call int) (io.ReadCloser, error)
		check func(t *testing.T, out replicate.Outcome, cmd *envelope.ContentReplicate)
	}{
		{
			name: "swept before the first read",
			open: func(int) (io.ReadCloser, error) { return nil, fmt.Errorf("test: open: %w", sink.ErrNotFound) },
			check: func(t *testing.T, out replicate.Outcome, cmd *envelope.ContentReplicate) {
				wantRefused(t, out, cmd, envelope.ReplicateReasonBlobExpired, "no longer stored")
			},
		},
		{
			name: "swept between the two reads",
			open: func(call int) (io.ReadCloser, error) {
				if call == 1 {
					return good()
				}
				return nil, fmt.Errorf("test: open: %w", sink.ErrNotFound)
			},
			check: func(t *testing.T, out replicate.Outcome, cmd *envelope.ContentReplicate) {
				wantRefused(t, out, cmd, envelope.ReplicateReasonBlobExpired, "no longer stored")
			},
		},
		{
			name: "a local disk error",
			open: func(int) (io.ReadCloser, error) { return nil, errors.New("local: open: permission denied") },
			check: func(t *testing.T, out replicate.Outcome, cmd *envelope.ContentReplicate) {
				wantTransient(t, out, "permission denied")
			},
		},
		{
			name: "the temp store answers 503",
			open: func(int) (io.ReadCloser, error) {
				return nil, fmt.Errorf("gcs: open: %w", &googleapi.Error{Code: 503, Message: "backend error"})
			},
			check: func(t *testing.T, out replicate.Outcome, cmd *envelope.ContentReplicate) {
				wantTransient(t, out, "503")
			},
		},
		{
			name: "the temp store answers 403",
			open: func(int) (io.ReadCloser, error) {
				return nil, fmt.Errorf("gcs: open: %w", &googleapi.Error{Code: 403, Message: "no storage.objects.get"})
			},
			check: func(t *testing.T, out replicate.Outcome, cmd *envelope.ContentReplicate) {
				if out.Fate != capability.Unclassified || out.Fact != nil || !strings.Contains(out.Err.Error(), "403") {
					t.Errorf("outcome %v %v (%v), want unclassified", out.Name(), out.Fact, out.Err)
				}
			},
		},
		{
			name: "a read fails halfway through the write",
			open: func(call int) (io.ReadCloser, error) {
				if call == 1 {
					return good()
				}
				return io.NopCloser(&failingReader{data: data[:5], err: errors.New("input/output error")}), nil
			},
			check: func(t *testing.T, out replicate.Outcome, cmd *envelope.ContentReplicate) {
				wantTransient(t, out, "input/output error")
			},
		},
		{
			name: "the stored bytes no longer hash to the fingerprint",
			open: func(int) (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(string(other))), nil },
			check: func(t *testing.T, out replicate.Outcome, cmd *envelope.ContentReplicate) {
				if out.Fate != capability.Unclassified || !strings.Contains(out.Err.Error(), "no longer hashes") {
					t.Errorf("outcome %v (%v), want unclassified", out.Name(), out.Err)
				}
			},
		},
		{
			name: "the bytes change between the reads",
			open: func(call int) (io.ReadCloser, error) {
				if call == 1 {
					return good()
				}
				return io.NopCloser(strings.NewReader(string(other))), nil
			},
			check: func(t *testing.T, out replicate.Outcome, cmd *envelope.ContentReplicate) {
				if out.Fate != capability.Unclassified || !strings.Contains(out.Err.Error(), "changed while it was copied") {
					t.Errorf("outcome %v (%v), want unclassified", out.Name(), out.Err)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := &testSource{
				uri:  func(fp string) string { return "file:///blobs/" + fp + ".bin" },
				open: func(call int, _ string) (io.ReadCloser, error) { return tc.open(call) },
			}
			aliases, b := primary(t)
			cmd := command(src.URI(fp))
			out := newHandler(t, replicate.Options{Source: src, Aliases: aliases}).Replicate(context.Background(), cmd)
			tc.check(t, out, cmd)
			if got := objects(t, destBucket, b.Prefix); len(got) != 0 {
				t.Errorf("objects %v after a source failure", got)
			}
		})
	}
}

func TestAPanicIsUnclassified(t *testing.T) {
	src := &testSource{
		uri: func(fp string) string {
			if fp == strings.Repeat("a", 64) {
				panic("a bug in the store")
			}
			return "file:///blobs/" + fp + ".bin"
		},
		open: func(int, string) (io.ReadCloser, error) { return nil, nil },
	}
	aliases, _ := primary(t)
	out := newHandler(t, replicate.Options{Source: src, Aliases: aliases}).
		Replicate(context.Background(), command("file:///blobs/"+strings.Repeat("a", 64)+".bin"))
	if out.Fate != capability.Unclassified || out.Fact != nil || !strings.Contains(out.Err.Error(), "a bug in the store") {
		t.Errorf("outcome %v %v (%v), want unclassified", out.Name(), out.Fact, out.Err)
	}
	if out := newHandler(t, replicate.Options{Source: src}).Replicate(context.Background(), nil); out.Fate != capability.Unclassified {
		t.Errorf("a nil command: %v", out.Name())
	}
}

// A worker on the gcs backend reads its blobs from its temp bucket; the
// local backend's URI of the same bytes is then the other backend's.
func TestAGCSSource(t *testing.T) {
	src, err := gcs.New(context.Background(), fake.Client, gcs.Options{Bucket: tempBucket, Prefix: uniquePrefix(), Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("a blob in the temp bucket")
	blob := store(t, src, data)
	aliases, b := primary(t)
	h := newHandler(t, replicate.Options{Source: src, Aliases: aliases})

	cmd := command(blob.URI)
	out := h.Replicate(context.Background(), cmd)
	key := b.Prefix + "/" + cmd.Destination
	wantComplete(t, out, cmd, true, "https://storage.googleapis.com/"+destBucket+"/"+key)
	if got := object(t, destBucket, key).Content; string(got) != string(data) {
		t.Errorf("object holds %q", got)
	}

	local := command("file:///var/lib/replicator/blobs/"+blob.Fingerprint[:2]+"/"+blob.Fingerprint[2:4]+"/"+blob.Fingerprint+".bin",
		func(c *envelope.ContentReplicate) { c.Destination = "other.pdf" })
	wantRefused(t, h.Replicate(context.Background(), local), local, envelope.ReplicateReasonBlobExpired, "no longer reads")

	stranger := command("gs://"+otherBucket+"/blobs/"+blob.Fingerprint+".bin", func(c *envelope.ContentReplicate) { c.Destination = "other.pdf" })
	wantRefused(t, h.Replicate(context.Background(), stranger), stranger, envelope.ReplicateReasonInvalidSource, "not a reference this store minted")
}

// Many commands at once, on one Handler.
func TestConcurrentUse(t *testing.T) {
	src := newLocal(t)
	aliases, b := primary(t)
	h := newHandler(t, replicate.Options{Source: src, Aliases: aliases})
	var wg sync.WaitGroup
	outs := make([]replicate.Outcome, 12)
	for i := range outs {
		blob := store(t, src, []byte(fmt.Sprintf("blob %d", i%4)))
		cmd := command(blob.URI, func(c *envelope.ContentReplicate) {
			c.CommandID, c.Destination = fmt.Sprintf("rep-%d", i), fmt.Sprintf("r%d.pdf", i%6)
		})
		wg.Go(func() { outs[i] = h.Replicate(context.Background(), cmd) })
	}
	wg.Wait()
	kinds := map[capability.Fate]int{}
	for _, o := range outs {
		kinds[o.Fate]++
	}
	// Each destination r(i%6) is claimed by commands i and i+6, whose blobs
	// i%4 and (i+2)%4 differ: one copy and one conflict apiece, whichever
	// wins the race.
	if diff := cmp.Diff(map[capability.Fate]int{capability.Complete: 6, capability.Close: 6}, kinds); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
	if got := len(objects(t, destBucket, b.Prefix+"/")); got != 6 {
		t.Errorf("%d objects, want 6", got)
	}
}

// Duration is measured on the Handler's clock.
func TestDuration(t *testing.T) {
	aliases, _ := primary(t)
	h := newHandler(t, replicate.Options{Source: newLocal(t), Aliases: aliases})
	var tick atomic.Int64
	replicate.SetClock(h, func() time.Time { return at.Add(time.Duration(tick.Add(1)) * time.Second) })
	out := h.Replicate(context.Background(), command("file:///etc/passwd"))
	// Read at the start, for the fact, and at the end.
	if out.Duration != 2*time.Second {
		t.Errorf("Duration = %v, want 2s", out.Duration)
	}
	if got := out.Fact.When(); !got.Equal(at.Add(2 * time.Second)) {
		t.Errorf("fact time %v", got)
	}
}

func TestNew(t *testing.T) {
	if _, err := replicate.New(replicate.Options{}); err == nil || !strings.HasPrefix(err.Error(), "replicate: ") {
		t.Errorf("New without a source: %v", err)
	}
	if _, err := replicate.New(replicate.Options{Source: newLocal(t), WriteTimeout: -time.Second}); err == nil {
		t.Error("New with a negative write timeout succeeded")
	}
	var logs testenv.LogBuffer
	aliases := newAliases(t, map[string]replicate.Binding{
		"primary": {Provider: replicate.ProviderGCS, Bucket: destBucket},
		"drive":   {Provider: replicate.ProviderGDrive},
	})
	if _, err := replicate.New(replicate.Options{Source: newLocal(t), Aliases: aliases, Logger: slogJSON(&logs)}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"level":"ERROR","msg":"replicate: no writer for this provider; commands naming the alias are refused provider_disabled","alias":"drive"`,
		`"level":"ERROR","msg":"replicate: could not build a gcs writer (no storage client); commands naming the alias are refused provider_disabled","alias":"primary"`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %s:\n%s", want, logs.String())
		}
	}
}

func TestPublicURL(t *testing.T) {
	tests := []struct {
		key  string
		want string
	}{
		{"reps/2026/r.pdf", "https://storage.googleapis.com/b/reps/2026/r.pdf"},
		{"a b/c+d=e@f,g(h)[i]~j_k.l-m", "https://storage.googleapis.com/b/a%20b/c%2Bd%3De%40f%2Cg%28h%29%5Bi%5D~j_k.l-m"},
		{"caf\u00e9/%/?#&;:", "https://storage.googleapis.com/b/caf%C3%A9/%25/%3F%23%26%3B%3A"},
	}
	for _, tc := range tests {
		t.Run(tc.key, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, replicate.PublicURL("b", tc.key)); diff != "" {
				t.Errorf("public_url (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFailedFact(t *testing.T) {
	cmd := command("file:///x")
	long := strings.Repeat("é", replicate.MaxDetailLength)
	tests := []struct {
		name     string
		reason   envelope.ReplicateReason
		detail   string
		attempts int
		want     *envelope.ReplicationFailed
	}{
		{
			name: "handler_error with attempts", reason: envelope.ReplicateReasonHandlerError, detail: "boom", attempts: 5,
			want: &envelope.ReplicationFailed{SchemaVersion: 1, OccurredAt: at, CommandID: "rep-1", InfoItemRepSpecID: "iirs-1",
				SourceRevisionID: "rev-1", InfoSourceID: "isrc-1", Reason: "handler_error", Terminal: true,
				Attempts: new(5), Detail: new("boom")},
		},
		{
			name: "unsupported_schema_version, no attempts", reason: envelope.ReplicateReasonUnsupportedSchemaVersion, detail: "schema_version=2",
			want: &envelope.ReplicationFailed{SchemaVersion: 1, OccurredAt: at, CommandID: "rep-1", InfoItemRepSpecID: "iirs-1",
				SourceRevisionID: "rev-1", InfoSourceID: "isrc-1", Reason: "unsupported_schema_version", Terminal: true,
				Detail: new("schema_version=2")},
		},
		{
			name: "no detail is null", reason: envelope.ReplicateReasonBlobExpired,
			want: &envelope.ReplicationFailed{SchemaVersion: 1, OccurredAt: at, CommandID: "rep-1", InfoItemRepSpecID: "iirs-1",
				SourceRevisionID: "rev-1", InfoSourceID: "isrc-1", Reason: "blob_expired", Terminal: true},
		},
		{
			name: "a long detail is cut on a character", reason: envelope.ReplicateReasonHandlerError, detail: long,
			want: &envelope.ReplicationFailed{SchemaVersion: 1, OccurredAt: at, CommandID: "rep-1", InfoItemRepSpecID: "iirs-1",
				SourceRevisionID: "rev-1", InfoSourceID: "isrc-1", Reason: "handler_error", Terminal: true,
				Detail: new(long[:replicate.MaxDetailLength-4] + "…")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := replicate.FailedFact(cmd, tc.reason, tc.detail, tc.attempts, at)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("FailedFact mismatch (-want +got):\n%s", diff)
			}
			if _, err := envelope.ToWire(got); err != nil {
				t.Errorf("ToWire: %v", err)
			}
		})
	}
}

func TestDedupeKey(t *testing.T) {
	if got := replicate.DedupeKey("rep-1"); got != "replicator:cmd:replicate:rep-1" {
		t.Errorf("DedupeKey = %q", got)
	}
}
