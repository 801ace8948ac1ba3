// Command policy publishes and revokes per-host politeness for a set of
// hosts on content.fetch-policy, then replays the stream the way every
// worker does at start-up and prints the floor each host now gets.
//
//	go run ./examples/policy --redis-url redis://127.0.0.1:16379/0 set 5 example.com example.org
//	go run ./examples/policy --redis-url redis://127.0.0.1:16379/0 revoke example.org
//	go run ./examples/policy --redis-url redis://127.0.0.1:16379/0 show example.com example.org
//
// A set is published under one occurred_at: workers apply the latest frame
// per host by occurred_at, on >=, so frames sharing one instant all take
// effect and a later republish of the whole set replaces it cleanly.
//
// Exit status: 0 on success, 1 when Redis failed, 2 for usage errors.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net/netip"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/policy"
	"github.com/replicator-go/replicator/policy/fleet"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `Usage: policy [--redis-url URL] ACTION ...

  set SECONDS HOST...   space requests to each HOST at least SECONDS apart
                        (0 means no spacing: a real value, not "absent")
  revoke HOST...        drop each HOST's policy; it falls back to the
                        workers' REPLICATOR_MIN_HOST_INTERVAL_SECONDS
  show HOST...          print the floor each HOST gets, publishing nothing

HOST is a host name or IP address without scheme or port.

Flags:`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("policy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, usage)
		fs.PrintDefaults()
	}
	defRedis := os.Getenv("REPLICATOR_REDIS_URL")
	if defRedis == "" {
		defRedis = "redis://localhost:6379/0"
	}
	redisURL := fs.String("redis-url", defRedis, "Redis `URL` (default $REPLICATOR_REDIS_URL)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "policy: "+format+"\n", a...)
		return 2
	}
	rest := fs.Args()
	if len(rest) < 2 {
		fs.Usage()
		return fail("want an action and at least one host")
	}
	action, rest := rest[0], rest[1:]
	var interval *float64
	switch action {
	case "set":
		secs, err := strconv.ParseFloat(rest[0], 64)
		if err != nil || secs < 0 || math.IsNaN(secs) || math.IsInf(secs, 0) {
			return fail("set: SECONDS %q: want a finite number ≥ 0", rest[0])
		}
		if rest = rest[1:]; len(rest) == 0 {
			return fail("set: want at least one host")
		}
		interval = &secs
	case "revoke", "show":
	default:
		return fail("unknown action %q: want set, revoke or show", action)
	}
	hosts := make([]string, 0, len(rest))
	for _, raw := range rest {
		h, err := normalizeHost(raw)
		if err != nil {
			return fail("%v", err)
		}
		hosts = append(hosts, h)
	}

	opt, err := rueidis.ParseURL(*redisURL)
	if err != nil {
		return fail("--redis-url: not a redis:// URL")
	}
	opt.DisableCache = true
	client, err := rueidis.NewClient(opt)
	if err != nil {
		fmt.Fprintf(stderr, "policy: connecting to Redis: %v\n", err)
		return 1
	}
	defer client.Close()

	if action != "show" {
		// One instant for the whole set.
		now := time.Now().UTC()
		for _, h := range hosts {
			m := &envelope.FetchPolicyState{
				SchemaVersion:      envelope.SchemaVersion,
				OccurredAt:         now,
				Host:               h,
				MinIntervalSeconds: interval, // null on a revocation
				Revoked:            action == "revoke",
			}
			id, err := publish(ctx, client, m)
			if err != nil {
				fmt.Fprintf(stderr, "policy: publishing to %s: %v\n", fleet.DefaultPolicyStream, err)
				return 1
			}
			fmt.Fprintf(stdout, "published %s host=%s min_interval_seconds=%s revoked=%t entry_id=%s\n",
				envelope.EventFetchPolicyState, h, seconds(interval), m.Revoked, id)
		}
	}

	table, applied, err := replay(ctx, client)
	if err != nil {
		fmt.Fprintf(stderr, "policy: replaying %s: %v\n", fleet.DefaultPolicyStream, err)
		return 1
	}
	fmt.Fprintf(stdout, "a worker replaying %s now applies (%d frames applied, %d hosts with a policy):\n",
		fleet.DefaultPolicyStream, applied, table.Len())
	for _, h := range hosts {
		if floor, ok := table.Floor(h); ok {
			fmt.Fprintf(stdout, "  %-30s %v apart (published)\n", h, floor)
		} else {
			fmt.Fprintf(stdout, "  %-30s the default (REPLICATOR_MIN_HOST_INTERVAL_SECONDS, 1 s unless set)\n", h)
		}
	}
	return 0
}

// publish writes m through the envelope codec, as workers decode it.
func publish(ctx context.Context, client rueidis.Client, m envelope.Model) (string, error) {
	fields, err := envelope.ToWire(m)
	if err != nil {
		return "", err
	}
	b := client.B().Xadd().Key(fleet.DefaultPolicyStream).Id("*").FieldValue()
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		b = b.FieldValue(k, fields[k])
	}
	return client.Do(ctx, b.Build()).ToString()
}

// replay reads the whole policy stream into a fresh table with the reader
// every worker runs, and returns how many frames changed it.
func replay(ctx context.Context, client rueidis.Client) (*policy.Table, int64, error) {
	table := policy.NewTable()
	ctx, cancel := context.WithCancel(ctx)
	r := fleet.NewReader(client, table, fleet.ReaderOptions{
		Block:  100 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	})
	done := make(chan struct{})
	go func() {
		r.Run(ctx)
		close(done)
	}()
	err := r.WaitReplayed(ctx)
	cancel()
	<-done
	return table, r.Applied(), err
}

// normalizeHost gives a host the form pacers key on: lower-cased, without
// a trailing dot, brackets or port.
func normalizeHost(raw string) (string, error) {
	h := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(raw)), ".")
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if a, err := netip.ParseAddr(h); err == nil && a.Zone() == "" {
		return a.String(), nil
	}
	if h == "" || len(h) > 253 || strings.ContainsAny(h, ":/@") {
		return "", fmt.Errorf("host %q: want a host name or IP address, without scheme or port", raw)
	}
	for label := range strings.SplitSeq(h, ".") {
		ok := label != "" && len(label) <= 63 && label[0] != '-' && label[len(label)-1] != '-'
		for _, c := range label {
			ok = ok && (c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_')
		}
		if !ok {
			return "", fmt.Errorf("host %q: %q is not a DNS label", raw, label)
		}
	}
	return h, nil
}

func seconds(p *float64) string {
	if p == nil {
		return "null"
	}
	return strconv.FormatFloat(*p, 'f', -1, 64)
}
