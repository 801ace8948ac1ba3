// Command issuer is an example content.fetch issuer: it publishes fetch
// commands for a set of URLs, follows their outcomes on content.blobs with a
// consumer group of its own, and keeps what a watching service keeps between
// checks (the last fingerprint and the validators to replay).
//
//	go run ./examples/issuer --redis-url redis://127.0.0.1:16379/0 \
//		--info-source-id demo --state issuer-state.json --rounds 2 URL...
//
// Each round publishes one command per URL and waits for every outcome; the
// next round replays the validators the previous one stored, so a second
// round against an unchanged origin ends not_modified. The code states each
// of the contract's issuer obligations where it keeps it, in a sentence.
//
// Exit status: 0 when every URL's last check ended stored or unchanged, 1
// when one failed or got no outcome in time, 2 for usage errors.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/guard"
)

// The streams of the contract.
const (
	streamCommands = "content.fetch"
	streamFacts    = "content.blobs"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// config is the parsed command line.
type config struct {
	redisURL string
	state    string
	group    string
	consumer string
	rounds   int
	wait     time.Duration
	reissue  int
	mint     mintOptions
	urls     []string
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, code := parseArgs(args, stderr)
	if code >= 0 {
		return code
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	iss, err := newIssuer(ctx, cfg, stdout, log)
	if err != nil {
		fmt.Fprintf(stderr, "issuer: %v\n", err)
		return 1
	}
	defer iss.client.Close()
	ok, err := iss.run(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "issuer: %v\n", err)
		return 1
	}
	if !ok {
		return 1
	}
	return 0
}

// parseArgs returns the configuration, or an exit status ≥ 0 when the
// program should stop (help, usage errors).
func parseArgs(args []string, stderr io.Writer) (config, int) {
	fs := flag.NewFlagSet("issuer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: issuer [flags] URL...\n\nPublishes content.fetch commands and follows their outcomes on content.blobs.\n\nFlags:")
		fs.PrintDefaults()
	}
	defRedis := os.Getenv("REPLICATOR_REDIS_URL")
	if defRedis == "" {
		defRedis = "redis://localhost:6379/0"
	}
	var cfg config
	fs.StringVar(&cfg.redisURL, "redis-url", defRedis, "Redis `URL` (default $REPLICATOR_REDIS_URL)")
	fs.StringVar(&cfg.mint.InfoSourceID, "info-source-id", "example-issuer", "info_source_id the facts echo back")
	fs.StringVar(&cfg.state, "state", "", "JSON `file` keeping items, validators and pending commands across runs (default: memory only)")
	fs.StringVar(&cfg.group, "group", "example.issuer", "this issuer's consumer `group` on content.blobs")
	fs.StringVar(&cfg.consumer, "consumer", "issuer-1", "consumer `name` within the group")
	fs.IntVar(&cfg.rounds, "rounds", 1, "checks of each URL, one after another")
	fs.DurationVar(&cfg.wait, "wait", time.Minute, "how long a round waits for outcomes before re-issuing")
	fs.IntVar(&cfg.reissue, "reissue", 1, "re-issues, under fresh command_ids, of a command still without an outcome")
	var headers []string
	fs.Func("H", "request header `'Name: value'` for every command (repeatable)", func(v string) error {
		headers = append(headers, v)
		return nil
	})
	timeout := fs.Float64("timeout", 0, "timeout_seconds for every command (default: the worker's)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, 0
		}
		return cfg, 2
	}
	fail := func(format string, a ...any) (config, int) {
		fmt.Fprintf(stderr, "issuer: "+format+"\n", a...)
		return cfg, 2
	}
	cfg.urls = fs.Args()
	switch {
	case len(cfg.urls) == 0:
		fs.Usage()
		return fail("want at least one URL")
	case strings.TrimSpace(cfg.mint.InfoSourceID) == "":
		return fail("--info-source-id must not be blank")
	case cfg.rounds < 1, cfg.wait <= 0, cfg.reissue < 0:
		return fail("--rounds must be ≥ 1, --wait positive, --reissue ≥ 0")
	}
	hdrs := map[string]string{}
	for _, h := range headers {
		name, value, ok := strings.Cut(h, ":")
		if !ok {
			return fail("-H: want 'Name: value'")
		}
		switch strings.ToLower(name) {
		case headerIfNoneMatch, headerIfModifiedSince:
			return fail("-H %s: validators come from the stored state, not the command line", name)
		}
		hdrs[name] = strings.TrimSpace(value)
	}
	// Screen before minting: a command the worker would refuse is never
	// published. The error names the header, never its value.
	if err := guard.ScreenHeaders(hdrs); err != nil {
		return fail("the worker would refuse these headers: %v", err)
	}
	if len(hdrs) > 0 {
		cfg.mint.Headers = hdrs
	}
	if *timeout != 0 {
		// Screened against the default ceiling; a worker configured lower
		// refuses it with invalid_request_options, which the issuer handles.
		if _, err := guard.SanitizeTimeout(timeout, guard.DefaultMaxTimeout); err != nil {
			return fail("--timeout: the worker would refuse it: %v", err)
		}
		cfg.mint.TimeoutSeconds = timeout
	}
	return cfg, -1
}

