package contentfetch_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/internal/hosts"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/internal/testenv/fetchenv"
	"github.com/replicator-go/replicator/sink"
)

func TestHandleStoresBodyAndPublishesEnrichedFact(t *testing.T) {
	body := []byte("<html>hello</html>")
	h := fetchenv.New(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "Text/HTML; charset=utf-8")
		w.Header().Set("ETag", ` W/"abc" `)
		w.Header().Set("Last-Modified", "Sun, 29 Nov 2026 23:18:58 GMT")
		w.Write(body)
	}), fetchenv.Options{})
	before := time.Now()
	cmd := fetchenv.Command(h.URL("origin.test", "/page"))
	out := h.Handle(t, cmd)
	if out.Label != contentfetch.Stored {
		t.Fatalf("kind = %v (%v), want stored", out.Name(), out.Err)
	}
	want := &envelope.BlobAvailable{
		SchemaVersion:      1,
		ContentFingerprint: fetchenv.SHA(body),
		BlobURI:            "mem://" + fetchenv.SHA(body),
		SizeBytes:          int64(len(body)),
		MediaType:          "text/html",
		URL:                cmd.URL,
		CommandID:          "01JCMD",
		InfoSourceID:       "source-7",
		FinalURL:           new(cmd.URL),
		StatusCode:         new(200),
		ContentTypeRaw:     new("Text/HTML; charset=utf-8"),
		ETag:               new(`W/"abc"`),
		LastModified:       new("Sun, 29 Nov 2026 23:18:58 GMT"),
	}
	got := out.Fact.(*envelope.BlobAvailable)
	if diff := cmp.Diff(want, got, fetchenv.IgnoreFactTimes); diff != "" {
		t.Errorf("fact mismatch (-want +got):\n%s", diff)
	}
	if got.FetchedAt == nil || got.FetchedAt.Before(before) {
		t.Errorf("fetched_at = %v, want a time after the fetch began", got.FetchedAt)
	}
	if got.BlobExpiresAt == nil || got.BlobExpiresAt.After(time.Now().Add(time.Hour)) {
		t.Errorf("blob_expires_at = %v, want at most now+TTL", got.BlobExpiresAt)
	}
	if !bytes.Equal(fetchenv.Stored(t, h.Sink, got.ContentFingerprint), body) {
		t.Error("stored bytes differ from the body served")
	}
}

