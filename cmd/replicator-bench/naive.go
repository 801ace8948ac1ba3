//go:build linux

package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/engine"
	"github.com/replicator-go/replicator/envelope"
)

// naiveChildEnv, when set, makes the bench process the naive loop: the
// same work as the worker, written the obvious way, which the worker's
// throughput is compared with. Its value is
// "REDIS_URL ORIGIN_ADDR BLOB_DIR COMMANDS CONCURRENCY".
const naiveChildEnv = "REPLICATOR_BENCH_NAIVE_LOOP"

// naiveConfig is what one naive loop runs against.
type naiveConfig struct {
	redisURL   string
	originAddr string // every host name dials this address
	blobDir    string
	commands   int // stop once this many are handled
	inFlight   int // consumers, each with one command at a time
}

// naiveSummary is what the naive loop prints when done. Its rate and
// latency are read from the facts it published, as the worker's are.
type naiveSummary struct {
	Done    int   `json:"done"`
	Skipped int   `json:"skipped"` // acked because the dedupe key existed
	Errors  int   `json:"errors"`  // acked without a fact
	PeakRSS int64 `json:"peak_rss"`

	cpu float64 // seconds, measured by the parent
}

// naiveChild runs the naive loop as a child process of the bench.
func naiveChild(stdout, stderr io.Writer) int {
	args, n, conc, ok := childArgs(stderr, "naive loop", os.Getenv(naiveChildEnv), 5)
	if !ok {
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	sum, err := naiveLoop(ctx, naiveConfig{redisURL: args[0], originAddr: args[1], blobDir: args[2], commands: n, inFlight: conc})
	if err != nil {
		fmt.Fprintln(stderr, "naive loop:", err)
		return 1
	}
	sum.PeakRSS = procField("/proc/self/status", "VmHWM") << 10
	json.NewEncoder(stdout).Encode(sum)
	return 0
}

// naiveLoop is the worker's work done the plain way: cfg.inFlight
// consumers, each reading one command (XREADGROUP COUNT 1), checking its
// dedupe key, fetching the URL with a plain net/http client, streaming the
// body into a temp file while hashing it, renaming the temp to
// <dir>/<ab>/<cd>/<sha256>.bin (no fsync), then one round trip each for
// the blob_available fact, the dedupe key and the ack. No guard, pacing,
// retries, batching or logs. A command that fails is acked without a fact
// and counted. It returns once cfg.commands commands are handled.
func naiveLoop(ctx context.Context, cfg naiveConfig) (*naiveSummary, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opt, err := rueidis.ParseURL(cfg.redisURL)
	if err != nil {
		return nil, err
	}
	opt.DisableCache = true
	client, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	httpc := loopbackClient(cfg.originAddr)
	defer httpc.CloseIdleConnections()
	tmpDir := filepath.Join(cfg.blobDir, "tmp")
	if err := os.MkdirAll(tmpDir, 0o755); err != nil {
		return nil, err
	}
	n := &naive{client: client, http: httpc, dir: cfg.blobDir, tmp: tmpDir}

	var handled, skipped, failed atomic.Int64
	var readErr error
	var once sync.Once
	var wg sync.WaitGroup
	for i := range cfg.inFlight {
		consumer := "naive-" + strconv.Itoa(i)
		wg.Go(func() {
			for ctx.Err() == nil {
				cmd := client.B().Xreadgroup().Group(group, consumer).Count(1).Block(1000).
					Streams().Key(streamCommands).Id(">").Build()
				res, err := client.Do(ctx, cmd).AsXRead()
				if rueidis.IsRedisNil(err) {
					continue
				}
				if err != nil {
					if ctx.Err() == nil {
						once.Do(func() { readErr = err })
					}
					cancel()
					return
				}
				for _, e := range res[streamCommands] {
					switch skip, err := n.handle(ctx, e); {
					case err != nil:
						failed.Add(1)
					case skip:
						skipped.Add(1)
					}
					if handled.Add(1) >= int64(cfg.commands) {
						cancel()
					}
				}
			}
		})
	}
	wg.Wait()
	if readErr != nil {
		return nil, readErr
	}
	if int(handled.Load()) < cfg.commands {
		return nil, fmt.Errorf("stopped after %d of %d commands: %w", handled.Load(), cfg.commands, ctx.Err())
	}
	return &naiveSummary{Done: int(handled.Load()), Skipped: int(skipped.Load()), Errors: int(failed.Load())}, nil
}

// naive is the naive loop's per-command work.
type naive struct {
	client rueidis.Client
	http   *http.Client
	dir    string // blobs, <dir>/<ab>/<cd>/<sha256>.bin
	tmp    string
}

// handle is one command, start to finish; the command is acked whatever
// happens, so the loop always ends.
func (n *naive) handle(ctx context.Context, e rueidis.XRangeEntry) (skipped bool, err error) {
	defer func() {
		ack := n.client.B().Xack().Key(streamCommands).Group(group).Id(e.ID).Build()
		if aerr := n.client.Do(ctx, ack).Error(); aerr != nil && err == nil {
			err = fmt.Errorf("XACK: %w", aerr)
		}
	}()
	cmd, err := envelope.DecodeCommand(e.FieldValues)
	if err != nil {
		return false, err
	}
	key := contentfetch.DefaultDedupePrefix + cmd.CommandID
	switch err := n.client.Do(ctx, n.client.B().Get().Key(key).Build()).Error(); {
	case err == nil:
		return true, nil
	case !rueidis.IsRedisNil(err):
		return false, fmt.Errorf("GET dedupe key: %w", err)
	}
	fact, err := n.fetch(ctx, cmd)
	if err != nil {
		return false, err
	}
	frame, err := envelope.ToFrame(fact)
	if err != nil {
		return false, err
	}
	xadd := n.client.B().Xadd().Key(streamFacts).Id("*").FieldValue()
	for i, name := range envelope.FrameFields() {
		xadd = xadd.FieldValue(name, frame[i])
	}
	if err := n.client.Do(ctx, xadd.Build()).Error(); err != nil {
		return false, fmt.Errorf("XADD fact: %w", err)
	}
	ttl := int64(engine.DefaultDedupeTTL / time.Second)
	if err := n.client.Do(ctx, n.client.B().Set().Key(key).Value("1").ExSeconds(ttl).Build()).Error(); err != nil {
		return false, fmt.Errorf("SET dedupe key: %w", err)
	}
	return false, nil
}

// fetch GETs the command's URL and stores the body under its sha256.
func (n *naive) fetch(ctx context.Context, cmd *envelope.ContentFetch) (*envelope.BlobAvailable, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cmd.URL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := n.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	tmp, err := os.CreateTemp(n.tmp, "b-*.tmp")
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	size, err := io.Copy(io.MultiWriter(tmp, h), resp.Body)
	err = errors.Join(err, tmp.Close())
	if err != nil {
		os.Remove(tmp.Name())
		return nil, err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	shard := filepath.Join(n.dir, sum[:2], sum[2:4])
	path := filepath.Join(shard, sum+".bin")
	if err := os.MkdirAll(shard, 0o755); err != nil {
		os.Remove(tmp.Name())
		return nil, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return nil, err
	}
	media, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	media = strings.ToLower(strings.TrimSpace(media))
	if media == "" {
		media = "application/octet-stream"
	}
	return &envelope.BlobAvailable{
		OccurredAt:         time.Now(),
		ContentFingerprint: sum,
		BlobURI:            "file://" + path,
		SizeBytes:          size,
		MediaType:          media,
		URL:                cmd.URL,
		CommandID:          cmd.CommandID,
		InfoSourceID:       cmd.InfoSourceID,
	}, nil
}