// issuer publishes commands and applies facts, one round at a time.
type issuer struct {
	cfg    config
	client rueidis.Client
	state  *State
	out    io.Writer
	log    *slog.Logger
	now    func() time.Time
}

func newIssuer(ctx context.Context, cfg config, out io.Writer, log *slog.Logger) (*issuer, error) {
	st, err := loadState(cfg.state)
	if err != nil {
		return nil, err
	}
	opt, err := rueidis.ParseURL(cfg.redisURL)
	if err != nil {
		return nil, fmt.Errorf("--redis-url %s: not a redis:// URL", guard.RedactURL(cfg.redisURL))
	}
	opt.DisableCache = true
	client, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", guard.RedactURL(cfg.redisURL), err)
	}
	iss := &issuer{cfg: cfg, client: client, state: st, out: out, log: log, now: time.Now}
	// The group must exist before the first command is published, or a
	// quick worker's fact would land before the group's starting point.
	err = client.Do(ctx, client.B().XgroupCreate().Key(streamFacts).Group(cfg.group).Id("$").Mkstream().Build()).Error()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		client.Close()
		return nil, fmt.Errorf("creating group %s on %s: %w", cfg.group, streamFacts, err)
	}
	return iss, nil
}

// run checks every URL cfg.rounds times and reports whether each one's last
// check ended stored or unchanged.
func (iss *issuer) run(ctx context.Context) (bool, error) {
	iss.state.forget(iss.now().Add(-forgetAfter))
	// Facts delivered to us before a crash but never acked come first.
	if err := iss.consume(ctx, "0", 0, nil, nil); err != nil {
		return false, err
	}
	last := map[string]Verdict{}
	for range iss.cfg.rounds {
		outcomes, err := iss.round(ctx)
		if err != nil {
			return false, err
		}
		last = outcomes
	}
	ok := true
	for _, u := range iss.cfg.urls {
		if v := last[u]; v != Stored && v != Unchanged {
			ok = false
		}
	}
	return ok, nil
}

// round publishes one command per URL and waits for every URL's outcome,
// re-issuing a command still silent after cfg.wait. It returns each URL's
// verdict ("" for none).
func (iss *issuer) round(ctx context.Context) (map[string]Verdict, error) {
	waiting := map[string]bool{}
	for _, u := range iss.cfg.urls {
		if err := iss.issue(ctx, u); err != nil {
			return nil, err
		}
		waiting[u] = true
	}
	outcomes := map[string]Verdict{}
	for attempt := 0; ; attempt++ {
		if err := iss.consume(ctx, ">", iss.cfg.wait, func(a Applied) {
			if a.Closed && waiting[a.Item] {
				delete(waiting, a.Item)
				outcomes[a.Item] = a.Verdict
			}
		}, func() bool { return len(waiting) == 0 }); err != nil {
			return nil, err
		}
		if len(waiting) == 0 {
			return outcomes, nil
		}
		// Silence is not failure: the command may still be retrying. Re-issue
		// under a fresh command_id (bounded); the old occasion stays pending,
		// so a late fact is still applied to its item.
		for _, u := range iss.cfg.urls {
			if !waiting[u] {
				continue
			}
			if attempt >= iss.cfg.reissue {
				fmt.Fprintf(iss.out, "no outcome url=%s after %v\n", guard.RedactURL(u), iss.cfg.wait)
				continue
			}
			fmt.Fprintf(iss.out, "re-issuing url=%s: no outcome after %v\n", guard.RedactURL(u), iss.cfg.wait)
			if err := iss.issue(ctx, u); err != nil {
				return nil, err
			}
		}
		if attempt >= iss.cfg.reissue {
			return outcomes, nil
		}
	}
}