func TestHandleStatusClasses(t *testing.T) {
	httpDate := time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)
	tests := []struct {
		name       string
		status     int
		header     map[string]string
		wantKind   string
		wantReason envelope.Reason
		// wantInterval is the host's interval in force after the response,
		// checked through the pacer; 0 means not escalated.
		wantInterval time.Duration
	}{
		{name: "200", status: 200, wantKind: contentfetch.Stored},
		{name: "203", status: 203, wantKind: contentfetch.Stored},
		{name: "206", status: 206, wantKind: contentfetch.Stored},
		{name: "304", status: 304, wantKind: contentfetch.NotModified, wantReason: envelope.ReasonNotModified},
		{name: "404", status: 404, wantKind: fetchenv.Permanent, wantReason: envelope.ReasonHTTPStatus},
		{name: "412", status: 412, wantKind: fetchenv.Permanent, wantReason: envelope.ReasonHTTPStatus},
		{name: "410", status: 410, wantKind: fetchenv.Permanent, wantReason: envelope.ReasonHTTPStatus},
		{name: "408", status: 408, wantKind: fetchenv.Transient},
		{name: "500", status: 500, wantKind: fetchenv.Transient},
		{name: "429 without Retry-After", status: 429, wantKind: fetchenv.Transient, wantInterval: 2 * time.Second},
		{name: "429 delta-seconds", status: 429, header: map[string]string{"Retry-After": "7"}, wantKind: fetchenv.Transient, wantInterval: 7 * time.Second},
		{name: "429 HTTP-date", status: 429, header: map[string]string{"Retry-After": httpDate}, wantKind: fetchenv.Transient, wantInterval: 29 * time.Second},
		{name: "429 malformed", status: 429, header: map[string]string{"Retry-After": "1_0"}, wantKind: fetchenv.Transient, wantInterval: 2 * time.Second},
		{name: "503", status: 503, wantKind: fetchenv.Transient, wantInterval: 2 * time.Second},
		{name: "300 is not followed", status: 300, header: map[string]string{"Location": "/elsewhere"}, wantKind: fetchenv.Permanent, wantReason: envelope.ReasonHTTPStatus},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := fetchenv.New(t, testenv.Status(tt.status, tt.header, "body"), fetchenv.Options{})
			cmd := fetchenv.Command(h.URL("origin.test", "/"))
			out := h.Handle(t, cmd)
			if out.Name() != tt.wantKind || out.Reason != string(tt.wantReason) {
				t.Fatalf("outcome = %v/%q (%v), want %v/%q", out.Name(), out.Reason, out.Err, tt.wantKind, tt.wantReason)
			}
			if out.StatusCode != tt.status {
				t.Errorf("status = %d, want %d", out.StatusCode, tt.status)
			}
			switch tt.wantKind {
			case fetchenv.Permanent, contentfetch.NotModified:
				want := &envelope.FetchFailed{SchemaVersion: 1, CommandID: "01JCMD", URL: cmd.URL, InfoSourceID: "source-7",
					Reason: tt.wantReason, Terminal: true, StatusCode: new(tt.status)}
				if diff := cmp.Diff(want, out.Fact, fetchenv.IgnoreFactTimes); diff != "" {
					t.Errorf("fact mismatch (-want +got):\n%s", diff)
				}
			case fetchenv.Transient:
				if out.Fact != nil {
					t.Errorf("transient outcome carries a fact: %#v", out.Fact)
				}
			}
			// The interval in force is what a fresh reservation must wait
			// after the request that just went out.
			r, _ := h.Pacer.ReserveAt(time.Now(), "origin.test", time.Hour)
			if tt.wantInterval == 0 {
				if r.Interval != 0 {
					t.Errorf("interval = %v, want no escalation", r.Interval)
				}
			} else if r.Interval < tt.wantInterval-2*time.Second || r.Interval > tt.wantInterval+time.Second {
				t.Errorf("interval = %v, want about %v", r.Interval, tt.wantInterval)
			}
		})
	}
}

func TestHandleRefusesBadRequestOptionsBeforeAnyRequest(t *testing.T) {
	h := fetchenv.New(t, testenv.Status(200, nil, "never"), fetchenv.Options{})
	tooMany := map[string]string{}
	for i := range guard.MaxHeaders + 1 {
		tooMany[fmt.Sprintf("x-h%d", i)] = "v"
	}
	tests := []struct {
		name    string
		headers map[string]string
		timeout *float64
	}{
		{name: "hop-by-hop", headers: map[string]string{"Connection": "close"}},
		{name: "host", headers: map[string]string{"Host": "elsewhere.test"}},
		{name: "content-length", headers: map[string]string{"content-length": "5"}},
		{name: "transfer-encoding", headers: map[string]string{"Transfer-Encoding": "chunked"}},
		{name: "proxy family", headers: map[string]string{"Proxy-Anything": "x"}},
		{name: "not a token", headers: map[string]string{"user agent": "x"}},
		{name: "colon in name", headers: map[string]string{"user:agent": "x"}},
		{name: "empty name", headers: map[string]string{"": "x"}},
		{name: "surrounding whitespace in name", headers: map[string]string{" accept": "x"}},
		{name: "non-ASCII name", headers: map[string]string{"äccept": "x"}},
		{name: "case collision", headers: map[string]string{"Accept": "a", "accept": "a"}},
		{name: "CRLF in value", headers: map[string]string{"x-a": "a\r\nInjected: yes"}},
		{name: "interior tab", headers: map[string]string{"x-a": "a\tb"}},
		{name: "obs-text", headers: map[string]string{"x-a": "caf\xe9"}},
		{name: "too many", headers: tooMany},
		{name: "too many bytes", headers: map[string]string{"x-big": strings.Repeat("v", guard.MaxHeaderBytes)}},
		{name: "zero timeout", timeout: new(0.0)},
		{name: "negative timeout", timeout: new(-1.0)},
		{name: "NaN timeout", timeout: new(math.NaN())},
		{name: "infinite timeout", timeout: new(math.Inf(1))},
		{name: "timeout over the maximum", timeout: new(121.0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := fetchenv.Command(h.URL("origin.test", "/"))
			cmd.Headers, cmd.TimeoutSeconds = tt.headers, tt.timeout
			out := h.Handle(t, cmd)
			if out.Fate != capability.Close || out.Reason != string(envelope.ReasonInvalidRequestOptions) {
				t.Fatalf("outcome = %v/%q (%v), want permanent/invalid_request_options", out.Name(), out.Reason, out.Err)
			}
			if !errors.Is(out.Err, guard.ErrInvalidOptions) {
				t.Errorf("err = %v, want guard.ErrInvalidOptions", out.Err)
			}
		})
	}
	if n := h.Origin.Count(); n != 0 {
		t.Errorf("origin saw %d requests, want 0", n)
	}
}

