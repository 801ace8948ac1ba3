package fetch_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/internal/testenv/fetchenv"
)

// libSleeps records the waits Get asks for instead of waiting.
type libSleeps struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (s *libSleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.waits = append(s.waits, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *libSleeps) got() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.waits...)
}

// libSequence answers with each handler in turn, repeating the last.
func libSequence(handlers ...http.Handler) http.Handler {
	var mu sync.Mutex
	n := 0
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		h := handlers[min(n, len(handlers)-1)]
		n++
		mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestRetryable runs every row of the retried and not-retried lists
// against real origins: first a single Fetch, whose error Retryable must
// classify, then a Get with two retries, which must retry exactly the
// retryable rows.
func TestRetryable(t *testing.T) {
	const opTimeout = 200 * time.Millisecond
	secure := testenv.StartTLSOrigin(t, testenv.Status(200, nil, "ok")) // never trusted here
	mux := http.NewServeMux()
	h := fetchenv.New(t, mux, fetchenv.Options{Fetch: fetch.Options{Pacer: fetchenv.NoPacer{}, MaxBodyBytes: 64 << 10}})
	// Only the per-operation row runs with a short operation timeout, so a
	// slow TLS handshake on a busy machine cannot turn another row into one.
	quick := fetchenv.New(t, mux, fetchenv.Options{Fetch: fetch.Options{Pacer: fetchenv.NoPacer{}, DefaultTimeout: opTimeout}})
	for _, code := range []int{400, 401, 403, 404, 405, 408, 410, 412, 418, 429, 451, 500, 501, 502, 503, 504} {
		mux.Handle(fmt.Sprintf("/status/%d", code), testenv.Status(code, nil, "no"))
	}
	mux.Handle("/reset", testenv.Raw("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\ncut short"))
	mux.Handle("/garbage", testenv.Raw("this is not HTTP\r\n\r\n"))
	mux.Handle("/hang", testenv.Hang())
	mux.Handle("/trickle", testenv.Trickle([]byte("x"), 50*time.Millisecond, 40))
	mux.Handle("/big", testenv.Body(1<<20, false))
	mux.Handle("/to-metadata", testenv.Redirect(http.StatusFound, "http://metadata.test/latest"))
	mux.Handle("/loop", testenv.Redirect(http.StatusFound, "/loop"))
	mux.Handle("/to-ftp", testenv.Redirect(http.StatusFound, "ftp://origin.test/file"))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()

	type row struct {
		name       string
		url        string
		fetcher    *fetch.Fetcher  // nil means h's
		ctx        context.Context // the caller's; nil means a live one
		timeout    time.Duration   // per attempt; 0 means none
		wantErr    error           // errors.Is target; nil when wantStatus says it
		wantStatus int             // *StatusError code
		retried    bool
	}
	status := func(code int, retried bool) row {
		return row{name: fmt.Sprintf("HTTP %d", code), url: h.URL("origin.test", fmt.Sprintf("/status/%d", code)), wantStatus: code, retried: retried}
	}
	tests := []row{
		// Retried: a fresh attempt might recover.
		{name: "connection refused", url: "http://" + closedPort(t) + "/", wantErr: fetch.ErrNetwork, retried: true},
		{name: "connection cut mid-body", url: h.URL("origin.test", "/reset"), wantErr: fetch.ErrNetwork, retried: true},
		{name: "malformed response", url: h.URL("origin.test", "/garbage"), wantErr: fetch.ErrNetwork, retried: true},
		{name: "name does not resolve", url: "http://nowhere.test/", wantErr: guard.ErrResolve, retried: true},
		{name: "per-attempt timeout", url: h.URL("origin.test", "/trickle"), timeout: 300 * time.Millisecond, wantErr: fetch.ErrDeadline, retried: true},
		{name: "per-operation timeout", url: quick.URL("origin.test", "/hang"), fetcher: quick.Fetcher, wantErr: fetch.ErrTimeout, retried: true},
		status(500, true),
		status(501, true),
		status(502, true),
		status(503, true),
		status(504, true),
		status(429, true),
		status(408, true), // a request timeout, as the worker treats it

		// Not retried: a retry cannot help.
		status(400, false),
		status(401, false),
		status(403, false),
		status(404, false),
		status(405, false),
		status(410, false),
		status(412, false),
		status(418, false),
		status(451, false),
		{name: "URL does not parse", url: "http://[::1/", wantErr: fetch.ErrNotFetchable},
		{name: "URL without a host", url: "http:///path", wantErr: fetch.ErrNotFetchable},
		{name: "relative URL", url: "/just/a/path", wantErr: fetch.ErrNotFetchable},
		{name: "unsupported protocol", url: "ftp://origin.test/file", wantErr: fetch.ErrNotFetchable},
		{name: "file protocol", url: "file:///etc/passwd", wantErr: fetch.ErrNotFetchable},
		{name: "redirect to an unsupported protocol", url: h.URL("origin.test", "/to-ftp"), wantErr: fetch.ErrNotFetchable},
		{name: "guard refuses the URL", url: "http://metadata.test/latest", wantErr: guard.ErrRefused},
		{name: "guard refuses a literal", url: "http://10.0.0.1/", wantErr: guard.ErrRefused},
		{name: "guard refuses a redirect target", url: h.URL("origin.test", "/to-metadata"), wantErr: guard.ErrRefused},
		{name: "too many redirects", url: h.URL("origin.test", "/loop"), wantErr: fetch.ErrNotFetchable},
		{name: "body over the limit", url: h.URL("origin.test", "/big"), wantErr: fetch.ErrTooLarge},
		{name: "TLS certificate not trusted", url: secure.URLFor("example.com", "/"), wantErr: fetch.ErrNetwork},
		{name: "caller cancelled", url: h.URL("origin.test", "/status/503"), ctx: cancelled, wantErr: context.Canceled},
		{name: "caller deadline passed", url: h.URL("origin.test", "/status/503"), ctx: expired, wantErr: context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := tt.ctx
			if ctx == nil {
				ctx = fetchenv.Ctx(t)
			}
			f := tt.fetcher
			if f == nil {
				f = h.Fetcher
			}
			check := func(what string, err error) {
				t.Helper()
				if tt.wantStatus != 0 {
					var se *fetch.StatusError
					if !errors.As(err, &se) || se.StatusCode != tt.wantStatus {
						t.Fatalf("%s: err = %v, want a *StatusError %d", what, err, tt.wantStatus)
					}
				} else if !errors.Is(err, tt.wantErr) {
					t.Fatalf("%s: err = %v, want one wrapping %v", what, err, tt.wantErr)
				}
			}

			_, err := f.Fetch(ctx, fetch.Request{URL: tt.url, MaxFetchTime: tt.timeout}, h.Sink)
			check("Fetch", err)
			if got := fetch.Retryable(err); got != tt.retried {
				t.Errorf("Retryable(%v) = %v, want %v", err, got, tt.retried)
			}

			var sleeps libSleeps
			timeout := tt.timeout
			if timeout == 0 {
				timeout = time.Minute
			}
			fetch.SetSleep(f, sleeps.sleep)
			doc, err := f.Get(ctx, tt.url, fetch.GetOptions{Retries: 2, Timeout: timeout})
			if doc != nil {
				t.Fatalf("Get returned a document: %+v", doc)
			}
			check("Get", err)
			wantWaits := 0
			if tt.retried {
				wantWaits = 2
			}
			if got := len(sleeps.got()); got != wantWaits {
				t.Errorf("Get waited %d times (%v), want %d", got, sleeps.got(), wantWaits)
			}
			if tt.retried && !strings.Contains(err.Error(), "gave up after 3 attempts") {
				t.Errorf("Get error %q does not count its attempts", err)
			}
		})
	}

	// Errors that are not about the origin at all.
	others := []struct {
		name string
		err  error
		want bool
	}{
		{name: "nil", err: nil, want: false},
		{name: "parked for politeness", err: &contentfetch.ParkedError{Host: "a.test", Wait: time.Hour}, want: false},
		{name: "stopping", err: contentfetch.ErrStopping, want: false},
		{name: "storage full", err: fetch.ErrStorageFull, want: false},
		{name: "store failed", err: fmt.Errorf("%w: disk full", fetch.ErrStore), want: false},
		{name: "refused headers", err: fmt.Errorf("x: %w", guard.ErrInvalidOptions), want: false},
		{name: "304 without a validator", err: &fetch.StatusError{StatusCode: 304}, want: false},
		{name: "unrecognized", err: errors.New("something else"), want: false},
		{name: "wrapped 503", err: fmt.Errorf("fetch: gave up after 3 attempts: %w", &fetch.StatusError{StatusCode: 503}), want: true},
		{name: "per-attempt timeout beside a caller's context error", err: errors.Join(fetch.ErrDeadline, context.Canceled), want: true},
	}
	for _, tt := range others {
		t.Run(tt.name, func(t *testing.T) {
			if got := fetch.Retryable(tt.err); got != tt.want {
				t.Errorf("Retryable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// TestGetRetriesThenSucceeds checks the retry count, the jittered waits
// between attempts and the document returned.
func TestGetRetriesThenSucceeds(t *testing.T) {
	const base = 100 * time.Millisecond
	fail := testenv.Status(http.StatusServiceUnavailable, nil, "busy")
	ok := testenv.Status(200, map[string]string{"Content-Type": "application/rss+xml", "ETag": `"v1"`}, "<rss/>")
	h := fetchenv.New(t, libSequence(fail, fail, fail, ok), fetchenv.Options{Fetch: fetch.Options{Pacer: fetchenv.NoPacer{}}})
	var sleeps libSleeps
	fetch.SetSleep(h.Fetcher, sleeps.sleep)
	doc, err := h.Fetcher.Get(fetchenv.Ctx(t), h.URL("origin.test", "/feed"), fetch.GetOptions{Retries: 3, Backoff: base})
	if err != nil {
		t.Fatal(err)
	}
	if doc.Attempts != 4 || h.Origin.Count() != 4 {
		t.Errorf("attempts = %d, origin saw %d, want 4 and 4", doc.Attempts, h.Origin.Count())
	}
	waits := sleeps.got()
	if len(waits) != 3 {
		t.Fatalf("waits = %v, want 3", waits)
	}
	for n, w := range waits {
		lo, hi := base<<n/2, base<<n
		if w < lo || w >= hi {
			t.Errorf("wait %d = %s, want within [%s, %s)", n, w, lo, hi)
		}
	}
	if doc.Kind != fetch.KindRSS || doc.ETag != `"v1"` || doc.NotModified || doc.StatusCode != 200 {
		t.Errorf("doc = %+v", doc)
	}
	if got := fetchenv.ReadDoc(t, doc); got != "<rss/>" {
		t.Errorf("body = %q", got)
	}
}

// TestGetRetryAfter checks that a 429's Retry-After replaces the backoff,
// in both forms, capped at MaxGetWait.
func TestGetRetryAfter(t *testing.T) {
	tests := []struct {
		name       string
		retryAfter func() string
		min, max   time.Duration
	}{
		{name: "delta-seconds", retryAfter: func() string { return "7" }, min: 7 * time.Second, max: 7 * time.Second},
		// HTTP dates have one-second resolution and the clock moves on.
		{name: "HTTP-date", retryAfter: func() string { return time.Now().Add(20 * time.Second).UTC().Format(http.TimeFormat) }, min: 18 * time.Second, max: 20 * time.Second},
		{name: "delta-seconds over the cap", retryAfter: func() string { return "86400" }, min: fetch.MaxGetWait, max: fetch.MaxGetWait},
		{name: "HTTP-date over the cap", retryAfter: func() string { return time.Now().Add(time.Hour).UTC().Format(http.TimeFormat) }, min: fetch.MaxGetWait, max: fetch.MaxGetWait},
		{name: "absent: the backoff", retryAfter: func() string { return "" }, min: 250 * time.Millisecond, max: 500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tooMany := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if v := tt.retryAfter(); v != "" {
					w.Header().Set("Retry-After", v)
				}
				w.WriteHeader(http.StatusTooManyRequests)
			})
			h := fetchenv.New(t, libSequence(tooMany, testenv.Status(200, nil, "ok")), fetchenv.Options{Fetch: fetch.Options{Pacer: fetchenv.NoPacer{}}})
			var sleeps libSleeps
			fetch.SetSleep(h.Fetcher, sleeps.sleep)
			doc, err := h.Fetcher.Get(fetchenv.Ctx(t), h.URL("origin.test", "/"), fetch.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			waits := sleeps.got()
			if len(waits) != 1 || waits[0] < tt.min || waits[0] > tt.max || doc.Attempts != 2 {
				t.Errorf("waits = %v, attempts = %d; want one wait within [%s, %s] and 2 attempts", waits, doc.Attempts, tt.min, tt.max)
			}
		})
	}
}

// TestGetRetryCounts checks the Retries option: default, none, and some.
func TestGetRetryCounts(t *testing.T) {
	tests := []struct {
		name    string
		retries int
		want    int // requests sent
	}{
		{name: "default", retries: 0, want: 1 + fetch.DefaultGetRetries},
		{name: "none", retries: fetch.None, want: 1},
		{name: "any negative is none", retries: -5, want: 1},
		{name: "one", retries: 1, want: 2},
		{name: "five", retries: 5, want: 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := fetchenv.New(t, testenv.Status(http.StatusBadGateway, nil, ""), fetchenv.Options{Fetch: fetch.Options{Pacer: fetchenv.NoPacer{}}})
			var sleeps libSleeps
			fetch.SetSleep(h.Fetcher, sleeps.sleep)
			_, err := h.Fetcher.Get(fetchenv.Ctx(t), h.URL("origin.test", "/"), fetch.GetOptions{Retries: tt.retries})
			var se *fetch.StatusError
			if !errors.As(err, &se) || se.StatusCode != http.StatusBadGateway {
				t.Fatalf("err = %v, want a 502 *StatusError", err)
			}
			if got := h.Origin.Count(); got != tt.want {
				t.Errorf("origin saw %d requests, want %d", got, tt.want)
			}
			if got := len(sleeps.got()); got != tt.want-1 {
				t.Errorf("waited %d times, want %d", got, tt.want-1)
			}
		})
	}
}

// TestGetPacesEveryRetry checks that retries go through the pacer: with an
// interval, every attempt to the host is at least that far from the last.
func TestGetPacesEveryRetry(t *testing.T) {
	const interval = 100 * time.Millisecond
	fail := testenv.Status(http.StatusInternalServerError, nil, "")
	h := fetchenv.New(t, libSequence(fail, fail, testenv.Status(200, nil, "ok")), fetchenv.Options{Interval: interval})
	var sleeps libSleeps
	fetch.SetSleep(h.Fetcher, sleeps.sleep)
	doc, err := h.Fetcher.Get(fetchenv.Ctx(t), h.URL("origin.test", "/"), fetch.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := h.Origin.Requests()
	if len(seen) != 3 || doc.Attempts != 3 {
		t.Fatalf("origin saw %d requests, attempts %d; want 3", len(seen), doc.Attempts)
	}
	for i := 1; i < len(seen); i++ {
		if gap := seen[i].At.Sub(seen[i-1].At); gap < interval-5*time.Millisecond {
			t.Errorf("gap before attempt %d = %s, want at least %s", i+1, gap, interval)
		}
	}
}

// TestGetGuardsEveryRetry checks that the guard judges every hop of every
// attempt: a retry that redirects to a denied address is refused, and the
// refusal is not retried.
func TestGetGuardsEveryRetry(t *testing.T) {
	h := fetchenv.New(t, libSequence(
		testenv.Status(http.StatusServiceUnavailable, nil, ""),
		testenv.Redirect(http.StatusFound, "http://metadata.test/latest/meta-data/"),
	), fetchenv.Options{Fetch: fetch.Options{Pacer: fetchenv.NoPacer{}}})
	var sleeps libSleeps
	fetch.SetSleep(h.Fetcher, sleeps.sleep)
	_, err := h.Fetcher.Get(fetchenv.Ctx(t), h.URL("origin.test", "/"), fetch.GetOptions{Retries: 5})
	if !errors.Is(err, guard.ErrRefused) {
		t.Fatalf("err = %v, want guard.ErrRefused", err)
	}
	if got := h.Origin.Count(); got != 2 {
		t.Errorf("origin saw %d requests, want 2 (the 503, then the redirect)", got)
	}
	if got := len(sleeps.got()); got != 1 {
		t.Errorf("waited %d times, want 1", got)
	}
}

// TestGetCancel checks that the caller's cancellation ends Get at once,
// whether it comes during an attempt or between attempts, with no further
// attempt.
func TestGetCancel(t *testing.T) {
	t.Run("mid-attempt", func(t *testing.T) {
		arrived := make(chan struct{}, 1)
		h := fetchenv.New(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			arrived <- struct{}{}
			<-r.Context().Done()
		}), fetchenv.Options{Fetch: fetch.Options{Pacer: fetchenv.NoPacer{}, DefaultTimeout: time.Minute}})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var sleeps libSleeps
		done := make(chan error, 1)
		go func() {
			fetch.SetSleep(h.Fetcher, sleeps.sleep)
			_, err := h.Fetcher.Get(ctx, h.URL("origin.test", "/"), fetch.GetOptions{Retries: 5, Timeout: time.Minute})
			done <- err
		}()
		<-arrived
		cancel()
		err := awaitGet(t, done)
		if !errors.Is(err, context.Canceled) || errors.Is(err, fetch.ErrDeadline) || errors.Is(err, fetch.ErrTimeout) {
			t.Errorf("err = %v, want context.Canceled and no timeout", err)
		}
		if got := h.Origin.Count(); got != 1 || len(sleeps.got()) != 0 {
			t.Errorf("origin saw %d requests after %d waits, want 1 and none", got, len(sleeps.got()))
		}
	})
	t.Run("between attempts", func(t *testing.T) {
		h := fetchenv.New(t, testenv.Status(http.StatusServiceUnavailable, nil, ""), fetchenv.Options{Fetch: fetch.Options{Pacer: fetchenv.NoPacer{}}})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		waiting := make(chan struct{})
		done := make(chan error, 1)
		// The default sleep, waiting the full MaxGetWait unless cut short.
		fetch.SetSleep(h.Fetcher, func(ctx context.Context, d time.Duration) error {
			close(waiting)
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		go func() {
			_, err := h.Fetcher.Get(ctx, h.URL("origin.test", "/"), fetch.GetOptions{Retries: 5, Backoff: time.Hour})
			done <- err
		}()
		<-waiting
		cancel()
		if err := awaitGet(t, done); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		if got := h.Origin.Count(); got != 1 {
			t.Errorf("origin saw %d requests, want 1", got)
		}
	})
	t.Run("default sleep", func(t *testing.T) {
		arrived := make(chan struct{}, 8)
		h := fetchenv.New(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
			arrived <- struct{}{}
		}), fetchenv.Options{Fetch: fetch.Options{Pacer: fetchenv.NoPacer{}}})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := h.Fetcher.Get(ctx, h.URL("origin.test", "/"), fetch.GetOptions{Retries: 5, Backoff: time.Hour})
			done <- err
		}()
		<-arrived
		cancel() // during the first attempt's last moments or its 30 s wait
		if err := awaitGet(t, done); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		if got := h.Origin.Count(); got != 1 {
			t.Errorf("origin saw %d requests, want 1", got)
		}
	})
	t.Run("caller deadline is not a per-attempt timeout", func(t *testing.T) {
		h := fetchenv.New(t, testenv.Hang(), fetchenv.Options{Fetch: fetch.Options{Pacer: fetchenv.NoPacer{}, DefaultTimeout: time.Minute}})
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		var sleeps libSleeps
		fetch.SetSleep(h.Fetcher, sleeps.sleep)
		_, err := h.Fetcher.Get(ctx, h.URL("origin.test", "/"), fetch.GetOptions{Timeout: time.Minute})
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, fetch.ErrDeadline) || fetch.Retryable(err) {
			t.Errorf("err = %v, want context.DeadlineExceeded, not retryable", err)
		}
		if got := h.Origin.Count(); got != 1 || len(sleeps.got()) != 0 {
			t.Errorf("origin saw %d requests after %d waits, want 1 and none", got, len(sleeps.got()))
		}
	})
	t.Run("per-attempt timeout is not the caller's", func(t *testing.T) {
		h := fetchenv.New(t, testenv.Hang(), fetchenv.Options{Fetch: fetch.Options{Pacer: fetchenv.NoPacer{}, DefaultTimeout: time.Minute}})
		var sleeps libSleeps
		fetch.SetSleep(h.Fetcher, sleeps.sleep)
		_, err := h.Fetcher.Get(fetchenv.Ctx(t), h.URL("origin.test", "/"), fetch.GetOptions{Retries: 1, Timeout: 150 * time.Millisecond})
		if !errors.Is(err, fetch.ErrDeadline) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want fetch.ErrDeadline only", err)
		}
		if !strings.Contains(err.Error(), "150ms") {
			t.Errorf("err = %q, want it to name the 150ms bound", err)
		}
		if got := h.Origin.Count(); got != 2 || len(sleeps.got()) != 1 {
			t.Errorf("origin saw %d requests after %d waits, want 2 and 1", got, len(sleeps.got()))
		}
	})
}

