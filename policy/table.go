package policy

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/replicator-go/replicator/envelope"
)

// Why a Table refused a change, for errors.Is.
var (
	// ErrIgnored is wrapped by every error of Apply, Set and Revoke: the
	// table did not change.
	ErrIgnored = errors.New("policy: fetch policy ignored")
	// ErrStale is wrapped by the error for a policy older than the one in
	// force for its host. It wraps ErrIgnored; it is set apart because a
	// replayed stream meets it in the ordinary course, unlike a bad frame.
	ErrStale = fmt.Errorf("%w: older than the one in force", ErrIgnored)
)

// Table holds the per-host floors published on content.fetch-policy: the
// latest fetch_policy_state for each host wins, by occurred_at.
//
// Create it with NewTable; the zero value is not usable. A Table is safe for
// concurrent use: one reader applies frames while pacers read floors.
type Table struct {
	mu    sync.RWMutex
	hosts map[string]tableEntry
	live  int
}

// tableEntry is one host's last applied frame. A revoked host keeps its entry
// (live false) so an older republish of the policy it revoked cannot bring
// it back.
type tableEntry struct {
	stamp    time.Time
	interval time.Duration
	live     bool
}

// NewTable returns an empty Table: every host has no policy until a frame
// for it is applied.
func NewTable() *Table {
	return &Table{hosts: make(map[string]tableEntry)}
}

// Floor returns host's published floor, or ok false when it has none. The
// host is matched by its HostKey, as it was published.
func (t *Table) Floor(host string) (time.Duration, bool) {
	host = HostKey(host)
	t.mu.RLock()
	e, ok := t.hosts[host]
	t.mu.RUnlock()
	if !ok || !e.live {
		return 0, false
	}
	return e.interval, true
}

// Len returns how many hosts have a policy in force (revoked hosts are not
// counted).
func (t *Table) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.live
}

// Snapshot returns every host with a policy in force and its floor, keyed
// by HostKey: a copy, for showing the table (replicator status).
func (t *Table) Snapshot() map[string]time.Duration {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make(map[string]time.Duration, t.live)
	for host, e := range t.hosts {
		if e.live {
			out[host] = e.interval
		}
	}
	return out
}

// Apply folds one decoded model into the table, under the HostKey of the
// frame's host, as Set or Revoke at its occurred_at. It returns nil when the
// host's entry changed, and otherwise an error wrapping ErrIgnored that says
// why: a model other than *envelope.FetchPolicyState (a foreign frame on
// the policy stream decodes cleanly into the wrong model), a schema version
// other than envelope.SchemaVersion, an empty host, a live policy whose
// interval is absent, negative, NaN or infinite, or (wrapping ErrStale too)
// a frame older than the one already applied for its host.
func (t *Table) Apply(m envelope.Model) error {
	p, ok := m.(*envelope.FetchPolicyState)
	if !ok || p == nil {
		event := "<nil>"
		if m != nil && !ok {
			event = m.EventType()
		}
		return fmt.Errorf("%w: event_type %s is not a fetch policy", ErrIgnored, event)
	}
	if p.SchemaVersion != envelope.SchemaVersion {
		return fmt.Errorf("%w: unsupported schema_version %d", ErrIgnored, p.SchemaVersion)
	}
	if p.Revoked {
		return t.Revoke(p.Host, p.OccurredAt)
	}
	d, ok := secondsToInterval(p.MinIntervalSeconds)
	if !ok {
		return fmt.Errorf("%w: host %q: min_interval_seconds is absent, negative or not finite", ErrIgnored, p.Host)
	}
	return t.Set(p.Host, d, p.OccurredAt)
}

// Set makes interval host's floor as of at, under host's HostKey, unless
// the host already has a policy (or a revocation) newer than at. A policy
// exactly as old is replaced, so a whole set republished under one instant
// takes effect. 0 is a real floor (no spacing); an interval beyond what
// any origin could mean is clamped. It returns nil when the entry changed,
// and otherwise an error wrapping ErrIgnored: for an empty host, a negative
// interval, or (wrapping ErrStale too) an older at.
func (t *Table) Set(host string, interval time.Duration, at time.Time) error {
	if interval < 0 {
		return fmt.Errorf("%w: host %q: negative interval %v", ErrIgnored, host, interval)
	}
	return t.put(host, tableEntry{stamp: at, interval: min(interval, maxInterval), live: true})
}

// Revoke drops host's floor as of at, so it falls back to the pacer's
// default (never to "unlimited"), and remembers at so an older policy
// cannot bring the floor back. Errors are as for Set.
func (t *Table) Revoke(host string, at time.Time) error {
	return t.put(host, tableEntry{stamp: at})
}

// put stores e for host's key if it is not older than the entry in force.
func (t *Table) put(host string, e tableEntry) error {
	key := HostKey(host)
	if key == "" {
		return fmt.Errorf("%w: no host", ErrIgnored)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old, seen := t.hosts[key]
	if seen && e.stamp.Before(old.stamp) {
		return fmt.Errorf("%w: host %s: occurred_at %s, applied at %s", ErrStale, key,
			e.stamp.Format(time.RFC3339Nano), old.stamp.Format(time.RFC3339Nano))
	}
	if old.live {
		t.live--
	}
	if e.live {
		t.live++
	}
	t.hosts[key] = e
	return nil
}

// secondsToInterval converts a published interval, refusing what no origin
// could have meant and clamping what no Duration can hold.
func secondsToInterval(s *float64) (time.Duration, bool) {
	if s == nil || math.IsNaN(*s) || math.IsInf(*s, 0) || *s < 0 {
		return 0, false
	}
	if *s >= maxInterval.Seconds() {
		return maxInterval, true
	}
	return time.Duration(math.Round(*s * float64(time.Second))), true
}
