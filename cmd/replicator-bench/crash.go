//go:build linux

package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// crashConfig sizes one crash-suite run.
type crashConfig struct {
	commands int
	hosts    int
	workers  int
	kills    int
	// publishFor spreads the publishing over this long, so kills land
	// while commands are being read, fetched, stored and announced.
	publishFor time.Duration
	// settle bounds the wait, after the last kill, for every command to
	// be resolved and nothing to be pending.
	settle time.Duration
	seed   uint64
}

// crashResult is what one crash-suite run saw.
type crashResult struct {
	cfg       crashConfig
	kinds     map[string]int // commands published per kind
	kills     int
	took      time.Duration
	facts     int // entries on content.blobs
	deadLets  int // entries on content.fetch.dlq
	byFact    int // commands resolved by a fact (dead letter or not)
	byDLQOnly int // commands resolved by a dead letter alone (malformed frames)
	// unresolved commands have neither; wrong ones ended otherwise than
	// their kind must.
	unresolved []string
	wrong      []string
	// blobs checked (every blob_available, duplicates included) and those
	// whose file is missing or does not hash to the announced fingerprint.
	blobsChecked int
	blobsBad     []string
	strayBlobs   []string // *.bin in a tree whose name is not its sha256
	tempDebris   int      // temp files killed workers left behind
	duplicates   int      // facts beyond one per command
	refetches    int      // origin requests beyond one per path
	skippedDup   int      // deliveries acked by the dedupe key (silent rows)
	trimmed      int      // pending entries found trimmed (silent rows)
	pending      int64    // entries still pending at the end
}

