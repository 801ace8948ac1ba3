package persist_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/persist"
	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/local"
)

var (
	data = []byte("%PDF-1.4 the revision this command keeps\n")
	fp   = digest(data)
	now  = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
)

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// stores is a temp sink and a permanent store, both on the local disk.
type stores struct {
	temp *local.Sink
	perm *persist.LocalStore
}

func newStores(t *testing.T) stores {
	t.Helper()
	temp, err := local.New(local.Options{Dir: filepath.Join(t.TempDir(), "temp"), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	perm, err := persist.NewLocalStore(filepath.Join(t.TempDir(), "permanent"))
	if err != nil {
		t.Fatal(err)
	}
	return stores{temp: temp, perm: perm}
}

// put stores b in the temp sink and returns its blob_uri.
func (s stores) put(t *testing.T, b []byte) string {
	t.Helper()
	blob, err := s.temp.Put(context.Background(), bytes.NewReader(b), sink.PutOptions{MediaType: "application/pdf"})
	if err != nil {
		t.Fatal(err)
	}
	return blob.URI
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func newHandler(t *testing.T, temp persist.Source, perm persist.Store) *persist.Handler {
	t.Helper()
	h, err := persist.New(persist.Options{Temp: temp, Store: perm, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	persist.SetNow(h, func() time.Time { return now })
	return h
}

// command decodes a content_persist frame as the engine would.
func command(t *testing.T, h *persist.Handler, id, fingerprint, blobURI string) *capability.Command {
	t.Helper()
	wire, err := envelope.ToWire(&envelope.ContentPersist{
		OccurredAt: now.Add(-time.Minute), CommandID: id, ContentFingerprint: fingerprint,
		BlobURI: blobURI, MediaType: "application/pdf",
	})
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := h.Decode(wire)
	if err != nil {
		t.Fatal(err)
	}
	return cmd
}

func persisted(id string, size int64) *envelope.BlobPersisted {
	return &envelope.BlobPersisted{SchemaVersion: 1, OccurredAt: now, CommandID: id, ContentFingerprint: fp, SizeBytes: size}
}

// wantClosed checks a refusal: the fate, the reason and the fact that
// echoes the command.
func wantClosed(t *testing.T, out capability.Outcome, reason envelope.PersistReason, id, fingerprint string) {
	t.Helper()
	if out.Fate != capability.Close || out.Reason != string(reason) {
		t.Fatalf("outcome %v %q (%v), want close %q", out.Fate, out.Reason, out.Err, reason)
	}
	f, ok := out.Fact.(*envelope.PersistFailed)
	if !ok {
		t.Fatalf("fact %T, want *envelope.PersistFailed", out.Fact)
	}
	if f.CommandID != id || f.ContentFingerprint != fingerprint || f.Reason != reason || !f.Terminal || f.Detail == nil {
		t.Errorf("fact %+v", f)
	}
	if _, err := envelope.ToWire(f); err != nil {
		t.Errorf("the fact does not encode: %v", err)
	}
}

func TestATempBlobIsKept(t *testing.T) {
	s := newStores(t)
	h := newHandler(t, s.temp, s.perm)

	out := h.Handle(context.Background(), command(t, h, "per-1", fp, s.put(t, data)))

	if out.Fate != capability.Complete || out.Name() != "persisted" {
		t.Fatalf("outcome %v %q: %v", out.Fate, out.Name(), out.Err)
	}
	if diff := cmp.Diff(envelope.Model(persisted("per-1", int64(len(data)))), out.Fact); diff != "" {
		t.Errorf("fact (-want +got):\n%s", diff)
	}
	got, err := os.ReadFile(s.perm.Path(fp))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("kept %q, %v", got, err)
	}
	fi, _ := os.Stat(s.perm.Path(fp))
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("kept blob mode %v, want 0644", fi.Mode().Perm())
	}
	if s.perm.URI(fp) != "file://"+filepath.ToSlash(s.perm.Path(fp)) {
		t.Errorf("URI %s, Path %s", s.perm.URI(fp), s.perm.Path(fp))
	}
	leftovers(t, s.perm.Dir())
}

// At-least-once: the redelivery finds the blob kept, writes nothing, and
// announces it again.
func TestASecondPersistIsASuccessThatAnnouncesAgain(t *testing.T) {
	s := newStores(t)
	h := newHandler(t, s.temp, s.perm)
	uri := s.put(t, data)
	if out := h.Handle(context.Background(), command(t, h, "per-1", fp, uri)); out.Fate != capability.Complete {
		t.Fatal(out.Err)
	}
	before, _ := os.Stat(s.perm.Path(fp))

	out := h.Handle(context.Background(), command(t, h, "per-2", fp, uri))

	if out.Fate != capability.Complete || out.Name() != "already_kept" {
		t.Fatalf("outcome %v %q: %v", out.Fate, out.Name(), out.Err)
	}
	if diff := cmp.Diff(envelope.Model(persisted("per-2", int64(len(data)))), out.Fact); diff != "" {
		t.Errorf("fact (-want +got):\n%s", diff)
	}
	after, _ := os.Stat(s.perm.Path(fp))
	if !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
		t.Error("the kept blob was written again")
	}
}

// A blob_uri naming the permanent store is a success when it holds the
// digest, and blob_expired when it does not.
func TestAPermanentURI(t *testing.T) {
	s := newStores(t)
	h := newHandler(t, s.temp, s.perm)

	out := h.Handle(context.Background(), command(t, h, "per-1", fp, s.perm.URI(fp)))
	wantClosed(t, out, envelope.PersistReasonBlobExpired, "per-1", fp)

	if _, err := s.perm.Keep(context.Background(), fp, bytes.NewReader(data), ""); err != nil {
		t.Fatal(err)
	}
	out = h.Handle(context.Background(), command(t, h, "per-2", fp, s.perm.URI(fp)))
	if out.Fate != capability.Complete {
		t.Fatalf("outcome %v: %v", out.Fate, out.Err)
	}
}

// The permanent store is the authority: a reaper re-issuing after the temp
// blob expired, for bytes an earlier command kept, hears a success.
func TestAnExpiredTempBlobAlreadyKeptIsASuccess(t *testing.T) {
	s := newStores(t)
	h := newHandler(t, s.temp, s.perm)
	if _, err := s.perm.Keep(context.Background(), fp, bytes.NewReader(data), ""); err != nil {
		t.Fatal(err)
	}

	out := h.Handle(context.Background(), command(t, h, "per-1", fp, s.temp.URI(fp)))

	if out.Fate != capability.Complete || out.Fact.(*envelope.BlobPersisted).SizeBytes != int64(len(data)) {
		t.Fatalf("outcome %v %+v: %v", out.Fate, out.Fact, out.Err)
	}
}

func TestATempBlobThatIsGoneIsExpired(t *testing.T) {
	s := newStores(t)
	h := newHandler(t, s.temp, s.perm)

	out := h.Handle(context.Background(), command(t, h, "per-1", fp, s.temp.URI(fp)))

	wantClosed(t, out, envelope.PersistReasonBlobExpired, "per-1", fp)
}

func TestAURINoStoreHereMintedIsInvalidSource(t *testing.T) {
	s := newStores(t)
	h := newHandler(t, s.temp, s.perm)
	s.put(t, data)
	temp := s.temp.URI(fp)
	tests := []struct{ name, uri string }{
		{"a real secret", "file:///etc/passwd"},
		{"a stranger's root", "file:///srv/elsewhere/" + fp[:2] + "/" + fp[2:4] + "/" + fp + ".bin"},
		{"a stranger's bucket", "gs://elsewhere/blobs/" + fp + ".bin"},
		{"traversal", strings.Replace(temp, "/"+fp[:2]+"/", "/"+fp[:2]+"/../"+fp[:2]+"/", 1)},
		{"percent-encoded", strings.Replace(temp, fp+".bin", "%"+hex.EncodeToString([]byte(fp[:1]))+fp[1:]+".bin", 1)},
		{"a query", temp + "?x=1"},
		{"a fragment", temp + "#x"},
		{"userinfo", strings.Replace(temp, "file://", "file://user:secret@", 1)},
		{"upper case", strings.Replace(temp, fp+".bin", strings.ToUpper(fp)+".bin", 1)},
		{"no suffix", strings.TrimSuffix(temp, ".bin")},
		{"junk", "not a uri"},
		{"empty", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := h.Handle(context.Background(), command(t, h, "per-1", fp, tc.uri))
			wantClosed(t, out, envelope.PersistReasonInvalidSource, "per-1", fp)
			if strings.Contains(*out.Fact.(*envelope.PersistFailed).Detail, "secret") {
				t.Errorf("detail shows a password: %s", *out.Fact.(*envelope.PersistFailed).Detail)
			}
		})
	}
	if _, err := s.perm.Size(context.Background(), fp); !errors.Is(err, sink.ErrNotFound) {
		t.Errorf("something was kept: %v", err)
	}
}

// The two digests must agree, decided before anything is read, so a gone
// blob cannot answer blob_expired for a command that could never succeed.
func TestTheTwoDigestsMustAgree(t *testing.T) {
	s := newStores(t)
	h := newHandler(t, s.temp, s.perm)
	other := []byte("some other revision")
	otherURI := s.put(t, other)
	another := digest([]byte("another revision, not stored"))
	tests := []struct {
		name, fingerprint, uri string
	}{
		{"a stored blob of another digest", fp, otherURI},
		{"a gone blob of another digest", another, s.temp.URI(fp)},
		{"a permanent URI of another digest", fp, s.perm.URI(digest(other))},
		{"a malformed fingerprint", "NOT-A-DIGEST", otherURI},
		{"a malformed fingerprint, the blob gone", "not-a-digest", s.temp.URI(another)},
		{"an upper-case fingerprint", strings.ToUpper(digest(other)), otherURI},
		{"an empty fingerprint", "", otherURI},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := h.Handle(context.Background(), command(t, h, "per-1", tc.fingerprint, tc.uri))
			wantClosed(t, out, envelope.PersistReasonInvalidSource, "per-1", tc.fingerprint)
		})
	}
	for _, d := range []string{fp, digest(other), another} {
		if _, err := s.perm.Size(context.Background(), d); !errors.Is(err, sink.ErrNotFound) {
			t.Errorf("%s was kept: %v", d, err)
		}
	}
}

