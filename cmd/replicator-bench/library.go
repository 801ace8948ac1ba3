//go:build linux

package main

import (
	"bufio"
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/internal/hosts"
	"github.com/replicator-go/replicator/policy"
	"github.com/replicator-go/replicator/sink"
)

// libraryOriginEnv, when set, makes the bench process the library mode's
// origin: fixedBody of the given size on a loopback port, which it prints,
// until its stdin closes. Out of process, so the CPU the clients are
// charged is theirs alone.
const libraryOriginEnv = "REPLICATOR_BENCH_LIBRARY_ORIGIN"

// The library mode's cases: over every host, and at one host, where the
// connections a client keeps per host decide whether it reconnects.
var libraryCases = []libraryCase{
	{1 << 10, 1, libraryHosts},
	{1 << 10, 16, libraryHosts},
	{1 << 10, 16, 1},
	{64 << 10, 1, libraryHosts},
	{64 << 10, 16, libraryHosts},
}

const (
	libraryHosts = 16 // host names the requests go to in turn
	// Bars, as ratios of Get to the guarded net/http client.
	libraryCPUSmall   = 1.25 // CPU/request, 1 KiB bodies at 16 in flight
	libraryRateSmall  = 0.85 // requests/s, 1 KiB bodies at 16 in flight
	libraryCPULarge   = 1.15 // CPU/request, 64 KiB bodies at 16 in flight
	libraryAllocRatio = 2    // allocations/request, every case
	// Bar of the http.Client on fetch.Transport, the same ratio.
	libraryCPUClient = 1.10 // CPU/request, 1 KiB bodies at 16 in flight
)

// libraryClients are the clients compared, net/http first.
var libraryClients = []string{"net/http", "Get", "Get+memory", "Client"}

// libraryClient is one of the two clients compared.
type libraryClient struct {
	name string
	get  func(ctx context.Context, url string) error
	stop func()
}

// libSample is one client's figures over one case of one run.
type libSample struct {
	perSec, cpuUs, allocs, bytes float64
}

// libraryCase names one body size, concurrency and number of hosts.
type libraryCase struct{ size, inFlight, hosts int }

func (c libraryCase) String() string {
	if c.hosts == 1 {
		return fmt.Sprintf("%d KiB, %d in flight, 1 host", c.size>>10, c.inFlight)
	}
	return fmt.Sprintf("%d KiB, %d in flight", c.size>>10, c.inFlight)
}

