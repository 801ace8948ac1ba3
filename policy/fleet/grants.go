package fleet

import (
	"context"
	"fmt"
)

// ACLRule is what a Redis user needs, beyond reading and writing the
// streams, for fleet pacing: the per-host keys and the pace script with
// the commands it runs, HLEN for the unspaced hosts, and the client-side
// caching that answers those (CLIENT TRACKING, and MULTI, CLIENT CACHING,
// PTTL and EXEC around each cached read) (docs/operations.md, Redis ACL).
// It is a selector to append to the user's ACL line.
const ACLRule = "(+evalsha +eval +time +hlen +hmget +hset +hdel +pexpire +pttl +multi +exec +client|tracking +client|caching ~" +
	DefaultKeyPrefix + "*)"

// probeHost names the key Probe writes: a name no origin can have.
const probeHost = "probe.invalid"

// Probe makes once each kind of call the pacer makes, on a key of its own,
// and returns the first error: a Redis user that lacks a grant of ACLRule
// gets NOPERM here, before any pacing decision depends on it. It records a
// request to probeHost, whose key expires after a minute.
func (p *Pacer) Probe(ctx context.Context) error {
	if _, err := p.exec(ctx, probeHost, "sent", 0, 0); err != nil {
		return fmt.Errorf("fleet: pace script: %w", err)
	}
	if _, _, err := p.reserveUnspaced(ctx, probeHost); err != nil {
		return fmt.Errorf("fleet: HLEN: %w", err)
	}
	return nil
}
