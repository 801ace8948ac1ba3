package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/envelope"
)

const dlqDescription = `Prints the newest dead letters on content.fetch.dlq (with --replicate, on
content.replicate.dlq; --stream names any other), oldest first, one line
each:

  id=<entry id> dlq_reason=<reason> dlq_original_id=<id> event_type=<type>
  command_id=<id> url=<URL> header_names=<names>

A content_replicate dead letter shows command_id, credentials_alias,
provider, destination and blob_uri instead of the URL.

When the payload does not decode, the frame's other fields are printed as they
are, and the payload only as far as it is safe: header values are never
printed (names at most), so a payload that may carry them is withheld.
Reads with XREVRANGE; nothing is acknowledged or removed.

Exit status: 0 when the dead letters were read (even none), 1 when Redis
failed, 2 for usage errors.`

// dlqFields are the frame fields the dead-letter line shows first, in order.
var dlqFields = []string{"dlq_reason", "dlq_original_id", envelope.FieldEventType}

// maxRawPayload bounds how much of an undecodable payload is printed.
const maxRawPayload = 512

func runDLQ(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("dlq", "dlq [--redis-url URL] [--count N] [--replicate | --stream KEY]", dlqDescription, stderr)
	redisURL := fs.String("redis-url", envRedisURL(), "Redis `URL` (default $REPLICATOR_REDIS_URL or "+defaultRedisURL+")")
	count := fs.Int("count", 20, "print the newest `N` dead letters")
	replicateDLQ := fs.Bool("replicate", false, "read content.replicate's dead letters ("+streamReplicateDLQ+")")
	stream := fs.String("stream", "", "read the dead letters of the stream `KEY` (default "+streamDLQ+")")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "replicator dlq: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *count <= 0 {
		fmt.Fprintln(stderr, "replicator dlq: --count must be positive")
		return 2
	}
	dlq := streamDLQ
	switch {
	case *replicateDLQ && *stream != "":
		fmt.Fprintln(stderr, "replicator dlq: give --replicate or --stream, not both")
		return 2
	case *replicateDLQ:
		dlq = streamReplicateDLQ
	case *stream != "":
		dlq = *stream
	}
	client, err := newRedisClient(*redisURL)
	if err != nil {
		fmt.Fprintf(stderr, "replicator dlq: %v\n", err)
		return redisExit(err)
	}
	defer client.Close()
	entries, err := client.Do(ctx, client.B().Xrevrange().Key(dlq).End("+").Start("-").Count(int64(*count)).Build()).AsXRange()
	if err != nil {
		fmt.Fprintf(stderr, "replicator dlq: reading %s: %v\n", dlq, err)
		return 1
	}
	if len(entries) == 0 {
		fmt.Fprintf(stderr, "replicator dlq: %s is empty\n", dlq)
		return 0
	}
	slices.Reverse(entries)
	for _, e := range entries {
		fmt.Fprintln(stdout, deadLetterLine(e))
	}
	return 0
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
		parts = append(parts, kv("command_id", p.CommandID), kv("url", envelope.RedactURL(p.URL)), kv("info_source_id", p.InfoSourceID))
		if len(p.Headers) > 0 {
			parts = append(parts, kv("header_names", headerNames(p.Headers)))
		}
	case *envelope.BlobAvailable:
		parts = append(parts, kv("command_id", p.CommandID), kv("url", envelope.RedactURL(p.URL)), kv("blob_uri", p.BlobURI))
	case *envelope.FetchFailed:
		parts = append(parts, kv("command_id", p.CommandID), kv("url", envelope.RedactURL(p.URL)), kv("reason", string(p.Reason)))
	case *envelope.FetchPolicyState:
		parts = append(parts, kv("host", p.Host))
	case *envelope.ContentReplicate:
		parts = append(parts, kv("command_id", p.CommandID), kv("credentials_alias", p.CredentialsAlias),
			kv("provider", p.Provider), kv("destination", p.Destination), kv("blob_uri", envelope.RedactURL(p.BlobURI)))
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
					shown = envelope.RedactURL(str)
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