func TestHandleRefusesUnfetchableURLs(t *testing.T) {
	h := fetchenv.New(t, testenv.Status(200, nil, "never"), fetchenv.Options{})
	for _, raw := range []string{"ftp://origin.test/x", "file:///etc/passwd", "http:///nohost", "mailto:a@b.test", "not a url at all", "http://[::1", "javascript:alert(1)", ""} {
		t.Run(raw, func(t *testing.T) {
			out := h.Handle(t, fetchenv.Command(raw))
			if out.Fate != capability.Close || out.Reason != string(envelope.ReasonNotFetchable) {
				t.Fatalf("outcome = %v/%q (%v), want permanent/not_fetchable", out.Name(), out.Reason, out.Err)
			}
		})
	}
	if n := h.Origin.Count(); n != 0 {
		t.Errorf("origin saw %d requests, want 0", n)
	}
}

func TestHandleRefusesDeniedDestinations(t *testing.T) {
	h := fetchenv.New(t, testenv.Status(200, nil, "never"), fetchenv.Options{})
	// A guard with no allow-list: loopback is denied like any private range.
	strict := fetch.New(fetch.Options{Guard: guard.New(guard.Options{Resolver: hosts.Resolver{Table: fetchenv.Hosts}})})
	t.Cleanup(strict.Close)
	strictHandler := contentfetch.NewHandler(contentfetch.HandlerOptions{Fetcher: strict, Sink: h.Sink})
	tests := []struct {
		name    string
		handler *contentfetch.Handler
		url     string
	}{
		{name: "metadata address", handler: h.Handler, url: "http://169.254.169.254/latest/meta-data/"},
		{name: "name resolving to the metadata address", handler: h.Handler, url: "http://metadata.test/"},
		{name: "name with one private answer", handler: h.Handler, url: h.URL("mixed.test", "/")},
		{name: "decimal loopback without allow-list", handler: strictHandler, url: "http://2130706433:" + h.Origin.Port() + "/"},
		{name: "loopback without allow-list", handler: strictHandler, url: h.URL("127.0.0.1", "/")},
		{name: "IPv4-mapped loopback without allow-list", handler: strictHandler, url: h.URL("::ffff:127.0.0.1", "/")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := tt.handler.Fetch(t.Context(), fetchenv.Command(tt.url), nil)
			if out.Fate != capability.Close || out.Reason != string(envelope.ReasonDestinationRefused) {
				t.Fatalf("outcome = %v/%q (%v), want permanent/destination_refused", out.Name(), out.Reason, out.Err)
			}
		})
	}
	if n := h.Origin.Count(); n != 0 {
		t.Errorf("origin saw %d requests, want 0", n)
	}
}

