package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/guard"
)

// Request header names the issuer fills from stored validators.
const (
	headerIfNoneMatch     = "if-none-match"
	headerIfModifiedSince = "if-modified-since"
)

// forgetAfter is how long an occasion without an outcome stays in the
// pending map. A retrying command has no latency bound, so this is generous;
// past it a late fact matches nothing and is discarded.
const forgetAfter = 7 * 24 * time.Hour

// Item is what the issuer keeps about one watched URL between checks: the
// last content it saw and the validators to replay on the next check.
type Item struct {
	URL string `json:"url"`
	// Fingerprint and BlobURI come from the last blob_available. A
	// not_modified keeps them: the origin said they are still current.
	Fingerprint   string     `json:"fingerprint,omitempty"`
	BlobURI       string     `json:"blob_uri,omitempty"`
	BlobExpiresAt *time.Time `json:"blob_expires_at,omitempty"`
	// ETag and LastModified are stored verbatim from the fact and replayed
	// verbatim: a parsed and re-serialized validator no longer matches.
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"last_modified,omitempty"`
	// LastOutcome is stored, unchanged or failed:<reason>.
	LastOutcome string    `json:"last_outcome,omitempty"`
	CheckedAt   time.Time `json:"checked_at,omitzero"`
}

// Occasion is one published command awaiting its outcome.
type Occasion struct {
	// Item is the key of the Item this fetch is for.
	Item     string    `json:"item"`
	IssuedAt time.Time `json:"issued_at"`
}

// State is the issuer's durable memory: the items it watches and the
// command_id → occasion map every fact is correlated through. The zero value
// is empty and usable. A State is not safe for concurrent use.
type State struct {
	Items   map[string]*Item     `json:"items"`
	Pending map[string]*Occasion `json:"pending"`
}

// loadState reads a state file; a missing file is an empty state.
func loadState(path string) (*State, error) {
	s := &State{}
	if path == "" {
		return s, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("state %s: %w", path, err)
	}
	return s, nil
}

// save writes the state atomically (temp file, rename), so a crash leaves
// either the old map or the new one. An empty path keeps it in memory.
func (s *State) save(path string) error {
	if path == "" {
		return nil
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".issuer-state-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// item returns the item for key, creating it.
func (s *State) item(key string) *Item {
	if s.Items == nil {
		s.Items = map[string]*Item{}
	}
	it, ok := s.Items[key]
	if !ok {
		it = &Item{URL: key}
		s.Items[key] = it
	}
	return it
}

// forget drops occasions issued before cutoff.
func (s *State) forget(cutoff time.Time) {
	maps.DeleteFunc(s.Pending, func(_ string, o *Occasion) bool { return o.IssuedAt.Before(cutoff) })
}

// mintOptions are the request options every command of a run carries.
type mintOptions struct {
	InfoSourceID string
	// Headers were screened once at start-up; they never hold validators.
	Headers map[string]string
	// TimeoutSeconds is nil for the worker's default.
	TimeoutSeconds *float64
}

// minted is one command ready to publish, and what minting it changed.
type minted struct {
	Cmd *envelope.ContentFetch
	// Conditional names the validator headers the command carries.
	Conditional []string
	// Dropped names stored validators dropped as unsendable.
	Dropped []string
}

// mint builds the next command for the item at key and records it as
// pending. The caller persists the state before publishing the command.
func (s *State) mint(key string, o mintOptions, now time.Time) (minted, error) {
	it := s.item(key)
	var m minted
	headers := maps.Clone(o.Headers)
	if headers == nil {
		headers = map[string]string{}
	}
	// Screen a stored validator before it goes on the command: an unsendable
	// one would be refused before any request, on every check, forever.
	// Dropping it costs one unconditional fetch instead.
	for _, v := range []struct {
		stored *string
		header string
		field  string
	}{
		{&it.ETag, headerIfNoneMatch, "etag"},
		{&it.LastModified, headerIfModifiedSince, "last_modified"},
	} {
		if *v.stored == "" {
			continue
		}
		if !guard.SendableValidator(*v.stored) {
			*v.stored = ""
			m.Dropped = append(m.Dropped, v.field)
			continue
		}
		headers[v.header] = *v.stored
		m.Conditional = append(m.Conditional, v.header)
	}
	// The count and size limits hold for the whole set, which no screening
	// of one value can speak for: if the set fails, mint unconditionally.
	if err := guard.ScreenHeaders(headers); err != nil {
		if len(m.Conditional) == 0 {
			return minted{}, err
		}
		delete(headers, headerIfNoneMatch)
		delete(headers, headerIfModifiedSince)
		m.Conditional = nil
		if err := guard.ScreenHeaders(headers); err != nil {
			return minted{}, err
		}
	}
	if len(headers) == 0 {
		headers = nil // null on the wire: the worker's defaults apply
	}
	// A fresh ULID per fetch occasion, never one derived from the URL: the
	// worker drops a command_id it has seen within its dedupe window, so a
	// resource-stable id would silently skip every re-check.
	m.Cmd = &envelope.ContentFetch{
		SchemaVersion:  envelope.SchemaVersion,
		OccurredAt:     now.UTC(),
		CommandID:      ulid.Make().String(),
		URL:            it.URL,
		InfoSourceID:   o.InfoSourceID,
		Headers:        headers,
		TimeoutSeconds: o.TimeoutSeconds,
	}
	if s.Pending == nil {
		s.Pending = map[string]*Occasion{}
	}
	s.Pending[m.Cmd.CommandID] = &Occasion{Item: key, IssuedAt: now.UTC()}
	return m, nil
}

// Verdict is what one fact meant to the issuer.
type Verdict string

// The verdicts apply can return.
const (
	// Unmatched: not one of our pending commands (another issuer's fact on
	// the shared stream, a duplicate of one already closed, or a fact whose
	// occasion we forgot). Discarded.
	Unmatched Verdict = "unmatched"
	// Stored: new bytes are stored; the item now points at them.
	Stored Verdict = "stored"
	// Unchanged: a 304 answered our validators; the stored fingerprint stands.
	Unchanged Verdict = "unchanged"
	// Refused: invalid_request_options; the stored validators were cleared.
	Refused Verdict = "refused"
	// Failed: closed without a blob for any other reason.
	Failed Verdict = "failed"
	// Retrying: a non-terminal failure; the command stays pending.
	Retrying Verdict = "retrying"
)

// Applied is the result of applying one fact.
type Applied struct {
	Verdict   Verdict
	CommandID string
	// Item is the key of the item the fact was about; "" when Unmatched.
	Item string
	// Reason is the fetch_failed reason token, as published.
	Reason envelope.Reason
	// Closed reports whether the fact closed the occasion.
	Closed bool
}

// apply folds one fact from content.blobs into the state. Applying the same
// fact twice is safe: the first closes the occasion, the second is Unmatched.
func (s *State) apply(m envelope.Model, now time.Time) Applied {
	switch f := m.(type) {
	case *envelope.BlobAvailable:
		// Correlate on command_id only. The fact's url is for debugging:
		// several items may watch one URL, and matching on it would attach
		// these bytes to whichever came first.
		occ, ok := s.Pending[f.CommandID]
		if !ok {
			return Applied{Verdict: Unmatched, CommandID: f.CommandID}
		}
		it := s.item(occ.Item)
		it.Fingerprint = f.ContentFingerprint
		it.BlobURI = f.BlobURI
		it.BlobExpiresAt = f.BlobExpiresAt
		// A fact without a validator clears the stored one: replaying a
		// validator for bytes we no longer hold would earn a 304 for them.
		it.ETag = deref(f.ETag)
		it.LastModified = deref(f.LastModified)
		it.LastOutcome = string(Stored)
		it.CheckedAt = now.UTC()
		delete(s.Pending, f.CommandID)
		return Applied{Verdict: Stored, CommandID: f.CommandID, Item: occ.Item, Closed: true}

	case *envelope.FetchFailed:
		occ, ok := s.Pending[f.CommandID]
		if !ok {
			return Applied{Verdict: Unmatched, CommandID: f.CommandID, Reason: f.Reason}
		}
		// Branch on terminal first: a non-terminal failure, whatever its
		// reason, means the command is still being worked on.
		if !f.Terminal {
			return Applied{Verdict: Retrying, CommandID: f.CommandID, Item: occ.Item, Reason: f.Reason}
		}
		it := s.item(occ.Item)
		it.CheckedAt = now.UTC()
		delete(s.Pending, f.CommandID)
		a := Applied{CommandID: f.CommandID, Item: occ.Item, Reason: f.Reason, Closed: true}
		switch f.Reason {
		case envelope.ReasonNotModified:
			// A successful check, not a failure: our copy is current, and
			// the fingerprint and validators we hold stand.
			a.Verdict = Unchanged
			it.LastOutcome = string(Unchanged)
		case envelope.ReasonInvalidRequestOptions:
			// Decided from the command alone, so re-minting it from the
			// same stored options would be refused forever: on this reason,
			// and this one alone, forget the stored validators.
			a.Verdict = Refused
			it.ETag, it.LastModified = "", ""
			it.LastOutcome = "failed:" + string(f.Reason)
		default:
			// Any other reason, known or not, closes the occasion as a
			// failure; an unknown token is recorded as is, never parsed.
			a.Verdict = Failed
			it.LastOutcome = "failed:" + string(f.Reason)
		}
		return a
	}
	// A command or a policy frame on the facts stream is somebody's
	// mistake, and never about one of our occasions.
	return Applied{Verdict: Unmatched}
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
