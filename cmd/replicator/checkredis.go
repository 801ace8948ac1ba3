package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/replicator-go/replicator/guard"
)

const checkRedisDescription = `Checks, before the worker starts, that its Redis meets the version floor
(7.0: the worker reads XAUTOCLAIM's three-element reply). Run by
deploy/replicator.service as an ExecStartPre. Hard on age, soft on absence:
a version below the floor exits 1 and stops the start; a Redis that cannot
be reached (retried every second for REPLICATOR_REDIS_FLOOR_WAIT seconds,
each probe bounded by REPLICATOR_REDIS_FLOOR_TIMEOUT) or that refuses the
credential leaves the floor unverified, says so, and exits 0, so the
worker's own back-off and outage limit deal with it.

It connects as the worker does, with REPLICATOR_REDIS_URL (or --redis-url)
and sends one INFO server.

Exit status: 0 when the floor is met or could not be checked, 1 when
Redis is older than the floor, 2 for usage errors.`

// redisFloorMajor is the oldest Redis major version the worker runs on.
const redisFloorMajor = 7

// floorVerdict is what one probe found.
type floorVerdict int

const (
	floorMet floorVerdict = iota
	floorBelow
	floorAuth        // reached Redis; it refused the credential
	floorUnreachable // never got that far
	floorUnknown     // no answer to go on (the probe timed out)
)

func runCheckRedis(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("check-redis", "check-redis [--redis-url URL]", checkRedisDescription, stderr)
	redisURL := fs.String("redis-url", envRedisURL(), "Redis `URL` (default $REPLICATOR_REDIS_URL or "+defaultRedisURL+")")
	if code, ok := parseNoArgs(fs, args, stderr); !ok {
		return code
	}
	cfg, err := loadFrom(byCheckRedis, os.Environ())
	if err != nil {
		fmt.Fprintf(stderr, "replicator check-redis: %s\n", oneLine(err))
		return 2
	}
	say := func(w io.Writer, format string, a ...any) {
		fmt.Fprintf(w, "replicator check-redis: "+format+"\n", a...)
	}
	for _, w := range cfg.Warnings {
		say(stderr, "%s", w)
	}
	started := time.Now()
	var version, detail string
	var verdict floorVerdict
	for {
		version, verdict, detail = probeFloor(ctx, *redisURL, cfg.RedisFloorTimeout)
		if verdict != floorUnreachable || time.Since(started) >= cfg.RedisFloorWait || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	waited := time.Since(started).Truncate(time.Second)
	switch verdict {
	case floorMet:
		if waited > 0 {
			say(stdout, "Redis reachable after %s", waited)
		}
		say(stdout, "Redis %s meets the %d.0 floor", version, redisFloorMajor)
		return 0
	case floorBelow:
		say(stderr, "Redis %s is below the %d.0 floor: the worker reads XAUTOCLAIM's three-element reply; not starting", version, redisFloorMajor)
		return 1
	case floorAuth:
		say(stderr, "reached Redis but could not authenticate as the worker does; %d.0 floor UNVERIFIED, not blocking the start (the worker will report its own refusal): %s", redisFloorMajor, detail)
	case floorUnreachable:
		say(stderr, "Redis unreachable after %s of retrying; %d.0 floor UNVERIFIED, not blocking the start: %s", waited, redisFloorMajor, detail)
	default:
		say(stderr, "could not read Redis's version (%s); %d.0 floor UNVERIFIED, not blocking the start", detail, redisFloorMajor)
	}
	return 0
}

// probeFloor connects to rawURL and reads INFO server once, within timeout.
func probeFloor(ctx context.Context, rawURL string, timeout time.Duration) (version string, v floorVerdict, detail string) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	type result struct {
		info string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		// The client's own dial may outlast ctx; the select below does not.
		client, err := newRedisClient(rawURL)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer client.Close()
		info, err := client.Do(ctx, client.B().Info().Section("server").Build()).ToString()
		done <- result{info, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		return "", floorUnknown, "timed out after " + seconds2text(timeout) + " s"
	}
	if r.err != nil {
		msg := strings.ReplaceAll(scrub(r.err, rawURL).Error(), rawURL, guard.RedactURL(rawURL))
		return "", classifyProbe(msg), msg
	}
	version, v = floorOf(r.info)
	if v == floorUnknown {
		return "", v, "INFO server named no redis_version"
	}
	return version, v, ""
}

// floorOf reads redis_version from an INFO reply and judges it.
func floorOf(info string) (string, floorVerdict) {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			major, _, _ := strings.Cut(v, ".")
			if n, err := strconv.Atoi(major); err == nil && n >= redisFloorMajor {
				return v, floorMet
			}
			return v, floorBelow
		}
	}
	return "", floorUnknown
}

// classifyProbe tells a refused credential from a Redis never reached: they
// want different things from an operator.
func classifyProbe(msg string) floorVerdict {
	for _, s := range []string{"WRONGPASS", "NOAUTH", "NOPERM", "invalid username-password", "AUTH failed", "Authentication required"} {
		if strings.Contains(msg, s) {
			return floorAuth
		}
	}
	for _, s := range []string{"connection refused", "no such host", "i/o timeout", "network is unreachable", "no route to host",
		"connection reset", "server misbehaving", "dial "} {
		if strings.Contains(strings.ToLower(msg), s) {
			return floorUnreachable
		}
	}
	return floorUnknown
}
