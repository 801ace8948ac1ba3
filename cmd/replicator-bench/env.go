//go:build linux

package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/internal/testenv"
)

// bench holds what every mode shares: Redis, the worker binary and the
// scratch directory.
type bench struct {
	o     options
	out   io.Writer // the report
	errw  io.Writer // progress and worker log tails
	redis *testenv.Redis
	url   string // the bench's own loops and client
	// workerURL is the worker's: url, or with -acl the production
	// worker user's.
	workerURL string
	client    rueidis.Client
	bin       string
	dir       string
	ownDir    bool
	seq       int // names worker processes uniquely within the bench
}

// newBench starts (or connects to) Redis, makes the scratch directory and
// builds the worker binary unless one was given.
func newBench(ctx context.Context, o options, stdout, stderr io.Writer) (_ *bench, err error) {
	b := &bench{o: o, out: stdout, errw: stderr}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	if o.scratch != "" {
		b.dir = o.scratch
		if err := os.MkdirAll(b.dir, 0o755); err != nil {
			return nil, err
		}
	} else {
		parent := os.TempDir()
		if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
			parent = "/dev/shm" // blobs on tmpfs, as the throughput bar asks
		}
		if b.dir, err = os.MkdirTemp(parent, "replicator-bench-*"); err != nil {
			return nil, err
		}
		b.ownDir = true
	}
	switch {
	case o.redisURL != "":
		b.url = o.redisURL
	case o.acl != "":
		root, err := moduleRoot(ctx)
		if err != nil {
			return nil, err
		}
		acl := filepath.Join(root, "deploy", "redis-acl", o.acl+".acl")
		if b.redis, err = testenv.NewRedis(testenv.RedisOptions{ACLFile: acl}); err != nil {
			return nil, err
		}
		b.url, b.workerURL = b.redis.AdminURL(), b.redis.URLAs("replicator", "PASSWORD")
	default:
		if b.redis, err = testenv.NewRedis(testenv.RedisOptions{}); err != nil {
			return nil, err
		}
		b.url = b.redis.URL()
	}
	b.workerURL = cmp.Or(b.workerURL, b.url)
	opt, err := rueidis.ParseURL(b.url)
	if err != nil {
		return nil, fmt.Errorf("-redis-url: %w", err)
	}
	opt.DisableCache = true
	if b.client, err = rueidis.NewClient(opt); err != nil {
		return nil, fmt.Errorf("connecting to redis at %s: %w", guard.RedactURL(b.url), err)
	}
	b.bin = o.workerBin
	if b.bin == "" {
		b.bin = filepath.Join(b.dir, "replicator")
		if err := buildWorker(ctx, b.bin, stderr); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (b *bench) close() {
	if b.client != nil {
		b.client.Close()
	}
	if b.redis != nil {
		b.redis.Close()
	}
	if b.ownDir && !b.o.keep {
		os.RemoveAll(b.dir)
	} else if b.dir != "" {
		fmt.Fprintf(b.errw, "replicator-bench: scratch dir kept at %s\n", b.dir)
	}
}

// buildWorker builds ./cmd/replicator of the module the current directory
// is in, without the race detector: the figures are the real binary's.
func buildWorker(ctx context.Context, out string, stderr io.Writer) error {
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/replicator")
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/replicator: %w", err)
	}
	return nil
}

// The -acl values: the files of deploy/redis-acl.
const (
	aclMinimal = "minimal"
	aclFull    = "full"
)

// moduleRoot is the directory of the replicator module the current
// directory is in.
func moduleRoot(ctx context.Context) (string, error) {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("finding the module (run from inside the repository, or pass -worker): %w", err)
	}
	if p := strings.TrimSpace(string(gomod)); p == "" || p == os.DevNull {
		return "", errors.New("not inside the replicator module: run from the repository, or pass -worker")
	}
	return filepath.Dir(strings.TrimSpace(string(gomod))), nil
}

// reset empties the bench's Redis database before a run.
func (b *bench) reset(ctx context.Context) error {
	return b.client.Do(ctx, b.client.B().Flushdb().Build()).Error()
}

// begin starts one run: a context bounded by -timeout, an empty database
// and, with group, the worker's consumer group on the command stream.
func (b *bench) begin(ctx context.Context, group bool) (context.Context, context.CancelFunc, error) {
	ctx, cancel := context.WithTimeout(ctx, b.o.timeout)
	err := b.reset(ctx)
	if err == nil && group {
		err = createGroup(ctx, b.client)
	}
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return ctx, cancel, nil
}

