package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/internal/redisacl"
	"github.com/replicator-go/replicator/policy"
)

const policyDescription = `Publishes a fetch_policy_state to content.fetch-policy, which every worker
replays at start-up and tails while running:

  policy set HOST SECONDS   space requests to HOST at least SECONDS apart
                            (0 means no spacing; any finite value >= 0)
  policy revoke HOST        drop HOST's policy: it falls back to the
                            workers' REPLICATOR_MIN_HOST_INTERVAL_SECONDS

HOST is a host name or IP address without a port; it is lower-cased. The
latest frame per host wins, by occurred_at (now).

It sends Redis nothing but XADD.

Exit status: 0 when published, 1 when Redis failed (when it refused XADD to
this Redis user, one line names the grant it needs), 2 for usage errors.`

func runPolicy(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("policy", "policy [--redis-url URL] set HOST SECONDS | revoke HOST", policyDescription, stderr)
	redisURL := fs.String("redis-url", envRedisURL(), "Redis `URL` (default $REPLICATOR_REDIS_URL or "+defaultRedisURL+")")
	// Flags may come before the action or after it.
	positional, code, ok := parseInterspersed(fs, args)
	if !ok {
		return code
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "replicator policy: "+format+"\n", a...)
		return 2
	}
	if len(positional) == 0 {
		fs.Usage()
		return usageErr("want set HOST SECONDS or revoke HOST")
	}
	m := &envelope.FetchPolicyState{SchemaVersion: envelope.SchemaVersion, OccurredAt: time.Now().UTC()}
	switch action := positional[0]; action {
	case "set":
		if len(positional) != 3 {
			return usageErr("set: want HOST SECONDS")
		}
		host, err := policyHost(positional[1])
		if err != nil {
			return usageErr("%v", err)
		}
		secs, err := strconv.ParseFloat(positional[2], 64)
		if err != nil || math.IsNaN(secs) || math.IsInf(secs, 0) || secs < 0 {
			return usageErr("set: SECONDS %q: want a finite number >= 0", positional[2])
		}
		m.Host, m.MinIntervalSeconds = host, &secs
	case "revoke":
		if len(positional) != 2 {
			return usageErr("revoke: want HOST")
		}
		host, err := policyHost(positional[1])
		if err != nil {
			return usageErr("%v", err)
		}
		m.Host, m.Revoked = host, true
	default:
		return usageErr("unknown action %q: want set or revoke", action)
	}

	client, err := newRedisClient(*redisURL)
	if err != nil {
		fmt.Fprintf(stderr, "replicator policy: %v\n", err)
		return redisExit(err)
	}
	defer client.Close()
	id, err := publish(ctx, client, streamPolicy, m)
	if err != nil {
		if !reportDenied(stderr, "replicator policy", *redisURL, redisacl.Check(err, "XADD", streamPolicy)) {
			fmt.Fprintf(stderr, "replicator policy: publishing to %s: %v\n", streamPolicy, err)
		}
		return 1
	}
	interval := "null"
	if m.MinIntervalSeconds != nil {
		interval = strconv.FormatFloat(*m.MinIntervalSeconds, 'f', -1, 64)
	}
	fmt.Fprintf(stdout, "published fetch_policy_state host=%s min_interval_seconds=%s revoked=%t entry_id=%s\n", m.Host, interval, m.Revoked, id)
	return 0
}

// policyHost validates and normalizes a policy's host to the key pacers
// use (policy.HostKey): the ASCII form of an internationalised name,
// lower-cased, no trailing dot, no port; an address in its canonical text.
// An IPv6 address may be bracketed; it is stored without brackets, as
// url.URL.Hostname gives it.
func policyHost(raw string) (string, error) {
	h := strings.TrimSpace(raw)
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	if a, err := netip.ParseAddr(h); err == nil && a.Zone() != "" {
		return "", fmt.Errorf("host %q: an address with a zone names no origin", raw)
	}
	if _, err := guard.ASCIIHost(h); err != nil {
		return "", fmt.Errorf("host %q: not a host name: %w", raw, err)
	}
	h = policy.HostKey(h)
	if a, err := netip.ParseAddr(h); err == nil {
		return a.String(), nil
	}
	if strings.Contains(h, ":") {
		return "", fmt.Errorf("host %q: give the host without a port or scheme", raw)
	}
	if h == "" || len(h) > 253 {
		return "", fmt.Errorf("host %q: want a host name of 1 to 253 characters", raw)
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return "", fmt.Errorf("host %q: %q is not a valid DNS label", raw, label)
		}
		for _, r := range label {
			if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' && r != '_' {
				return "", fmt.Errorf("host %q: %q is not a valid DNS label", raw, label)
			}
		}
	}
	return h, nil
}
