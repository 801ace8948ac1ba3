//go:build linux

package main

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/replicator-go/replicator/internal/testenv"
)

// hostileKind is one kind of origin behaviour in the hostile suite.
type hostileKind struct {
	name   string
	weight int // share of the commands, out of 100
	hosts  int // host names serving this kind
	// want is the outcome every command of this kind must end with while
	// the suite runs: "blob_available", a fetch_failed reason, or
	// "pending" for kinds that fail transiently forever (they must get no
	// fact at all).
	want string
	// handler serves the kind; nil for kinds hostileOrigin serves itself.
	handler http.Handler
	// loop hosts redirect to the next host of the kind.
	loop bool
}

// hostileInterval is REPLICATOR_MIN_HOST_INTERVAL_SECONDS in this mode.
const hostileInterval = 100 * time.Millisecond

// hostileTimeout is each command's timeout_seconds: the per-operation
// bound that ends a hanging origin.
const hostileTimeout = 5.0

func hostileKinds(bomb []byte) []hostileKind {
	huge := int64(100 << 20)
	return []hostileKind{
		{name: "healthy", weight: 56, hosts: 20, want: "blob_available", handler: fixedBody(1024)},
		// Slow but finite: ten pieces 200 ms apart, inside every bound.
		{name: "trickle", weight: 4, hosts: 1, want: "blob_available", handler: testenv.Trickle([]byte(strings.Repeat("t", 100)), 200*time.Millisecond, 10)},
		// A byte a second for ever: only the whole-fetch bound ends it.
		{name: "drip", weight: 4, hosts: 1, want: "pending", handler: testenv.Trickle([]byte("d"), time.Second, 3600)},
		{name: "hang", weight: 4, hosts: 1, want: "pending", handler: testenv.Hang()},
		{name: "redirect-self", weight: 3, hosts: 1, want: "not_fetchable", loop: true},
		{name: "redirect-pair", weight: 3, hosts: 2, want: "not_fetchable", loop: true},
		{name: "gzip-bomb", weight: 3, hosts: 1, want: "too_large", handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(bomb)
		})},
		{name: "100MB-length", weight: 2, hosts: 1, want: "too_large", handler: testenv.Body(huge, true)},
		{name: "100MB-stream", weight: 2, hosts: 1, want: "too_large", handler: testenv.Body(huge, false)},
		{name: "bad-chunked", weight: 3, hosts: 1, want: "pending", handler: testenv.BadChunked()},
		{name: "truncated", weight: 2, hosts: 1, want: "pending", handler: testenv.Raw("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nonly this")},
		{name: "not-http", weight: 1, hosts: 1, want: "pending", handler: testenv.Raw("SSH-2.0-OpenSSH_9.6\r\n\r\n")},
		{name: "header-flood", weight: 2, hosts: 1, want: "pending", handler: testenv.ManyHeaders(100000)},
		{name: "429-storm", weight: 6, hosts: 3, want: "pending", handler: testenv.Status(http.StatusTooManyRequests, nil, "slow down")},
		{name: "429-retry-after", weight: 3, hosts: 1, want: "pending", handler: testenv.Status(http.StatusTooManyRequests, map[string]string{"Retry-After": "5"}, "slow down")},
		{name: "not-found", weight: 2, hosts: 1, want: "http_status", handler: http.NotFoundHandler()},
	}
}

// gzipBomb is a gzip stream of decoded zero bytes.
func gzipBomb(decoded int) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	zeros := make([]byte, 1<<20)
	for left := decoded; left > 0; left -= len(zeros) {
		zw.Write(zeros[:min(left, len(zeros))])
	}
	zw.Close()
	return buf.Bytes()
}

// hostileRow is one kind's outcome counts.
type hostileRow struct {
	kind     hostileKind
	commands int
	outcomes map[string]int // "blob_available", reasons, "pending"
	requests int
	minGap   time.Duration // smallest gap on any host of the kind
	// minAfterRefusal is the smallest gap after a 429 (-1 when none).
	minAfterRefusal time.Duration
}

type hostileResult struct {
	rows       []hostileRow
	peakRSS    int64
	took       time.Duration
	healthyAll bool
	wrong      []string
	gapsOK     bool
	refusalOK  bool
	unstamped  int
}

