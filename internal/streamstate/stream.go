// Package streamstate reads what Redis holds about the worker's streams:
// each stream's length and the age of its entries, each consumer group's
// lag, pending entries and consumers, and the dead letters by reason and
// host. The worker's stream gauges and the read-only operator commands
// (`replicator status`, `replicator dlq`) all read through it, so a number
// on the dashboard and on the status screen is computed once
// (docs/operations.md).
//
// It only reads, except TrimDeadLetters. Every call is one command on one
// key (TYPE, XINFO, XPENDING, XRANGE, XTRIM) or TIME, so it works
// unchanged on a Redis Cluster.
package streamstate

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// PendingSample is how many of a group's oldest pending entries (by id)
// are read to find the longest idle one: a worker keeps the entries it
// holds fresh, so an entry idle for long is one nobody holds, and those
// are the oldest.
const PendingSample = 100

// MaxLagCount bounds the entries counted when Redis cannot say a group's
// lag itself (before Redis 7, or after entries were deleted from the
// middle of the stream).
const MaxLagCount = 10000

// Stream is one stream as Redis holds it.
type Stream struct {
	// Key is the stream's key.
	Key string
	// Exists is false when the key is absent: a stream nothing has written
	// to yet. Its length is then 0.
	Exists bool
	// Length is XLEN.
	Length int64
	// Oldest and Newest are when the first and last entries were added
	// (their ids' times, on the Redis server's clock); zero when empty.
	Oldest, Newest time.Time
}

// Group is one consumer group of a stream.
type Group struct {
	// Name is the group's name.
	Name string
	// Lag is how many entries the group has not yet been delivered.
	Lag int64
	// LagCounted is set when Redis could not say the lag and it was
	// counted instead, up to MaxLagCount (a lower bound when it reached it).
	LagCounted bool
	// Pending is how many entries were delivered and not yet acknowledged.
	Pending int64
	// OldestPendingIdle is the longest time since delivery among the
	// PendingSample oldest pending entries; zero when none is pending.
	OldestPendingIdle time.Duration
	// Consumers are the group's consumers, as XINFO CONSUMERS lists them.
	Consumers []Consumer
}

// Consumer is one consumer of a group.
type Consumer struct {
	// Name is the consumer's name (REPLICATOR_CONSUMER_NAME).
	Name string
	// Pending is how many entries it holds unacknowledged.
	Pending int64
	// Idle is how long since it last read or claimed.
	Idle time.Duration
}

// ServerTime returns the Redis server's clock: stream ids are stamped with
// it, so ages are measured against it rather than this machine's.
func ServerTime(ctx context.Context, c rueidis.Client) (time.Time, error) {
	v, err := c.Do(ctx, c.B().Time().Build()).AsStrSlice()
	if err != nil {
		return time.Time{}, fmt.Errorf("streamstate: TIME: %w", err)
	}
	if len(v) != 2 {
		return time.Time{}, fmt.Errorf("streamstate: TIME answered %d values", len(v))
	}
	sec, err1 := strconv.ParseInt(v[0], 10, 64)
	usec, err2 := strconv.ParseInt(v[1], 10, 64)
	if err1 != nil || err2 != nil {
		return time.Time{}, fmt.Errorf("streamstate: TIME answered %q", v)
	}
	return time.Unix(sec, usec*1000).UTC(), nil
}

// ReadStream reads key's length and the times of its first and last
// entries. An absent key is a Stream with Exists false; a key of another
// type is an error.
func ReadStream(ctx context.Context, c rueidis.Client, key string) (Stream, error) {
	s := Stream{Key: key}
	typ, err := c.Do(ctx, c.B().Type().Key(key).Build()).ToString()
	if err != nil {
		return s, fmt.Errorf("streamstate: TYPE %s: %w", key, err)
	}
	switch typ {
	case "none":
		return s, nil
	case "stream":
	default:
		return s, fmt.Errorf("streamstate: %s is a %s, not a stream", key, typ)
	}
	info, err := c.Do(ctx, c.B().XinfoStream().Key(key).Build()).AsMap()
	if err != nil {
		return s, fmt.Errorf("streamstate: XINFO STREAM %s: %w", key, err)
	}
	s.Exists = true
	if v, ok := info["length"]; ok {
		s.Length, _ = v.AsInt64()
	}
	s.Oldest = entryTime(info["first-entry"])
	s.Newest = entryTime(info["last-entry"])
	return s, nil
}

// entryTime is the time of the entry XINFO STREAM shows, zero when none.
func entryTime(m rueidis.RedisMessage) time.Time {
	if m.IsNil() {
		return time.Time{}
	}
	e, err := m.AsXRangeEntry()
	if err != nil {
		return time.Time{}
	}
	t, _ := IDTime(e.ID)
	return t
}