// A temp blob whose bytes no longer hash to its name is refused and never
// reaches the permanent store.
func TestBytesThatDoNotHashToTheirNameAreRefused(t *testing.T) {
	s := newStores(t)
	h := newHandler(t, s.temp, s.perm)
	uri := s.put(t, data)
	if err := os.WriteFile(s.temp.Path(fp), []byte("bit-rotted bytes"), 0o644); err != nil {
		t.Fatal(err)
	}

	out := h.Handle(context.Background(), command(t, h, "per-1", fp, uri))

	wantClosed(t, out, envelope.PersistReasonSourceCorrupt, "per-1", fp)
	if _, err := os.Stat(s.perm.Path(fp)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("corrupt bytes kept: %v", err)
	}
	leftovers(t, s.perm.Dir())
}

// leftovers fails when a temp file is left in dir's tree.
func leftovers(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".tmp") {
			t.Errorf("temp left behind: %s", path)
		}
		return nil
	})
}

// stubStore answers Size and Keep as told, for the classification of what
// real stores rarely say.
type stubStore struct {
	persist.Store
	sizeErr, keepErr error
}

func (s stubStore) Size(ctx context.Context, fingerprint string) (int64, error) {
	if s.sizeErr != nil {
		return 0, s.sizeErr
	}
	return s.Store.Size(ctx, fingerprint)
}