// failed says what, if anything, breaks the suite's promises.
func (r *crashResult) failed() error {
	var errs []string
	if r.kills < r.cfg.kills {
		errs = append(errs, fmt.Sprintf("only %d of %d kills happened", r.kills, r.cfg.kills))
	}
	if len(r.unresolved) > 0 {
		errs = append(errs, fmt.Sprintf("%d commands with neither a fact nor a dead letter (e.g. %s)", len(r.unresolved), first(r.unresolved)))
	}
	if len(r.wrong) > 0 {
		errs = append(errs, fmt.Sprintf("%d commands ended wrongly (e.g. %s)", len(r.wrong), first(r.wrong)))
	}
	if len(r.blobsBad) > 0 {
		errs = append(errs, fmt.Sprintf("%d blob_available facts name bytes that are not stored (e.g. %s)", len(r.blobsBad), first(r.blobsBad)))
	}
	if len(r.strayBlobs) > 0 {
		errs = append(errs, fmt.Sprintf("%d blobs at a final name that is not their sha256 (e.g. %s)", len(r.strayBlobs), first(r.strayBlobs)))
	}
	if r.pending != 0 {
		errs = append(errs, fmt.Sprintf("%d entries still pending", r.pending))
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

func first(xs []string) string {
	if len(xs) == 0 {
		return ""
	}
	return xs[0]
}

func (r *crashResult) print(w io.Writer, run int) {
	fmt.Fprintf(w, "run %d (seed %d): %d commands (%s) over %d hosts, %d workers, %d kill -9 + restart, all resolved in %.1fs\n",
		run, r.cfg.seed, r.cfg.commands, countSummary(r.kinds), r.cfg.hosts, r.cfg.workers, r.kills, r.took.Seconds())
	fmt.Fprintf(w, "  facts %d, dead letters %d; commands resolved by a fact %d, by a dead letter alone %d; unresolved %d; wrong outcome %d\n",
		r.facts, r.deadLets, r.byFact, r.byDLQOnly, len(r.unresolved), len(r.wrong))
	fmt.Fprintf(w, "  blob_available checked against the stored bytes: %d, bad %d; blobs under a wrong name %d; temp files left by kills %d\n",
		r.blobsChecked, len(r.blobsBad), len(r.strayBlobs), r.tempDebris)
	fmt.Fprintf(w, "  duplicate facts %d; re-fetches at the origin %d; silent rows: deliveries acked by the dedupe key %d, trimmed %d; still pending %d\n",
		r.duplicates, r.refetches, r.skippedDup, r.trimmed, r.pending)
}

// countSummary lists counts by name, sorted: "a 3, b 1".
func countSummary(counts map[string]int) string {
	names := make([]string, 0, len(counts))
	for k := range counts {
		names = append(names, k)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s %d", k, counts[k])
	}
	return strings.Join(parts, ", ")
}

// runCrash is the crash suite at full size (or -commands/-kills).
func runCrash(ctx context.Context, b *bench) error {
	cfg := crashConfig{
		commands:   cmp.Or(b.o.commands, 10000),
		hosts:      cmp.Or(b.o.hosts, 100),
		workers:    3,
		kills:      max(b.o.kills, 1),
		publishFor: 20 * time.Second,
		settle:     3 * time.Minute,
	}
	var errs []error
	for run := 1; run <= b.o.runs; run++ {
		cfg.seed = rand.Uint64()
		r, err := b.crashOnce(ctx, cfg)
		if err != nil {
			return fmt.Errorf("run %d: %w", run, err)
		}
		r.print(b.out, run)
		if err := r.failed(); err != nil {
			fmt.Fprintf(b.out, "  FAILED: %v\n", err)
			errs = append(errs, fmt.Errorf("run %d: %w", run, err))
		} else {
			fmt.Fprintln(b.out, "  PASS: every command has a fact or a dead letter, every announced blob is stored with its sha256, nothing pending")
		}
	}
	return errors.Join(errs...)
}

// Command kinds of the crash suite, by index modulo 100.
func crashKind(i int) string {
	switch m := i % 100; {
	case m < 85:
		return "ok"
	case m < 90:
		return "not-found"
	case m < 94:
		return "not-modified"
	case m < 97:
		return "malformed"
	default:
		return "big"
	}
}

// crashBodySizes are the bodies of the kinds that store one.
var crashBodySizes = map[string]int{"ok": 1024, "big": 512 << 10}

func crashOrigin(pad []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind, idx, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		i, _ := strconv.Atoi(idx)
		// A few milliseconds of think time, so kills find fetches in flight.
		delay := time.Duration(i*7%10) * time.Millisecond
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		switch kind {
		case "ok":
			w.Header().Set("Content-Type", "text/plain")
			w.Write(bodyFor(r.URL.Path, crashBodySizes[kind], pad))
		case "big":
			// Streamed in pieces, so a kill can land mid-body.
			body := bodyFor(r.URL.Path, crashBodySizes[kind], pad)
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			for len(body) > 0 {
				k := min(len(body), 64<<10)
				if _, err := w.Write(body[:k]); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				body = body[k:]
				select {
				case <-time.After(10 * time.Millisecond):
				case <-r.Context().Done():
					return
				}
			}
		case "not-found":
			http.NotFound(w, r)
		case "not-modified":
			w.WriteHeader(http.StatusNotModified)
		default:
			http.Error(w, "unexpected path", http.StatusInternalServerError)
		}
	})
}

