//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/envelope"
)

// bareChildEnv, when set, makes the bench process the bare loop: the
// ceiling the worker's throughput is compared with. Its value is
// "REDIS_URL ORIGIN_ADDR COMMANDS CONCURRENCY".
const bareChildEnv = "REPLICATOR_BENCH_BARE_LOOP"

// bareSummary is what the bare loop prints when done.
type bareSummary struct {
	Done      int     `json:"done"`
	Errors    int     `json:"errors"`
	FirstNs   int64   `json:"first_ns"` // unix ns of the first ack
	LastNs    int64   `json:"last_ns"`
	LatencyUs []int64 `json:"latency_us"` // entry added to ack, per command
	AckUs     []int64 `json:"ack_us"`     // each command's ack, µs after FirstNs
	PeakRSS   int64   `json:"peak_rss"`

	cpu float64 // seconds, measured by the parent
}

// bareChild runs the bare loop: read commands in batches with the
// worker's group, GET each URL with as many requests in flight as the
// worker's default, discard the body, ack in pipelined batches. Nothing
// else: no guard, pacing, sink, fact or dedupe. It stops after the given
// number of acks, or after ten minutes.
func bareChild(stdout, stderr io.Writer) int {
	args, n, conc, ok := childArgs(stderr, "bare loop", os.Getenv(bareChildEnv), 4)
	if !ok {
		return 2
	}
	sum, err := bareLoop(args[0], args[1], n, conc)
	if err != nil {
		fmt.Fprintln(stderr, "bare loop:", err)
		return 1
	}
	sum.PeakRSS = procField("/proc/self/status", "VmHWM") << 10
	json.NewEncoder(stdout).Encode(sum)
	return 0
}

// childArgs splits a loop child's arguments: want words, the last two the
// commands to handle and the requests in flight, both positive.
func childArgs(stderr io.Writer, name, env string, want int) (args []string, commands, inFlight int, ok bool) {
	args = strings.Fields(env)
	if len(args) != want {
		fmt.Fprintln(stderr, name+": bad arguments")
		return nil, 0, 0, false
	}
	n, err1 := strconv.Atoi(args[want-2])
	conc, err2 := strconv.Atoi(args[want-1])
	if err1 != nil || err2 != nil || n < 1 || conc < 1 {
		fmt.Fprintln(stderr, name+": bad counts")
		return nil, 0, 0, false
	}
	return args, n, conc, true
}

func bareLoop(redisURL, originAddr string, n, conc int) (*bareSummary, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	opt, err := rueidis.ParseURL(redisURL)
	if err != nil {
		return nil, err
	}
	opt.DisableCache = true
	client, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	httpc := loopbackClient(originAddr)
	defer httpc.CloseIdleConnections()

	type job struct {
		id  string
		url string
	}
	jobs := make(chan job, 256)
	acks := make(chan string, 256)
	var readErr error
	go func() {
		defer close(jobs)
		read := 0
		for read < n && ctx.Err() == nil {
			cmd := client.B().Xreadgroup().Group(group, "bare").Count(256).Block(1000).
				Streams().Key(streamCommands).Id(">").Build()
			res, err := client.Do(ctx, cmd).AsXReadSlices()
			if rueidis.IsRedisNil(err) {
				continue
			}
			if err != nil {
				readErr = err
				cancel()
				return
			}
			for _, e := range res[streamCommands] {
				fields := make(map[string]string, len(e.FieldValues))
				for _, f := range e.FieldValues {
					fields[f.Field] = f.Value
				}
				u := ""
				if c, err := envelope.DecodeCommand(fields); err == nil {
					u = c.URL
				}
				jobs <- job{id: e.ID, url: u}
				read++
			}
		}
	}()
	var errMu sync.Mutex
	getErrors := 0
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for j := range jobs {
				if err := get(ctx, httpc, j.url); err != nil {
					errMu.Lock()
					getErrors++
					errMu.Unlock()
				}
				acks <- j.id
			}
		})
	}
	go func() { wg.Wait(); close(acks) }()

	sum := &bareSummary{LatencyUs: make([]int64, 0, n), AckUs: make([]int64, 0, n)}
	batch := make([]string, 0, 256)
	for id := range acks {
		batch = append(batch[:0], id)
	gather:
		for len(batch) < cap(batch) {
			select {
			case more, ok := <-acks:
				if !ok {
					break gather
				}
				batch = append(batch, more)
			default:
				break gather
			}
		}
		if err := client.Do(ctx, client.B().Xack().Key(streamCommands).Group(group).Id(batch...).Build()).Error(); err != nil {
			return nil, fmt.Errorf("XACK: %w", err)
		}
		now := time.Now()
		if sum.Done == 0 {
			sum.FirstNs = now.UnixNano()
		}
		sum.LastNs = now.UnixNano()
		sinceFirst := (now.UnixNano() - sum.FirstNs) / 1e3
		for _, id := range batch {
			sum.LatencyUs = append(sum.LatencyUs, now.Sub(time.UnixMilli(entryMillis(id))).Microseconds())
			sum.AckUs = append(sum.AckUs, sinceFirst)
		}
		sum.Done += len(batch)
		if sum.Done >= n {
			break
		}
	}
	cancel()
	if readErr != nil && sum.Done < n {
		return nil, readErr
	}
	if sum.Done < n {
		return nil, errors.New("stopped before every command was acked")
	}
	sum.Errors = getErrors
	return sum, nil
}

func get(ctx context.Context, c *http.Client, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// loopbackClient is an HTTP client with the worker's pool shape whose
// every host name dials originAddr: the bare and naive loops' client.
func loopbackClient(originAddr string) *http.Client {
	var d net.Dialer
	transport := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, originAddr)
		},
		MaxIdleConns:        1024,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
	}
	return &http.Client{Transport: transport, Timeout: 30 * time.Second}
}
