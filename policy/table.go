package policy

import (
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/replicator-go/replicator/envelope"
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

// Apply folds one decoded model into the table and reports whether it
// changed the host's entry, which is kept under the HostKey of the frame's
// host. It ignores, with a log line on slog.Default: models other than
// *envelope.FetchPolicyState (a foreign frame on the policy stream decodes
// cleanly into the wrong model), schema versions other than
// envelope.SchemaVersion, an empty host, a live policy whose interval is
// absent, negative, NaN or infinite, and a frame older than the one already
// applied for its host. A frame exactly as old is applied, so a whole
// set republished under one occurred_at takes effect. A revocation drops the
// host's floor (it falls back to the pacer's default) and remembers the
// frame's instant.
func (t *Table) Apply(m envelope.Model) bool {
	return t.apply(m, slog.Default())
}

func (t *Table) apply(m envelope.Model, log *slog.Logger) bool {
	p, ok := m.(*envelope.FetchPolicyState)
	if !ok || p == nil {
		event := "<nil>"
		if m != nil && !ok {
			event = m.EventType()
		}
		log.Warn("ignoring a message on the fetch policy stream that is not a fetch policy", "event_type", event)
		return false
	}
	if p.SchemaVersion != envelope.SchemaVersion {
		log.Warn("ignoring a fetch policy with an unsupported schema_version", "schema_version", p.SchemaVersion)
		return false
	}
	host := HostKey(p.Host)
	if host == "" {
		log.Warn("ignoring a fetch policy with no host")
		return false
	}
	var interval time.Duration
	if !p.Revoked {
		d, ok := secondsToInterval(p.MinIntervalSeconds)
		if !ok {
			log.Warn("ignoring a fetch policy whose interval is absent, negative or not finite", "host", host)
			return false
		}
		interval = d
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	old, seen := t.hosts[host]
	if seen && p.OccurredAt.Before(old.stamp) {
		log.Info("ignoring a fetch policy older than the one already applied",
			"host", host, "occurred_at", p.OccurredAt, "applied_at", old.stamp)
		return false
	}
	if old.live {
		t.live--
	}
	t.hosts[host] = tableEntry{stamp: p.OccurredAt, interval: interval, live: !p.Revoked}
	if !p.Revoked {
		t.live++
		log.Debug("applied a host fetch policy", "host", host, "min_interval_seconds", interval.Seconds())
	} else {
		log.Debug("revoked a host fetch policy; it falls back to the default", "host", host)
	}
	return true
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
