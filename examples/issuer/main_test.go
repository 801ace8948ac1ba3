package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/engine"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/policy"
	"github.com/replicator-go/replicator/sink/memory"
)

// origin serves /feed with an ETag (304 when it is sent back) and /gone
// with a 404.
func origin(t *testing.T) *testenv.Origin {
	mux := http.NewServeMux()
	mux.HandleFunc("/feed", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Content-Type", "application/rss+xml; charset=utf-8")
		w.Write([]byte(`<rss version="2.0"><channel><title>demo</title></channel></rss>`))
	})
	mux.Handle("/gone", testenv.Status(http.StatusNotFound, nil, "gone"))
	return testenv.StartOrigin(t, mux)
}

// startWorker runs a content.fetch worker against r until the test ends. Its
// handler refuses timeout_seconds over maxTimeout, so a test can make it
// answer invalid_request_options to a command the issuer screened.
func startWorker(t *testing.T, r *testenv.Redis, maxTimeout time.Duration) {
	t.Helper()
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	readBlock := 100 * time.Millisecond
	quiet := slog.New(slog.DiscardHandler)
	fetcher := fetch.New(fetch.Options{
		Guard:       guard.New(guard.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}),
		Pacer:       policy.NewLocal(policy.LocalOptions{DefaultInterval: policy.None}),
		MaxInFlight: 4,
		Logger:      quiet,
	})
	h := contentfetch.NewHandler(contentfetch.HandlerOptions{
		Fetcher:    fetcher,
		Sink:       memory.New(memory.Options{}),
		MaxTimeout: maxTimeout,
		MaxWait:    readBlock,
		Logger:     quiet,
	})
	w := engine.New(client, engine.Config{StartID: "0", ReadBlock: readBlock, Logger: quiet}, contentfetch.Capability(h))
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
		fetcher.Close()
		client.Close()
	})
}

// runIssuer runs the program with args and returns its exit status and
// output.
func runIssuer(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &stdout, &stderr)
	t.Logf("issuer %s\nstdout:\n%sstderr:\n%s", strings.Join(args, " "), stdout.String(), stderr.String())
	return code, stdout.String()
}

// verdicts returns the first word of each output line that reports an
// outcome (or a dropped validator).
func verdicts(out string) []string {
	var got []string
	for line := range strings.Lines(out) {
		word, _, _ := strings.Cut(line, " ")
		if word != "issued" {
			got = append(got, word)
		}
	}
	return got
}

func writeState(t *testing.T, path string, s *State) {
	t.Helper()
	if err := s.save(path); err != nil {
		t.Fatal(err)
	}
}

