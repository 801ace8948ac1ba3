package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/internal/redisclock"
	"github.com/replicator-go/replicator/internal/streamstate"
)

const dlqDescription = `Reads the dead letters on content.fetch.dlq (with --replicate,
content.replicate.dlq; --stream names any other):

  dlq [filters]                 the newest --count dead letters, oldest first
  dlq stats [filters]           how many, by reason and by host, with the
                                oldest and newest of each
  dlq trim --older-than D       remove the dead letters older than D

Filters: --reason TOKEN, --since and --until (a duration ago, as 2h or 30m,
or an RFC 3339 time; both inclusive), and --host HOST (content_fetch
commands for that host). A dead letter is listed one line each:

  id=<entry id> dlq_reason=<reason> dlq_original_id=<id> event_type=<type>
  command_id=<id> url=<URL> header_names=<names>

A content_replicate dead letter shows command_id, credentials_alias,
provider, destination and blob_uri instead of the URL.

When the payload does not decode, the frame's other fields are printed as they
are, and the payload only as far as it is safe: header values are never
printed (names at most), so a payload that may carry them is withheld.
Listing and stats only read (XINFO STREAM, XRANGE): nothing is acknowledged
or removed. trim is the one way to drop dead letters: XTRIM MINID at Redis's
clock (INFO server) minus D, exact; it prints how many it removed.

Exit status: 0 when the dead letters were read or trimmed (even none), 1
when Redis failed or refused a command to this Redis user (one line names
the grant it needs), 2 for usage errors.`

// dlqFields are the frame fields the dead-letter line shows first, in order.
var dlqFields = []string{"dlq_reason", "dlq_original_id", envelope.FieldEventType}

// maxRawPayload bounds how much of an undecodable payload is printed.
const maxRawPayload = 512

func runDLQ(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("dlq", "dlq [--redis-url URL] [--replicate | --stream KEY] [filters] [--count N] [stats | trim --older-than D]", dlqDescription, stderr)
	redisURL := fs.String("redis-url", envRedisURL(), "Redis `URL` (default $REPLICATOR_REDIS_URL or "+defaultRedisURL+")")
	count := fs.Int("count", 20, "print the newest `N` dead letters")
	replicateDLQ := fs.Bool("replicate", false, "read content.replicate's dead letters ("+streamReplicateDLQ+")")
	stream := fs.String("stream", "", "read the dead letters of the stream `KEY` (default "+streamDLQ+")")
	reason := fs.String("reason", "", "keep the dead letters of this reason `TOKEN`")
	host := fs.String("host", "", "keep content_fetch commands for `HOST`")
	since := fs.String("since", "", "keep those written at or after `WHEN` (a duration ago or an RFC 3339 time)")
	until := fs.String("until", "", "keep those written at or before `WHEN` (a duration ago or an RFC 3339 time)")
	olderThan := fs.Duration("older-than", 0, "trim: remove dead letters older than `D`")
	// Flags may come before the action or after it.
	positional, code, ok := parseInterspersed(fs, args)
	if !ok {
		return code
	}
	usageErr := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "replicator dlq: "+format+"\n", a...)
		return 2
	}
	action := ""
	if len(positional) > 0 {
		action = positional[0]
	}
	switch {
	case len(positional) > 1 || (action != "" && action != "stats" && action != "trim"):
		return usageErr("unexpected argument %q: want stats, trim or nothing", positional[len(positional)-1])
	case *count <= 0:
		return usageErr("--count must be positive")
	}
	dlq := streamDLQ
	switch {
	case *replicateDLQ && *stream != "":
		return usageErr("give --replicate or --stream, not both")
	case *replicateDLQ:
		dlq = streamReplicateDLQ
	case *stream != "":
		dlq = *stream
	}
	if *host != "" && dlq == streamReplicateDLQ {
		return usageErr("--host filters content_fetch commands; %s holds content_replicate ones", dlq)
	}
	now := time.Now()
	var f streamstate.Filter
	var err error
	f.Reason, f.Host = *reason, *host
	if f.Since, err = parseWhen(*since, now); err != nil {
		return usageErr("--since: %v", err)
	}
	if f.Until, err = parseWhen(*until, now); err != nil {
		return usageErr("--until: %v", err)
	}
	if action == "trim" {
		if *olderThan <= 0 {
			return usageErr("trim needs --older-than D, a positive duration: it removes every dead letter older than D")
		}
		if f != (streamstate.Filter{}) {
			return usageErr("trim removes by age alone: --reason, --host, --since and --until do not apply")
		}
	} else if *olderThan != 0 {
		return usageErr("--older-than applies to trim only")
	}

	client, err := newRedisClient(*redisURL)
	if err != nil {
		fmt.Fprintf(stderr, "replicator dlq: %v\n", err)
		return redisExit(err)
	}
	defer client.Close()
	failed := func(doing string, err error) int {
		if !reportDenied(stderr, "replicator dlq", *redisURL, err) {
			fmt.Fprintf(stderr, "replicator dlq: %s %s: %v\n", doing, dlq, err)
		}
		return 1
	}
	switch action {
	case "trim":
		// Against Redis's clock, which stamped the ids.
		now, err := redisclock.Now(ctx, client)
		if err != nil {
			return failed("trimming", err)
		}
		before := now.Add(-*olderThan)
		n, err := streamstate.TrimDeadLetters(ctx, client, dlq, before)
		if err != nil {
			return failed("trimming", err)
		}
		fmt.Fprintf(stdout, "replicator dlq trim: removed %d dead letters older than %s (written before %s) from %s\n",
			n, *olderThan, before.Format(time.RFC3339Nano), dlq)
		return 0
	case "stats":
		st, err := streamstate.CountDeadLetters(ctx, client, dlq, f, 0)
		if err != nil {
			return failed("reading", err)
		}
		renderDLQStats(stdout, st, now)
		return 0
	}
	letters, err := streamstate.NewestDeadLetters(ctx, client, dlq, f, *count)
	if err != nil {
		return failed("reading", err)
	}
	if len(letters) == 0 {
		if f != (streamstate.Filter{}) {
			fmt.Fprintf(stderr, "replicator dlq: no dead letter on %s matches\n", dlq)
		} else {
			fmt.Fprintf(stderr, "replicator dlq: %s is empty\n", dlq)
		}
		return 0
	}
	slices.Reverse(letters)
	for _, d := range letters {
		fmt.Fprintln(stdout, deadLetterLine(d.Entry))
	}
	return 0
}

