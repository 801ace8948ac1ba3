package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
)

func TestFetchCommand(t *testing.T) {
	const body = "hello from the origin\n"
	origin := testenv.StartOrigin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Write([]byte(body))
		case "/gone":
			http.Error(w, "gone", http.StatusGone)
		case "/same":
			w.WriteHeader(http.StatusNotModified)
		}
	}))
	tests := []struct {
		name     string
		args     []string
		wantCode int
		check    func(t *testing.T, r result)
	}{
		{name: "stored", args: []string{"--allow-cidr", "127.0.0.1/32", origin.URL + "/"}, wantCode: 0,
			check: func(t *testing.T, r result) {
				var fact struct {
					EventType  string `json:"event_type"`
					BlobURI    string `json:"blob_uri"`
					SizeBytes  int64  `json:"size_bytes"`
					MediaType  string `json:"media_type"`
					StatusCode int    `json:"status_code"`
				}
				if err := json.Unmarshal([]byte(r.stdout), &fact); err != nil {
					t.Fatalf("stdout is not a JSON fact: %v\n%s", err, r.stdout)
				}
				want := struct {
					EventType  string `json:"event_type"`
					BlobURI    string `json:"blob_uri"`
					SizeBytes  int64  `json:"size_bytes"`
					MediaType  string `json:"media_type"`
					StatusCode int    `json:"status_code"`
				}{EventType: "blob_available", BlobURI: fact.BlobURI, SizeBytes: int64(len(body)), MediaType: "text/plain", StatusCode: 200}
				if diff := cmp.Diff(want, fact); diff != "" {
					t.Errorf("fact (-want +got):\n%s", diff)
				}
				got, err := os.ReadFile(blobPath(t, fact.BlobURI))
				if err != nil {
					t.Fatalf("reading the blob: %v", err)
				}
				if string(got) != body {
					t.Errorf("blob holds %q, want %q", got, body)
				}
			}},
		{name: "refused by the guard without --allow-cidr", args: []string{origin.URL + "/"}, wantCode: 1,
			check: func(t *testing.T, r result) {
				if !strings.Contains(r.stdout, "destination_refused") {
					t.Errorf("stdout does not name destination_refused:\n%s", r.stdout)
				}
			}},
		{name: "http status", args: []string{"--allow-cidr", "127.0.0.1/32", origin.URL + "/gone"}, wantCode: 1,
			check: func(t *testing.T, r result) {
				if !strings.Contains(r.stdout, `"reason": "http_status"`) {
					t.Errorf("stdout does not name http_status:\n%s", r.stdout)
				}
			}},
		{name: "not modified", args: []string{"--allow-cidr", "127.0.0.1/32", origin.URL + "/same"}, wantCode: 0,
			check: func(t *testing.T, r result) {
				if !strings.Contains(r.stdout, `"reason": "not_modified"`) {
					t.Errorf("stdout does not name not_modified:\n%s", r.stdout)
				}
			}},
		{name: "no URL", args: nil, wantCode: 2},
		{name: "two URLs", args: []string{"http://a.example/", "http://b.example/"}, wantCode: 2},
		{name: "header without colon", args: []string{"-H", "secret-token", "http://a.example/"}, wantCode: 2,
			check: func(t *testing.T, r result) {
				if strings.Contains(r.stderr, "secret-token") {
					t.Errorf("stderr echoes the bad header line:\n%s", r.stderr)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"fetch", "--blob-dir", t.TempDir()}, tt.args...)
			r := runBinary(t, nil, args...)
			if r.code != tt.wantCode {
				t.Fatalf("exit code = %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, tt.wantCode, r.stdout, r.stderr)
			}
			if tt.check != nil {
				tt.check(t, r)
			}
		})
	}
}