func TestHandleRedirects(t *testing.T) {
	mux := http.NewServeMux()
	// /chain/N redirects to /chain/N-1; /chain/0 answers.
	mux.HandleFunc("/chain/{n}", func(w http.ResponseWriter, r *http.Request) {
		var n int
		fmt.Sscan(r.PathValue("n"), &n)
		if n == 0 {
			w.Write([]byte("end of chain"))
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/chain/%d", n-1), http.StatusFound)
	})
	mux.Handle("/loop/a", testenv.Redirect(http.StatusMovedPermanently, "/loop/b"))
	mux.Handle("/loop/b", testenv.Redirect(http.StatusTemporaryRedirect, "/loop/a"))
	mux.Handle("/no-location", testenv.Redirect(http.StatusFound, ""))
	mux.Handle("/bad-scheme", testenv.Redirect(http.StatusFound, "gopher://origin.test/"))
	mux.Handle("/to-metadata", testenv.Redirect(http.StatusFound, "http://169.254.169.254/latest/meta-data/"))
	mux.Handle("/to-metadata-name", testenv.Redirect(http.StatusSeeOther, "http://metadata.test/"))
	mux.Handle("/relative", testenv.Redirect(http.StatusPermanentRedirect, "chain/0"))
	h := fetchenv.New(t, mux, fetchenv.Options{})

	tests := []struct {
		name       string
		path       string
		wantKind   string
		wantReason envelope.Reason
		wantStatus int
		wantHits   int
	}{
		{name: "10 redirects are followed", path: "/chain/10", wantKind: contentfetch.Stored, wantStatus: 200, wantHits: 11},
		{name: "the 11th redirect ends the fetch", path: "/chain/11", wantKind: fetchenv.Permanent, wantReason: envelope.ReasonNotFetchable, wantHits: 11},
		{name: "redirect loop", path: "/loop/a", wantKind: fetchenv.Permanent, wantReason: envelope.ReasonNotFetchable, wantHits: 11},
		{name: "3xx without Location is its status", path: "/no-location", wantKind: fetchenv.Permanent, wantReason: envelope.ReasonHTTPStatus, wantStatus: 302, wantHits: 1},
		{name: "Location with a bad scheme", path: "/bad-scheme", wantKind: fetchenv.Permanent, wantReason: envelope.ReasonNotFetchable, wantHits: 1},
		{name: "redirect to a denied address", path: "/to-metadata", wantKind: fetchenv.Permanent, wantReason: envelope.ReasonDestinationRefused, wantHits: 1},
		{name: "redirect to a name resolving to a denied address", path: "/to-metadata-name", wantKind: fetchenv.Permanent, wantReason: envelope.ReasonDestinationRefused, wantHits: 1},
		{name: "relative Location", path: "/relative", wantKind: contentfetch.Stored, wantStatus: 200, wantHits: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := h.Origin.Count()
			out := h.Handle(t, fetchenv.Command(h.URL("origin.test", tt.path)))
			if out.Name() != tt.wantKind || out.Reason != string(tt.wantReason) || out.StatusCode != tt.wantStatus {
				t.Fatalf("outcome = %v/%q/%d (%v), want %v/%q/%d", out.Name(), out.Reason, out.StatusCode, out.Err, tt.wantKind, tt.wantReason, tt.wantStatus)
			}
			if hits := h.Origin.Count() - before; hits != tt.wantHits {
				t.Errorf("origin saw %d requests, want %d", hits, tt.wantHits)
			}
			if tt.wantKind == contentfetch.Stored {
				got := out.Fact.(*envelope.BlobAvailable)
				if want := h.URL("origin.test", "/chain/0"); *got.FinalURL != want {
					t.Errorf("final_url = %q, want %q", *got.FinalURL, want)
				}
			}
		})
	}
}

