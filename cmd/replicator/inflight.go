package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/engine"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/persist"
)

const inflightDescription = `Prints how many commands this host's worker holds unacknowledged: the
patching gate's question, "is anything in flight?". It reads the worker's
settings from --env-file (then the environment, which wins), as the worker
would, and sums the pending entries of the worker's own consumers in both
groups (REPLICATOR_CONSUMER_NAME and REPLICATOR_REPLICATE_CONSUMER_NAME, or
the names derived from the groups), and of the replicator@<hostname> name
earlier versions used, whose entries are this host's until reclaimed. Other
consumers' entries are not counted: a dead one's would hold the gate shut
until a reclaim. Read-only: one XINFO STREAM … FULL per stream, which both
the worker's Redis user and an operator's may run.

It fails closed: when the env file cannot be read, a setting is invalid, or
Redis cannot be read, it prints nothing on stdout and exits non-zero, so a
gate never reads a failure as 0.

Exit status: 0 with the count printed, 1 when Redis could not be read or
the env file is missing, 2 for usage errors and invalid settings.`

// defaultEnvFile is where deploy/replicator.service reads its settings.
const defaultEnvFile = "/etc/replicator/replicator.env"

// inflightTimeout bounds the whole read.
const inflightTimeout = 10 * time.Second

// runStatusForms is `replicator status`: its inflight form, or the full
// screen.
func runStatusForms(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "inflight" {
		return runInflight(ctx, args[1:], stdout, stderr)
	}
	code := runStatus(ctx, args, stdout, stderr)
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			fmt.Fprintln(stderr, "\nAlso: replicator status inflight prints this worker's pending count for a\npatching gate (replicator status inflight --help).")
			break
		}
	}
	return code
}

func runInflight(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("status inflight", "status inflight [--env-file FILE] [--redis-url URL]", inflightDescription, stderr)
	envFile := fs.String("env-file", defaultEnvFile, "the worker's environment `file`")
	redisURL := fs.String("redis-url", "", "Redis `URL` to read as (an operator's user); default the worker's REPLICATOR_REDIS_URL")
	if code, ok := parseNoArgs(fs, args, stderr); !ok {
		return code
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "replicator status inflight: "+format+"\n", a...)
		return code
	}
	fileEnv, err := readEnvFile(*envFile)
	if err != nil {
		// Without the file the defaults name a local Redis, and a 0 from
		// there says nothing about this worker.
		return fail(1, "%v", err)
	}
	cfg, err := loadConfigFrom(overlayEnv(fileEnv, os.Environ()))
	if err != nil {
		return fail(2, "%s", oneLine(err))
	}
	url := cfg.RedisURL
	if *redisURL != "" {
		url = *redisURL
	}
	client, err := newRedisClient(url)
	if err != nil {
		return fail(1, "%s", oneLine(err))
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(ctx, inflightTimeout)
	defer cancel()
	n, err := countInflight(ctx, client, cfg)
	if err != nil {
		return fail(1, "reading %s: %s", guard.RedactURL(url), scrub(err, url))
	}
	fmt.Fprintln(stdout, n)
	return 0
}

// countInflight sums the pending entries of this worker's consumers, its
// current names and the old one, in each of its groups: content.persist's
// only when persist is on, as a worker with it off never reads that stream
// and its Redis user may not be granted it (docs/operations.md, Redis ACL).
func countInflight(ctx context.Context, c rueidis.Client, cfg Config) (int64, error) {
	var total int64
	groups := []struct{ stream, group, name string }{
		{streamCommands, cfg.ConsumerGroup, cfg.ConsumerName},
		{streamReplicate, cfg.ReplicateConsumerGroup, cfg.ReplicateConsumerName},
	}
	if cfg.PersistEnabled {
		groups = append(groups, struct{ stream, group, name string }{
			persist.DefaultStream, persist.DefaultGroup, engine.ConsumerName(persist.DefaultGroup)})
	}
	for _, g := range groups {
		consumers, _, err := groupConsumers(ctx, c, g.stream, g.group)
		if err != nil {
			return 0, err
		}
		for _, cs := range consumers {
			if cs.Name == g.name || cs.Name == oldConsumerName() {
				total += cs.Pending
			}
		}
	}
	return total, nil
}

// readEnvFile reads a systemd environment file: NAME=value lines, # and ;
// comments, a value in matching single or double quotes unquoted.
func readEnvFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var env []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			continue // systemd ignores such a line too, with a warning
		}
		value = strings.TrimSpace(value)
		if len(value) >= 2 && (value[0] == '"' || value[0] == '\'') && value[len(value)-1] == value[0] {
			value = value[1 : len(value)-1]
		}
		env = append(env, strings.TrimSpace(name)+"="+value)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return env, nil
}

// overlayEnv is base with every variable of over replacing base's of the
// same name in any case, as a process's environment beats an env file.
func overlayEnv(base, over []string) []string {
	set := map[string]bool{}
	for _, kv := range over {
		name, _, _ := strings.Cut(kv, "=")
		set[strings.ToUpper(name)] = true
	}
	var out []string
	for _, kv := range base {
		if name, _, _ := strings.Cut(kv, "="); !set[strings.ToUpper(name)] {
			out = append(out, kv)
		}
	}
	return append(out, over...)
}
