package streamstate

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/redisacl"
	"github.com/replicator-go/replicator/policy"
)

// batch is how many entries one XRANGE of a dead-letter scan asks for.
const batch = 500

// DeadLetter is one entry of a dead-letter stream (docs/streams.md, Dead
// letters): the original frame's fields plus the reason and original id.
type DeadLetter struct {
	// Entry is the entry as read.
	Entry rueidis.XRangeEntry
	// At is when it was dead-lettered: its id's time.
	At time.Time
	// Reason is its dlq_reason field.
	Reason string
	// Host is the HostKey of a content_fetch command's URL (read from the
	// payload even when the frame does not decode); "" for anything else.
	Host string
}

// DeadLetterOf reads an entry of a dead-letter stream.
func DeadLetterOf(e rueidis.XRangeEntry) DeadLetter {
	d := DeadLetter{Entry: e, Reason: e.FieldValues[envelope.FieldDLQReason]}
	d.At, _ = IDTime(e.ID)
	d.Host = commandHost(e.FieldValues)
	return d
}

// commandHost is the host a content_fetch frame's URL names.
func commandHost(fields map[string]string) string {
	raw := ""
	if m, err := envelope.FromWire(fields); err == nil {
		if cf, ok := m.(*envelope.ContentFetch); ok {
			raw = cf.URL
		}
	} else if fields[envelope.FieldEventType] == "content_fetch" {
		// Undecodable: its url member, if the payload is an object.
		var p struct {
			URL string `json:"url"`
		}
		if json.Unmarshal([]byte(fields[envelope.FieldPayload]), &p) == nil {
			raw = p.URL
		}
	}
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return policy.HostKey(u.Hostname())
}

// Filter selects dead letters. The zero Filter selects every one.
type Filter struct {
	// Reason, when set, is the dlq_reason to keep.
	Reason string
	// Host, when set, keeps content_fetch commands for that host (compared
	// by HostKey).
	Host string
	// Since and Until, when set, bound when the dead letter was written,
	// both inclusive, to the millisecond.
	Since, Until time.Time
}

// Match reports whether f keeps d.
func (f Filter) Match(d DeadLetter) bool {
	if f.Reason != "" && d.Reason != f.Reason {
		return false
	}
	if f.Host != "" && d.Host != policy.HostKey(f.Host) {
		return false
	}
	if !f.Since.IsZero() && d.At.Before(f.Since.Truncate(time.Millisecond)) {
		return false
	}
	if !f.Until.IsZero() && d.At.After(f.Until) {
		return false
	}
	return true
}

// bounds are the ids that bracket f's time range, for XRANGE.
func (f Filter) bounds() (start, end string) {
	start, end = "-", "+"
	if !f.Since.IsZero() {
		start = strconv.FormatInt(max(f.Since.UnixMilli(), 0), 10)
	}
	if !f.Until.IsZero() {
		end = strconv.FormatInt(max(f.Until.UnixMilli(), 0), 10)
	}
	return start, end
}

// NewestDeadLetters returns up to n of key's dead letters that f keeps,
// newest first.
//
// It reads backwards with XRANGE alone (the operators' Redis user is not
// granted XREVRANGE; docs/operations.md, Redis ACL): from the newest entry
// XINFO STREAM names, over windows of entry-id time, each read oldest first
// at most a batch at a time. The first window is one millisecond; one that
// holds little widens the next (up to 16 times, 16 times when empty, so
// years without an entry are crossed in a few reads), and one that fills a
// batch is narrowed and read again, so reading the newest n takes a few
// reads more than n/batch. It stops when it has n or has read back to the
// oldest entry (or f.Since).
func NewestDeadLetters(ctx context.Context, c rueidis.Client, key string, f Filter, n int) ([]DeadLetter, error) {
	st, err := ReadStream(ctx, c, key)
	if err != nil || st.Length == 0 {
		return nil, err
	}
	lo, hi := st.Oldest.UnixMilli(), st.Newest.UnixMilli()
	if !f.Since.IsZero() {
		lo = max(lo, f.Since.UnixMilli())
	}
	if !f.Until.IsZero() {
		hi = min(hi, f.Until.UnixMilli())
	}
	var out []DeadLetter
	for width := int64(1); hi >= lo && len(out) < n; {
		from := max(hi-width+1, lo)
		entries, err := xrange(ctx, c, key, strconv.FormatInt(from, 10), strconv.FormatInt(hi, 10))
		if err != nil {
			return nil, err
		}
		if len(entries) == batch {
			if last, _ := IDTime(entries[len(entries)-1].ID); last.UnixMilli() < hi {
				// Too many: the newer part first, at most half the window.
				width = max(min((hi-from+1)/2, hi-last.UnixMilli()), 1)
				continue
			}
			// The batch reached millisecond hi: read the rest of it.
			for page := entries; len(page) == batch; {
				if page, err = xrange(ctx, c, key, "("+page[len(page)-1].ID, strconv.FormatInt(hi, 10)); err != nil {
					return nil, err
				}
				entries = append(entries, page...)
			}
		}
		for i := len(entries) - 1; i >= 0 && len(out) < n; i-- {
			if d := DeadLetterOf(entries[i]); f.Match(d) {
				out = append(out, d)
			}
		}
		hi = from - 1
		switch {
		case len(entries) == 0:
			width *= 16
		case len(entries) < batch/4:
			width *= min(int64(batch/2/len(entries)), 16)
		}
		width = min(width, max(hi-lo+1, 1))
	}
	return out, nil
}