// progress prints a line on stderr with -v.
func (b *bench) progress(format string, args ...any) {
	if b.o.verbose {
		fmt.Fprintf(b.errw, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
	}
}

// printMachine describes the machine the figures come from.
func (b *bench) printMachine() {
	model := "unknown CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	mem := ""
	if kb := procField("/proc/meminfo", "MemTotal"); kb > 0 {
		mem = fmt.Sprintf(", %.1f GiB RAM", float64(kb)/(1<<20))
	}
	redisVer := "redis (external)"
	if b.redis != nil {
		if out, err := exec.Command("redis-server", "--version").Output(); err == nil {
			redisVer = strings.TrimSpace(string(out))
			if i := strings.Index(redisVer, " sha="); i > 0 {
				redisVer = redisVer[:i]
			}
		}
	}
	fmt.Fprintf(b.out, "machine: %d CPUs (%s)%s, %s/%s, %s; %s; blobs under %s\n",
		runtime.NumCPU(), model, mem, runtime.GOOS, runtime.GOARCH, runtime.Version(), redisVer, b.dir)
}

// redisCPU is the CPU seconds Redis has used (INFO cpu), 0 if unknown.
func (b *bench) redisCPU(ctx context.Context) float64 {
	info, err := b.client.Do(ctx, b.client.B().Info().Section("cpu").Build()).ToString()
	if err != nil {
		return 0
	}
	var total float64
	for line := range strings.SplitSeq(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return total
}

// redisCommandStats returns Redis's per-command time since the last
// CONFIG RESETSTAT, busiest first, one "name calls usec" entry each.
func (b *bench) redisCommandStats(ctx context.Context) []string {
	info, err := b.client.Do(ctx, b.client.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		return nil
	}
	type stat struct {
		name        string
		calls, usec int64
	}
	var stats []stat
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		st := stat{name: strings.TrimPrefix(name, "cmdstat_")}
		for kv := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				st.calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				st.usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		stats = append(stats, st)
	}
	slices.SortFunc(stats, func(a, b stat) int { return cmp.Compare(b.usec, a.usec) })
	out := make([]string, len(stats))
	for i, st := range stats {
		out[i] = fmt.Sprintf("%s calls=%d usec=%d", st.name, st.calls, st.usec)
	}
	return out
}

func (b *bench) resetRedisStats(ctx context.Context) {
	b.client.Do(ctx, b.client.B().ConfigResetstat().Build())
}

// selfCPU is the CPU seconds this process has used.
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// procField reads a "Name:   123 kB" line of a /proc status-like file and
// returns the number (kB for memory fields), or 0.
func procField(path, name string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != name {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			return 0
		}
		n, _ := strconv.ParseInt(fields[0], 10, 64)
		return n
	}
	return 0
}

// workerProc is one running `replicator worker` process.
type workerProc struct {
	name    string
	env     []string
	logPath string
	metrics string // host:port of /metrics and /healthz

	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error // set when done closes
}

// workerEnv is the environment every worker gets: this bench's Redis, the
// loopback origin allowed and its host names resolved, groups starting at
// the beginning of the stream (commands are often queued first), INFO logs.
func (b *bench) workerEnv(extra ...string) []string {
	env := []string{
		"REPLICATOR_REDIS_URL=" + b.workerURL,
		"REPLICATOR_ALLOW_CIDRS=127.0.0.0/8",
		"REPLICATOR_RESOLVE=" + benchResolve,
		"REPLICATOR_CONSUMER_START_ID=0",
		"REPLICATOR_LOG_LEVEL=INFO",
	}
	if b.o.concurrency > 0 {
		env = append(env, "REPLICATOR_CONCURRENCY="+strconv.Itoa(b.o.concurrency))
	}
	if b.o.acl == aclFull {
		env = append(env, "REPLICATOR_FLEET_PACING=on")
	}
	return append(env, extra...)
}

