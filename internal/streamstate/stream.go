// Package streamstate reads what Redis holds about the worker's streams:
// each stream's length and the age of its entries, each consumer group's
// lag, pending entries and consumers, and the dead letters by reason and
// host. The worker's stream gauges and the read-only operator commands
// (`replicator status`, `replicator dlq`) all read through it, so a number
// on the dashboard and on the status screen is computed once
// (docs/operations.md).
//
// It only reads, except TrimDeadLetters. Every call is one command on one
// key (XINFO STREAM, XRANGE, XTRIM), so it works unchanged on a Redis
// Cluster, and only commands the worker's and the operators' Redis users
// are granted (docs/operations.md, Redis ACL). A command Redis refuses
// under its ACL is reported as a *redisacl.Denied.
package streamstate

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/internal/redisacl"
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
	// Length is how many entries it holds (what XLEN says).
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
	// Consumers are the group's consumers, as XINFO STREAM FULL lists them.
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

// ReadStream reads key's length and the times of its first and last
// entries, with XINFO STREAM. An absent key is a Stream with Exists
// false; a key of another type is an error.
func ReadStream(ctx context.Context, c rueidis.Client, key string) (Stream, error) {
	s := Stream{Key: key}
	info, err := c.Do(ctx, c.B().XinfoStream().Key(key).Build()).AsMap()
	if isNoSuchKey(err) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("streamstate: XINFO STREAM %s: %w", key, redisacl.Check(err, "XINFO STREAM", key))
	}
	s.Exists = true
	s.Length, _ = pint(info, "length")
	s.Oldest = entryTime(info["first-entry"])
	s.Newest = entryTime(info["last-entry"])
	return s, nil
}

// isNoSuchKey reports XINFO's answer for an absent key ("no such key";
// some servers prefix it with ERR). Telling it apart this way, rather than
// asking TYPE first, keeps to the commands the Redis users are granted.
func isNoSuchKey(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && strings.TrimPrefix(re.Error(), "ERR ") == "no such key"
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
//
// It reads them from one XINFO STREAM key FULL COUNT PendingSample, which
// lists each group's lag, its pending entries oldest first (PendingSample
// of them) and its consumers. Redis stamps those with when they were
// delivered and last seen; idle times are measured from now, the server's
// clock (redisclock.Now).
func ReadGroups(ctx context.Context, c rueidis.Client, key string, now time.Time, names ...string) ([]Group, error) {
	info, err := c.Do(ctx, c.B().XinfoStream().Key(key).Full().Count(PendingSample).Build()).AsMap()
	if isNoSuchKey(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("streamstate: XINFO STREAM %s FULL: %w", key, redisacl.Check(err, "XINFO STREAM", key))
	}
	groupsInfo := info["groups"]
	list, err := groupsInfo.ToArray()
	if err != nil {
		return nil, fmt.Errorf("streamstate: XINFO STREAM %s FULL: groups: %w", key, err)
	}
	var groups []Group
	for _, item := range list {
		info, err := item.AsMap()
		if err != nil {
			return nil, fmt.Errorf("streamstate: XINFO STREAM %s FULL: a group: %w", key, err)
		}
		g := Group{Name: pstr(info, "name")}
		if len(names) > 0 && !contains(names, g.Name) {
			continue
		}
		g.Pending, _ = pint(info, "pel-count")
		lag, known := pint(info, "lag")
		g.Lag = lag
		if !known {
			if g.Lag, err = countAfter(ctx, c, key, pstr(info, "last-delivered-id")); err != nil {
				return nil, err
			}
			g.LagCounted = true
		}
		g.OldestPendingIdle = oldestPendingIdle(info["pending"], now)
		g.Consumers = readConsumers(info["consumers"], now)
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
		return 0, fmt.Errorf("streamstate: XRANGE %s: %w", key, redisacl.Check(err, "XRANGE", key))
	}
	return int64(len(n)), nil
}

// oldestPendingIdle is the longest time since delivery among the pending
// entries a group's XINFO STREAM FULL lists: its PendingSample oldest.
func oldestPendingIdle(pending rueidis.RedisMessage, now time.Time) time.Duration {
	rows, _ := pending.ToArray()
	var longest time.Duration
	for _, row := range rows {
		// id, consumer, delivery time (Unix ms), deliveries
		f, err := row.ToArray()
		if err != nil || len(f) < 3 {
			continue
		}
		if at, err := f[2].AsInt64(); err == nil {
			longest = max(longest, since(now, at))
		}
	}
	return longest
}

// readConsumers reads a group's consumers as XINFO STREAM FULL lists them.
func readConsumers(consumers rueidis.RedisMessage, now time.Time) []Consumer {
	list, _ := consumers.ToArray()
	out := make([]Consumer, 0, len(list))
	for _, item := range list {
		info, err := item.AsMap()
		if err != nil {
			continue
		}
		cs := Consumer{Name: pstr(info, "name")}
		cs.Pending, _ = pint(info, "pel-count")
		if seen, ok := pint(info, "seen-time"); ok {
			cs.Idle = since(now, seen)
		}
		out = append(out, cs)
	}
	return out
}

// since is how long before now the Unix millisecond ms was, never
// negative: on a Cluster, now may come from another node's clock.
func since(now time.Time, ms int64) time.Duration {
	return max(now.Sub(time.UnixMilli(ms)), 0).Truncate(time.Millisecond)
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