// xrange reads up to a batch of key's entries from start to end.
func xrange(ctx context.Context, c rueidis.Client, key, start, end string) ([]rueidis.XRangeEntry, error) {
	entries, err := c.Do(ctx, c.B().Xrange().Key(key).Start(start).End(end).Count(batch).Build()).AsXRange()
	if err != nil {
		return nil, fmt.Errorf("streamstate: XRANGE %s: %w", key, redisacl.Check(err, "XRANGE", key))
	}
	return entries, nil
}

// Tally counts dead letters sharing a reason or a host.
type Tally struct {
	// Key is the reason or host ("" for dead letters with no host).
	Key string
	// Count is how many.
	Count int64
	// Oldest and Newest are when the first and last were written.
	Oldest, Newest time.Time
}

func (t *Tally) add(d DeadLetter) {
	if t.Count == 0 || d.At.Before(t.Oldest) {
		t.Oldest = d.At
	}
	if t.Count == 0 || d.At.After(t.Newest) {
		t.Newest = d.At
	}
	t.Count++
}

// Stats summarises the dead letters of one stream that a Filter kept.
type Stats struct {
	// Stream is the dead-letter stream's key.
	Stream string
	// All tallies every dead letter kept.
	All Tally
	// ByReason and ByHost tally them by reason and by host, the largest
	// count first.
	ByReason, ByHost []Tally
	// Truncated is set when the scan stopped at its limit: the tallies
	// cover the oldest limit entries of the range only.
	Truncated bool
}

// CountDeadLetters tallies key's dead letters that f keeps, reading at most
// limit entries, oldest first (0: no limit).
func CountDeadLetters(ctx context.Context, c rueidis.Client, key string, f Filter, limit int) (Stats, error) {
	s := Stats{Stream: key}
	reasons, hosts := map[string]*Tally{}, map[string]*Tally{}
	start, end := f.bounds()
	read := 0
	for {
		entries, err := xrange(ctx, c, key, start, end)
		if err != nil {
			return s, err
		}
		for _, e := range entries {
			if limit > 0 && read == limit {
				s.Truncated = true
				break
			}
			read++
			d := DeadLetterOf(e)
			if !f.Match(d) {
				continue
			}
			s.All.add(d)
			tally(reasons, d.Reason).add(d)
			tally(hosts, d.Host).add(d)
		}
		if s.Truncated || len(entries) < batch {
			break
		}
		start = "(" + entries[len(entries)-1].ID
	}
	s.ByReason, s.ByHost = sorted(reasons), sorted(hosts)
	return s, nil
}

func tally(m map[string]*Tally, k string) *Tally {
	t, ok := m[k]
	if !ok {
		t = &Tally{Key: k}
		m[k] = t
	}
	return t
}

func sorted(m map[string]*Tally) []Tally {
	out := make([]Tally, 0, len(m))
	for _, t := range m {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b Tally) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Key, b.Key))
	})
	return out
}

// TrimDeadLetters removes key's dead letters written before before (to
// the millisecond) with XTRIM MINID, and returns how many it removed. It
// is the one call of this package that writes.
func TrimDeadLetters(ctx context.Context, c rueidis.Client, key string, before time.Time) (int64, error) {
	minID := strconv.FormatInt(max(before.UnixMilli(), 0), 10)
	n, err := c.Do(ctx, c.B().Xtrim().Key(key).Minid().Exact().Threshold(minID).Build()).AsInt64()
	if err != nil {
		return 0, fmt.Errorf("streamstate: XTRIM %s MINID %s: %w", key, minID, redisacl.Check(err, "XTRIM", key))
	}
	return n, nil
}