// startWorker starts a worker named name (its consumer name) with env on
// top of the machine's environment minus any REPLICATOR_* variable. Its
// logs go to a file in the scratch dir. The process dies with the bench.
func (b *bench) startWorker(name string, env []string) (*workerProc, error) {
	b.seq++
	port, err := testenv.FreePort()
	if err != nil {
		return nil, err
	}
	p := &workerProc{
		name:    name,
		env:     env,
		logPath: filepath.Join(b.dir, fmt.Sprintf("worker-%03d-%s.log", b.seq, name)),
		metrics: "127.0.0.1:" + strconv.Itoa(port),
	}
	if err := p.start(b.bin); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *workerProc) start(bin string) error {
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, "worker")
	cmd.Env = append(cleanEnv(), p.env...)
	cmd.Env = append(cmd.Env, "REPLICATOR_CONSUMER_NAME="+p.name, "REPLICATOR_METRICS_ADDR="+p.metrics)
	cmd.Stdout, cmd.Stderr = f, f
	// The worker must never outlive the bench, whatever ends it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("starting worker %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.log, p.done, p.err = cmd, f, done, nil
	go func() {
		err := cmd.Wait()
		f.Close()
		p.err = err // read only once done is closed
		close(done)
	}()
	return nil
}

// cleanEnv is this process's environment without REPLICATOR_* variables,
// so the machine's settings never reach a measured worker.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REPLICATOR_") && !strings.HasPrefix(kv, "STORAGE_EMULATOR_HOST=") {
			out = append(out, kv)
		}
	}
	return out
}

// restart starts a killed worker again with the same name and settings.
func (p *workerProc) restart(bin string) error {
	select {
	case <-p.done:
	default:
		return fmt.Errorf("worker %s is still running", p.name)
	}
	return p.start(bin)
}

func (p *workerProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitHealthy waits until /healthz answers 200: the group exists, Redis
// answers and the policy replay is done.
func (p *workerProc) waitHealthy(ctx context.Context, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		if p.exited() {
			return fmt.Errorf("worker %s exited at start-up: %v (log: %s)", p.name, p.err, p.tail(800))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.metrics+"/healthz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("worker %s not healthy within %s (log: %s)", p.name, within, p.tail(800))
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// peakRSS is the process's peak resident set size (VmHWM), in bytes; 0
// once it has exited.
func (p *workerProc) peakRSS() int64 {
	if p.exited() {
		return 0
	}
	return procField(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid), "VmHWM") << 10
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *workerProc) kill() {
	if p.exited() {
		return
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM and waits up to within for a clean exit, then kills.
// It returns an error unless the worker exited 0.
func (p *workerProc) stop(within time.Duration) error {
	if p.exited() {
		if p.err != nil {
			return fmt.Errorf("worker %s had exited: %v", p.name, p.err)
		}
		return nil
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(within):
		p.kill()
		return fmt.Errorf("worker %s did not stop within %s of SIGTERM", p.name, within)
	}
	if p.err != nil {
		return fmt.Errorf("worker %s: %v", p.name, p.err)
	}
	return nil
}

// tail returns the last n bytes of the worker's log.
func (p *workerProc) tail(n int64) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(st.Size()-n, 0)
	buf := make([]byte, st.Size()-off)
	f.ReadAt(buf, off)
	return string(buf)
}

// countLog counts log lines containing every one of subs.
func countLog(path string, subs ...string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
next:
	for sc.Scan() {
		line := sc.Text()
		for _, s := range subs {
			if !strings.Contains(line, s) {
				continue next
			}
		}
		n++
	}
	return n
}

// workers is a set of running worker processes.
type workers []*workerProc

func (ws workers) peakRSS() int64 {
	var m int64
	for _, w := range ws {
		m = max(m, w.peakRSS())
	}
	return m
}

// stopAll stops every worker at once (SIGTERM, then SIGKILL past within).
func (ws workers) stopAll(within time.Duration) error {
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() {
			if err := w.stop(within); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// cpu is the CPU seconds the workers used, counting only those that have
// exited (a killed and restarted worker counts its last life only).
func (ws workers) cpu() float64 {
	var s float64
	for _, w := range ws {
		if w.exited() && w.cmd.ProcessState != nil {
			s += (w.cmd.ProcessState.UserTime() + w.cmd.ProcessState.SystemTime()).Seconds()
		}
	}
	return s
}

func (ws workers) killAll() {
	for _, w := range ws {
		w.kill()
	}
}

func (ws workers) logCount(subs ...string) int {
	n := 0
	for _, w := range ws {
		n += countLog(w.logPath, subs...)
	}
	return n
}