// renderDLQStats writes dlq stats' report.
func renderDLQStats(w io.Writer, st streamstate.Stats, now time.Time) {
	if st.All.Count == 0 {
		fmt.Fprintf(w, "%s: no dead letters\n", st.Stream)
		return
	}
	fmt.Fprintf(w, "%s: %d dead letters, oldest %s, newest %s\n", st.Stream, st.All.Count, ago(now, st.All.Oldest), ago(now, st.All.Newest))
	for _, part := range []struct {
		title   string
		tallies []streamstate.Tally
	}{{"by reason", st.ByReason}, {"by host", st.ByHost}} {
		fmt.Fprintf(w, "\n%s:\n", part.title)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, t := range part.tallies {
			key := t.Key
			if key == "" {
				key = "(none)"
			}
			fmt.Fprintf(tw, "  %s\t%d\toldest %s\tnewest %s\n", key, t.Count, ago(now, t.Oldest), ago(now, t.Newest))
		}
		tw.Flush()
	}
}

// parseWhen reads --since or --until: empty (no bound), a duration before
// now, or an RFC 3339 time.
func parseWhen(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%q: a duration ago must not be negative", s)
		}
		t := now.Add(-d)
		if t.UnixMilli() < 0 {
			return time.Time{}, fmt.Errorf("%q: reaches before 1970", s)
		}
		return t, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q: want a duration ago (2h, 30m) or an RFC 3339 time (2026-12-01T10:00:00Z)", s)
	}
	if t.UnixMilli() < 0 {
		return time.Time{}, fmt.Errorf("%q: before 1970", s)
	}
	return t, nil
}

