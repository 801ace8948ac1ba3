//go:build linux

package main

import (
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/replicator-go/replicator/contentfetch"
)

// waves returns completion times, in ns, of n commands done in waves of
// conc, one every delay, the first at delay.
func waves(n, conc int, delay time.Duration) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i/conc+1) * int64(delay)
	}
	return out
}

func TestSteadyRate(t *testing.T) {
	const delay = 500 * time.Millisecond
	tests := []struct {
		name string
		done []int64
		skip int
		want float64
	}{
		{name: "none", done: nil, skip: 16, want: 0},
		{name: "one", done: []int64{5}, skip: 16, want: 0},
		{name: "perfect waves of 16", done: waves(16*12, 16, delay), skip: 16, want: 32},
		{name: "perfect waves of 1024", done: waves(1024*7, 1024, delay), skip: 1024, want: 2048},
		// First to last completion would say 16×11/(5.5 s) = 32 + a
		// wave's worth over too short a span.
		{name: "without skipping, waves overstate", done: waves(16*12, 16, delay), skip: 0, want: float64(16*12-1) / 5.5},
		{name: "even flow", done: []int64{0, 1e9, 2e9, 3e9, 4e9}, skip: 1, want: 1},
		{name: "skip shrinks to fit", done: []int64{0, 1e9, 3e9}, skip: 10, want: 1},
		{name: "order does not matter", done: []int64{3e9, 0, 2e9, 1e9, 4e9}, skip: 1, want: 1},
		{name: "all at once", done: []int64{7, 7, 7}, skip: 0, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := steadyRate(tt.done, tt.skip); math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("steadyRate = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSteadyWindow(t *testing.T) {
	// Waves of 4 at 1, 2, 3, 4 and 5 s: from the end of the first wave to
	// the end of the fourth, 12 completions.
	from, to, n := steadyWindow(waves(20, 4, time.Second), 4)
	if from != 1e9 || to != 4e9 || n != 12 {
		t.Errorf("steadyWindow = %d, %d, %d; want 1e9, 4e9, 12", from, to, n)
	}
	if from, to, n := steadyWindow([]int64{9}, 1); from != 0 || to != 0 || n != 0 {
		t.Errorf("steadyWindow of one = %d, %d, %d; want zeros", from, to, n)
	}
}

func TestMeanInFlight(t *testing.T) {
	d := &delayedOrigin{samples: []inFlightSample{{at: 1, n: 100}, {at: 2, n: 10}, {at: 3, n: 20}, {at: 4, n: 1000}}}
	if got := d.meanInFlight(2, 3); got != 15 {
		t.Errorf("meanInFlight(2, 3) = %v, want 15", got)
	}
	if got := d.meanInFlight(5, 9); got != 0 {
		t.Errorf("meanInFlight with no sample = %v, want 0", got)
	}
}

func TestLBArithmetic(t *testing.T) {
	p := lbPoint{concurrency: 1024, delay: 500 * time.Millisecond,
		worker: lbSide{commands: 12288, perSec: 1945.6, cpu: 1.2288},
		bare:   lbSide{commands: 12288, perSec: 2027.52}}
	if got := p.ideal(); got != 2048 {
		t.Errorf("ideal = %v, want 2048", got)
	}
	if got := p.share(p.worker.perSec); math.Abs(got-0.95) > 1e-9 {
		t.Errorf("worker share = %v, want 0.95", got)
	}
	if got := p.worker.perCommand(p.worker.cpu); got != 100*time.Microsecond {
		t.Errorf("CPU per command = %v, want 100µs", got)
	}
	if got := (lbSide{}).perCommand(3); got != 0 {
		t.Errorf("CPU per command of no commands = %v, want 0", got)
	}
	if got := (lbPoint{concurrency: 4}).ideal(); got != 0 {
		t.Errorf("ideal with no delay = %v, want 0", got)
	}
	// 5 s at 2,048/s plus the two skipped waves.
	if got := lbCommands(1024, 500*time.Millisecond, 5*time.Second); got != 10240+2048 {
		t.Errorf("lbCommands(1024) = %d, want %d", got, 10240+2048)
	}
	if got := lbCommands(16, 500*time.Millisecond, 5*time.Second); got != 160+32 {
		t.Errorf("lbCommands(16) = %d, want %d", got, 160+32)
	}
	// A delay longer than steady ÷ lbMinWaves: lbMinWaves whole waves
	// measured, not a part of one.
	if got := lbCommands(16384, 8*time.Second, 5*time.Second); got != 6*16384 {
		t.Errorf("lbCommands(16384, 8s) = %d, want %d", got, 6*16384)
	}
	if got := lbCommands(4096, 2*time.Second, 5*time.Second); got != 6*4096 {
		t.Errorf("lbCommands(4096, 2s) = %d, want %d", got, 6*4096)
	}
	for _, tt := range []struct {
		worker, bare float64
		want         bool
	}{
		{0.95, 0.99, true},  // 90 % of ideal is enough
		{0.90, 0.99, true},  // the bound itself
		{0.80, 0.79, true},  // short of 90 %, as good as the bare loop
		{0.80, 0.80, true},  // the same share
		{0.85, 0.95, false}, // short of both
	} {
		if got := lbBarMet(tt.worker, tt.bare); got != tt.want {
			t.Errorf("lbBarMet(%v, %v) = %v, want %v", tt.worker, tt.bare, got, tt.want)
		}
	}
}

func TestMedianPoint(t *testing.T) {
	mk := func(rate float64, rss int64) lbPoint {
		return lbPoint{concurrency: 256, delay: time.Second,
			worker: lbSide{commands: 100, perSec: rate, peakRSS: rss, lateMax: time.Duration(rss)},
			bare:   lbSide{commands: 100, perSec: rate * 2}}
	}
	got := medianPoint([]lbPoint{mk(250, 30), mk(240, 10), mk(255, 20)})
	want := lbPoint{concurrency: 256, delay: time.Second,
		worker: lbSide{commands: 100, perSec: 250, peakRSS: 20, lateMax: 20},
		bare:   lbSide{commands: 100, perSec: 500}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(lbPoint{}, lbSide{})); diff != "" {
		t.Errorf("medianPoint (-want +got):\n%s", diff)
	}
}

func TestParseSweep(t *testing.T) {
	got, err := parseSweep("1024, 16,256,16")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{16, 256, 1024}, got); diff != "" {
		t.Errorf("parseSweep (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"", "16,,32", "0", "-4", "many"} {
		if _, err := parseSweep(bad); err == nil {
			t.Errorf("parseSweep(%q): want an error", bad)
		}
	}
}

// TestDelayedOrigin holds many requests at once: each is answered after
// the delay, not one after another, and the origin counts them in flight.
func TestDelayedOrigin(t *testing.T) {
	const n, delay = 64, 200 * time.Millisecond
	d := &delayedOrigin{delay: delay, body: fixedBody(16)}
	srv := httptest.NewServer(d)
	defer srv.Close()
	tr := &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: n}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			if err := get(t.Context(), c, srv.URL+"/x"); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if took < delay {
		t.Errorf("answered in %s, before the delay %s", took, delay)
	}
	// Served in sequence they would take n × delay; together, about one.
	if took > 10*delay {
		t.Errorf("%d requests took %s: not served together", n, took)
	}
	if got := d.peak.Load(); got < n/2 {
		t.Errorf("peak in flight %d, want most of %d", got, n)
	}
	if got := d.woken.Load(); got != n {
		t.Errorf("%d timers woke, want %d", got, n)
	}
}

// TestDelayedOriginWatch samples what the origin holds while requests wait.
func TestDelayedOriginWatch(t *testing.T) {
	d := &delayedOrigin{delay: 300 * time.Millisecond, body: fixedBody(16)}
	srv := httptest.NewServer(d)
	defer srv.Close()
	stop := d.watch(10 * time.Millisecond)
	from := time.Now().UnixNano()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { get(t.Context(), srv.Client(), srv.URL+"/w") })
	}
	time.Sleep(150 * time.Millisecond)
	mid := time.Now().UnixNano()
	wg.Wait()
	stop()
	if got := d.meanInFlight(mid-50e6, mid); got < 4 {
		t.Errorf("mean in flight while 8 requests wait = %v, want near 8", got)
	}
	if got := d.meanInFlight(from-1e9, from-1); got != 0 {
		t.Errorf("mean in flight before any sample = %v, want 0", got)
	}
}