func TestPolicyCommandPublishesDecodableFrames(t *testing.T) {
	srv := testenv.StartRedis(t)
	c := redisClient(t, srv)
	env := []string{"REPLICATOR_REDIS_URL=" + srv.URL()}

	steps := []struct {
		args []string
		want *envelope.FetchPolicyState
	}{
		{args: []string{"policy", "set", "Example.COM.", "2.5"},
			want: &envelope.FetchPolicyState{SchemaVersion: 1, Host: "example.com", MinIntervalSeconds: new(2.5)}},
		{args: []string{"policy", "set", "[2001:DB8::1]", "0"},
			want: &envelope.FetchPolicyState{SchemaVersion: 1, Host: "2001:db8::1", MinIntervalSeconds: new(0.0)}},
		{args: []string{"policy", "set", "Bücher.test.", "3"},
			want: &envelope.FetchPolicyState{SchemaVersion: 1, Host: "xn--bcher-kva.test", MinIntervalSeconds: new(3.0)}},
		{args: []string{"policy", "set", "2130706433", "4"},
			want: &envelope.FetchPolicyState{SchemaVersion: 1, Host: "127.0.0.1", MinIntervalSeconds: new(4.0)}},
		{args: []string{"policy", "--redis-url", srv.URL(), "revoke", "example.com"},
			want: &envelope.FetchPolicyState{SchemaVersion: 1, Host: "example.com", Revoked: true}},
	}
	before := time.Now().UTC().Add(-time.Second)
	for _, s := range steps {
		r := runBinary(t, env, s.args...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d\n%s", s.args, r.code, r.stderr)
		}
		if !strings.HasPrefix(r.stdout, "published fetch_policy_state host="+s.want.Host) {
			t.Errorf("%v: stdout = %q", s.args, r.stdout)
		}
	}
	entries := readStream(t, c, streamPolicy)
	if len(entries) != len(steps) {
		t.Fatalf("%s has %d entries, want %d", streamPolicy, len(entries), len(steps))
	}
	for i, e := range entries {
		m, err := envelope.FromWire(e.FieldValues)
		if err != nil {
			t.Fatalf("entry %s does not decode: %v", e.ID, err)
		}
		got, ok := m.(*envelope.FetchPolicyState)
		if !ok {
			t.Fatalf("entry %s is a %T", e.ID, m)
		}
		if got.OccurredAt.Before(before) || got.OccurredAt.After(time.Now().Add(time.Second)) {
			t.Errorf("entry %s occurred_at %v is not now", e.ID, got.OccurredAt)
		}
		if diff := cmp.Diff(steps[i].want, got, cmpopts.IgnoreFields(envelope.FetchPolicyState{}, "OccurredAt")); diff != "" {
			t.Errorf("entry %d (-want +got):\n%s", i, diff)
		}
		if e.FieldValues[envelope.FieldKey] != steps[i].want.Host {
			t.Errorf("entry %d key = %q, want the host", i, e.FieldValues[envelope.FieldKey])
		}
	}
}

