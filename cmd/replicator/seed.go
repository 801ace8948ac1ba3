package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/internal/redisacl"
)

const seedDescription = `Publishes one content_fetch command per URL to content.fetch (or --stream),
each with a fresh ULID command_id, and prints one line per command as it
lands:

  published command_id=<ULID> entry_id=<stream id> url=<URL>

The live target is guarded as the reference's seed script guards it: the
worker fetches whatever lands on content.fetch, so publishing there on
database 0 needs --production. Another database, or another stream, does
not. --dry-run prints the frames instead (header values shown as xxxxx) and
connects to nothing.

Headers are screened with the worker's own rules first: a command the worker
would refuse with invalid_request_options is never minted (exit 2, naming the
header, never its value).

With --watch it then tails the fact stream (content.blobs for content.fetch,
else <stream>.blobs, or --facts-stream) with plain XREAD (no consumer group
is created) from a second before the first command's entry id, and prints a
progress line for each command's outcome (blob_available or fetch_failed).
Without --watch it sends Redis nothing but XADD; with it, XREAD too.

'replicator seed replicate --help' describes publishing a content_replicate
command instead.

Exit status: 0 when everything was published and, with --watch, every
command ended blob_available or not_modified; 1 when publishing or watching
failed (when Redis refused a command to this Redis user, one line names the
grant it needs), a command failed, or the watch timed out; 2 for usage
errors and a refused target.`

// defaultWatchTimeout is how long --watch waits by default.
const defaultWatchTimeout = 30 * time.Second

// seedResult is one published command.
type seedResult struct {
	commandID string
	entryID   string
	url       string
}

func runSeed(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "replicate" {
		return runSeedReplicate(ctx, args[1:], stdout, stderr)
	}
	fs := newFlagSet("seed", "seed --info-source-id ID [--redis-url URL] [--stream S] [--production] [--dry-run] [-H 'Name: value']... [--timeout S] [--watch] [--watch-timeout D] URL...", seedDescription, stderr)
	target := addSeedTarget(fs, streamCommands, streamFacts, ".blobs", "fetches")
	infoSource := fs.String("info-source-id", "", "info_source_id echoed on both facts (required)")
	var headers multiFlag
	fs.Var(&headers, "H", "request header `'Name: value'` for every command (repeatable)")
	timeout := fs.Float64("timeout", 0, "timeout_seconds for every command, in `seconds` (default: the worker's, 30)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "replicator seed: "+format+"\n", a...)
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return usageErr("want at least one URL")
	}
	if strings.TrimSpace(*infoSource) == "" {
		return usageErr("--info-source-id is required (the issuer's id echoed on both facts)")
	}
	hdrs, err := parseHeaders(headers)
	if err != nil {
		return usageErr("%v", err)
	}
	if err := guard.ScreenHeaders(hdrs); err != nil {
		// The guard's message names the header as given, never its value.
		return usageErr("the worker would refuse these headers: %v", err)
	}
	var timeoutSeconds *float64
	if *timeout != 0 {
		ceiling := seedTimeoutCeiling()
		if _, err := guard.SanitizeTimeout(timeout, ceiling); err != nil {
			return usageErr("--timeout: the worker would refuse it: want more than 0 and at most %v seconds (REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS)", ceiling.Seconds())
		}
		timeoutSeconds = timeout
	}
	if msg := target.check(); msg != "" {
		return usageErr("%s", msg)
	}
	commands := make([]*envelope.ContentFetch, 0, fs.NArg())
	for _, u := range fs.Args() {
		commands = append(commands, &envelope.ContentFetch{
			SchemaVersion:  envelope.SchemaVersion,
			OccurredAt:     time.Now().UTC(),
			CommandID:      ulid.Make().String(),
			URL:            u,
			InfoSourceID:   *infoSource,
			Headers:        hdrs,
			TimeoutSeconds: timeoutSeconds,
		})
	}
	if *target.dryRun {
		return printDryRun(stdout, stderr, *target.stream, commands)
	}
	client, code := target.connect("seed", "a running worker will fetch these URLs for real", stderr)
	if code != 0 {
		return code
	}
	defer client.Close()

	var published []seedResult
	for _, cmd := range commands {
		cmd.OccurredAt = time.Now().UTC()
		id, err := publish(ctx, client, *target.stream, cmd)
		if err != nil {
			return target.publishFailed("seed", err, stderr, "publishing to %s failed after %d of %d commands", *target.stream, len(published), fs.NArg())
		}
		r := seedResult{commandID: cmd.CommandID, entryID: id, url: cmd.URL}
		published = append(published, r)
		fmt.Fprintf(stdout, "published command_id=%s entry_id=%s url=%s\n", r.commandID, r.entryID, guard.RedactURL(r.url))
	}
	if !*target.watch {
		return 0
	}
	return watchFacts(ctx, client, *target.redisURL, target.factsStream(), watchCursor(published[0].entryID), published, target.watchTimeout.d, stdout, stderr)
}

// printFrame writes the frame seed would publish to stream, as JSON with
// its six fields.
func printFrame(stdout, stderr io.Writer, stream string, m envelope.Model) int {
	fields, err := envelope.ToWire(m)
	if err == nil {
		var line []byte
		if line, err = json.Marshal(fields); err == nil {
			fmt.Fprintf(stdout, "would publish to %s: %s\n", stream, line)
			return 0
		}
	}
	fmt.Fprintf(stderr, "replicator seed: %v\n", err)
	return 1
}

