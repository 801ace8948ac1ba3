package fleet

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/internal/redisacl"
	"github.com/replicator-go/replicator/internal/redisclock"
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
// HMGET per key found, compared with the node's own clock (INFO server).
//
// A command Redis refuses under its ACL ends the read with a
// *redisacl.Denied (the HMGET grant names every pacing key); the holds
// read before it are returned with it.
func Holds(ctx context.Context, client rueidis.Client, prefix string) ([]Hold, error) {
	prefix = cmp.Or(prefix, DefaultKeyPrefix)
	seen := map[string]bool{}
	var out []Hold
	for _, node := range client.Nodes() {
		now, err := redisclock.Now(ctx, node)
		if err != nil {
			return byHost(out), fmt.Errorf("fleet: %w", err)
		}
		var cursor uint64
		for {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(prefix+"{*}").Count(scanCount).Type("hash").Build()).AsScanEntry()
			if err != nil {
				return byHost(out), fmt.Errorf("fleet: SCAN: %w", redisacl.Check(err, "SCAN", ""))
			}
			for _, key := range e.Elements {
				if seen[key] {
					continue // a replica's copy
				}
				seen[key] = true
				h, ok, err := readHold(ctx, node, key, prefix, now)
				if err != nil {
					return byHost(out), err
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
	return byHost(out), nil
}

// byHost sorts holds by host.
func byHost(holds []Hold) []Hold {
	slices.SortFunc(holds, func(a, b Hold) int { return strings.Compare(a.Host, b.Host) })
	return holds
}

// readHold reads one pacing key's escalation (see pace.lua).
func readHold(ctx context.Context, node rueidis.Client, key, prefix string, now time.Time) (Hold, bool, error) {
	v, err := node.Do(ctx, node.B().Hmget().Key(key).Field("esc", "esc_at").Build()).ToArray()
	if err != nil {
		return Hold{}, false, fmt.Errorf("fleet: HMGET %s: %w", key, redisacl.CheckPattern(err, "HMGET", key, prefix+"*"))
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