func awaitGet(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Get did not return after its context was cancelled")
		return nil
	}
}

// TestGetHeaders checks what goes on the wire: defaults, caller headers
// over them, and refusal of bad caller headers before anything is sent.
func TestGetHeaders(t *testing.T) {
	tests := []struct {
		name    string
		headers map[string]string
		want    map[string]string // header → value on the wire; "" means absent
	}{
		{name: "defaults", want: map[string]string{"User-Agent": fetch.DefaultUserAgent(), "Accept": fetch.DefaultAccept}},
		{name: "caller overrides the defaults", headers: map[string]string{"USER-AGENT": "mine/1", "accept": "text/plain"},
			want: map[string]string{"User-Agent": "mine/1", "Accept": "text/plain"}},
		{name: "extra headers, values trimmed", headers: map[string]string{"Authorization": " Bearer t ", "X-Trace": "1"},
			want: map[string]string{"Authorization": "Bearer t", "X-Trace": "1", "Accept": fetch.DefaultAccept}},
		{name: "conditional headers belong to the cache", headers: map[string]string{"If-None-Match": `"caller"`, "if-modified-since": "Sun, 29 Nov 2026 00:00:00 GMT"},
			want: map[string]string{"If-None-Match": "", "If-Modified-Since": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := fetchenv.New(t, testenv.Status(200, nil, "ok"), fetchenv.Options{Fetch: fetch.Options{Pacer: fetchenv.NoPacer{}}})
			if _, err := h.Fetcher.Get(fetchenv.Ctx(t), h.URL("origin.test", "/"), fetch.GetOptions{Headers: tt.headers}); err != nil {
				t.Fatal(err)
			}
			seen := h.Origin.Requests()[0].Header
			got := map[string]string{}
			for name := range tt.want {
				got[name] = seen.Get(name)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("headers on the wire (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("refused headers", func(t *testing.T) {
		h := fetchenv.New(t, testenv.Status(200, nil, "ok"), fetchenv.Options{})
		_, err := h.Fetcher.Get(fetchenv.Ctx(t), h.URL("origin.test", "/"), fetch.GetOptions{Headers: map[string]string{"Host": "elsewhere.test"}})
		if !errors.Is(err, guard.ErrInvalidOptions) || fetch.Retryable(err) {
			t.Errorf("err = %v, want guard.ErrInvalidOptions, not retryable", err)
		}
		if h.Origin.Count() != 0 {
			t.Errorf("a request was sent")
		}
	})
}

// TestGetDocument checks the document's fields after a redirect.
func TestGetDocument(t *testing.T) {
	mux := http.NewServeMux()
	h := fetchenv.New(t, mux, fetchenv.Options{Fetch: fetch.Options{Pacer: fetchenv.NoPacer{}}})
	mux.Handle("/start", testenv.Redirect(http.StatusMovedPermanently, h.URL("a.test", "/feed.json")))
	mux.Handle("/feed.json", testenv.Status(200, map[string]string{
		"Content-Type":  " text/plain; charset=utf-8 ",
		"ETag":          `W/"abc"`,
		"Last-Modified": "Sun, 29 Nov 2026 10:00:00 GMT",
	}, `{"version": "https://jsonfeed.org/version/1.1", "items": []}`))
	doc, err := h.Fetcher.Get(fetchenv.Ctx(t), h.URL("origin.test", "/start"), fetch.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := fetch.Document{
		URL:          h.URL("a.test", "/feed.json"),
		StatusCode:   200,
		ContentType:  "text/plain; charset=utf-8",
		Kind:         fetch.KindJSONFeed,
		ETag:         `W/"abc"`,
		LastModified: "Sun, 29 Nov 2026 10:00:00 GMT",
		Attempts:     1,
		LeftOrigin:   true, // origin.test redirected to a.test
	}
	ignore := cmp.Options{cmpopts.IgnoreFields(fetch.Document{}, "Blob"), cmpopts.IgnoreUnexported(fetch.Document{})}
	if diff := cmp.Diff(want, *doc, ignore); diff != "" {
		t.Errorf("document (-want +got):\n%s", diff)
	}
	const body = `{"version": "https://jsonfeed.org/version/1.1", "items": []}`
	if got := fetchenv.ReadDoc(t, doc); got != body || doc.Blob.Fingerprint != fetchenv.SHA([]byte(body)) || doc.Blob.Size != int64(len(body)) {
		t.Errorf("body = %q, blob = %+v", got, doc.Blob)
	}
}