// printDryRun writes, one line per command, the frame seed would publish
// to stream, as JSON with its six fields. Header values are shown as xxxxx
// and URL userinfo redacted: like every other output of this program, the
// line never carries a credential.
func printDryRun(stdout, stderr io.Writer, stream string, commands []*envelope.ContentFetch) int {
	for _, cmd := range commands {
		shown := *cmd
		shown.URL = guard.RedactURL(cmd.URL)
		if cmd.Headers != nil {
			shown.Headers = make(map[string]string, len(cmd.Headers))
			for name := range cmd.Headers {
				shown.Headers[name] = "xxxxx"
			}
		}
		if code := printFrame(stdout, stderr, stream, &shown); code != 0 {
			return code
		}
	}
	return 0
}

// watchFacts tails streamFacts from start until every published command
// has a fact or timeout passes, printing one progress line per outcome. It
// returns the exit status: 0 when every command ended blob_available or
// not_modified. redisURL names the Redis user when Redis refuses the read.
func watchFacts(ctx context.Context, client rueidis.Client, redisURL, streamFacts, start string, published []seedResult, timeout time.Duration, stdout, stderr io.Writer) int {
	outstanding := make(map[string]bool, len(published))
	for _, r := range published {
		outstanding[r.commandID] = true
	}
	total := len(published)
	done, failed := 0, 0
	deadline := time.Now().Add(timeout)
	cursor := start
	for len(outstanding) > 0 {
		remaining := time.Until(deadline)
		if remaining <= 0 {
			break
		}
		// A whole number of milliseconds, at least 1: BLOCK 0 would wait forever.
		block := max(remaining.Milliseconds(), 1)
		streams, err := client.Do(ctx, client.B().Xread().Count(100).Block(block).Streams().Key(streamFacts).Id(cursor).Build()).AsXRead()
		if rueidis.IsRedisNil(err) {
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				fmt.Fprintf(stderr, "replicator seed: interrupted with %d of %d outcomes seen\n", done, total)
				return 1
			}
			if !reportDenied(stderr, "replicator seed", redisURL, redisacl.Check(err, "XREAD", streamFacts)) {
				fmt.Fprintf(stderr, "replicator seed: watching %s failed: %v\n", streamFacts, err)
			}
			return 1
		}
		for _, e := range streams[streamFacts] {
			cursor = e.ID
			m, err := envelope.FromWire(e.FieldValues)
			if err != nil {
				// A shared stream: someone else's bad frame must not stop the watch.
				fmt.Fprintf(stderr, "replicator seed: skipping undecodable fact %s: %v\n", e.ID, err)
				continue
			}
			var line string
			switch f := m.(type) {
			case *envelope.BlobAvailable:
				if !outstanding[f.CommandID] {
					continue
				}
				delete(outstanding, f.CommandID)
				line = fmt.Sprintf("blob_available command_id=%s status=%s size=%d blob_uri=%s", f.CommandID, optInt(f.StatusCode), f.SizeBytes, f.BlobURI)
			case *envelope.FetchFailed:
				if !outstanding[f.CommandID] {
					continue
				}
				delete(outstanding, f.CommandID)
				if f.Reason != envelope.ReasonNotModified {
					failed++
				}
				line = fmt.Sprintf("fetch_failed command_id=%s reason=%s status=%s", f.CommandID, f.Reason, optInt(f.StatusCode))
				if f.Detail != nil {
					line += " detail=" + strconv.Quote(*f.Detail)
				}
			case *envelope.ReplicationComplete:
				if !outstanding[f.CommandID] {
					continue
				}
				delete(outstanding, f.CommandID)
				line = fmt.Sprintf("replication_complete command_id=%s public_url=%s", f.CommandID, f.PublicURL)
			case *envelope.ReplicationFailed:
				if !outstanding[f.CommandID] {
					continue
				}
				delete(outstanding, f.CommandID)
				failed++
				line = fmt.Sprintf("replication_failed command_id=%s reason=%s", f.CommandID, f.Reason)
				if f.Detail != nil {
					line += " detail=" + strconv.Quote(*f.Detail)
				}
			default:
				continue
			}
			done++
			fmt.Fprintf(stdout, "[%d/%d] %s\n", done, total, line)
		}
	}
	if len(outstanding) > 0 {
		var missing []string
		for _, r := range published {
			if outstanding[r.commandID] {
				missing = append(missing, r.commandID)
			}
		}
		fmt.Fprintf(stderr, "replicator seed: no outcome on %s after %v for %d of %d commands: %s\n", streamFacts, timeout, len(missing), total, strings.Join(missing, ", "))
		return 1
	}
	if failed > 0 {
		fmt.Fprintf(stderr, "replicator seed: %d of %d commands failed\n", failed, total)
		return 1
	}
	return 0
}

// seedTimeoutCeiling is the largest --timeout the worker accepts: this
// host's REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS when it is set and valid, else
// its default.
func seedTimeoutCeiling() time.Duration {
	var c Config
	v := strings.TrimSpace(os.Getenv("REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS"))
	if v != "" && seconds(func(c *Config) *time.Duration { return &c.MaxFetchTimeout }, false)(&c, v) == nil {
		return c.MaxFetchTimeout
	}
	return guard.DefaultMaxTimeout
}

// optInt prints an optional number, "-" when absent.
func optInt(p *int) string {
	if p == nil {
		return "-"
	}
	return strconv.Itoa(*p)
}

// durationFlag accepts a Go duration ("45s", "2m") or a bare number of
// seconds, as the reference's --watch-timeout took.
type durationFlag struct{ d time.Duration }

func (f *durationFlag) String() string { return f.d.String() }

func (f *durationFlag) Set(v string) error {
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if math.IsNaN(s) || math.IsInf(s, 0) || s > maxSettingSeconds {
			return errors.New("not a usable number of seconds")
		}
		f.d = time.Duration(s * float64(time.Second))
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return errors.New("want a duration like 45s or a number of seconds")
	}
	f.d = d
	return nil
}