// crashOnce publishes cfg.commands over cfg.publishFor to cfg.workers
// workers, kills a random worker with SIGKILL at cfg.kills random moments
// (restarting it each time), waits until everything is resolved, then
// checks every promise.
func (b *bench) crashOnce(ctx context.Context, cfg crashConfig) (*crashResult, error) {
	ctx, cancel, err := b.begin(ctx, true)
	if err != nil {
		return nil, err
	}
	defer cancel()
	rng := rand.New(rand.NewPCG(cfg.seed, cfg.seed^0x9e3779b97f4a7c15))
	pad := []byte(strings.Repeat("replicator-bench crash body. ", 32))
	o, err := startOrigin(crashOrigin(pad), false)
	if err != nil {
		return nil, err
	}
	defer o.close()
	hosts := hostNames("crash", cfg.hosts)
	res := &crashResult{cfg: cfg, kinds: map[string]int{}}
	cmds := make([]*command, cfg.commands)
	tag := strconv.FormatUint(cfg.seed%100000, 10)
	for i := range cmds {
		kind := crashKind(i)
		res.kinds[kind]++
		cmds[i] = &command{
			id:        fmt.Sprintf("crash-%s-%05d", tag, i),
			url:       o.url(hosts[i%len(hosts)], fmt.Sprintf("/%s/%d", kind, i)),
			kind:      kind,
			malformed: kind == "malformed",
		}
	}

	blobs := filepath.Join(b.dir, "blobs-crash-"+tag)
	defer os.RemoveAll(blobs)
	env := b.workerEnv(
		"REPLICATOR_MIN_HOST_INTERVAL_SECONDS=0",
		// Entries a killed worker held come back through the reclaim
		// after this long.
		"REPLICATOR_CLAIM_MIN_IDLE_MS=1500",
		"REPLICATOR_READ_BLOCK_MS=1000")
	ws := make(workers, cfg.workers)
	defer func() { ws.killAll() }()
	for i := range ws {
		// Each worker keeps its own tree, as on separate machines; a
		// restarted one finds its tree as the kill left it.
		w, err := b.startWorker(fmt.Sprintf("crash-%s-%d", tag, i),
			append(slices.Clone(env), "REPLICATOR_BLOB_DIR="+filepath.Join(blobs, strconv.Itoa(i))))
		if err != nil {
			return nil, err
		}
		ws[i] = w
	}

	start := time.Now()
	// The publisher spreads the load over publishFor.
	var (
		pubErr error
		wg     sync.WaitGroup
	)
	wg.Go(func() {
		const tick = 50 * time.Millisecond
		steps := max(int(cfg.publishFor/tick), 1)
		per := (len(cmds) + steps - 1) / steps
		for rest := cmds; len(rest) > 0; {
			k := min(per, len(rest))
			if err := publish(ctx, b.client, rest[:k]); err != nil {
				pubErr = err
				return
			}
			rest = rest[k:]
			select {
			case <-time.After(tick):
			case <-ctx.Done():
				pubErr = ctx.Err()
				return
			}
		}
	})
	// The killer: kill moments spread over the publishing and a little
	// after it, while the backlog drains.
	at := make([]time.Duration, cfg.kills)
	span := cfg.publishFor + cfg.publishFor/5
	for i := range at {
		at[i] = cfg.publishFor/20 + time.Duration(rng.Int64N(int64(span)))
	}
	slices.Sort(at)
	var killErr error
	wg.Go(func() {
		for _, t := range at {
			if d := time.Until(start.Add(t)); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					killErr = ctx.Err()
					return
				}
			}
			w := ws[rng.IntN(len(ws))]
			w.kill()
			res.kills++
			b.progress("crash: killed %s (%d/%d)", w.name, res.kills, cfg.kills)
			time.Sleep(time.Duration(rng.Int64N(int64(300 * time.Millisecond))))
			if err := w.restart(b.bin); err != nil {
				killErr = err
				return
			}
		}
	})
	wg.Wait()
	if pubErr != nil {
		return nil, fmt.Errorf("publishing: %w", pubErr)
	}
	if killErr != nil {
		return nil, fmt.Errorf("killing: %w", killErr)
	}
	b.progress("crash: published %d, %d kills; waiting for every command to resolve", len(cmds), res.kills)
	for _, w := range ws {
		// A worker restarted a moment ago must be up before it can be
		// stopped cleanly.
		if err := w.waitHealthy(ctx, 30*time.Second); err != nil {
			return nil, err
		}
	}

	oc := newOutcomes()
	err = waitUntil(ctx, cfg.settle, 200*time.Millisecond, func() (bool, error) {
		for _, w := range ws {
			if w.exited() {
				return false, fmt.Errorf("worker %s exited on its own: %v: %s", w.name, w.err, w.tail(800))
			}
		}
		if err := oc.poll(ctx, b.client); err != nil {
			return false, err
		}
		for _, c := range cmds {
			if !oc.resolved(c) {
				return false, nil
			}
		}
		p, err := pendingCount(ctx, b.client)
		return p == 0, err
	})
	res.took = time.Since(start)
	if err != nil && !errors.Is(err, errNotDone) {
		return nil, err
	}
	// Whatever the wait ended with, stop the workers cleanly, then judge.
	if err := ws.stopAll(30 * time.Second); err != nil {
		return nil, err
	}
	if err := oc.poll(ctx, b.client); err != nil {
		return nil, err
	}
	if res.pending, err = pendingCount(ctx, b.client); err != nil {
		return nil, err
	}
	res.facts, res.deadLets = oc.nFacts, oc.nDLQ
	res.duplicates = oc.duplicateFacts()
	st := o.stats()
	res.refetches = st.refetches
	res.skippedDup = ws.logCount("skipped an already-handled command")
	res.trimmed = ws.logCount("was trimmed from the stream")

	expected := map[string]string{} // command_id -> sha256 of its body
	for _, c := range cmds {
		facts, dls := oc.facts[c.id], oc.dlq[c.entry]
		switch {
		case len(facts) == 0 && len(dls) == 0:
			res.unresolved = append(res.unresolved, c.id)
			continue
		case len(facts) > 0:
			res.byFact++
		default:
			res.byDLQOnly++
		}
		if why := wrongOutcome(c, facts, dls); why != "" {
			res.wrong = append(res.wrong, c.id+": "+why)
		}
		if size, ok := crashBodySizes[c.kind]; ok {
			u, _ := url.Parse(c.url)
			sum := sha256.Sum256(bodyFor(u.Path, size, pad))
			expected[c.id] = hex.EncodeToString(sum[:])
		}
	}
	for id, facts := range oc.facts {
		for _, f := range facts {
			if f.event != "blob_available" {
				continue
			}
			res.blobsChecked++
			if why := checkBlob(f, expected[id]); why != "" {
				res.blobsBad = append(res.blobsBad, id+": "+why)
			}
		}
	}
	res.strayBlobs, res.tempDebris = scanTree(blobs)
	return res, nil
}