func readState(t *testing.T, path string) *State {
	t.Helper()
	s, err := loadState(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestIssuer(t *testing.T) {
	r := testenv.StartRedis(t)
	startWorker(t, r, 10*time.Second)
	o := origin(t)
	feedURL, goneURL := o.URL+"/feed", o.URL+"/gone"

	// ifNoneMatch returns the If-None-Match of each request the origin saw
	// for path since the given count.
	ifNoneMatch := func(from int, path string) []string {
		var got []string
		for _, req := range o.Requests()[from:] {
			if req.Path == path {
				got = append(got, req.Header.Get("If-None-Match"))
			}
		}
		return got
	}

	t.Run("a second round replays the validator and ends unchanged", func(t *testing.T) {
		state := filepath.Join(t.TempDir(), "state.json")
		from := o.Count()
		code, out := runIssuer(t, "--redis-url", r.URL(), "--group", "g1", "--state", state, "--wait", "10s", "--rounds", "2", feedURL)
		if code != 0 {
			t.Fatalf("exit %d, want 0", code)
		}
		if diff := cmp.Diff([]string{"stored", "unchanged"}, verdicts(out)); diff != "" {
			t.Errorf("outcomes (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"", `"v1"`}, ifNoneMatch(from, "/feed")); diff != "" {
			t.Errorf("If-None-Match the origin saw (-want +got):\n%s", diff)
		}
		it := readState(t, state).Items[feedURL]
		if it == nil || it.ETag != `"v1"` || it.Fingerprint == "" || it.LastOutcome != "unchanged" {
			t.Errorf("stored item = %+v, want etag \"v1\", a fingerprint, last outcome unchanged", it)
		}
		if !strings.Contains(out, "conditional=if-none-match") {
			t.Errorf("the second command was not reported conditional")
		}
	})

	t.Run("an unsendable stored validator is dropped, never sent", func(t *testing.T) {
		state := filepath.Join(t.TempDir(), "state.json")
		writeState(t, state, &State{Items: map[string]*Item{feedURL: {URL: feedURL, ETag: "\"v1\x01\""}}})
		from := o.Count()
		code, out := runIssuer(t, "--redis-url", r.URL(), "--group", "g2", "--state", state, "--wait", "10s", feedURL)
		if code != 0 {
			t.Fatalf("exit %d, want 0", code)
		}
		if diff := cmp.Diff([]string{"dropped", "stored"}, verdicts(out)); diff != "" {
			t.Errorf("outcomes (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{""}, ifNoneMatch(from, "/feed")); diff != "" {
			t.Errorf("If-None-Match the origin saw (-want +got):\n%s", diff)
		}
		if strings.Contains(out, "\x01") {
			t.Errorf("the output repeats the validator's value")
		}
		if it := readState(t, state).Items[feedURL]; it.ETag != `"v1"` {
			t.Errorf("stored etag = %q, want the fact's \"v1\"", it.ETag)
		}
	})

	t.Run("invalid_request_options clears the stored validators", func(t *testing.T) {
		state := filepath.Join(t.TempDir(), "state.json")
		writeState(t, state, &State{Items: map[string]*Item{feedURL: {URL: feedURL, ETag: `"v1"`, LastModified: "Mon, 30 Nov 2026 10:00:00 GMT"}}})
		from := o.Count()
		// 60 s passes the default ceiling the issuer screens with; this
		// worker's ceiling is 10 s.
		code, out := runIssuer(t, "--redis-url", r.URL(), "--group", "g3", "--state", state, "--wait", "10s", "--timeout", "60", feedURL)
		if code != 1 {
			t.Fatalf("exit %d, want 1", code)
		}
		if diff := cmp.Diff([]string{"refused"}, verdicts(out)); diff != "" {
			t.Errorf("outcomes (-want +got):\n%s", diff)
		}
		if n := len(ifNoneMatch(from, "/feed")); n != 0 {
			t.Errorf("the origin saw %d requests for a refused command", n)
		}
		it := readState(t, state).Items[feedURL]
		if it.ETag != "" || it.LastModified != "" {
			t.Errorf("validators after invalid_request_options = %q, %q; want both cleared", it.ETag, it.LastModified)
		}
	})

	t.Run("a terminal failure fails the check", func(t *testing.T) {
		code, out := runIssuer(t, "--redis-url", r.URL(), "--group", "g4", "--wait", "10s", goneURL)
		if code != 1 {
			t.Fatalf("exit %d, want 1", code)
		}
		if !strings.Contains(out, "failed command_id=") || !strings.Contains(out, "reason=http_status terminal=true status=404") {
			t.Errorf("output lacks the http_status failure")
		}
	})

	t.Run("silence is re-issued under a fresh command_id, then reported", func(t *testing.T) {
		// A Redis no worker reads: nothing ever answers.
		quiet := testenv.StartRedis(t)
		code, out := runIssuer(t, "--redis-url", quiet.URL(), "--wait", "200ms", "--reissue", "1", feedURL)
		if code != 1 {
			t.Fatalf("exit %d, want 1", code)
		}
		ids := map[string]bool{}
		for line := range strings.Lines(out) {
			if rest, ok := strings.CutPrefix(line, "issued command_id="); ok {
				ids[strings.Fields(rest)[0]] = true
			}
		}
		if len(ids) != 2 {
			t.Errorf("issued %d distinct command_ids, want 2 (the first and one re-issue)", len(ids))
		}
		if diff := cmp.Diff([]string{"re-issuing", "no"}, verdicts(out)); diff != "" {
			t.Errorf("outcomes (-want +got):\n%s", diff)
		}
	})
}

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no URL", nil, "want at least one URL"},
		{"a refused header", []string{"-H", "Host: other.example", "http://x.example/"}, "would refuse these headers"},
		{"a validator on the command line", []string{"-H", "If-None-Match: \"v1\"", "http://x.example/"}, "validators come from the stored state"},
		{"a timeout out of range", []string{"--timeout", "-1", "http://x.example/"}, "--timeout"},
		{"a header without a colon", []string{"-H", "secret-token", "http://x.example/"}, "want 'Name: value'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tc.args, &stdout, &stderr); code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tc.want)
			}
			if strings.Contains(stderr.String(), "other.example") || strings.Contains(stderr.String(), "secret-token") {
				t.Errorf("stderr repeats a header value: %q", stderr.String())
			}
		})
	}
}
