//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/policy/fleet"
)

// The streams and group of the contract (README, Streams and frames).
const (
	streamCommands = contentfetch.DefaultStream
	streamFacts    = contentfetch.DefaultFactsStream
	streamDLQ      = contentfetch.DefaultDLQStream
	streamPolicy   = fleet.DefaultPolicyStream
	group          = contentfetch.DefaultGroup
)

// maxActivePerHost is how many requests the worker runs at once for one
// host, so a concurrency needs at least concurrency ÷ this many hosts.
const maxActivePerHost = contentfetch.DefaultMaxActivePerHost

// command is one command the bench publishes.
type command struct {
	id      string // command_id
	url     string
	kind    string // what the origin does with it, for the report
	timeout *float64
	// malformed frames carry a payload that does not decode.
	malformed bool

	entry string // stream entry id, once published
}

// frame is the command's stream entry fields.
func (c *command) frame() (map[string]string, error) {
	if c.malformed {
		return map[string]string{
			"key": c.id, "payload": `{"event_type": "content_fetch", "command_id": "` + c.id + `", "url": `,
			"event_type": envelope.EventContentFetch, "schema_version": "1",
			"occurred_at": time.Now().UTC().Format(time.RFC3339Nano), "content_type": envelope.ContentType,
		}, nil
	}
	return envelope.ToWire(&envelope.ContentFetch{
		OccurredAt:     time.Now(),
		CommandID:      c.id,
		URL:            c.url,
		InfoSourceID:   "replicator-bench",
		TimeoutSeconds: c.timeout,
	})
}

// frameOrder is the field order of a published frame.
var frameOrder = []string{"key", "payload", "event_type", "schema_version", "occurred_at", "content_type"}

// createGroup creates the worker's consumer group at the start of the
// stream, so commands queued before any worker starts are read.
func createGroup(ctx context.Context, c rueidis.Client) error {
	err := c.Do(ctx, c.B().XgroupCreate().Key(streamCommands).Group(group).Id("0").Mkstream().Build()).Error()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return fmt.Errorf("XGROUP CREATE: %w", err)
	}
	return nil
}

// publish XADDs the commands in pipelined batches and records their
// entry ids.
func publish(ctx context.Context, c rueidis.Client, cmds []*command) error {
	const batch = 500
	for len(cmds) > 0 {
		k := min(len(cmds), batch)
		multi := make(rueidis.Commands, k)
		for i, cmd := range cmds[:k] {
			fields, err := cmd.frame()
			if err != nil {
				return err
			}
			b := c.B().Xadd().Key(streamCommands).Id("*").FieldValue()
			for _, name := range frameOrder {
				b = b.FieldValue(name, fields[name])
			}
			multi[i] = b.Build()
		}
		for i, r := range c.DoMulti(ctx, multi...) {
			id, err := r.ToString()
			if err != nil {
				return fmt.Errorf("XADD: %w", err)
			}
			cmds[i].entry = id
		}
		cmds = cmds[k:]
	}
	return nil
}

// publishPolicy publishes a fetch_policy_state for host.
func publishPolicy(ctx context.Context, c rueidis.Client, host string, seconds float64) error {
	fields, err := envelope.ToWire(&envelope.FetchPolicyState{OccurredAt: time.Now(), Host: host, MinIntervalSeconds: &seconds})
	if err != nil {
		return err
	}
	b := c.B().Xadd().Key(streamPolicy).Id("*").FieldValue()
	for _, name := range frameOrder {
		b = b.FieldValue(name, fields[name])
	}
	return c.Do(ctx, b.Build()).Error()
}

// entryMillis is the millisecond part of a stream id: when Redis added the
// entry, on its clock.
func entryMillis(id string) int64 {
	ms, _, _ := strings.Cut(id, "-")
	n, _ := strconv.ParseInt(ms, 10, 64)
	return n
}

// fact is one entry of content.blobs, as much as the report needs.
type fact struct {
	entry       string
	event       string // blob_available or fetch_failed
	commandID   string
	reason      string // fetch_failed only
	fingerprint string // blob_available only
	uri         string
	size        int64
	fetchedAt   time.Time // blob_available only; zero when absent
}

// deadLetter is one entry of content.fetch.dlq.
type deadLetter struct {
	entry      string
	originalID string
	reason     string
}

// outcomes accumulates the facts and dead letters published so far. poll
// reads what is new.
type outcomes struct {
	facts    map[string][]fact       // by command_id
	dlq      map[string][]deadLetter // by the command's entry id
	nFacts   int
	nDLQ     int
	undecod  int // facts that did not decode (a bug if ever non-zero)
	lastFact string
	lastDLQ  string
}