// wrongOutcome says how a resolved command ended otherwise than its kind
// must, or "".
func wrongOutcome(c *command, facts []fact, dls []deadLetter) string {
	want := map[string]struct{ event, reason, dlq string }{
		"ok":           {"blob_available", "", ""},
		"big":          {"blob_available", "", ""},
		"not-found":    {"fetch_failed", "http_status", "http_status"},
		"not-modified": {"fetch_failed", "not_modified", ""},
		"malformed":    {"", "", "malformed_frame"},
	}[c.kind]
	for _, f := range facts {
		if f.event != want.event || f.reason != want.reason {
			return fmt.Sprintf("fact %s %s, want %s %s", f.event, f.reason, want.event, want.reason)
		}
	}
	if want.event != "" && len(facts) == 0 {
		// A permanent failure's fact may be lost to a kill only if its
		// dead letter exists; the contract swallows that publish failure.
		if want.dlq == "" || len(dls) == 0 {
			return "no fact"
		}
	}
	for _, d := range dls {
		if d.reason != want.dlq {
			return fmt.Sprintf("dead letter %s, want %q", d.reason, want.dlq)
		}
	}
	if want.dlq != "" && len(dls) == 0 {
		return "no dead letter"
	}
	return ""
}

// checkBlob reads the file a blob_available names and checks its size and
// sha256 against the fact, and the fact against the bytes the origin
// served.
func checkBlob(f fact, want string) string {
	u, err := url.Parse(f.uri)
	if err != nil || u.Scheme != "file" {
		return "blob_uri " + f.uri + " is not a file:// URI"
	}
	data, err := os.ReadFile(u.Path)
	if err != nil {
		return "not stored: " + err.Error()
	}
	sum := sha256.Sum256(data)
	got := hex.EncodeToString(sum[:])
	switch {
	case int64(len(data)) != f.size:
		return fmt.Sprintf("stored %d bytes, fact says %d", len(data), f.size)
	case got != f.fingerprint:
		return "stored bytes hash to " + got + ", fact says " + f.fingerprint
	case want != "" && got != want:
		return "stored bytes are not what the origin served"
	}
	return ""
}

// scanTree checks every *.bin under root is named by its sha256, and
// counts the temp files left behind.
func scanTree(root string) (stray []string, temps int) {
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		name := d.Name()
		switch {
		case strings.HasSuffix(name, ".tmp"):
			temps++
		case strings.HasSuffix(name, ".bin"):
			data, err := os.ReadFile(path)
			sum := sha256.Sum256(data)
			if err != nil || hex.EncodeToString(sum[:])+".bin" != name {
				stray = append(stray, path)
			}
		}
		return nil
	})
	return stray, temps
}