// deadLetterLine renders one dead letter as key=value pairs. It never
// includes a header value.
func deadLetterLine(e rueidis.XRangeEntry) string {
	var b strings.Builder
	b.WriteString(kv("id", e.ID))
	shown := map[string]bool{}
	for _, k := range dlqFields {
		if v, ok := e.FieldValues[k]; ok {
			b.WriteString(" " + kv(k, v))
			shown[k] = true
		}
	}
	m, err := envelope.FromWire(e.FieldValues)
	if err == nil || errors.Is(err, envelope.ErrUnsupportedVersion) {
		b.WriteString(modelSummary(m))
		if err != nil {
			b.WriteString(" " + kv("schema_version", e.FieldValues[envelope.FieldSchemaVersion]))
		}
		return b.String()
	}
	// Undecodable: the raw fields, sorted, the payload made safe.
	b.WriteString(" " + kv("decode_error", err.Error()))
	names := make([]string, 0, len(e.FieldValues))
	for k := range e.FieldValues {
		if !shown[k] {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	for _, k := range names {
		v := e.FieldValues[k]
		if k == envelope.FieldPayload {
			b.WriteString(safePayload(v))
			continue
		}
		b.WriteString(" " + kv(k, v))
	}
	return b.String()
}

// modelSummary names a decoded model's correlation fields. For a command,
// headers are reduced to their names.
func modelSummary(m envelope.Model) string {
	var parts []string
	switch p := m.(type) {
	case *envelope.ContentFetch:
		parts = append(parts, kv("command_id", p.CommandID), kv("url", guard.RedactURL(p.URL)), kv("info_source_id", p.InfoSourceID))
		if len(p.Headers) > 0 {
			parts = append(parts, kv("header_names", headerNames(p.Headers)))
		}
	case *envelope.BlobAvailable:
		parts = append(parts, kv("command_id", p.CommandID), kv("url", guard.RedactURL(p.URL)), kv("blob_uri", p.BlobURI))
	case *envelope.FetchFailed:
		parts = append(parts, kv("command_id", p.CommandID), kv("url", guard.RedactURL(p.URL)), kv("reason", string(p.Reason)))
	case *envelope.FetchPolicyState:
		parts = append(parts, kv("host", p.Host))
	case *envelope.ContentReplicate:
		parts = append(parts, kv("command_id", p.CommandID), kv("credentials_alias", p.CredentialsAlias),
			kv("provider", p.Provider), kv("destination", p.Destination), kv("blob_uri", guard.RedactURL(p.BlobURI)))
	case *envelope.ReplicationComplete:
		parts = append(parts, kv("command_id", p.CommandID), kv("public_url", p.PublicURL))
	case *envelope.ReplicationFailed:
		parts = append(parts, kv("command_id", p.CommandID), kv("reason", string(p.Reason)))
	}
	if len(parts) == 0 {
		return ""
	}
	return " " + strings.Join(parts, " ")
}

// safePayload shows what can be shown of a payload that did not decode.
// A JSON object is shown member by member with any headers object reduced
// to its names; anything else is shown only when it cannot hold a header
// (no "header" in it), since a broken payload's text is not parseable
// enough to strip values from.
func safePayload(v string) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(v), &obj) == nil {
		names := make([]string, 0, len(obj))
		for k := range obj {
			names = append(names, k)
		}
		slices.Sort(names)
		var b strings.Builder
		for _, k := range names {
			raw := obj[k]
			if strings.EqualFold(k, "headers") {
				var h map[string]json.RawMessage
				if json.Unmarshal(raw, &h) == nil {
					b.WriteString(" " + kv("payload.header_names", headerNames(h)))
				} else {
					b.WriteString(" " + kv("payload.headers", "(withheld)"))
				}
				continue
			}
			shown := string(raw)
			var str string
			if json.Unmarshal(raw, &str) == nil {
				shown = str
				if strings.HasSuffix(k, "url") {
					shown = guard.RedactURL(str)
				}
			}
			b.WriteString(" " + kv("payload."+k, bounded(shown)))
		}
		return b.String()
	}
	if strings.Contains(strings.ToLower(v), "header") {
		return " " + kv("payload", fmt.Sprintf("(%d bytes withheld: not a JSON object and may carry header values)", len(v)))
	}
	return " " + kv("payload", bounded(v))
}

// headerNames lists a header map's names, sorted, comma-separated.
func headerNames[V any](h map[string]V) string {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

// bounded cuts s to maxRawPayload bytes.
func bounded(s string) string {
	if len(s) <= maxRawPayload {
		return s
	}
	return s[:maxRawPayload] + "…"
}

// kv renders key=value, quoting the value when it is empty or holds spaces,
// quotes or unprintable bytes, so a line stays one line.
func kv(k, v string) string {
	if v == "" || strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r == '"' || r == '=' || r > '~' }) {
		return k + "=" + strconv.Quote(v)
	}
	return k + "=" + v
}