func (s stubStore) Keep(ctx context.Context, fingerprint string, r io.Reader, mediaType string) (persist.Kept, error) {
	if s.keepErr != nil {
		io.Copy(io.Discard, r)
		return persist.Kept{}, s.keepErr
	}
	return s.Store.Keep(ctx, fingerprint, r, mediaType)
}

// stubSource answers Open as told.
type stubSource struct {
	persist.Source
	openErr error
	readErr error // after the first bytes
}

func (s stubSource) Open(ctx context.Context, fingerprint string) (io.ReadCloser, error) {
	if s.openErr != nil {
		return nil, s.openErr
	}
	rc, err := s.Source.Open(ctx, fingerprint)
	if err != nil || s.readErr == nil {
		return rc, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(io.LimitReader(rc, 4), errReader{s.readErr}), rc}, nil
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestFailuresAreClassified(t *testing.T) {
	statusless := errors.New("connection reset by peer")
	refused := errors.Join(sink.ErrPermanent, errors.New("403 no storage.objects.create"))
	tests := []struct {
		name   string
		source func(persist.Source) persist.Source
		store  func(persist.Store) persist.Store
		fate   capability.Fate
		reason envelope.PersistReason
	}{
		{name: "the store refuses for good", store: func(s persist.Store) persist.Store { return stubStore{Store: s, keepErr: refused} },
			fate: capability.Close, reason: envelope.PersistReasonStoreRefused},
		{name: "the store fails with no status", store: func(s persist.Store) persist.Store { return stubStore{Store: s, keepErr: statusless} },
			fate: capability.Retry},
		{name: "the store times out", store: func(s persist.Store) persist.Store {
			return stubStore{Store: s, keepErr: context.DeadlineExceeded}
		}, fate: capability.Retry},
		{name: "the permanent store cannot be checked", store: func(s persist.Store) persist.Store { return stubStore{Store: s, sizeErr: statusless} },
			fate: capability.Retry},
		{name: "the permanent store refuses the check", store: func(s persist.Store) persist.Store { return stubStore{Store: s, sizeErr: refused} },
			fate: capability.Unclassified},
		{name: "the temp store cannot be reached", source: func(s persist.Source) persist.Source { return stubSource{Source: s, openErr: statusless} },
			fate: capability.Retry},
		// No persist reason says "this host cannot read its own store":
		// the delivery ceiling closes it as handler_error.
		{name: "the temp store refuses the read", source: func(s persist.Source) persist.Source { return stubSource{Source: s, openErr: refused} },
			fate: capability.Unclassified},
		{name: "the read breaks off", source: func(s persist.Source) persist.Source { return stubSource{Source: s, readErr: statusless} },
			fate: capability.Retry},
		{name: "the blob is swept while it is read", source: func(s persist.Source) persist.Source {
			return stubSource{Source: s, readErr: sink.ErrNotFound}
		}, fate: capability.Close, reason: envelope.PersistReasonBlobExpired},
		{name: "the blob is swept before it is opened", source: func(s persist.Source) persist.Source {
			return stubSource{Source: s, openErr: sink.ErrNotFound}
		}, fate: capability.Close, reason: envelope.PersistReasonBlobExpired},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStores(t)
			uri := s.put(t, data)
			var src persist.Source = s.temp
			var st persist.Store = s.perm
			if tc.source != nil {
				src = tc.source(src)
			}
			if tc.store != nil {
				st = tc.store(st)
			}
			h := newHandler(t, src, st)
			out := h.Handle(context.Background(), command(t, h, "per-1", fp, uri))
			if out.Fate != tc.fate || out.Reason != string(tc.reason) {
				t.Fatalf("outcome %v %q (%v), want %v %q", out.Fate, out.Reason, out.Err, tc.fate, tc.reason)
			}
			if tc.fate == capability.Close {
				wantClosed(t, out, tc.reason, "per-1", fp)
			} else if out.Fact != nil || out.Err == nil {
				t.Errorf("fact %v, err %v: want no fact and an error", out.Fact, out.Err)
			}
			if _, err := s.perm.Size(context.Background(), fp); !errors.Is(err, sink.ErrNotFound) {
				t.Errorf("kept after a failure: %v", err)
			}
		})
	}
}