// ReadGroups reads key's consumer groups: the ones named, or every group
// when none is. A named group that does not exist is left out, as is
// every group of an absent key.
func ReadGroups(ctx context.Context, c rueidis.Client, key string, names ...string) ([]Group, error) {
	// XINFO GROUPS on an absent key is an error reply; TYPE first.
	typ, err := c.Do(ctx, c.B().Type().Key(key).Build()).ToString()
	if err != nil {
		return nil, fmt.Errorf("streamstate: TYPE %s: %w", key, err)
	}
	if typ != "stream" {
		return nil, nil
	}
	list, err := c.Do(ctx, c.B().XinfoGroups().Key(key).Build()).ToArray()
	if err != nil {
		return nil, fmt.Errorf("streamstate: XINFO GROUPS %s: %w", key, err)
	}
	var groups []Group
	for _, item := range list {
		info, err := item.AsMap()
		if err != nil {
			return nil, fmt.Errorf("streamstate: XINFO GROUPS %s: %w", key, err)
		}
		g := Group{}
		g.Name = pstr(info, "name")
		if len(names) > 0 && !contains(names, g.Name) {
			continue
		}
		g.Pending, _ = pint(info, "pending")
		lag, known := pint(info, "lag")
		g.Lag = lag
		if !known {
			last := pstr(info, "last-delivered-id")
			if g.Lag, err = countAfter(ctx, c, key, last); err != nil {
				return nil, err
			}
			g.LagCounted = true
		}
		if g.OldestPendingIdle, err = oldestPendingIdle(ctx, c, key, g.Name, g.Pending); err != nil {
			return nil, err
		}
		if g.Consumers, err = readConsumers(ctx, c, key, g.Name); err != nil {
			return nil, err
		}
		groups = append(groups, g)
	}
	return groups, nil
}

// pint reads an integer field, reporting false when it is absent or nil.
func pint(info map[string]rueidis.RedisMessage, field string) (int64, bool) {
	v, ok := info[field]
	if !ok || v.IsNil() {
		return 0, false
	}
	n, err := v.AsInt64()
	return n, err == nil
}

// pstr reads a string field, "" when it is absent.
func pstr(info map[string]rueidis.RedisMessage, field string) string {
	v, ok := info[field]
	if !ok {
		return ""
	}
	s, _ := v.ToString()
	return s
}

// countAfter counts key's entries after id, up to MaxLagCount.
func countAfter(ctx context.Context, c rueidis.Client, key, id string) (int64, error) {
	if id == "" {
		id = "0-0"
	}
	n, err := c.Do(ctx, c.B().Xrange().Key(key).Start("("+id).End("+").Count(MaxLagCount).Build()).ToArray()
	if err != nil {
		return 0, fmt.Errorf("streamstate: XRANGE %s: %w", key, err)
	}
	return int64(len(n)), nil
}

// oldestPendingIdle is the longest idle among the group's PendingSample
// oldest pending entries.
func oldestPendingIdle(ctx context.Context, c rueidis.Client, key, group string, pending int64) (time.Duration, error) {
	if pending == 0 {
		return 0, nil
	}
	rows, err := c.Do(ctx, c.B().Xpending().Key(key).Group(group).Start("-").End("+").Count(PendingSample).Build()).ToArray()
	if err != nil {
		return 0, fmt.Errorf("streamstate: XPENDING %s %s: %w", key, group, err)
	}
	var longest int64
	for _, row := range rows {
		// id, consumer, idle ms, deliveries
		f, err := row.ToArray()
		if err != nil || len(f) < 3 {
			continue
		}
		if idle, err := f[2].AsInt64(); err == nil {
			longest = max(longest, idle)
		}
	}
	return time.Duration(longest) * time.Millisecond, nil
}

// readConsumers lists a group's consumers.
func readConsumers(ctx context.Context, c rueidis.Client, key, group string) ([]Consumer, error) {
	list, err := c.Do(ctx, c.B().XinfoConsumers().Key(key).Group(group).Build()).ToArray()
	if err != nil {
		return nil, fmt.Errorf("streamstate: XINFO CONSUMERS %s %s: %w", key, group, err)
	}
	out := make([]Consumer, 0, len(list))
	for _, item := range list {
		info, err := item.AsMap()
		if err != nil {
			return nil, fmt.Errorf("streamstate: XINFO CONSUMERS %s %s: %w", key, group, err)
		}
		var cs Consumer
		cs.Name = pstr(info, "name")
		cs.Pending, _ = pint(info, "pending")
		idle, _ := pint(info, "idle")
		cs.Idle = time.Duration(idle) * time.Millisecond
		out = append(out, cs)
	}
	return out, nil
}

// IDTime is the time a stream id was stamped with: its milliseconds part.
func IDTime(id string) (time.Time, bool) {
	ms, _, _ := strings.Cut(id, "-")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(n).UTC(), true
}

func contains(names []string, s string) bool {
	for _, n := range names {
		if n == s {
			return true
		}
	}
	return false
}