// issue mints a command for the item, persists the occasion, then publishes.
func (iss *issuer) issue(ctx context.Context, key string) error {
	m, err := iss.state.mint(key, iss.cfg.mint, iss.now())
	if err != nil {
		return fmt.Errorf("minting a command for %s: %w", guard.RedactURL(key), err)
	}
	for _, field := range m.Dropped {
		fmt.Fprintf(iss.out, "dropped stored %s url=%s: the worker would refuse to send it\n", field, guard.RedactURL(key))
	}
	// Persist command_id → item before publishing: a fact for an id we
	// never recorded could not be matched to anything.
	if err := iss.state.save(iss.cfg.state); err != nil {
		return err
	}
	// Publish through the envelope codec, never hand-rolled fields: the
	// worker dead-letters a frame it cannot decode, silently.
	fields, err := envelope.ToWire(m.Cmd)
	if err != nil {
		return err
	}
	b := iss.client.B().Xadd().Key(streamCommands).Id("*").FieldValue()
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		b = b.FieldValue(k, fields[k])
	}
	if err := iss.client.Do(ctx, b.Build()).Error(); err != nil {
		return fmt.Errorf("publishing to %s: %w", streamCommands, err)
	}
	line := fmt.Sprintf("issued command_id=%s url=%s", m.Cmd.CommandID, guard.RedactURL(key))
	if len(m.Conditional) > 0 {
		// Names only: a header value never goes to a log.
		line += " conditional=" + strings.Join(m.Conditional, ",")
	}
	fmt.Fprintln(iss.out, line)
	return nil
}

// consume reads facts from our group and applies them. With id ">" it
// reads new facts until done reports true or block has passed; with id "0"
// it reads once through our own delivered-but-unacked facts. Facts are acked
// only after the state recording them is saved, so a crash redelivers a fact
// rather than losing it.
func (iss *issuer) consume(ctx context.Context, id string, block time.Duration, seen func(Applied), done func() bool) error {
	deadline := time.Now().Add(block)
	for {
		if done != nil && done() {
			return nil
		}
		remaining := time.Until(deadline)
		if id == ">" && remaining <= 0 {
			return nil
		}
		b := iss.client.B().Xreadgroup().Group(iss.cfg.group, iss.cfg.consumer).Count(100)
		var cmd rueidis.Completed
		if id == ">" {
			// Short blocks keep the loop responsive to ctx and the deadline.
			cmd = b.Block(max(min(remaining, time.Second).Milliseconds(), 1)).Streams().Key(streamFacts).Id(id).Build()
		} else {
			cmd = b.Streams().Key(streamFacts).Id(id).Build()
		}
		res, err := iss.client.Do(ctx, cmd).AsXRead()
		switch {
		case rueidis.IsRedisNil(err) && id == ">":
			continue
		case rueidis.IsRedisNil(err):
			return nil
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			return fmt.Errorf("reading %s: %w", streamFacts, err)
		}
		entries := res[streamFacts]
		if len(entries) == 0 {
			if id != ">" {
				return nil // backlog drained
			}
			continue
		}
		ids := make([]string, 0, len(entries))
		for _, e := range entries {
			ids = append(ids, e.ID)
			if a, ok := iss.applyEntry(e); ok && seen != nil {
				seen(a)
			}
		}
		if err := iss.state.save(iss.cfg.state); err != nil {
			return err
		}
		if err := iss.client.Do(ctx, iss.client.B().Xack().Key(streamFacts).Group(iss.cfg.group).Id(ids...).Build()).Error(); err != nil {
			return fmt.Errorf("acking on %s: %w", streamFacts, err)
		}
		if id != ">" {
			id = ids[len(ids)-1] // the backlog continues after the last one read
		}
	}
}

// applyEntry decodes and applies one fact, printing what it meant.
func (iss *issuer) applyEntry(e rueidis.XRangeEntry) (Applied, bool) {
	m, err := envelope.FromWire(e.FieldValues)
	if err != nil {
		// Check the schema version before reading anything else; a frame
		// of a version we do not know, or one that never decodes, is not
		// ours to interpret. The stream is shared, so it must not stop us.
		iss.log.Warn("skipping a fact that does not decode", "entry_id", e.ID, "error", err)
		return Applied{}, false
	}
	a := iss.state.apply(m, iss.now())
	switch f := m.(type) {
	case *envelope.BlobAvailable:
		if a.Verdict == Stored {
			fmt.Fprintf(iss.out, "stored command_id=%s url=%s fingerprint=%s size=%d blob_uri=%s\n",
				f.CommandID, guard.RedactURL(a.Item), f.ContentFingerprint, f.SizeBytes, f.BlobURI)
		}
	case *envelope.FetchFailed:
		line := fmt.Sprintf("command_id=%s url=%s reason=%s terminal=%t", f.CommandID, guard.RedactURL(a.Item), f.Reason, f.Terminal)
		if f.StatusCode != nil {
			line += " status=" + strconv.Itoa(*f.StatusCode)
		}
		switch a.Verdict {
		case Unchanged:
			fmt.Fprintf(iss.out, "unchanged %s (the stored fingerprint stands)\n", line)
		case Refused:
			fmt.Fprintf(iss.out, "refused %s (stored validators cleared)\n", line)
		case Failed, Retrying:
			if f.Detail != nil {
				// detail is for operators: shown, never branched on.
				line += " detail=" + strconv.Quote(*f.Detail)
			}
			fmt.Fprintf(iss.out, "%s %s\n", a.Verdict, line)
		}
	}
	return a, true
}
