package fleet

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/policy"
)

// Hold is a host the fleet currently spaces beyond its floor: a 429 or 503
// escalated it, and the escalation is still in force.
type Hold struct {
	// Host is the host's HostKey.
	Host string
	// Interval is the escalated interval in force.
	Interval time.Duration
	// Since is when the last refusal escalated it; Until is when it drops
	// back to its floor (Since + policy.EscalationReset) unless another
	// refusal comes first. Both on the Redis server's clock.
	Since, Until time.Time
}

// scanCount is the COUNT hint of each SCAN step.
const scanCount = 1000

// Holds lists the hosts whose pacing key under prefix (empty:
// DefaultKeyPrefix) holds an escalation still in force, by host. It reads
// only: SCAN on every node (a key lives on one node of a Cluster) and one
// HMGET per key found, compared with the node's own clock.
func Holds(ctx context.Context, client rueidis.Client, prefix string) ([]Hold, error) {
	if prefix == "" {
		prefix = DefaultKeyPrefix
	}
	seen := map[string]bool{}
	var out []Hold
	for _, node := range client.Nodes() {
		now, err := serverNow(ctx, node)
		if err != nil {
			return nil, err
		}
		var cursor uint64
		for {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(prefix+"{*}").Count(scanCount).Type("hash").Build()).AsScanEntry()
			if err != nil {
				return nil, fmt.Errorf("fleet: SCAN: %w", err)
			}
			for _, key := range e.Elements {
				if seen[key] {
					continue // a replica's copy
				}
				seen[key] = true
				h, ok, err := readHold(ctx, node, key, prefix, now)
				if err != nil {
					return nil, err
				}
				if ok {
					out = append(out, h)
				}
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b Hold) int { return strings.Compare(a.Host, b.Host) })
	return out, nil
}

// readHold reads one pacing key's escalation (see pace.lua).
func readHold(ctx context.Context, node rueidis.Client, key, prefix string, now time.Time) (Hold, bool, error) {
	v, err := node.Do(ctx, node.B().Hmget().Key(key).Field("esc", "esc_at").Build()).ToArray()
	if err != nil {
		return Hold{}, false, fmt.Errorf("fleet: HMGET %s: %w", key, err)
	}
	if len(v) != 2 {
		return Hold{}, false, nil
	}
	esc, err1 := v[0].AsInt64()
	at, err2 := v[1].AsInt64()
	if err1 != nil || err2 != nil || esc <= 0 {
		return Hold{}, false, nil
	}
	h := Hold{
		Host:     strings.TrimSuffix(strings.TrimPrefix(key, prefix+"{"), "}"),
		Interval: time.Duration(esc) * time.Microsecond,
		Since:    time.UnixMicro(at).UTC(),
	}
	h.Until = h.Since.Add(policy.EscalationReset)
	return h, now.Before(h.Until), nil
}

// serverNow is a node's clock.
func serverNow(ctx context.Context, node rueidis.Client) (time.Time, error) {
	v, err := node.Do(ctx, node.B().Time().Build()).AsStrSlice()
	if err != nil {
		return time.Time{}, fmt.Errorf("fleet: TIME: %w", err)
	}
	if len(v) != 2 {
		return time.Time{}, fmt.Errorf("fleet: TIME answered %d values", len(v))
	}
	sec, _ := strconv.ParseInt(v[0], 10, 64)
	usec, _ := strconv.ParseInt(v[1], 10, 64)
	return time.Unix(sec, usec*1000).UTC(), nil
}