func TestPolicyCommandRedisDown(t *testing.T) {
	port, err := testenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	r := runBinary(t, nil, "policy", "--redis-url", "redis://:hunter2@127.0.0.1:"+strconv.Itoa(port)+"/0", "set", "example.com", "1")
	if r.code != 1 {
		t.Errorf("exit code = %d, want 1\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, "hunter2") {
		t.Errorf("stderr carries the Redis password:\n%s", r.stderr)
	}
}

func TestDLQCommand(t *testing.T) {
	srv := testenv.StartRedis(t)
	c := redisClient(t, srv)
	ctx := context.Background()
	const secret = "Bearer secret-dlq-7f3a"

	// A command dead-lettered after http_status, headers and all.
	cmd := &envelope.ContentFetch{
		OccurredAt: time.Date(2026, 11, 29, 23, 18, 58, 0, time.UTC), CommandID: "01JCMD0000000000000000000A",
		URL: "https://user:pw@origin.example/a", InfoSourceID: "src-1",
		Headers: map[string]string{"Authorization": secret, "Accept": "text/html"},
	}
	fields, err := envelope.ToWire(cmd)
	if err != nil {
		t.Fatal(err)
	}
	fields["dlq_reason"], fields["dlq_original_id"] = "http_status", "1700000000000-0"
	if _, err := xadd(ctx, c, streamDLQ, fields); err != nil {
		t.Fatal(err)
	}
	// A malformed frame: the payload is JSON but misses required fields, and
	// still carries a header value.
	if _, err := xadd(ctx, c, streamDLQ, map[string]string{
		"event_type": "content_fetch", "payload": `{"url":"https://x.example/","headers":{"Cookie":"` + secret + `"}}`,
		"dlq_reason": "malformed_frame", "dlq_original_id": "1700000000001-0",
	}); err != nil {
		t.Fatal(err)
	}
	// A payload that is not JSON at all but mentions headers.
	if _, err := xadd(ctx, c, streamDLQ, map[string]string{
		"event_type": "content_fetch", "payload": `{"headers":{"X-Token":"` + secret,
		"dlq_reason": "malformed_frame", "dlq_original_id": "1700000000002-0",
	}); err != nil {
		t.Fatal(err)
	}
	// A synthesized record for an entry that was gone.
	if _, err := xadd(ctx, c, streamDLQ, map[string]string{"dlq_reason": "malformed_frame", "dlq_original_id": "1700000000003-0"}); err != nil {
		t.Fatal(err)
	}

	r := runBinary(t, []string{"REPLICATOR_REDIS_URL=" + srv.URL()}, "dlq")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, "secret-dlq") {
		t.Fatalf("dlq printed a header value:\n%s", r.stdout)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	want := []*regexp.Regexp{
		regexp.MustCompile(`^id=\S+ dlq_reason=http_status dlq_original_id=1700000000000-0 event_type=content_fetch command_id=01JCMD0000000000000000000A url=https://xxxxx@origin.example/a info_source_id=src-1 header_names=Accept,Authorization$`),
		regexp.MustCompile(`^id=\S+ dlq_reason=malformed_frame dlq_original_id=1700000000001-0 event_type=content_fetch decode_error=".*" payload.header_names=Cookie payload.url=https://x.example/$`),
		regexp.MustCompile(`^id=\S+ dlq_reason=malformed_frame dlq_original_id=1700000000002-0 event_type=content_fetch decode_error=".*" payload="\(\d+ bytes withheld.*\)"$`),
		regexp.MustCompile(`^id=\S+ dlq_reason=malformed_frame dlq_original_id=1700000000003-0 decode_error=".*"$`),
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), r.stdout)
	}
	for i, re := range want {
		if !re.MatchString(lines[i]) {
			t.Errorf("line %d = %q\nwant match for %s", i, lines[i], re)
		}
	}

	// --count keeps the newest.
	r = runBinary(t, nil, "dlq", "--redis-url", srv.URL(), "--count", "1")
	if r.code != 0 || strings.Count(r.stdout, "\n") != 1 || !strings.Contains(r.stdout, "1700000000003-0") {
		t.Errorf("dlq --count 1: exit %d, stdout:\n%s", r.code, r.stdout)
	}
}

