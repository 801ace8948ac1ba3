package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/guard"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

const feed = "https://example.com/feed.xml"

// pendingState is a state with one item holding validators and one pending
// occasion for it, "CMD1".
func pendingState() *State {
	return &State{
		Items: map[string]*Item{feed: {
			URL: feed, Fingerprint: "aaaa", BlobURI: "file:///blobs/aaaa.bin",
			ETag: `W/"v1"`, LastModified: "Mon, 30 Nov 2026 10:00:00 GMT",
		}},
		Pending: map[string]*Occasion{"CMD1": {Item: feed, IssuedAt: t0}},
	}
}

func failed(id string, reason envelope.Reason, terminal bool) *envelope.FetchFailed {
	return &envelope.FetchFailed{OccurredAt: t0, CommandID: id, URL: feed, InfoSourceID: "demo", Reason: reason, Terminal: terminal}
}

func TestApply(t *testing.T) {
	later := t0.Add(time.Minute)
	checked := func(it Item, outcome string) *Item {
		it.LastOutcome, it.CheckedAt = outcome, later
		return &it
	}
	before := *pendingState().Items[feed]
	for _, tc := range []struct {
		name        string
		fact        envelope.Model
		want        Applied
		wantItem    *Item
		wantPending bool
	}{
		{
			name: "blob_available closes the occasion and stores what it says",
			fact: &envelope.BlobAvailable{CommandID: "CMD1", URL: feed, ContentFingerprint: "bbbb",
				BlobURI: "gs://b/blobs/bbbb.bin", ETag: new(`"v2"`)},
			want: Applied{Verdict: Stored, CommandID: "CMD1", Item: feed, Closed: true},
			wantItem: &Item{URL: feed, Fingerprint: "bbbb", BlobURI: "gs://b/blobs/bbbb.bin", ETag: `"v2"`,
				LastOutcome: "stored", CheckedAt: later},
		},
		{
			name:        "a fact for the same URL under another command_id is not ours",
			fact:        &envelope.BlobAvailable{CommandID: "OTHER", URL: feed, ContentFingerprint: "cccc"},
			want:        Applied{Verdict: Unmatched, CommandID: "OTHER"},
			wantItem:    &before,
			wantPending: true,
		},
		{
			name:     "not_modified is a successful check: fingerprint and validators stand",
			fact:     failed("CMD1", envelope.ReasonNotModified, true),
			want:     Applied{Verdict: Unchanged, CommandID: "CMD1", Item: feed, Reason: envelope.ReasonNotModified, Closed: true},
			wantItem: checked(before, "unchanged"),
		},
		{
			name: "invalid_request_options clears the stored validators",
			fact: failed("CMD1", envelope.ReasonInvalidRequestOptions, true),
			want: Applied{Verdict: Refused, CommandID: "CMD1", Item: feed, Reason: envelope.ReasonInvalidRequestOptions, Closed: true},
			wantItem: func() *Item {
				it := checked(before, "failed:invalid_request_options")
				it.ETag, it.LastModified = "", ""
				return it
			}(),
		},
		{
			name:     "any other terminal reason fails the check and keeps the validators",
			fact:     failed("CMD1", envelope.ReasonHTTPStatus, true),
			want:     Applied{Verdict: Failed, CommandID: "CMD1", Item: feed, Reason: envelope.ReasonHTTPStatus, Closed: true},
			wantItem: checked(before, "failed:http_status"),
		},
		{
			name:     "an unknown terminal reason is opaque: recorded as is",
			fact:     failed("CMD1", "origin_on_fire", true),
			want:     Applied{Verdict: Failed, CommandID: "CMD1", Item: feed, Reason: "origin_on_fire", Closed: true},
			wantItem: checked(before, "failed:origin_on_fire"),
		},
		{
			name:        "a non-terminal failure leaves the command pending, whatever its reason",
			fact:        failed("CMD1", envelope.ReasonInvalidRequestOptions, false),
			want:        Applied{Verdict: Retrying, CommandID: "CMD1", Item: feed, Reason: envelope.ReasonInvalidRequestOptions},
			wantItem:    &before,
			wantPending: true,
		},
		{
			name:        "a foreign model on the facts stream is never ours",
			fact:        &envelope.ContentFetch{CommandID: "CMD1", URL: feed},
			want:        Applied{Verdict: Unmatched},
			wantItem:    &before,
			wantPending: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := pendingState()
			got := s.apply(tc.fact, later)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("apply (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantItem, s.Items[feed]); diff != "" {
				t.Errorf("item (-want +got):\n%s", diff)
			}
			if _, pending := s.Pending["CMD1"]; pending != tc.wantPending {
				t.Errorf("CMD1 pending = %t, want %t", pending, tc.wantPending)
			}
			// Applying the same fact again changes nothing: facts arrive at
			// least once.
			item := *s.Items[feed]
			again := s.apply(tc.fact, later.Add(time.Minute))
			if tc.want.Closed && again.Verdict != Unmatched {
				t.Errorf("second apply = %v, want unmatched", again.Verdict)
			}
			if diff := cmp.Diff(&item, s.Items[feed]); tc.want.Closed && diff != "" {
				t.Errorf("second apply changed the item (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMint(t *testing.T) {
	opts := mintOptions{InfoSourceID: "demo", Headers: map[string]string{"accept": "application/rss+xml"}}
	for _, tc := range []struct {
		name            string
		item            Item
		opts            mintOptions
		wantHeaders     map[string]string
		wantConditional []string
		wantDropped     []string
		wantItem        Item
	}{
		{
			name:        "no validators: the run's headers only",
			item:        Item{URL: feed},
			opts:        opts,
			wantHeaders: map[string]string{"accept": "application/rss+xml"},
			wantItem:    Item{URL: feed},
		},
		{
			name:        "no headers at all is null on the wire",
			item:        Item{URL: feed},
			opts:        mintOptions{InfoSourceID: "demo"},
			wantHeaders: nil,
			wantItem:    Item{URL: feed},
		},
		{
			name: "sendable validators are replayed verbatim",
			item: Item{URL: feed, ETag: `W/"v1"`, LastModified: "Mon, 30 Nov 2026 10:00:00 GMT"},
			opts: opts,
			wantHeaders: map[string]string{"accept": "application/rss+xml",
				"if-none-match": `W/"v1"`, "if-modified-since": "Mon, 30 Nov 2026 10:00:00 GMT"},
			wantConditional: []string{"if-none-match", "if-modified-since"},
			wantItem:        Item{URL: feed, ETag: `W/"v1"`, LastModified: "Mon, 30 Nov 2026 10:00:00 GMT"},
		},
		{
			name:            "an unsendable stored validator is dropped before minting",
			item:            Item{URL: feed, ETag: "\"caf\xc3\xa9\"", LastModified: "Mon, 30 Nov 2026 10:00:00 GMT"},
			opts:            opts,
			wantHeaders:     map[string]string{"accept": "application/rss+xml", "if-modified-since": "Mon, 30 Nov 2026 10:00:00 GMT"},
			wantConditional: []string{"if-modified-since"},
			wantDropped:     []string{"etag"},
			wantItem:        Item{URL: feed, LastModified: "Mon, 30 Nov 2026 10:00:00 GMT"},
		},
		{
			name: "validators that push the set over its size limit are left off",
			item: Item{URL: feed, ETag: `"` + strings.Repeat("e", 3500) + `"`},
			opts: mintOptions{InfoSourceID: "demo", Headers: map[string]string{
				"x-a": strings.Repeat("a", 3000), "x-b": strings.Repeat("b", 2000)}},
			wantHeaders: map[string]string{"x-a": strings.Repeat("a", 3000), "x-b": strings.Repeat("b", 2000)},
			wantItem:    Item{URL: feed, ETag: `"` + strings.Repeat("e", 3500) + `"`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			item := tc.item
			s := &State{Items: map[string]*Item{feed: &item}}
			m, err := s.mint(feed, tc.opts, t0)
			if err != nil {
				t.Fatalf("mint: %v", err)
			}
			if diff := cmp.Diff(tc.wantHeaders, m.Cmd.Headers); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantConditional, m.Conditional); diff != "" {
				t.Errorf("conditional (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantDropped, m.Dropped); diff != "" {
				t.Errorf("dropped (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantItem, *s.Items[feed]); diff != "" {
				t.Errorf("item (-want +got):\n%s", diff)
			}
			if err := guard.ScreenHeaders(m.Cmd.Headers); err != nil {
				t.Errorf("minted headers the worker would refuse: %v", err)
			}
			want := Occasion{Item: feed, IssuedAt: t0}
			if diff := cmp.Diff(&want, s.Pending[m.Cmd.CommandID]); diff != "" {
				t.Errorf("pending occasion (-want +got):\n%s", diff)
			}
			if m.Cmd.URL != feed || m.Cmd.InfoSourceID != "demo" {
				t.Errorf("command url, info_source_id = %q, %q", m.Cmd.URL, m.Cmd.InfoSourceID)
			}
		})
	}
}

func TestMintFreshIDPerOccasion(t *testing.T) {
	s := &State{}
	seen := map[string]bool{}
	for range 100 {
		m, err := s.mint(feed, mintOptions{InfoSourceID: "demo"}, t0)
		if err != nil {
			t.Fatal(err)
		}
		if seen[m.Cmd.CommandID] {
			t.Fatalf("command_id %s minted twice for one URL", m.Cmd.CommandID)
		}
		seen[m.Cmd.CommandID] = true
	}
	if len(s.Pending) != 100 {
		t.Errorf("pending = %d occasions, want 100", len(s.Pending))
	}
}

func TestMintRefusesBadHeaders(t *testing.T) {
	s := &State{}
	_, err := s.mint(feed, mintOptions{Headers: map[string]string{"Host": "other.example"}}, t0)
	if !errors.Is(err, guard.ErrInvalidOptions) {
		t.Fatalf("mint with a host header: error = %v, want guard.ErrInvalidOptions", err)
	}
	if len(s.Pending) != 0 {
		t.Errorf("a refused command was recorded as pending")
	}
}

func TestStateRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	s := pendingState()
	s.Pending["OLD"] = &Occasion{Item: feed, IssuedAt: t0.Add(-forgetAfter - time.Second)}
	if err := s.save(path); err != nil {
		t.Fatal(err)
	}
	got, err := loadState(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s, got); diff != "" {
		t.Errorf("loaded state (-want +got):\n%s", diff)
	}
	got.forget(t0.Add(-forgetAfter))
	if _, ok := got.Pending["OLD"]; ok {
		t.Errorf("an occasion older than forgetAfter was kept")
	}
	if _, ok := got.Pending["CMD1"]; !ok {
		t.Errorf("a recent occasion was forgotten")
	}
	empty, err := loadState(filepath.Join(t.TempDir(), "absent.json"))
	if err != nil || len(empty.Items) != 0 {
		t.Errorf("loadState(missing) = %+v, %v; want an empty state", empty, err)
	}
}
