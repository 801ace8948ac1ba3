package fetch_test

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/internal/testenv/fetchenv"
)

const (
	libETag         = `"v1"`
	libLastModified = "Sun, 29 Nov 2026 10:00:00 GMT"
)

// libValidating is an origin that answers 304 when the request carries its
// current ETag, and 200 with its validators otherwise.
func libValidating(body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-None-Match") == libETag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Content-Type", "application/atom+xml")
		w.Header().Set("ETag", libETag)
		w.Header().Set("Last-Modified", libLastModified)
		fmt.Fprint(w, body)
	})
}

// TestCacheNotModified fetches twice through one cache: a 200 that fills
// it, then a 304 that returns the cached document.
func TestCacheNotModified(t *testing.T) {
	const body = `<feed xmlns="http://www.w3.org/2005/Atom"/>`
	h := fetchenv.New(t, libValidating(body), fetchenv.Options{Fetch: fetch.Options{Pacer: fetchenv.NoPacer{}}})
	cache := fetch.NewMemoryCache()
	u := h.URL("origin.test", "/feed")

	first, err := h.Fetcher.Get(fetchenv.Ctx(t), u, fetch.GetOptions{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	if first.NotModified || first.StatusCode != 200 || cache.Len() != 1 {
		t.Fatalf("first = %+v, cache holds %d", first, cache.Len())
	}
	second, err := h.Fetcher.Get(fetchenv.Ctx(t), u, fetch.GetOptions{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}

	want := *first
	want.NotModified = true
	want.StatusCode = http.StatusNotModified
	if diff := cmp.Diff(&want, second, cmpopts.IgnoreUnexported(fetch.Document{})); diff != "" {
		t.Errorf("second document (-want +got):\n%s", diff)
	}
	if got := fetchenv.ReadDoc(t, second); got != body {
		t.Errorf("second body = %q, want the cached %q", got, body)
	}
	if first.NotModified {
		t.Errorf("the 304 changed the first document")
	}
	seen := h.Origin.Requests()
	if len(seen) != 2 {
		t.Fatalf("origin saw %d requests, want 2", len(seen))
	}
	if got := seen[0].Header.Get("If-None-Match") + seen[0].Header.Get("If-Modified-Since"); got != "" {
		t.Errorf("first request was conditional: %q", got)
	}
	if got, want := [2]string{seen[1].Header.Get("If-None-Match"), seen[1].Header.Get("If-Modified-Since")}, [2]string{libETag, libLastModified}; got != want {
		t.Errorf("second request validators = %q, want %q", got, want)
	}
}

// TestCacheValidatorsOnTheFirstHopOnly checks that a redirect target never
// receives the conditional headers, which describe the URL asked for.
func TestCacheValidatorsOnTheFirstHopOnly(t *testing.T) {
	mux := http.NewServeMux()
	h := fetchenv.New(t, mux, fetchenv.Options{Fetch: fetch.Options{Pacer: fetchenv.NoPacer{}}})
	mux.Handle("/start", testenv.Redirect(http.StatusFound, h.URL("a.test", "/final")))
	mux.Handle("/final", libValidating("<feed/>"))
	cache := fetch.NewMemoryCache()
	u := h.URL("origin.test", "/start")
	for i := range 2 {
		doc, err := h.Fetcher.Get(fetchenv.Ctx(t), u, fetch.GetOptions{Cache: cache})
		if err != nil {
			t.Fatal(err)
		}
		// The target never sees the validators, so it answers 200 both times.
		if doc.NotModified || doc.URL != h.URL("a.test", "/final") {
			t.Errorf("fetch %d: doc = %+v", i+1, doc)
		}
	}
	var got []string
	for _, s := range h.Origin.Requests() {
		got = append(got, s.Path+" "+s.Header.Get("If-None-Match")+" "+s.Header.Get("If-Modified-Since"))
	}
	want := []string{
		"/start  ",
		"/final  ",
		"/start " + libETag + " " + libLastModified,
		"/final  ",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests: path and validators (-want +got):\n%s", diff)
	}
}

// TestCacheValidatorsOnEveryRetry checks the validators are re-sent on a
// retried attempt and the 304 that follows is a success.
func TestCacheValidatorsOnEveryRetry(t *testing.T) {
	cache := fetch.NewMemoryCache()
	h := fetchenv.New(t, libSequence(
		libValidating("<feed/>"),
		testenv.Status(http.StatusServiceUnavailable, nil, ""),
		libValidating("<feed/>"),
	), fetchenv.Options{Fetch: fetch.Options{Pacer: fetchenv.NoPacer{}}})
	u := h.URL("origin.test", "/")
	if _, err := h.Fetcher.Get(fetchenv.Ctx(t), u, fetch.GetOptions{Cache: cache}); err != nil {
		t.Fatal(err)
	}
	var sleeps libSleeps
	fetch.SetSleep(h.Fetcher, sleeps.sleep)
	doc, err := h.Fetcher.Get(fetchenv.Ctx(t), u, fetch.GetOptions{Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	if !doc.NotModified || doc.Attempts != 2 || len(sleeps.got()) != 1 {
		t.Errorf("doc = %+v after %d waits, want NotModified after 2 attempts", doc, len(sleeps.got()))
	}
	seen := h.Origin.Requests()
	for i, s := range seen[1:] {
		if s.Header.Get("If-None-Match") != libETag {
			t.Errorf("attempt %d carried If-None-Match %q", i+1, s.Header.Get("If-None-Match"))
		}
	}
}

// TestCacheWrittenOnlyAfterA200 checks that no other final response
// replaces or creates a cache entry.
func TestCacheWrittenOnlyAfterA200(t *testing.T) {
	tests := []struct {
		name    string
		then    http.Handler
		wantErr bool
	}{
		{name: "500", then: testenv.Status(http.StatusInternalServerError, map[string]string{"ETag": `"err"`}, "oops"), wantErr: true},
		{name: "404", then: testenv.Status(http.StatusNotFound, map[string]string{"ETag": `"gone"`}, "gone"), wantErr: true},
		{name: "429", then: testenv.Status(http.StatusTooManyRequests, nil, ""), wantErr: true},
		{name: "203", then: testenv.Status(http.StatusNonAuthoritativeInfo, map[string]string{"ETag": `"203"`}, "proxied")},
		{name: "206", then: testenv.Status(http.StatusPartialContent, map[string]string{"ETag": `"206"`}, "part")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := fetchenv.New(t, libSequence(libValidating("<feed/>"), tt.then), fetchenv.Options{Fetch: fetch.Options{Pacer: fetchenv.NoPacer{}}})
			cache := fetch.NewMemoryCache()
			u := h.URL("origin.test", "/")
			first, err := h.Fetcher.Get(fetchenv.Ctx(t), u, fetch.GetOptions{Cache: cache})
			if err != nil {
				t.Fatal(err)
			}
			doc, err := h.Fetcher.Get(fetchenv.Ctx(t), u, fetch.GetOptions{Cache: cache, Retries: fetch.None})
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, doc = %+v; want an error: %v", err, doc, tt.wantErr)
			}
			cached, ok := cache.Load(u)
			if !ok || cached.ETag != libETag || cached.Blob != first.Blob {
				t.Errorf("cache holds %+v, want the first document", cached)
			}
		})
	}

	t.Run("a failed first fetch stores nothing", func(t *testing.T) {
		h := fetchenv.New(t, testenv.Status(http.StatusBadGateway, map[string]string{"ETag": libETag}, ""), fetchenv.Options{Fetch: fetch.Options{Pacer: fetchenv.NoPacer{}}})
		cache := fetch.NewMemoryCache()
		if _, err := h.Fetcher.Get(fetchenv.Ctx(t), h.URL("origin.test", "/"), fetch.GetOptions{Cache: cache, Retries: fetch.None}); err == nil {
			t.Fatal("no error")
		}
		if cache.Len() != 0 {
			t.Errorf("cache holds %d entries, want none", cache.Len())
		}
	})
}

// TestCacheOwnsTheConditionalHeaders checks a caller's If-None-Match never
// replaces the cache's.
func TestCacheOwnsTheConditionalHeaders(t *testing.T) {
	h := fetchenv.New(t, libValidating("<feed/>"), fetchenv.Options{Fetch: fetch.Options{Pacer: fetchenv.NoPacer{}}})
	cache := fetch.NewMemoryCache()
	u := h.URL("origin.test", "/")
	caller := map[string]string{"If-None-Match": `"caller"`, "If-Modified-Since": "Thu, 01 Jan 1970 00:00:00 GMT"}
	if _, err := h.Fetcher.Get(fetchenv.Ctx(t), u, fetch.GetOptions{Cache: cache, Headers: caller}); err != nil {
		t.Fatal(err)
	}
	doc, err := h.Fetcher.Get(fetchenv.Ctx(t), u, fetch.GetOptions{Cache: cache, Headers: caller})
	if err != nil {
		t.Fatal(err)
	}
	if !doc.NotModified {
		t.Errorf("second fetch was not answered 304: %+v", doc)
	}
	seen := h.Origin.Requests()
	got := [][2]string{}
	for _, s := range seen {
		got = append(got, [2]string{s.Header.Get("If-None-Match"), s.Header.Get("If-Modified-Since")})
	}
	want := [][2]string{{"", ""}, {libETag, libLastModified}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("validators on the wire (-want +got):\n%s", diff)
	}
}

// TestCacheUnbidden304 checks a 304 that answers no validator of ours is
// an error, not an empty document.
func TestCacheUnbidden304(t *testing.T) {
	notModified := testenv.Status(http.StatusNotModified, nil, "")
	mux := http.NewServeMux()
	h := fetchenv.New(t, mux, fetchenv.Options{Fetch: fetch.Options{Pacer: fetchenv.NoPacer{}}})
	mux.Handle("/plain", notModified)
	mux.Handle("/start", testenv.Redirect(http.StatusFound, "/after"))
	mux.Handle("/after", notModified)
	cache := fetch.NewMemoryCache()
	cache.Store(h.URL("origin.test", "/start"), &fetch.Document{ETag: libETag})

	tests := []struct {
		name string
		path string
		opts fetch.GetOptions
	}{
		{name: "no cache", path: "/plain"},
		{name: "nothing cached", path: "/plain", opts: fetch.GetOptions{Cache: fetch.NewMemoryCache()}},
		{name: "from a redirect target", path: "/start", opts: fetch.GetOptions{Cache: cache}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := h.Origin.Count()
			doc, err := h.Fetcher.Get(fetchenv.Ctx(t), h.URL("origin.test", tt.path), tt.opts)
			var se *fetch.StatusError
			if !errors.As(err, &se) || se.StatusCode != http.StatusNotModified || doc != nil {
				t.Fatalf("doc = %+v, err = %v; want a 304 *StatusError", doc, err)
			}
			if fetch.Retryable(err) {
				t.Errorf("an unbidden 304 is retryable")
			}
			if n := h.Origin.Count() - before; n > 2 {
				t.Errorf("origin saw %d requests, want no retry", n)
			}
		})
	}
}

// TestCacheSkipsUnsendableValidators checks a cached validator that could
// not go on the wire is dropped rather than failing the request.
func TestCacheSkipsUnsendableValidators(t *testing.T) {
	h := fetchenv.New(t, testenv.Status(200, nil, "fresh"), fetchenv.Options{Fetch: fetch.Options{Pacer: fetchenv.NoPacer{}}})
	cache := fetch.NewMemoryCache()
	u := h.URL("origin.test", "/")
	cache.Store(u, &fetch.Document{ETag: "\"bad\x7f\"", LastModified: libLastModified})
	if _, err := h.Fetcher.Get(fetchenv.Ctx(t), u, fetch.GetOptions{Cache: cache}); err != nil {
		t.Fatal(err)
	}
	got := h.Origin.Requests()[0].Header
	if got.Get("If-None-Match") != "" || got.Get("If-Modified-Since") != libLastModified {
		t.Errorf("validators = %q, %q", got.Get("If-None-Match"), got.Get("If-Modified-Since"))
	}
}

func TestMemoryCacheConcurrentUse(t *testing.T) {
	cache := fetch.NewMemoryCache()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 100 {
				u := fmt.Sprintf("http://a.test/%d", j%10)
				cache.Store(u, &fetch.Document{ETag: fmt.Sprint(i)})
				if d, ok := cache.Load(u); ok && d == nil {
					t.Errorf("%s loaded as nil", u)
				}
				if j%7 == 0 {
					cache.Delete(u)
				}
			}
		})
	}
	wg.Wait()
	if n := cache.Len(); n > 10 {
		t.Errorf("cache holds %d entries, want at most 10", n)
	}
}