func TestSeedCommand(t *testing.T) {
	srv := testenv.StartRedis(t)
	c := redisClient(t, srv)
	env := []string{"REPLICATOR_REDIS_URL=" + srv.URL()}

	t.Run("publishes one command per URL", func(t *testing.T) {
		r := runBinary(t, env, "seed", "--production", "--info-source-id", "src-1", "-H", "Accept: text/html", "--timeout", "12.5",
			"https://a.example/1", "https://b.example/2")
		if r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		ids := publishedIDs(t, r.stdout)
		entries := readStream(t, c, streamCommands)
		if len(entries) != 2 || len(ids) != 2 {
			t.Fatalf("published %d ids, stream holds %d entries:\n%s", len(ids), len(entries), r.stdout)
		}
		for i, e := range entries {
			cmd, err := envelope.DecodeCommand(e.FieldValues)
			if err != nil {
				t.Fatalf("entry %s: %v", e.ID, err)
			}
			want := &envelope.ContentFetch{SchemaVersion: 1, CommandID: ids[i], URL: []string{"https://a.example/1", "https://b.example/2"}[i],
				InfoSourceID: "src-1", Headers: map[string]string{"Accept": "text/html"}, TimeoutSeconds: new(12.5)}
			if diff := cmp.Diff(want, cmd, cmpopts.IgnoreFields(envelope.ContentFetch{}, "OccurredAt")); diff != "" {
				t.Errorf("command %d (-want +got):\n%s", i, diff)
			}
			if time.Since(cmd.OccurredAt) > time.Minute {
				t.Errorf("occurred_at %v is not now", cmd.OccurredAt)
			}
		}
		if ids[0] == ids[1] {
			t.Errorf("two commands share command_id %s", ids[0])
		}
	})

	t.Run("refuses headers the worker would refuse", func(t *testing.T) {
		before := len(readStream(t, c, streamCommands))
		for _, h := range []string{"Proxy-Authorization: Basic c2VjcmV0LXZhbHVl", "X-Token: secret-value\x01"} {
			r := runBinary(t, env, "seed", "--info-source-id", "src-1", "-H", h, "https://a.example/")
			name, _, _ := strings.Cut(h, ":")
			if r.code != 2 || !strings.Contains(r.stderr, name) {
				t.Errorf("-H %q: exit %d, stderr does not name %s:\n%s", name, r.code, name, r.stderr)
			}
			if strings.Contains(r.stderr, "secret-value") || strings.Contains(r.stderr, "c2VjcmV0") {
				t.Errorf("-H %q: stderr carries the value:\n%s", name, r.stderr)
			}
		}
		if after := len(readStream(t, c, streamCommands)); after != before {
			t.Errorf("a refused seed published %d commands", after-before)
		}
	})

	t.Run("watch reports each outcome", func(t *testing.T) {
		// A stand-in for the worker: answers each command on the fact stream,
		// so the watch logic is tested on its own. The real worker is in
		// TestWorkerEndToEnd.
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		cursor, err := lastID(ctx, c, streamCommands)
		if err != nil {
			t.Fatal(err)
		}
		// A fact for another command, already there before the seed: never counted.
		publishFact(t, c, &envelope.BlobAvailable{CommandID: "someone-else", OccurredAt: time.Now(), ContentFingerprint: strings.Repeat("a", 64), BlobURI: "file:///x", MediaType: "text/plain", URL: "u", InfoSourceID: "i"})
		go answerCommands(ctx, c, cursor)
		r := runBinary(t, env, "seed", "--production", "--info-source-id", "src-1", "--watch", "--watch-timeout", "20s",
			"https://ok.example/", "https://same.example/", "https://bad.example/")
		if r.code != 1 {
			t.Errorf("exit code = %d, want 1 (one command failed)\n%s", r.code, r.stderr)
		}
		for _, want := range []*regexp.Regexp{
			regexp.MustCompile(`(?m)^\[\d/3\] blob_available command_id=\S+ status=200 size=5 blob_uri=file:///blobs/x$`),
			regexp.MustCompile(`(?m)^\[\d/3\] fetch_failed command_id=\S+ reason=not_modified status=304$`),
			regexp.MustCompile(`(?m)^\[\d/3\] fetch_failed command_id=\S+ reason=http_status status=404 detail="gone"$`),
			regexp.MustCompile(`(?m)^\[3/3\] `),
		} {
			if !want.MatchString(r.stdout) {
				t.Errorf("stdout has no line matching %s:\n%s", want, r.stdout)
			}
		}
		if !strings.Contains(r.stderr, "1 of 3 commands failed") {
			t.Errorf("stderr does not summarize the failure:\n%s", r.stderr)
		}
		if strings.Contains(r.stdout, "someone-else") {
			t.Errorf("the watch reported another command's fact:\n%s", r.stdout)
		}
	})

	t.Run("watch times out", func(t *testing.T) {
		r := runBinary(t, env, "seed", "--production", "--info-source-id", "src-1", "--watch", "--watch-timeout", "0.3", "https://nobody.example/")
		if r.code != 1 || !strings.Contains(r.stderr, "no outcome on content.blobs") {
			t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
		}
	})
}

