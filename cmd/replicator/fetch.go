package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/fetch/robots"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/sink/local"
)

const fetchDescription = `Fetches URL once through the same handler the worker uses — header and
timeout sanitizer, destination guard, politeness, redirects, size limit —
stores the body in the local blob directory and prints the resulting fact as
JSON. No Redis is involved.

Exit status: 0 for blob_available and not_modified, 1 for any other outcome,
2 for usage errors.`

func runFetch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("fetch", "fetch [-H 'Name: value']... [--timeout S] [--blob-dir D] [--allow-cidr C]... [--resolve host=ip]... [--robots] URL", fetchDescription, stderr)
	var headers, allow, resolve multiFlag
	fs.Var(&headers, "H", "request header `'Name: value'` (repeatable)")
	timeout := fs.Float64("timeout", 0, "per-operation timeout in `seconds` (default 30)")
	blobDir := fs.String("blob-dir", "./blobs", "local blob `directory`")
	fs.Var(&allow, "allow-cidr", "let the guard allow this `CIDR` (repeatable; e.g. 127.0.0.1/32 for a local server)")
	fs.Var(&resolve, "resolve", "answer DNS for `host=ip` (repeatable; the guard still judges the address)")
	infoSource := fs.String("info-source-id", "replicator-cli", "info_source_id echoed on the fact")
	maxBytes := fs.Int64("max-bytes", fetch.DefaultMaxBodyBytes, "largest body to store, in `bytes`")
	obeyRobots := fs.Bool("robots", false, "obey the origin's robots.txt (RFC 9309), as REPLICATOR_ROBOTS=obey does")
	verbose := fs.Bool("v", false, "log progress to stderr")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "replicator fetch: want exactly one URL")
		fs.Usage()
		return 2
	}
	hdrs, err := parseHeaders(headers)
	if err != nil {
		fmt.Fprintf(stderr, "replicator fetch: %v\n", err)
		return 2
	}
	prefixes, err := parseCIDRs(strings.Join(allow, ","))
	if err != nil {
		fmt.Fprintf(stderr, "replicator fetch: --allow-cidr: %v\n", err)
		return 2
	}
	gopts, err := guardOptions(prefixes, strings.Join(resolve, ","))
	if err != nil {
		fmt.Fprintf(stderr, "replicator fetch: %v\n", err)
		return 2
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	blobs, err := local.New(local.Options{Dir: *blobDir, Logger: logger})
	if err != nil {
		fmt.Fprintf(stderr, "replicator fetch: %v\n", err)
		return 1
	}
	fopts := fetch.Options{Guard: guard.New(gopts), MaxBodyBytes: *maxBytes, Logger: logger}
	if *obeyRobots {
		fopts.Robots = robots.New(robots.Options{Logger: logger})
	}
	fetcher := fetch.New(fopts)
	defer fetcher.Close()
	handler := contentfetch.NewHandler(contentfetch.HandlerOptions{Fetcher: fetcher, Sink: blobs, Logger: logger})

	cmd := &envelope.ContentFetch{
		SchemaVersion: envelope.SchemaVersion,
		OccurredAt:    time.Now().UTC(),
		CommandID:     ulid.Make().String(),
		URL:           fs.Arg(0),
		InfoSourceID:  *infoSource,
		Headers:       hdrs,
	}
	if *timeout != 0 {
		cmd.TimeoutSeconds = timeout
	}
	out := handler.Fetch(ctx, cmd, nil)
	if err := printOutcome(stdout, out); err != nil {
		fmt.Fprintf(stderr, "replicator fetch: %v\n", err)
		return 1
	}
	if out.Fate == capability.Complete {
		return 0
	}
	return 1
}

// guardOptions builds the guard's options from the allow-list and the
// comma-separated host=ip overrides. Like curl's --resolve, names the
// overrides do not mention resolve normally.
func guardOptions(allow []netip.Prefix, resolve string) (guard.Options, error) {
	opts := guard.Options{Allow: allow}
	if strings.TrimSpace(resolve) != "" {
		r, err := parseResolve(resolve)
		if err != nil {
			return opts, err
		}
		r.Fallback = net.DefaultResolver
		opts.Resolver = r
	}
	return opts, nil
}

// printOutcome writes the outcome's fact as indented JSON in its wire shape,
// or, for outcomes without a fact, a small JSON object saying why.
func printOutcome(w io.Writer, out contentfetch.Outcome) error {
	var doc []byte
	if out.Fact != nil {
		fields, err := envelope.ToWire(out.Fact)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		if err := json.Indent(&buf, []byte(fields["payload"]), "", "  "); err != nil {
			return err
		}
		doc = buf.Bytes()
	} else {
		detail := ""
		if out.Err != nil {
			detail = out.Err.Error()
		}
		var err error
		doc, err = json.MarshalIndent(map[string]string{"outcome": out.Name(), "detail": detail}, "", "  ")
		if err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "%s\n", doc)
	return err
}
