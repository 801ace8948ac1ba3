package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
)

// TestDLQFiltersStatsAndTrim reads, tallies and trims dead letters written
// at known instants on a real Redis.
func TestDLQFiltersStatsAndTrim(t *testing.T) {
	srv := testenv.StartRedis(t)
	c := redisClient(t, srv)
	ctx := context.Background()
	now := time.Now()
	// Three hours, two hours and a minute ago, and now.
	for i, dl := range []struct {
		ago    time.Duration
		reason string
		url    string
	}{
		{3 * time.Hour, "http_status", "https://a.example/old"},
		{2 * time.Hour, "destination_refused", "https://b.example/x"},
		{time.Minute, "http_status", "https://b.example/y"},
		{0, "http_status", "https://a.example/new"},
	} {
		fields, _ := envelope.ToWire(&envelope.ContentFetch{OccurredAt: now, CommandID: "01JDLQ" + strconv.Itoa(1000000000+i) + "000000000",
			URL: dl.url, InfoSourceID: "src"})
		fields[envelope.FieldDLQReason], fields[envelope.FieldDLQOriginalID] = dl.reason, "1-0"
		b := c.B().Xadd().Key(streamDLQ).Id(strconv.FormatInt(now.Add(-dl.ago).UnixMilli(), 10) + "-0").FieldValue()
		for k, v := range fields {
			b = b.FieldValue(k, v)
		}
		if err := c.Do(ctx, b.Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	dlq := func(args ...string) result {
		t.Helper()
		r := runBinary(t, []string{"REPLICATOR_REDIS_URL=" + srv.URL()}, append([]string{"dlq"}, args...)...)
		if r.code != 0 {
			t.Fatalf("dlq %v: exit %d\n%s", args, r.code, r.stderr)
		}
		return r
	}
	urls := func(r result) string {
		var out []string
		for line := range strings.SplitSeq(strings.TrimSpace(r.stdout), "\n") {
			for f := range strings.FieldsSeq(line) {
				if u, ok := strings.CutPrefix(f, "url="); ok {
					out = append(out, u)
				}
			}
		}
		return strings.Join(out, " ")
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "https://a.example/old https://b.example/x https://b.example/y https://a.example/new"},
		{[]string{"--reason", "http_status"}, "https://a.example/old https://b.example/y https://a.example/new"},
		{[]string{"--host", "A.Example"}, "https://a.example/old https://a.example/new"},
		{[]string{"--since", "90m"}, "https://b.example/y https://a.example/new"},
		{[]string{"--until", "90m"}, "https://a.example/old https://b.example/x"},
		{[]string{"--since", now.Add(-150 * time.Minute).UTC().Format(time.RFC3339), "--until", "30s", "--reason", "http_status"}, "https://b.example/y"},
		{[]string{"--reason", "http_status", "--count", "1"}, "https://a.example/new"},
	} {
		if got := urls(dlq(tt.args...)); got != tt.want {
			t.Errorf("dlq %v listed %s\nwant %s", tt.args, got, tt.want)
		}
	}
	if r := dlq("--reason", "nope"); r.stdout != "" || !strings.Contains(r.stderr, "no dead letter") {
		t.Errorf("a filter matching nothing: %q %q", r.stdout, r.stderr)
	}

	r := dlq("stats")
	for _, want := range []string{
		"content.fetch.dlq: 4 dead letters",
		"by reason:", "http_status          3", "destination_refused  1",
		"by host:", "a.example  2", "b.example  2",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("dlq stats lacks %q:\n%s", want, r.stdout)
		}
	}
	if r := dlq("stats", "--host", "b.example", "--reason", "http_status"); !strings.Contains(r.stdout, "1 dead letters") {
		t.Errorf("filtered stats:\n%s", r.stdout)
	}

	// Reading removed nothing; trim removes the two older than 90 minutes.
	if n := len(readStream(t, c, streamDLQ)); n != 4 {
		t.Fatalf("after reading, %d dead letters remain, want 4", n)
	}
	r = dlq("trim", "--older-than", "90m")
	if !strings.Contains(r.stdout, "removed 2 dead letters older than 1h30m0s") {
		t.Errorf("trim said:\n%s", r.stdout)
	}
	if got := urls(dlq()); got != "https://b.example/y https://a.example/new" {
		t.Errorf("after trim: %s", got)
	}
	if r := dlq("trim", "--older-than", "90m"); !strings.Contains(r.stdout, "removed 0 dead letters") {
		t.Errorf("second trim said:\n%s", r.stdout)
	}
}

func FuzzParseWhen(f *testing.F) {
	for _, s := range []string{"", "2h", "-1h", "2026-12-01T10:00:00Z", "1969-01-01T00:00:00Z", "soon", "1e400h"} {
		f.Add(s)
	}
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		at, err := parseWhen(s, now)
		if err == nil && strings.TrimSpace(s) != "" && (at.After(now) && !strings.Contains(s, "T") || at.UnixMilli() < 0 && !at.IsZero()) {
			t.Fatalf("parseWhen(%q) = %v", s, at)
		}
	})
}