func newOutcomes() *outcomes {
	return &outcomes{facts: map[string][]fact{}, dlq: map[string][]deadLetter{}, lastFact: "-", lastDLQ: "-"}
}

// poll reads every fact and dead letter added since the last poll.
func (oc *outcomes) poll(ctx context.Context, c rueidis.Client) error {
	for {
		entries, err := xrangeAfter(ctx, c, streamFacts, oc.lastFact)
		if err != nil {
			return err
		}
		for _, e := range entries {
			oc.lastFact = e.ID
			oc.nFacts++
			f, err := decodeFact(e)
			if err != nil {
				oc.undecod++
				continue
			}
			oc.facts[f.commandID] = append(oc.facts[f.commandID], f)
		}
		if len(entries) < xrangeBatch {
			break
		}
	}
	for {
		entries, err := xrangeAfter(ctx, c, streamDLQ, oc.lastDLQ)
		if err != nil {
			return err
		}
		for _, e := range entries {
			oc.lastDLQ = e.ID
			oc.nDLQ++
			d := deadLetter{entry: e.ID, originalID: e.FieldValues["dlq_original_id"], reason: e.FieldValues["dlq_reason"]}
			oc.dlq[d.originalID] = append(oc.dlq[d.originalID], d)
		}
		if len(entries) < xrangeBatch {
			break
		}
	}
	return nil
}

const xrangeBatch = 1000

// xrangeAfter reads up to xrangeBatch entries after id ("-" for the start).
func xrangeAfter(ctx context.Context, c rueidis.Client, stream, id string) ([]rueidis.XRangeEntry, error) {
	start := "-"
	if id != "-" {
		start = "(" + id
	}
	return c.Do(ctx, c.B().Xrange().Key(stream).Start(start).End("+").Count(xrangeBatch).Build()).AsXRange()
}

func decodeFact(e rueidis.XRangeEntry) (fact, error) {
	m, err := envelope.FromWire(e.FieldValues)
	if err != nil {
		return fact{}, err
	}
	f := fact{entry: e.ID, event: m.EventType()}
	switch v := m.(type) {
	case *envelope.BlobAvailable:
		f.commandID, f.fingerprint, f.uri, f.size = v.CommandID, v.ContentFingerprint, v.BlobURI, v.SizeBytes
		if v.FetchedAt != nil {
			f.fetchedAt = *v.FetchedAt
		}
	case *envelope.FetchFailed:
		f.commandID, f.reason = v.CommandID, string(v.Reason)
	default:
		return fact{}, errors.New("not a fact")
	}
	return f, nil
}

// resolved reports whether the command has a fact or a dead letter.
func (oc *outcomes) resolved(c *command) bool {
	return len(oc.facts[c.id]) > 0 || len(oc.dlq[c.entry]) > 0
}

// duplicateFacts counts facts beyond the first per command_id.
func (oc *outcomes) duplicateFacts() int {
	n := 0
	for _, fs := range oc.facts {
		n += len(fs) - 1
	}
	return n
}

// streamLen is XLEN.
func streamLen(ctx context.Context, c rueidis.Client, stream string) (int64, error) {
	return c.Do(ctx, c.B().Xlen().Key(stream).Build()).AsInt64()
}

// pendingCount is how many entries of the group are still pending.
func pendingCount(ctx context.Context, c rueidis.Client) (int64, error) {
	arr, err := c.Do(ctx, c.B().Xpending().Key(streamCommands).Group(group).Build()).ToArray()
	if err != nil {
		return 0, err
	}
	if len(arr) == 0 {
		return 0, nil
	}
	return arr[0].AsInt64()
}

// percentile returns the p-th percentile (0..100) of sorted values, by the
// nearest-rank method.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// latencies sorts ds and returns p50, p90, p99 and max.
func latencies(ds []time.Duration) (p50, p90, p99, mx time.Duration) {
	slices.Sort(ds)
	if len(ds) == 0 {
		return
	}
	return percentile(ds, 50), percentile(ds, 90), percentile(ds, 99), ds[len(ds)-1]
}

// errNotDone is waitUntil's error when the condition never held.
var errNotDone = errors.New("not done")

// waitUntil polls cond every tick until it holds, ctx ends or within has
// passed.
func waitUntil(ctx context.Context, within, tick time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(within)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w within %s", errNotDone, within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(tick):
		}
	}
}