// A cancelled handling (the engine's drain) is retried, having kept
// nothing.
func TestACancelledPersistIsRetried(t *testing.T) {
	s := newStores(t)
	h := newHandler(t, s.temp, s.perm)
	uri := s.put(t, data)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	out := h.Handle(ctx, command(t, h, "per-1", fp, uri))

	if out.Fate != capability.Retry || !errors.Is(out.Err, context.Canceled) {
		t.Fatalf("outcome %v: %v", out.Fate, out.Err)
	}
}

func TestDecode(t *testing.T) {
	s := newStores(t)
	h := newHandler(t, s.temp, s.perm)

	cmd := command(t, h, "per-1", fp, s.temp.URI(fp))
	if cmd.ID != "per-1" || cmd.Key != "" || cmd.Value.(*envelope.ContentPersist).ContentFingerprint != fp {
		t.Errorf("command %+v", cmd)
	}

	fetch, _ := envelope.ToWire(&envelope.ContentFetch{OccurredAt: now, CommandID: "cmd-1", URL: "https://example.test/"})
	if cmd, err := h.Decode(fetch); cmd != nil || !errors.Is(err, envelope.ErrForeignPayload) {
		t.Errorf("a fetch command: %v, %v; want foreign", cmd, err)
	}
	if cmd, err := h.Decode(map[string]string{"event_type": "content_persist"}); cmd != nil || !errors.Is(err, envelope.ErrMalformedFrame) {
		t.Errorf("no payload: %v, %v; want malformed", cmd, err)
	}

	v2, _ := envelope.ToWire(&envelope.ContentPersist{SchemaVersion: 2, OccurredAt: now, CommandID: "per-2", ContentFingerprint: "x"})
	cmd, err := h.Decode(v2)
	if !errors.Is(err, envelope.ErrUnsupportedVersion) || cmd == nil || cmd.ID != "per-2" {
		t.Fatalf("version 2: %v, %v", cmd, err)
	}
	got := h.Failed(cmd, string(envelope.PersistReasonUnsupportedSchemaVersion), "", 0, now)
	want := &envelope.PersistFailed{SchemaVersion: 1, OccurredAt: now, CommandID: "per-2", ContentFingerprint: "x",
		Reason: envelope.PersistReasonUnsupportedSchemaVersion, Terminal: true, Detail: new("schema_version=2")}
	if diff := cmp.Diff(envelope.Model(want), got); diff != "" {
		t.Errorf("unsupported_schema_version fact (-want +got):\n%s", diff)
	}
}

