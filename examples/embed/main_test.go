package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/policy"
)

// origin serves an RSS feed with an ETag (304 when it comes back), an HTML
// page without validators, and a 404.
func origin(t *testing.T) *testenv.Origin {
	mux := http.NewServeMux()
	mux.HandleFunc("/feed.xml", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-None-Match") == `"f1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", `"f1"`)
		w.Header().Set("Content-Type", "text/xml")
		w.Write([]byte(`<?xml version="1.0"?><rss version="2.0"><channel><title>t</title></channel></rss>`))
	})
	mux.Handle("/page", testenv.Status(http.StatusOK, map[string]string{"Content-Type": "text/html"}, "<html><title>p</title></html>"))
	mux.Handle("/missing", testenv.Status(http.StatusNotFound, nil, "no"))
	return testenv.StartOrigin(t, mux)
}

func runEmbed(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &stdout, &stderr)
	t.Logf("embed %s\nstdout:\n%sstderr:\n%s", strings.Join(args, " "), stdout.String(), stderr.String())
	return code, stdout.String()
}

// words returns the first word of every line of out.
func words(out string) []string {
	var got []string
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) > 0 {
			got = append(got, f[0])
		}
	}
	return got
}

func TestEmbed(t *testing.T) {
	o := origin(t)
	feed, page := o.URL+"/feed.xml", o.URL+"/page"

	t.Run("a second poll of an unchanged feed is answered from the cache", func(t *testing.T) {
		from := o.Count()
		code, out := runEmbed(t, "--allow-cidr", "127.0.0.1/32", "--floor", "127.0.0.1=0", "--polls", "2",
			"-H", "Authorization: Bearer s3cret", feed, page)
		if code != 0 {
			t.Fatalf("exit %d, want 0", code)
		}
		want := []string{"poll", "fetched", "fetched", "poll", "unchanged", "fetched", "table:", "", ""}
		got := words(out)
		for i := range got {
			if i < len(want) && want[i] == "" {
				got[i] = "" // the table rows start with a fingerprint
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("output lines (-want +got):\n%s", diff)
		}
		if !strings.Contains(out, "kind=rss") || !strings.Contains(out, "kind=html") {
			t.Errorf("kinds not detected as rss and html")
		}
		if !strings.Contains(out, "table: 2 rows") || !strings.Contains(out, "refs=2") {
			t.Errorf("want two rows, the page's stored twice")
		}
		// The fetcher hands the announced media type to the sink's Put.
		if !strings.Contains(out, " bytes  text/xml  refs=") || !strings.Contains(out, " bytes  text/html  refs=") {
			t.Errorf("the table rows do not carry the media types text/xml and text/html:\n%s", out)
		}
		var inm []string
		for _, r := range o.Requests()[from:] {
			if r.Path == "/feed.xml" {
				inm = append(inm, r.Header.Get("If-None-Match"))
			}
			if r.Header.Get("Authorization") != "Bearer s3cret" {
				t.Errorf("request for %s lacks the caller's header", r.Path)
			}
		}
		if diff := cmp.Diff([]string{"", `"f1"`}, inm); diff != "" {
			t.Errorf("If-None-Match at the origin (-want +got):\n%s", diff)
		}
		if strings.Contains(out, "s3cret") {
			t.Errorf("the output repeats a header value")
		}
	})

	t.Run("loopback is refused unless allowed", func(t *testing.T) {
		from := o.Count()
		code, out := runEmbed(t, "--floor", "127.0.0.1=0", feed)
		if code != 1 {
			t.Fatalf("exit %d, want 1", code)
		}
		if !strings.Contains(out, "refused") {
			t.Errorf("output lacks the refusal")
		}
		if n := o.Count() - from; n != 0 {
			t.Errorf("the origin saw %d requests", n)
		}
	})

	t.Run("a 404 fails the poll", func(t *testing.T) {
		code, out := runEmbed(t, "--allow-cidr", "127.0.0.1/32", "--floor", "127.0.0.1=0", o.URL+"/missing")
		if code != 1 || !strings.Contains(out, "HTTP 404") {
			t.Errorf("exit %d, output %q; want 1 and HTTP 404", code, out)
		}
	})

	t.Run("a floor spaces requests to its host", func(t *testing.T) {
		from := o.Count()
		const floor = 300 * time.Millisecond
		code, _ := runEmbed(t, "--allow-cidr", "127.0.0.1/32", "--floor", "127.0.0.1=0.3", "--polls", "3", page)
		if code != 0 {
			t.Fatalf("exit %d, want 0", code)
		}
		seen := o.Requests()[from:]
		if len(seen) != 3 {
			t.Fatalf("origin saw %d requests, want 3", len(seen))
		}
		for i := 1; i < len(seen); i++ {
			if gap := seen[i].At.Sub(seen[i-1].At); gap < floor {
				t.Errorf("gap %d = %v, want at least %v", i, gap, floor)
			}
		}
	})
}

func TestApplyFloor(t *testing.T) {
	for _, tc := range []struct {
		arg     string
		host    string
		want    time.Duration
		wantErr bool
	}{
		{arg: "Example.COM=2.5", host: "example.com", want: 2500 * time.Millisecond},
		{arg: "example.org=0", host: "example.org", want: 0},
		{arg: "example.net", wantErr: true},
		{arg: "example.net=-1", wantErr: true},
		{arg: "example.net=NaN", wantErr: true},
		{arg: "=3", wantErr: true},
	} {
		t.Run(tc.arg, func(t *testing.T) {
			table := policy.NewTable()
			err := applyFloor(table, tc.arg)
			if (err != nil) != tc.wantErr {
				t.Fatalf("applyFloor(%q) error = %v, want error %t", tc.arg, err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if got, ok := table.Floor(tc.host); !ok || got != tc.want {
				t.Errorf("Floor(%s) = %v, %t; want %v, true", tc.host, got, ok, tc.want)
			}
		})
	}
}

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no URL", nil},
		{"a refused header", []string{"-H", "Connection: close", "http://x.example/"}},
		{"a bad CIDR", []string{"--allow-cidr", "nope", "http://x.example/"}},
		{"a bad floor", []string{"--floor", "x.example", "http://x.example/"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tc.args, &stdout, &stderr); code != 2 {
				t.Errorf("exit %d, want 2 (stderr %q)", code, stderr.String())
			}
		})
	}
}
