package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/policy/fleet"
	"github.com/replicator-go/replicator/replicate"
)

// The streams of the contract (docs/streams.md, Streams), as the library
// names them.
const (
	streamCommands = contentfetch.DefaultStream
	streamFacts    = contentfetch.DefaultFactsStream
	streamDLQ      = contentfetch.DefaultDLQStream

	streamReplicate    = replicate.DefaultStream
	streamArtifacts    = replicate.DefaultFactsStream
	streamReplicateDLQ = replicate.DefaultDLQStream
	streamPolicy       = fleet.DefaultPolicyStream
)

// defaultRedisURL is REPLICATOR_REDIS_URL's default.
const defaultRedisURL = "redis://localhost:6379/0"

// envRedisURL is the --redis-url default of the operator subcommands:
// REPLICATOR_REDIS_URL when set, else its default, so they talk to the Redis
// the worker on this host uses.
func envRedisURL() string {
	if v := strings.TrimSpace(os.Getenv("REPLICATOR_REDIS_URL")); v != "" {
		return v
	}
	return defaultRedisURL
}

// newRedisClient connects to a Redis URL (a single server, or a Cluster),
// read by parseRedisURL, without client-side caching. A URL that cannot be
// used wraps errRedisURL. Errors never carry the URL's password.
func newRedisClient(rawURL string) (rueidis.Client, error) {
	c, _, err := connectRedis(rawURL, false)
	return c, err
}

// workerCacheBytes bounds each connection's client-side cache: it holds
// only the fleet pacer's "no state for this host" answers.
const workerCacheBytes = 4 << 20

// connectRedis is newRedisClient, with server-assisted client-side caching
// when cache is set: the fleet pacer then learns that a host has no fleet
// state without a round trip, until Redis invalidates the answer. A server
// that cannot (no RESP3 or no client tracking) gets a client without it;
// cached reports which.
//
// The client sends nothing a Redis user with only the worker's or the
// operator's grants would be refused (docs/operations.md, Redis ACL): no
// CLIENT SETINFO, client tracking only when cache is set, and cluster
// discovery (CLUSTER SLOTS) only for a Cluster: a URL with ?addr= seeds,
// or a server whose HELLO says it runs in cluster mode.
func connectRedis(rawURL string, cache bool) (c rueidis.Client, cached bool, err error) {
	target, err := parseRedisURL(rawURL)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", guard.RedactURL(rawURL), err)
	}
	opt := target.opt
	opt.ClientSetInfo = rueidis.DisableClientSetInfo
	opt.CacheSizeEachConn = workerCacheBytes
	opt.ForceSingleClient = len(opt.InitAddress) == 1
	c, cached, err = newClient(opt, cache)
	if err == nil && opt.ForceSingleClient && opt.DialCtxFn == nil {
		var cluster bool
		if cluster, err = clusterEnabled(c); err == nil && cluster {
			c.Close()
			opt.ForceSingleClient = false
			c, cached, err = newClient(opt, cache)
		} else if err != nil {
			c.Close()
		}
	}
	if err != nil {
		return nil, false, fmt.Errorf("connecting to redis at %s: %w", guard.RedactURL(rawURL), scrub(err, rawURL))
	}
	return c, cached, nil
}

// newClient makes a client on opt, caching if cache is set and the server
// can.
func newClient(opt rueidis.ClientOption, cache bool) (rueidis.Client, bool, error) {
	opt.DisableCache = !cache
	c, err := rueidis.NewClient(opt)
	if cache && errors.Is(err, rueidis.ErrNoCache) {
		opt.DisableCache = true
		c, err = rueidis.NewClient(opt)
	}
	return c, err == nil && !opt.DisableCache, err
}

// clusterEnabled asks a server whether it runs in cluster mode, with
// HELLO: every user may run it, whatever its grants.
func clusterEnabled(c rueidis.Client) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hello, err := c.Do(ctx, c.B().Hello().Build()).AsMap()
	if err != nil {
		return false, fmt.Errorf("HELLO: %w", err)
	}
	mode := hello["mode"]
	m, _ := mode.ToString()
	return m == "cluster", nil
}

// redisExit is the exit status of an operator subcommand whose client could
// not be made: 2 for a URL that cannot be used as given (a usage error),
// 1 otherwise.
func redisExit(err error) int {
	if errors.Is(err, errRedisURL) {
		return 2
	}
	return 1
}

// scrub keeps a client error from repeating the URL it was given with its
// password.
func scrub(err error, rawURL string) error {
	msg := err.Error()
	if strings.Contains(msg, rawURL) {
		return fmt.Errorf("%s", strings.ReplaceAll(msg, rawURL, guard.RedactURL(rawURL)))
	}
	return err
}

// publish encodes m with the envelope codec and XADDs it to stream,
// returning the entry id.
func publish(ctx context.Context, c rueidis.Client, stream string, m envelope.Model) (string, error) {
	fields, err := envelope.ToWire(m)
	if err != nil {
		return "", err
	}
	return xadd(ctx, c, stream, fields)
}

// xadd appends fields (in a stable order) to stream.
func xadd(ctx context.Context, c rueidis.Client, stream string, fields map[string]string) (string, error) {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	slices.Sort(names)
	b := c.B().Xadd().Key(stream).Id("*").FieldValue()
	for _, k := range names {
		b = b.FieldValue(k, fields[k])
	}
	return c.Do(ctx, b.Build()).ToString()
}