func TestFailedHandlerError(t *testing.T) {
	s := newStores(t)
	h := newHandler(t, s.temp, s.perm)
	cmd := command(t, h, "per-1", "NOT-A-DIGEST", "x")

	got := h.Failed(cmd, string(envelope.PersistReasonHandlerError), strings.Repeat("why ", 1000), 5, now)

	f := got.(*envelope.PersistFailed)
	if f.Reason != envelope.PersistReasonHandlerError || f.ContentFingerprint != "NOT-A-DIGEST" || !f.Terminal ||
		!strings.HasPrefix(*f.Detail, "after 5 handlings: why") || len(*f.Detail) > envelope.MaxDetailLength {
		t.Errorf("fact %+v %q", f, *f.Detail)
	}
}

func TestCapability(t *testing.T) {
	s := newStores(t)
	h := newHandler(t, s.temp, s.perm)

	c := persist.Capability(h)

	want := capability.Capability{
		Name: "persist", Handler: h,
		Stream: "content.persist", Group: "replicator.persist", FactsStream: "content.artifacts",
		DLQStream: "content.persist.dlq", DedupePrefix: "replicator:cmd:persist:",
		Concurrency: persist.DefaultConcurrency, MaxHeld: persist.DefaultMaxHeld,
		DrainTimeout: persist.DefaultTimeout + persist.DrainMargin,
	}
	if diff := cmp.Diff(want, c, cmp.Comparer(func(a, b capability.Handler) bool { return a == b })); diff != "" {
		t.Errorf("capability (-want +got):\n%s", diff)
	}
}

func TestNewRefusesWhatIsMissing(t *testing.T) {
	s := newStores(t)
	for _, opts := range []persist.Options{
		{Store: s.perm},
		{Temp: s.temp},
		{Temp: s.temp, Store: s.perm, Timeout: -time.Second},
	} {
		if _, err := persist.New(opts); err == nil {
			t.Errorf("New(%+v) succeeded", opts)
		}
	}
}

// counting is a reader of n generated bytes.
type counting struct{ n, off int64 }

func (c *counting) Read(p []byte) (int, error) {
	if c.off >= c.n {
		return 0, io.EOF
	}
	m := min(int64(len(p)), c.n-c.off)
	for i := range p[:m] {
		p[i] = byte(c.off + int64(i))
	}
	c.off += m
	return int(m), nil
}

func generatedDigest(n int64) string {
	h := sha256.New()
	io.Copy(h, &counting{n: n})
	return hex.EncodeToString(h.Sum(nil))
}

// Keeping a blob streams it: the bytes allocated are a small fraction of
// the blob's size.
func TestLocalKeepStreams(t *testing.T) {
	const size = 64 << 20
	perm, err := persist.NewLocalStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := generatedDigest(size)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	kept, err := perm.Keep(context.Background(), want, &counting{n: size}, "")
	runtime.ReadMemStats(&after)
	if err != nil || kept.Size != size || !kept.Created {
		t.Fatalf("Keep: %+v, %v", kept, err)
	}
	if grown := after.TotalAlloc - before.TotalAlloc; grown > size/16 {
		t.Errorf("Keep of %d bytes allocated %d", size, grown)
	}
}
