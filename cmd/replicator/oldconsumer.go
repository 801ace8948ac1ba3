package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// Earlier versions of this worker registered as replicator@<hostname> in
// both groups; the names are now derived from the groups
// (consumername.go). A consumer registration outlives its process, so the
// old one is left behind, possibly holding pending entries. Those come
// back through the loops' ordinary reclaim (XAUTOCLAIM once idle for
// REPLICATOR_CLAIM_MIN_IDLE_MS), so nothing is lost; what is left is the
// registration, deleted here once its list is empty, where the grant
// allows XGROUP DELCONSUMER. Only the worker's production grants are used
// otherwise: XINFO STREAM … FULL shows the consumers and their lists.

// consumerInfo is one consumer of a group as XINFO STREAM … FULL shows it.
type consumerInfo struct {
	Name    string
	Pending int64
	Seen    time.Time // its last attempted interaction
}

// groupConsumers returns group's consumers on stream; ok is false when the
// stream or the group does not exist.
func groupConsumers(ctx context.Context, c rueidis.Client, stream, group string) (consumers []consumerInfo, ok bool, err error) {
	// COUNT 1 keeps the reply small: each consumer's pel-count is its whole
	// list whatever COUNT says; only the entries listed are cut.
	info, err := c.Do(ctx, c.B().XinfoStream().Key(stream).Full().Count(1).Build()).AsMap()
	if err != nil {
		if strings.Contains(err.Error(), "no such key") {
			return nil, false, nil
		}
		return nil, false, err
	}
	groupsMsg := info["groups"]
	groups, err := groupsMsg.ToArray()
	if err != nil {
		return nil, false, fmt.Errorf("XINFO STREAM %s FULL: groups: %w", stream, err)
	}
	for _, g := range groups {
		gm, err := g.AsMap()
		if err != nil {
			return nil, false, fmt.Errorf("XINFO STREAM %s FULL: a group: %w", stream, err)
		}
		nameMsg, consumersMsg := gm["name"], gm["consumers"]
		if name, _ := nameMsg.ToString(); name != group {
			continue
		}
		list, err := consumersMsg.ToArray()
		if err != nil {
			return nil, false, fmt.Errorf("XINFO STREAM %s FULL: consumers of %s: %w", stream, group, err)
		}
		for _, cm := range list {
			m, err := cm.AsMap()
			if err != nil {
				return nil, false, fmt.Errorf("XINFO STREAM %s FULL: a consumer of %s: %w", stream, group, err)
			}
			nameMsg, pelMsg, seenMsg := m["name"], m["pel-count"], m["seen-time"]
			name, _ := nameMsg.ToString()
			pending, _ := pelMsg.AsInt64()
			seen, _ := seenMsg.AsInt64()
			consumers = append(consumers, consumerInfo{Name: name, Pending: pending, Seen: time.UnixMilli(seen)})
		}
		return consumers, true, nil
	}
	return nil, false, nil
}

// oldConsumer is one group's old registration being taken over.
type oldConsumer struct {
	stream, group, name string
	told                map[string]bool // what was logged already, by kind
}

// takeOver follows the old registrations of this worker's groups until each
// is gone, deleted or named for the operator.
type takeOver struct {
	client rueidis.Client
	log    *slog.Logger
	// active is how recently a consumer must have been seen to count as a
	// live process: a live worker reads every REPLICATOR_READ_BLOCK_MS.
	active   time.Duration
	interval time.Duration    // between looks
	now      func() time.Time // the clock compared with seen-time
}

// takeOverOldConsumers runs the take-over for cfg's groups until it is done
// or ctx ends.
func takeOverOldConsumers(ctx context.Context, client rueidis.Client, log *slog.Logger, cfg Config) {
	t := takeOver{
		client:   client,
		log:      log,
		active:   max(cfg.ClaimMinIdle, 3*cfg.ReadBlock),
		interval: min(max(cfg.ClaimMinIdle/2, 100*time.Millisecond), 30*time.Second),
		now:      time.Now,
	}
	t.run(ctx, oldConsumers(cfg))
}

// oldConsumers lists the old registrations to look for: one per group
// whose current name differs from the old one.
func oldConsumers(cfg Config) []*oldConsumer {
	old := oldConsumerName()
	var out []*oldConsumer
	for _, g := range []struct{ stream, group, current string }{
		{streamCommands, cfg.ConsumerGroup, cfg.ConsumerName},
		{streamReplicate, cfg.ReplicateConsumerGroup, cfg.ReplicateConsumerName},
	} {
		if g.current != old {
			out = append(out, &oldConsumer{stream: g.stream, group: g.group, name: old, told: map[string]bool{}})
		}
	}
	return out
}

func (t takeOver) run(ctx context.Context, olds []*oldConsumer) {
	for len(olds) > 0 {
		var left []*oldConsumer
		for _, o := range olds {
			if !t.step(ctx, o) {
				left = append(left, o)
			}
		}
		olds = left
		if len(olds) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(t.interval):
		}
	}
}

// step looks at o once and reports whether it is settled.
func (t takeOver) step(ctx context.Context, o *oldConsumer) bool {
	attrs := []any{"stream", o.stream, "group", o.group, "old_consumer", o.name}
	once := func(kind string, f func()) {
		if !o.told[kind] {
			o.told[kind] = true
			f()
		}
	}
	consumers, ok, err := groupConsumers(ctx, t.client, o.stream, o.group)
	if err != nil {
		if ctx.Err() == nil {
			once("error", func() {
				t.log.Warn("could not read the group's consumers to take over the old consumer name; trying again", append(attrs, "error", err)...)
			})
		}
		return false
	}
	var found *consumerInfo
	for i := range consumers {
		if consumers[i].Name == o.name {
			found = &consumers[i]
		}
	}
	if !ok || found == nil {
		return true
	}
	if found.Pending > 0 {
		once("pending", func() {
			t.log.Info("commands are pending under the old consumer name; they are reclaimed once idle for REPLICATOR_CLAIM_MIN_IDLE_MS",
				append(attrs, "pending", found.Pending)...)
		})
		return false
	}
	if idle := t.now().Sub(found.Seen); idle < t.active {
		// A process still reads under the old name (an older worker on this
		// host): its registration is not left behind yet.
		once("active", func() {
			t.log.Warn("a process still reads under the old consumer name; it is deleted once idle",
				append(attrs, "idle_ms", idle.Milliseconds())...)
		})
		return false
	}
	err = t.client.Do(ctx, t.client.B().XgroupDelconsumer().Key(o.stream).Group(o.group).Consumername(o.name).Build()).Error()
	switch {
	case err == nil:
		t.log.Info("deleted the old consumer, its list empty", attrs...)
		return true
	case strings.HasPrefix(err.Error(), "NOPERM"):
		t.log.Warn("the old consumer's list is empty but this user may not delete it; delete it as an operator",
			append(attrs, "command", fmt.Sprintf("XGROUP DELCONSUMER %s %s %s", o.stream, o.group, o.name))...)
		return true
	case ctx.Err() != nil:
		return false
	}
	once("delete", func() {
		t.log.Warn("could not delete the old consumer; trying again", append(attrs, "error", err)...)
	})
	return false
}