// publishedIDs extracts the command ids from seed's stdout.
func publishedIDs(t *testing.T, stdout string) []string {
	t.Helper()
	var ids []string
	for _, m := range regexp.MustCompile(`(?m)^published command_id=(\S+) entry_id=\S+ url=\S+$`).FindAllStringSubmatch(stdout, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// answerCommands publishes one fact per command after cursor, chosen by the
// command's host: ok → blob_available, same → not_modified, else
// http_status 404. It stops when ctx ends.
func answerCommands(ctx context.Context, c rueidis.Client, cursor string) {
	for ctx.Err() == nil {
		streams, err := c.Do(ctx, c.B().Xread().Block(100).Streams().Key(streamCommands).Id(cursor).Build()).AsXRead()
		if err != nil {
			continue
		}
		for _, e := range streams[streamCommands] {
			cursor = e.ID
			cmd, err := envelope.DecodeCommand(e.FieldValues)
			if err != nil {
				continue
			}
			var fact envelope.Model
			switch u, _ := url.Parse(cmd.URL); u.Hostname() {
			case "ok.example":
				fact = &envelope.BlobAvailable{OccurredAt: time.Now(), ContentFingerprint: strings.Repeat("b", 64), BlobURI: "file:///blobs/x",
					SizeBytes: 5, MediaType: "text/plain", URL: cmd.URL, CommandID: cmd.CommandID, InfoSourceID: cmd.InfoSourceID, StatusCode: new(200)}
			case "same.example":
				fact = &envelope.FetchFailed{OccurredAt: time.Now(), CommandID: cmd.CommandID, URL: cmd.URL, InfoSourceID: cmd.InfoSourceID,
					Reason: envelope.ReasonNotModified, Terminal: true, StatusCode: new(304)}
			default:
				fact = &envelope.FetchFailed{OccurredAt: time.Now(), CommandID: cmd.CommandID, URL: cmd.URL, InfoSourceID: cmd.InfoSourceID,
					Reason: envelope.ReasonHTTPStatus, Terminal: true, StatusCode: new(404), Detail: new("gone")}
			}
			publish(ctx, c, streamFacts, fact)
		}
	}
}

func publishFact(t *testing.T, c rueidis.Client, m envelope.Model) {
	t.Helper()
	if _, err := publish(context.Background(), c, streamFacts, m); err != nil {
		t.Fatal(err)
	}
}

// TestSeedGuardsTheLiveStream checks the guard the reference's seed script
// has: content.fetch on database 0 is what a running worker fetches, so
// publishing there needs --production; another database or another stream
// does not; --dry-run prints the frames and connects to nothing.
func TestSeedGuardsTheLiveStream(t *testing.T) {
	srv := testenv.StartRedis(t)
	c := redisClient(t, srv)
	count := func(stream string) int { return len(readStream(t, c, stream)) }

	t.Run("content.fetch on database 0 needs --production", func(t *testing.T) {
		r := runBinary(t, nil, "seed", "--redis-url", srv.URL(), "--info-source-id", "src-1", "https://a.example/")
		if r.code != 2 || !strings.Contains(r.stderr, "--production") {
			t.Errorf("exit %d, stderr does not name --production:\n%s", r.code, r.stderr)
		}
		if n := count(streamCommands); n != 0 {
			t.Errorf("a refused seed published %d commands", n)
		}
		r = runBinary(t, nil, "seed", "--redis-url", srv.URL(), "--production", "--info-source-id", "src-1", "https://a.example/")
		if r.code != 0 || count(streamCommands) != 1 {
			t.Errorf("--production: exit %d, %d commands published\n%s", r.code, count(streamCommands), r.stderr)
		}
	})

	t.Run("another database is no live target", func(t *testing.T) {
		r := runBinary(t, nil, "seed", "--redis-url", "redis://"+srv.Addr+"/0?db=1", "--info-source-id", "src-1", "https://b.example/")
		if r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		db1, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr}, SelectDB: 1, DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db1.Close()
		if n, err := db1.Do(t.Context(), db1.B().Xlen().Key(streamCommands).Build()).AsInt64(); err != nil || n != 1 {
			t.Errorf("database 1 holds %d commands (%v), want 1", n, err)
		}
	})

	t.Run("another stream is no live target, and is watched on <stream>.blobs", func(t *testing.T) {
		before := count(streamCommands)
		r := runBinary(t, nil, "seed", "--redis-url", srv.URL(), "--stream", "scratch.fetch", "--info-source-id", "src-1",
			"--watch", "--watch-timeout", "0.3", "https://c.example/")
		if r.code != 1 || !strings.Contains(r.stderr, "no outcome on scratch.fetch.blobs") {
			t.Errorf("exit %d, want 1 after watching scratch.fetch.blobs:\n%s", r.code, r.stderr)
		}
		if count("scratch.fetch") != 1 || count(streamCommands) != before {
			t.Errorf("scratch.fetch holds %d, content.fetch gained %d; want 1 and 0", count("scratch.fetch"), count(streamCommands)-before)
		}
	})

	t.Run("--dry-run prints the frames and connects to nothing", func(t *testing.T) {
		port, err := testenv.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		r := runBinary(t, nil, "seed", "--redis-url", "redis://127.0.0.1:"+strconv.Itoa(port)+"/0", "--dry-run",
			"--info-source-id", "src-1", "-H", "Authorization: Bearer dry-secret", "https://user:pw@d.example/")
		if r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		line, ok := strings.CutPrefix(strings.TrimSpace(r.stdout), "would publish to content.fetch: ")
		if !ok {
			t.Fatalf("stdout = %q", r.stdout)
		}
		var fields map[string]string
		if err := json.Unmarshal([]byte(line), &fields); err != nil {
			t.Fatalf("the frame is not JSON: %v", err)
		}
		cmd, err := envelope.DecodeCommand(fields)
		if err != nil {
			t.Fatalf("the frame does not decode: %v", err)
		}
		if cmd.InfoSourceID != "src-1" || cmd.Headers["Authorization"] != "xxxxx" || cmd.URL != "https://xxxxx@d.example/" {
			t.Errorf("frame = %+v, want the header value and userinfo masked", cmd)
		}
		if strings.Contains(r.stdout+r.stderr, "dry-secret") {
			t.Errorf("the dry run printed a header value")
		}
	})

	t.Run("a Redis URL parameter it does not know is a usage error", func(t *testing.T) {
		r := runBinary(t, nil, "seed", "--redis-url", srv.URL()+"?dial_timeout=5s", "--production", "--info-source-id", "src-1", "https://e.example/")
		if r.code != 2 || !strings.Contains(r.stderr, `unknown parameter "dial_timeout"`) {
			t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
		}
	})
}

// lastID returns the id of stream's newest entry, or "0-0" when the stream
// is empty or absent.
func lastID(ctx context.Context, c rueidis.Client, stream string) (string, error) {
	entries, err := c.Do(ctx, c.B().Xrevrange().Key(stream).End("+").Start("-").Count(1).Build()).AsXRange()
	if err != nil {
		return "", err
	}
	if len(entries) == 0 {
		return "0-0", nil
	}
	return entries[0].ID, nil
}