// runLibrary compares fetch.Fetcher.Get with net/http dialing through the
// same guard, in this process, against an origin in a child process.
func runLibrary(ctx context.Context, b *bench) error {
	results := map[libraryCase]map[string][]libSample{}
	var order []libraryCase
	for run := 1; run <= b.o.runs; run++ {
		var o *libraryOrigin
		for _, c := range libraryCases {
			n := cmp.Or(b.o.commands, 20000)
			if c.size > 1<<10 && b.o.commands == 0 {
				n = 5000
			}
			if o == nil || o.size != c.size {
				if o != nil {
					o.stop()
				}
				var err error
				if o, err = startLibraryOrigin(ctx, c.size); err != nil {
					return err
				}
			}
			if results[c] == nil {
				results[c] = map[string][]libSample{}
				order = append(order, c)
			}
			// Each run starts with another client, so none always
			// inherits the others' garbage or a warmer machine.
			clients := []*libraryClient{guardedNetHTTP(), libraryFetcher(c.size, false), libraryFetcher(c.size, true), libraryHTTPClient(c.size)}
			k := (run - 1) % len(clients)
			clients = append(clients[k:], clients[:k]...)
			for _, cl := range clients {
				s, err := libraryMeasure(ctx, cl, o.urls[:c.hosts], n, c.inFlight)
				cl.stop()
				if err != nil {
					o.stop()
					return fmt.Errorf("%s, %s, run %d: %w", cl.name, c, run, err)
				}
				fmt.Fprintf(b.out, "run %d, %s: %-10s %8.0f req/s %7.1f µs CPU/req %7.1f allocs/req %9.0f B/req\n",
					run, c, cl.name, s.perSec, s.cpuUs, s.allocs, s.bytes)
				results[c][cl.name] = append(results[c][cl.name], s)
			}
		}
		o.stop()
	}

	fmt.Fprintf(b.out, "\nmedians of %d runs; the ratios to net/http are medians of each run's ratio\n", b.o.runs)
	fmt.Fprintf(b.out, "%-30s %-18s %9s %11s %11s %9s\n", "case", "client", "req/s", "µs CPU/req", "allocs/req", "B/req")
	var misses []string
	for _, c := range order {
		base := results[c]["net/http"]
		for _, name := range libraryClients {
			ss := results[c][name]
			fmt.Fprintf(b.out, "%-30s %-18s %9.0f %11.1f %11.1f %9.0f\n", c, name,
				median(mapf(ss, func(s libSample) float64 { return s.perSec })),
				median(mapf(ss, func(s libSample) float64 { return s.cpuUs })),
				median(mapf(ss, func(s libSample) float64 { return s.allocs })),
				median(mapf(ss, func(s libSample) float64 { return s.bytes })))
		}
		ratios := map[string]libSample{}
		for _, name := range libraryClients[1:] {
			ss := results[c][name]
			ratio := func(f func(libSample) float64) float64 {
				rs := make([]float64, len(ss))
				for i := range ss {
					rs[i] = f(ss[i]) / f(base[i])
				}
				return median(rs)
			}
			r := libSample{
				perSec: ratio(func(s libSample) float64 { return s.perSec }),
				cpuUs:  ratio(func(s libSample) float64 { return s.cpuUs }),
				allocs: ratio(func(s libSample) float64 { return s.allocs }),
				bytes:  ratio(func(s libSample) float64 { return s.bytes }),
			}
			ratios[name] = r
			fmt.Fprintf(b.out, "%-30s %-18s %9.2f %11.2f %11.2f %9.2f\n", c, name+"/net/http", r.perSec, r.cpuUs, r.allocs, r.bytes)
		}
		// The bars hold Get with a sink that only hashes, as net/http
		// does: what the library adds, not what keeping a body in memory
		// costs (Get+memory, shown beside it).
		r := ratios["Get"]
		check := func(name string, ok bool, text string) {
			fmt.Fprintf(b.out, "  bar: %s, %s %s\n", c, text, verdict(ok))
			if !ok {
				misses = append(misses, c.String()+" "+name)
			}
		}
		if c.inFlight == 16 && c.size == 1<<10 {
			check("CPU", r.cpuUs <= libraryCPUSmall, fmt.Sprintf("Get's CPU/request ≤ %.2f× net/http's: %.2f", libraryCPUSmall, r.cpuUs))
			check("rate", r.perSec >= libraryRateSmall, fmt.Sprintf("Get's requests/s ≥ %.2f× net/http's: %.2f", libraryRateSmall, r.perSec))
			cr := ratios["Client"].cpuUs
			check("Client CPU", cr <= libraryCPUClient, fmt.Sprintf("Client's CPU/request ≤ %.2f× net/http's: %.2f", libraryCPUClient, cr))
		}
		if c.inFlight == 16 && c.size == 64<<10 {
			check("CPU", r.cpuUs <= libraryCPULarge, fmt.Sprintf("Get's CPU/request ≤ %.2f× net/http's: %.2f", libraryCPULarge, r.cpuUs))
		}
		check("allocations", r.allocs <= libraryAllocRatio, fmt.Sprintf("Get's allocations/request ≤ %d× net/http's: %.2f", libraryAllocRatio, r.allocs))
	}
	if len(misses) > 0 {
		return fmt.Errorf("bar missed: %s", strings.Join(misses, "; "))
	}
	return nil
}

// libraryMeasure warms cl with a request to every host, then sends n
// requests, inFlight at a time, and charges it this process's CPU time and
// the heap's allocation counters over them.
func libraryMeasure(ctx context.Context, cl *libraryClient, urls []string, n, inFlight int) (libSample, error) {
	for i, u := range urls {
		if err := cl.get(ctx, fmt.Sprintf("%s/warm/%d", u, i)); err != nil {
			return libSample{}, err
		}
	}
	// Made beforehand, so neither client is charged for them.
	targets := make([]string, n)
	for i := range targets {
		targets[i] = fmt.Sprintf("%s/doc/%d", urls[i%len(urls)], i)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu0, start := selfCPU(), time.Now()
	var next atomic.Int64
	var first atomic.Pointer[error]
	var wg sync.WaitGroup
	for range inFlight {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n) && ctx.Err() == nil; i = next.Add(1) - 1 {
				if err := cl.get(ctx, targets[i]); err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	wall, cpu := time.Since(start), selfCPU()-cpu0
	runtime.ReadMemStats(&after)
	if err := first.Load(); err != nil {
		return libSample{}, *err
	}
	if err := ctx.Err(); err != nil {
		return libSample{}, err
	}
	return libSample{
		perSec: float64(n) / wall.Seconds(),
		cpuUs:  cpu / float64(n) * 1e6,
		allocs: float64(after.Mallocs-before.Mallocs) / float64(n),
		bytes:  float64(after.TotalAlloc-before.TotalAlloc) / float64(n),
	}, nil
}

// libraryGuard allows the loopback origin and resolves its host names,
// the one guard both clients dial through.
func libraryGuard() *guard.Guard {
	table := map[string][]netip.Addr{}
	for i := range libraryHosts {
		table[libraryHost(i)] = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	}
	return guard.New(guard.Options{
		Allow:    []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Resolver: hosts.Resolver{Table: table},
	})
}

func libraryHost(i int) string { return fmt.Sprintf("lib-%02d.test", i) }

// guardedNetHTTP is net/http as a careful caller would use it: a transport
// with the Fetcher's pool shape (no host kept from keeping every connection
// it used), every connection dialed through the guard,
// the body hashed with sha256 through a pooled buffer (io.Copy would
// allocate 32 KiB per request).
func guardedNetHTTP() *libraryClient {
	_, pool := fetch.Options{}.OpenFiles()
	t := &http.Transport{
		Proxy:               nil,
		DialContext:         libraryGuard().DialContext,
		MaxIdleConns:        pool,
		MaxIdleConnsPerHost: pool,
		IdleConnTimeout:     90 * time.Second,
	}
	cl := hashingClient(&http.Client{Transport: t})
	cl.name = "net/http"
	return cl
}

// hashingClient GETs with c and hashes the body with sha256 through a
// pooled buffer (io.Copy would allocate 32 KiB per request).
func hashingClient(c *http.Client) *libraryClient {
	return &libraryClient{
		stop: c.CloseIdleConnections,
		get: func(ctx context.Context, url string) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return err
			}
			resp, err := c.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			h := sha256.New()
			buf := libraryBufs.Get().(*[]byte)
			defer libraryBufs.Put(buf)
			if _, err := io.CopyBuffer(h, resp.Body, *buf); err != nil {
				return err
			}
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			h.Sum(nil)
			return nil
		},
	}
}

