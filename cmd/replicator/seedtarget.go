package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/internal/redisacl"
	"github.com/replicator-go/replicator/internal/streamstate"
)

// seedTarget is where a seed subcommand publishes and what it watches: the
// flags both share, and the guard on the live stream.
type seedTarget struct {
	redisURL, stream, facts *string
	production, dryRun      *bool
	watch                   *bool
	watchTimeout            durationFlag

	live, liveFacts, factsSuffix string
}

// addSeedTarget defines the target flags on fs: live is the stream a
// running worker consumes (on database 0), liveFacts its fact stream, and
// factsSuffix names the fact stream of any other stream.
func addSeedTarget(fs *flag.FlagSet, live, liveFacts, factsSuffix, what string) *seedTarget {
	t := &seedTarget{live: live, liveFacts: liveFacts, factsSuffix: factsSuffix, watchTimeout: durationFlag{d: defaultWatchTimeout}}
	t.redisURL = fs.String("redis-url", envRedisURL(), "Redis `URL` (default $REPLICATOR_REDIS_URL or "+defaultRedisURL+")")
	t.stream = fs.String("stream", live, "command `stream` to publish to")
	t.production = fs.Bool("production", false, "allow publishing to "+live+" on database 0, which a running worker "+what+" for real")
	t.dryRun = fs.Bool("dry-run", false, "print what would be published and exit without connecting")
	t.facts = fs.String("facts-stream", "", "fact `stream` --watch reads (default "+liveFacts+" for "+live+", else <stream>"+factsSuffix+")")
	t.watch = fs.Bool("watch", false, "tail the fact stream until every command has an outcome")
	fs.Var(&t.watchTimeout, "watch-timeout", "how long --watch waits, a `duration` like 45s or a number of seconds")
	return t
}

// check reports what is wrong with the flags, "" when nothing.
func (t *seedTarget) check() string {
	switch {
	case t.watchTimeout.d <= 0:
		return "--watch-timeout: want a positive duration"
	case strings.TrimSpace(*t.stream) == "":
		return "--stream: want a stream name"
	}
	return ""
}

// factsStream is the stream --watch reads.
func (t *seedTarget) factsStream() string {
	switch {
	case *t.facts != "":
		return *t.facts
	case *t.stream == t.live:
		return t.liveFacts
	}
	return *t.stream + t.factsSuffix
}

// connect checks the live-stream guard, as the reference decides reach
// (only the live stream on database 0 is what a running worker consumes;
// either alone reaches nothing), then connects. It returns the exit status
// when it fails, having said why.
func (t *seedTarget) connect(name, consequence string, stderr io.Writer) (rueidis.Client, int) {
	target, err := parseRedisURL(*t.redisURL)
	if err != nil {
		fmt.Fprintf(stderr, "replicator %s: --redis-url %s: %v\n", name, guard.RedactURL(*t.redisURL), err)
		return nil, 2
	}
	if *t.stream == t.live && target.db == 0 && !*t.production {
		fmt.Fprintf(stderr, "replicator %s: %s on database 0 is the live command stream: %s. Pass --production to mean it (or --dry-run to see the frames)\n", name, t.live, consequence)
		return nil, 2
	}
	client, err := newRedisClient(*t.redisURL)
	if err != nil {
		fmt.Fprintf(stderr, "replicator %s: %v\n", name, err)
		return nil, redisExit(err)
	}
	return client, 0
}

// publishFailed says why publishing to the command stream failed: the
// grant it needs when Redis refused it to this user. It returns the exit
// status, 1.
func (t *seedTarget) publishFailed(name string, err error, stderr io.Writer, format string, a ...any) int {
	if !reportDenied(stderr, "replicator "+name, *t.redisURL, redisacl.Check(err, "XADD", *t.stream)) {
		fmt.Fprintf(stderr, "replicator "+name+": "+format+": %v\n", append(a, err)...)
	}
	return 1
}

// watchSkew is how long before the first command's entry id --watch
// starts reading the fact stream: on a Cluster the fact stream may live on
// a node whose clock is a little behind the command stream's.
const watchSkew = time.Second

// watchCursor is the fact stream id --watch reads after, from the entry id
// of the first command published: watchSkew before it. Every fact about
// these commands is written after they were published, so the watch needs
// no read of the fact stream beforehand (its last id would take XREVRANGE,
// which an issuer's Redis user is not granted); facts about other commands
// read on the way are skipped by command_id.
func watchCursor(firstEntryID string) string {
	at, ok := streamstate.IDTime(firstEntryID)
	if !ok || at.UnixMilli() <= watchSkew.Milliseconds() {
		return "0-0"
	}
	return strconv.FormatInt(at.Add(-watchSkew).UnixMilli(), 10) + "-0"
}