func TestHandleSizeLimit(t *testing.T) {
	const limit = 1 << 20
	mux := http.NewServeMux()
	mux.Handle("/with-length", testenv.Body(limit+1, true))
	mux.Handle("/without-length", testenv.Body(limit+1, false))
	mux.Handle("/exact", testenv.Body(limit, true))
	mux.Handle("/bomb", testenv.GzipBomb(64*limit))
	h := fetchenv.New(t, mux, fetchenv.Options{Fetch: fetch.Options{MaxBodyBytes: limit}})
	tests := []struct {
		path     string
		wantKind string
	}{
		{"/with-length", fetchenv.Permanent},
		{"/without-length", fetchenv.Permanent},
		{"/bomb", fetchenv.Permanent},
		{"/exact", contentfetch.Stored},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			out := h.Handle(t, fetchenv.Command(h.URL("origin.test", tt.path)))
			if out.Name() != tt.wantKind {
				t.Fatalf("kind = %v (%v), want %v", out.Name(), out.Err, tt.wantKind)
			}
			if tt.wantKind == fetchenv.Permanent {
				if out.Reason != string(envelope.ReasonTooLarge) || !errors.Is(out.Err, fetch.ErrTooLarge) {
					t.Errorf("reason = %q, err = %v; want too_large", out.Reason, out.Err)
				}
			}
		})
	}
	// Only the exact-size body is stored.
	if _, err := h.Sink.Open(t.Context(), fetchenv.SHA(bytes.Repeat([]byte("x"), limit+1))); !errors.Is(err, sink.ErrNotFound) {
		t.Errorf("an over-limit body was stored (Open err = %v)", err)
	}
}

func TestHandleDecompression(t *testing.T) {
	body := bytes.Repeat([]byte("feed "), 1000)
	h := fetchenv.New(t, testenv.Gzipped(body), fetchenv.Options{})
	t.Run("decoded when the worker asked for gzip", func(t *testing.T) {
		out := h.Handle(t, fetchenv.Command(h.URL("origin.test", "/")))
		if out.Label != contentfetch.Stored {
			t.Fatalf("kind = %v (%v)", out.Name(), out.Err)
		}
		if got := fetchenv.Stored(t, h.Sink, out.Fact.(*envelope.BlobAvailable).ContentFingerprint); !bytes.Equal(got, body) {
			t.Errorf("stored %d bytes, want the %d decoded bytes", len(got), len(body))
		}
		if ae := h.Origin.Requests()[0].Header.Get("Accept-Encoding"); ae != "gzip" {
			t.Errorf("Accept-Encoding sent = %q, want gzip", ae)
		}
	})
	t.Run("decoded too when the issuer set accept-encoding", func(t *testing.T) {
		cmd := fetchenv.Command(h.URL("origin.test", "/"))
		cmd.Headers = map[string]string{"Accept-Encoding": "gzip"}
		out := h.Handle(t, cmd)
		if out.Label != contentfetch.Stored {
			t.Fatalf("kind = %v (%v)", out.Name(), out.Err)
		}
		if got := fetchenv.Stored(t, h.Sink, out.Fact.(*envelope.BlobAvailable).ContentFingerprint); !bytes.Equal(got, body) {
			t.Errorf("stored %d bytes, want the %d decoded bytes", len(got), len(body))
		}
	})
}

func TestHandleTimeouts(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("/hang", testenv.Hang())
	mux.Handle("/trickle", testenv.Trickle([]byte("x"), 50*time.Millisecond, 100))
	mux.Handle("/stall", testenv.Trickle([]byte("x"), 2*time.Second, 3))
	h := fetchenv.New(t, mux, fetchenv.Options{Fetch: fetch.Options{MaxFetchTime: 700 * time.Millisecond}})
	tests := []struct {
		name    string
		path    string
		timeout float64
		wantErr error
	}{
		{name: "server hangs before headers", path: "/hang", timeout: 0.2, wantErr: fetch.ErrTimeout},
		{name: "body stalls between reads", path: "/stall", timeout: 0.2, wantErr: fetch.ErrTimeout},
		{name: "trickle past the whole-fetch deadline", path: "/trickle", timeout: 1, wantErr: fetch.ErrDeadline},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := fetchenv.Command(h.URL("origin.test", tt.path))
			cmd.TimeoutSeconds = &tt.timeout
			start := time.Now()
			out := h.Handle(t, cmd)
			if out.Fate != capability.Retry || !errors.Is(out.Err, tt.wantErr) {
				t.Fatalf("outcome = %v (%v), want transient %v", out.Name(), out.Err, tt.wantErr)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("took %v; the timeout did not cut the fetch short", took)
			}
		})
	}
}

