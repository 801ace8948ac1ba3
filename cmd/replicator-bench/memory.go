//go:build linux

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/replicator-go/replicator/internal/testenv"
)

// memBodies is how many 64 MiB bodies are fetched at once.
const memBodies = 16

// memBodySize is each body's size: exactly the default
// REPLICATOR_MAX_BLOB_BYTES, so every body is stored.
const memBodySize = 64 << 20

// memBar is the peak RSS the worker must stay under.
const memBar = 128 << 20

// runMemory fetches 16 bodies of 64 MiB at once into the local sink, then
// into the gcs sink, and reports the worker's peak RSS (VmHWM). The origin
// holds every response until all 16 requests have arrived, so the 16
// fetches really are concurrent.
func runMemory(ctx context.Context, b *bench) error {
	fmt.Fprintf(b.out, "%d concurrent fetches of %d MiB bodies, one per host, spacing 0; peak RSS is the worker's VmHWM\n",
		memBodies, memBodySize>>20)
	peaks := map[string][]float64{}
	for run := 1; run <= b.o.runs; run++ {
		for _, backend := range []string{"local", "gcs"} {
			r, err := b.memoryOnce(ctx, backend, run)
			if err != nil {
				return fmt.Errorf("%s, run %d: %w", backend, run, err)
			}
			peaks[backend] = append(peaks[backend], float64(r.peakRSS))
			fmt.Fprintf(b.out, "run %d: %-5s peak RSS %s  all %d in flight together: %v  stored %d×%d MiB in %.1fs\n",
				run, backend, mib(r.peakRSS), memBodies, r.together, r.stored, memBodySize>>20, r.took.Seconds())
		}
	}
	var missed []string
	for _, backend := range []string{"local", "gcs"} {
		m := median(peaks[backend])
		fmt.Fprintf(b.out, "bar: %s peak RSS < 128 MiB: median %s %s\n", backend, mib(int64(m)), verdict(m < memBar))
		if m >= memBar {
			missed = append(missed, backend)
		}
	}
	if len(missed) > 0 {
		return fmt.Errorf("bar missed for %s", strings.Join(missed, ", "))
	}
	return nil
}

type memResult struct {
	peakRSS  int64
	together bool // the origin saw all 16 requests before answering any
	stored   int
	took     time.Duration
}

func (b *bench) memoryOnce(ctx context.Context, backend string, run int) (memResult, error) {
	ctx, cancel, err := b.begin(ctx, true)
	if err != nil {
		return memResult{}, err
	}
	defer cancel()
	bar := newBarrier(memBodies, 30*time.Second)
	o, err := startOrigin(bigBody(memBodySize, bar), false)
	if err != nil {
		return memResult{}, err
	}
	defer o.close()
	hosts := hostNames("mem", memBodies)
	env := b.workerEnv("REPLICATOR_MIN_HOST_INTERVAL_SECONDS=0")
	blobs := filepath.Join(b.dir, "blobs-memory-"+backend)
	defer os.RemoveAll(blobs)
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return memResult{}, err
	}
	switch backend {
	case "local":
		env = append(env, "REPLICATOR_BLOB_DIR="+blobs)
	case "gcs":
		emu, stop, err := startGCSChild("bench", blobs)
		if err != nil {
			return memResult{}, err
		}
		defer stop()
		env = append(env, "STORAGE_EMULATOR_HOST="+strings.TrimPrefix(emu, "http://"),
			"REPLICATOR_BLOB_BACKEND=gcs", "REPLICATOR_BLOB_BUCKET=bench",
			// The emulator is slow over a gigabyte at once; the bound
			// guards against a stalled service, not a slow one.
			"REPLICATOR_BLOB_TIMEOUT_SECONDS=600",
			// The upload is spooled to a temp file first; keep it on tmpfs.
			"TMPDIR="+blobs)
	}
	w, err := b.startWorker(fmt.Sprintf("memory-%s-%d", backend, run), env)
	if err != nil {
		return memResult{}, err
	}
	defer w.kill()
	if err := w.waitHealthy(ctx, 30*time.Second); err != nil {
		return memResult{}, err
	}
	cmds := make([]*command, memBodies)
	for i := range cmds {
		cmds[i] = &command{id: fmt.Sprintf("mem-%s-%d-%02d", backend, run, i), url: o.url(hosts[i], fmt.Sprintf("/big/%d/%d", run, i))}
	}
	start := time.Now()
	if err := publish(ctx, b.client, cmds); err != nil {
		return memResult{}, err
	}
	oc := newOutcomes()
	err = waitUntil(ctx, b.o.timeout, 50*time.Millisecond, func() (bool, error) {
		if w.exited() {
			return false, fmt.Errorf("worker exited: %v: %s", w.err, w.tail(800))
		}
		if err := oc.poll(ctx, b.client); err != nil {
			return false, err
		}
		return len(oc.facts) >= memBodies || oc.nDLQ > 0, nil
	})
	if err != nil {
		return memResult{}, err
	}
	r := memResult{peakRSS: w.peakRSS(), together: bar.released(), took: time.Since(start)}
	for _, c := range cmds {
		fs := oc.facts[c.id]
		if len(fs) == 0 || fs[0].event != "blob_available" || fs[0].size != memBodySize {
			return memResult{}, fmt.Errorf("command %s did not store %d bytes: %+v (dead letters %d; log: %s)", c.id, memBodySize, fs, oc.nDLQ, w.tail(800))
		}
		r.stored++
	}
	if err := w.stop(60 * time.Second); err != nil {
		return memResult{}, err
	}
	return r, nil
}

// barrier holds callers until n have arrived (or a timeout passes), so a
// set of requests is answered together.
type barrier struct {
	n       int
	timeout time.Duration
	mu      sync.Mutex
	arrived int
	all     chan struct{}
	ok      bool
}

func newBarrier(n int, timeout time.Duration) *barrier {
	return &barrier{n: n, timeout: timeout, all: make(chan struct{})}
}

func (b *barrier) wait(ctx context.Context) {
	b.mu.Lock()
	b.arrived++
	if b.arrived == b.n {
		b.ok = true
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
	case <-time.After(b.timeout):
	case <-ctx.Done():
	}
}

// released reports whether all n arrived together.
func (b *barrier) released() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ok
}

// bigBody serves size bytes unique to the path, after the barrier. The
// bytes are a path line then a random block repeated: cheap to serve,
// distinct per command.
func bigBody(size int64, bar *barrier) http.Handler {
	block := make([]byte, 1<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range block {
		block[i] = byte(rng.Uint32())
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if bar != nil {
			bar.wait(r.Context())
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", fmt.Sprint(size))
		head := []byte(r.URL.Path + "\n")
		w.Write(head)
		left := size - int64(len(head))
		for left > 0 {
			k := min(left, int64(len(block)))
			if _, err := w.Write(block[:k]); err != nil {
				return
			}
			left -= k
		}
	})
}

// startGCSChild runs fake-gcs-server in a child process (this binary,
// through testenv.ServeGCSChild) with bucket created, keeping objects on
// disk (under tmp), so its memory is never counted as the worker's. It
// returns the server's URL and a function that stops it.
func startGCSChild(bucket, tmp string) (string, func(), error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(cleanEnv(), "TMPDIR="+tmp)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	g, err := testenv.NewGCSProcess(cmd, bucket)
	if err != nil {
		return "", nil, err
	}
	return g.URL, g.Close, nil
}