// runHostile mixes healthy origins with hostile ones and checks the
// worker's memory, spacing and that every healthy command completes.
func runHostile(ctx context.Context, b *bench) error {
	n := cmp.Or(b.o.commands, 1000)
	fmt.Fprintf(b.out, "%d commands, timeout_seconds %.0f, host interval %s, REPLICATOR_MAX_FETCH_SECONDS 15, reclaim after 10 s\n",
		n, hostileTimeout, hostileInterval)
	var errs []string
	var peaks []float64
	for run := 1; run <= b.o.runs; run++ {
		r, err := b.hostileOnce(ctx, run, n)
		if err != nil {
			return fmt.Errorf("run %d: %w", run, err)
		}
		peaks = append(peaks, float64(r.peakRSS))
		fmt.Fprintf(b.out, "run %d: ran %.1fs; worker peak RSS %s; requests timed by the handler for want of a kernel stamp: %d\n",
			run, r.took.Seconds(), mib(r.peakRSS), r.unstamped)
		for _, row := range r.rows {
			after := "-"
			if row.minAfterRefusal >= 0 {
				after = ms(row.minAfterRefusal)
			}
			fmt.Fprintf(b.out, "  %-16s %4d cmds  want %-14s got %-40s requests %5d  min gap %9s  after a 429 %9s\n",
				row.kind.name, row.commands, row.kind.want, countSummary(row.outcomes), row.requests, ms(row.minGap), after)
		}
		fmt.Fprintf(b.out, "run %d: peak RSS < 128 MiB %s; every gap ≥ %s %s; gap after a 429 ≥ 2 s (5 s with Retry-After) %s; healthy all stored %s; outcomes as expected %s\n",
			run, verdict(r.peakRSS < memBar), hostileInterval, verdict(r.gapsOK), verdict(r.refusalOK), verdict(r.healthyAll), verdict(len(r.wrong) == 0))
		if r.peakRSS >= memBar {
			errs = append(errs, fmt.Sprintf("run %d: peak RSS %s", run, mib(r.peakRSS)))
		}
		if !r.gapsOK || !r.refusalOK {
			errs = append(errs, fmt.Sprintf("run %d: spacing", run))
		}
		if !r.healthyAll {
			errs = append(errs, fmt.Sprintf("run %d: healthy commands left undone", run))
		}
		if len(r.wrong) > 0 {
			errs = append(errs, fmt.Sprintf("run %d: %s", run, strings.Join(r.wrong, "; ")))
		}
	}
	fmt.Fprintf(b.out, "bar: hostile mix peak RSS < 128 MiB: median %s %s\n", mib(int64(median(peaks))), verdict(median(peaks) < memBar))
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func (b *bench) hostileOnce(ctx context.Context, run, n int) (*hostileResult, error) {
	ctx, cancel, err := b.begin(ctx, true)
	if err != nil {
		return nil, err
	}
	defer cancel()
	kinds := hostileKinds(gzipBomb(256 << 20))
	byHost := map[string]*hostileKind{}
	hostsOf := map[string][]string{}
	for i := range kinds {
		k := &kinds[i]
		for j := range k.hosts {
			h := strings.ToLower(fmt.Sprintf("%s-%d.test", k.name, j))
			byHost[h] = k
			hostsOf[k.name] = append(hostsOf[k.name], h)
		}
	}
	var o *origin
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := hostOf(r)
		k := byHost[host]
		switch {
		case k == nil:
			http.NotFound(w, r)
		case k.loop:
			hs := hostsOf[k.name]
			next := hs[(slices.Index(hs, host)+1)%len(hs)]
			http.Redirect(w, r, o.url(next, r.URL.Path), http.StatusFound)
		default:
			k.handler.ServeHTTP(w, r)
		}
	})
	o, err = startOrigin(handler, true)
	if err != nil {
		return nil, err
	}
	defer o.close()

	// Commands by weight, interleaved: kind i takes its share of every
	// hundred.
	var slots []int
	for i, k := range kinds {
		for range k.weight {
			slots = append(slots, i)
		}
	}
	timeout := hostileTimeout
	cmds := make([]*command, n)
	count := make([]int, len(kinds))
	for i := range cmds {
		ki := slots[i%len(slots)]
		k := kinds[ki]
		hs := hostsOf[k.name]
		host := hs[count[ki]%len(hs)]
		count[ki]++
		cmds[i] = &command{id: fmt.Sprintf("hostile-%d-%04d", run, i), kind: k.name, timeout: &timeout,
			url: o.url(host, fmt.Sprintf("/%s/%d", k.name, i))}
	}
	slices.SortStableFunc(cmds, func(a, b *command) int { return strings.Compare(a.id, b.id) })
	if err := publish(ctx, b.client, cmds); err != nil {
		return nil, err
	}
	w, err := b.startWorker(fmt.Sprintf("hostile-%d", run), b.workerEnv(
		fmt.Sprintf("REPLICATOR_MIN_HOST_INTERVAL_SECONDS=%g", hostileInterval.Seconds()),
		"REPLICATOR_MAX_FETCH_TIMEOUT_SECONDS=10", "REPLICATOR_MAX_FETCH_SECONDS=15",
		"REPLICATOR_CLAIM_MIN_IDLE_MS=10000",
		"REPLICATOR_BLOB_DIR="+filepath.Join(b.dir, "blobs-hostile")))
	if err != nil {
		return nil, err
	}
	defer w.kill()
	start := time.Now()
	want := map[string]string{}
	for _, k := range kinds {
		want[k.name] = k.want
	}
	oc := newOutcomes()
	// Run until every command that can finish has, then a little longer
	// so the retries of the others are seen too; at most three minutes.
	var doneAt time.Time
	err = waitUntil(ctx, 3*time.Minute, 250*time.Millisecond, func() (bool, error) {
		if w.exited() {
			return false, fmt.Errorf("worker exited: %v: %s", w.err, w.tail(800))
		}
		if err := oc.poll(ctx, b.client); err != nil {
			return false, err
		}
		for _, c := range cmds {
			if want[c.kind] != "pending" && len(oc.facts[c.id]) == 0 {
				return false, nil
			}
		}
		if doneAt.IsZero() {
			doneAt = time.Now()
		}
		return time.Since(doneAt) > 15*time.Second, nil
	})
	if err != nil && !errors.Is(err, errNotDone) {
		return nil, err
	}
	res := &hostileResult{peakRSS: w.peakRSS(), took: time.Since(start), healthyAll: true, gapsOK: true, refusalOK: true}
	if err := w.stop(40 * time.Second); err != nil {
		return nil, err
	}
	if err := oc.poll(ctx, b.client); err != nil {
		return nil, err
	}
	res.unstamped = o.stats().unstamped
	for _, p := range o.closePairs(hostileInterval) {
		fmt.Fprintf(b.out, "  gap under the interval: %s\n", p)
	}
	for i, k := range kinds {
		row := hostileRow{kind: k, commands: count[i], outcomes: map[string]int{}, minGap: -1, minAfterRefusal: -1}
		for _, h := range hostsOf[k.name] {
			l := o.host(h)
			row.requests += l.n
			if l.minGap >= 0 && (row.minGap < 0 || l.minGap < row.minGap) {
				row.minGap = l.minGap
			}
			if l.minGapRefused >= 0 && (row.minAfterRefusal < 0 || l.minGapRefused < row.minAfterRefusal) {
				row.minAfterRefusal = l.minGapRefused
			}
		}
		res.rows = append(res.rows, row)
	}
	rowOf := map[string]*hostileRow{}
	for i := range res.rows {
		rowOf[res.rows[i].kind.name] = &res.rows[i]
	}
	for _, c := range cmds {
		row := rowOf[c.kind]
		got := "pending"
		if fs := oc.facts[c.id]; len(fs) > 0 {
			got = fs[0].event
			if got == "fetch_failed" {
				got = fs[0].reason
			}
			for _, f := range fs[1:] {
				if f.event != fs[0].event || f.reason != fs[0].reason {
					res.wrong = append(res.wrong, fmt.Sprintf("%s got two different facts", c.id))
				}
			}
		}
		row.outcomes[got]++
		if got != row.kind.want {
			if row.kind.want == "blob_available" {
				res.healthyAll = false
			}
			if len(res.wrong) < 5 {
				res.wrong = append(res.wrong, fmt.Sprintf("%s (%s) ended %s, want %s", c.id, c.kind, got, row.kind.want))
			}
		}
	}
	for _, row := range res.rows {
		if row.minGap >= 0 && row.minGap < hostileInterval {
			res.gapsOK = false
		}
		floor := 2 * time.Second
		if row.kind.name == "429-retry-after" {
			floor = 5 * time.Second
		}
		if row.minAfterRefusal >= 0 && row.minAfterRefusal < floor {
			res.refusalOK = false
		}
	}
	return res, nil
}