func TestHandleMalformedResponses(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("/bad-chunked", testenv.BadChunked())
	mux.Handle("/garbage", testenv.Raw("this is not HTTP at all\r\n\r\n"))
	mux.Handle("/300-headers", testenv.ManyHeaders(300))
	mux.Handle("/long-type", testenv.Status(200, map[string]string{"Content-Type": "text/plain; x=" + strings.Repeat("a", 1100)}, "body"))
	mux.Handle("/etag-obs-text", testenv.Status(200, map[string]string{"Etag": "\"caf\xe9\"", "Last-Modified": "Sun, 29 Nov 2026 \xa0"}, "body"))
	mux.Handle("/blank-headers", testenv.Status(200, map[string]string{"Etag": "   ", "Content-Type": " "}, "body"))
	mux.Handle("/long-etag", testenv.Status(200, map[string]string{"Etag": `"` + strings.Repeat("e", 1100) + `"`}, "body"))
	h := fetchenv.New(t, mux, fetchenv.Options{})

	for _, path := range []string{"/bad-chunked", "/garbage"} {
		t.Run(path, func(t *testing.T) {
			out := h.Handle(t, fetchenv.Command(h.URL("origin.test", path)))
			if out.Fate != capability.Retry {
				t.Fatalf("kind = %v (%v), want transient", out.Name(), out.Err)
			}
		})
	}
	tests := []struct {
		path      string
		wantMedia string
		wantRaw   *string
	}{
		{path: "/300-headers", wantMedia: "text/plain", wantRaw: new("text/plain; charset=utf-8")},
		// Only the part before ';' makes media_type; the whole value is past
		// the passthrough bound, so content_type_raw is null.
		{path: "/long-type", wantMedia: "text/plain"},
		{path: "/etag-obs-text", wantMedia: "text/plain", wantRaw: new("text/plain; charset=utf-8")},
		{path: "/blank-headers", wantMedia: sink.DefaultMediaType},
		{path: "/long-etag", wantMedia: "text/plain", wantRaw: new("text/plain; charset=utf-8")},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			out := h.Handle(t, fetchenv.Command(h.URL("origin.test", tt.path)))
			if out.Label != contentfetch.Stored {
				t.Fatalf("kind = %v (%v), want stored", out.Name(), out.Err)
			}
			fact := out.Fact.(*envelope.BlobAvailable)
			if fact.MediaType != tt.wantMedia {
				t.Errorf("media_type = %q, want %q", fact.MediaType, tt.wantMedia)
			}
			if diff := cmp.Diff(tt.wantRaw, fact.ContentTypeRaw); diff != "" {
				t.Errorf("content_type_raw (-want +got):\n%s", diff)
			}
			if fact.ETag != nil || fact.LastModified != nil {
				t.Errorf("etag = %v, last_modified = %v; want both null", fact.ETag, fact.LastModified)
			}
		})
	}
}

func TestHandleHeadersOnTheWire(t *testing.T) {
	h := fetchenv.New(t, testenv.Status(200, nil, "ok"), fetchenv.Options{})
	t.Run("default user-agent", func(t *testing.T) {
		h.Handle(t, fetchenv.Command(h.URL("origin.test", "/")))
		got := h.Origin.Requests()
		if ua := got[len(got)-1].Header.Values("User-Agent"); len(ua) != 1 || ua[0] != fetch.DefaultUserAgent() {
			t.Errorf("User-Agent lines = %q, want one default", ua)
		}
	})
	t.Run("issuer wins with one line", func(t *testing.T) {
		cmd := fetchenv.Command(h.URL("origin.test", "/"))
		cmd.Headers = map[string]string{"User-Agent": "  issuer/1.0 ", "X-Trace": "abc"}
		if out := h.Handle(t, cmd); out.Label != contentfetch.Stored {
			t.Fatalf("kind = %v (%v)", out.Name(), out.Err)
		}
		got := h.Origin.Requests()
		last := got[len(got)-1].Header
		if ua := last.Values("User-Agent"); len(ua) != 1 || ua[0] != "issuer/1.0" {
			t.Errorf("User-Agent lines = %q, want exactly [issuer/1.0]", ua)
		}
		if v := last.Values("X-Trace"); len(v) != 1 || v[0] != "abc" {
			t.Errorf("X-Trace = %q", v)
		}
	})
}