func TestFetchesEnded(t *testing.T) {
	at := func(ms int64) time.Time { return time.UnixMilli(ms).Add(250 * time.Microsecond) }
	facts := map[string][]fact{
		// Fetched 1 s apart, both published in one burst at 5 s.
		"a": {{entry: "5000-0", event: "blob_available", fetchedAt: at(3000)}},
		"b": {{entry: "5000-1", event: "blob_available", fetchedAt: at(4000)},
			{entry: "7000-0", event: "blob_available", fetchedAt: at(6000)}}, // repeated: the first counts
		"c": {{entry: "5000-2", event: "fetch_failed"}},
		"d": {{entry: "5000-3", event: "blob_available"}}, // no fetched_at
	}
	done, lag, failed := fetchesEnded(facts)
	slices.Sort(done)
	if want := []int64{at(3000).UnixNano(), at(4000).UnixNano()}; !cmp.Equal(done, want) {
		t.Errorf("done = %v, want %v", done, want)
	}
	if want := []time.Duration{time.Second, 2 * time.Second}; !cmp.Equal(lag, want) {
		t.Errorf("lag = %v, want %v", lag, want)
	}
	if failed != 2 {
		t.Errorf("failed = %d, want 2", failed)
	}
}

func TestMarkedPoint(t *testing.T) {
	d := &delayedOrigin{body: fixedBody(8)}
	srv := httptest.NewServer(d)
	defer srv.Close()
	for _, path := range []string{"/lb/1", "/lb/2", "/lb/1", "/lb/1"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if d.again != 2 {
		t.Errorf("requests seen again = %d, want 2", d.again)
	}

	need := uint64(contentfetch.MinOpenFiles(16384))
	p := lbPoint{concurrency: 16384, openFiles: need - 1}
	if !p.filesShort() || p.marked() {
		t.Errorf("short of files, nothing fetched again: filesShort %v, marked %v; want true, false", p.filesShort(), p.marked())
	}
	runs := []lbPoint{p, p, p}
	runs[1].worker.refetched = 9
	if m := medianPoint(runs); !m.marked() {
		t.Error("a point marked in one run of three is not marked in the medians")
	}
	if p := (lbPoint{concurrency: 16384, openFiles: need}); p.filesShort() {
		t.Error("a limit of exactly what is needed is called short")
	}
	if p := (lbPoint{concurrency: 16384, openFiles: 20000}); p.filesShort() {
		t.Error("a limit the worker fits at 16,384 in flight is called short")
	}
}