// libraryHTTPClient is an http.Client on fetch.Transport with the guard,
// no spacing and the body bound at size, read as guardedNetHTTP reads it.
func libraryHTTPClient(size int) *libraryClient {
	c := fetch.NewClient(fetch.Options{
		Guard:        libraryGuard(),
		Pacer:        policy.NewLocal(policy.LocalOptions{DefaultInterval: policy.None}),
		Logger:       slog.New(slog.DiscardHandler),
		MaxBodyBytes: int64(size),
	})
	cl := hashingClient(c)
	cl.name = "Client"
	return cl
}

var libraryBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// libraryFetcher is fetch.Fetcher.Get with the guard, no spacing and no
// retries, storing into hashSink ("Get": the body hashed, as net/http
// does) or, with memory, into its default sink, a fresh memory sink per
// Get that keeps the body ("Get+memory").
func libraryFetcher(size int, memory bool) *libraryClient {
	f := fetch.New(fetch.Options{
		Guard:  libraryGuard(),
		Pacer:  policy.NewLocal(policy.LocalOptions{DefaultInterval: policy.None}),
		Logger: slog.New(slog.DiscardHandler),
	})
	opts := fetch.GetOptions{Retries: fetch.None, Sink: hashSink{}}
	name := "Get"
	if memory {
		opts.Sink, name = nil, "Get+memory"
	}
	return &libraryClient{
		name: name,
		stop: f.Close,
		get: func(ctx context.Context, url string) error {
			d, err := f.Get(ctx, url, opts)
			if err != nil {
				return err
			}
			if d.Blob.Size != int64(size) {
				return fmt.Errorf("stored %d bytes, want %d", d.Blob.Size, size)
			}
			return nil
		},
	}
}

// hashSink stores nothing: Put hashes the body as every sink does
// (sink.Copy) and keeps no byte.
type hashSink struct{}

func (hashSink) Put(ctx context.Context, r io.Reader, opts sink.PutOptions) (sink.Blob, error) {
	fp, n, err := sink.Copy(ctx, io.Discard, r, opts.Limit)
	if err != nil {
		return sink.Blob{}, err
	}
	return sink.Blob{Fingerprint: fp, Size: n}, nil
}

func (hashSink) Open(context.Context, string) (io.ReadCloser, error) {
	return nil, sink.ErrNotFound
}

// libraryOrigin is the origin child and the base URL of each host name.
type libraryOrigin struct {
	size int
	urls []string
	stop func()
}

// startLibraryOrigin starts the bench again as an origin serving size-byte
// bodies and returns once it listens.
func startLibraryOrigin(ctx context.Context, size int) (*libraryOrigin, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(cleanEnv(), libraryOriginEnv+"="+strconv.Itoa(size))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop := func() {
		stdin.Close()
		cmd.Wait()
	}
	port, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stop()
		return nil, fmt.Errorf("library origin: %v: %s", err, stderr.String())
	}
	o := &libraryOrigin{size: size, stop: stop}
	for i := range libraryHosts {
		o.urls = append(o.urls, "http://"+libraryHost(i)+":"+strings.TrimSpace(port))
	}
	return o, nil
}

// libraryOriginChild is the origin process: it serves until its stdin
// closes.
func libraryOriginChild(stdout, stderr io.Writer) int {
	size, err := strconv.Atoi(os.Getenv(libraryOriginEnv))
	if err != nil || size < 1 {
		fmt.Fprintln(stderr, "library origin: bad size")
		return 2
	}
	o, err := startOrigin(fixedBody(size), false)
	if err != nil {
		fmt.Fprintln(stderr, "library origin:", err)
		return 1
	}
	defer o.close()
	fmt.Fprintln(stdout, o.port)
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil && !errors.Is(err, os.ErrClosed) {
		return 1
	}
	return 0
}
