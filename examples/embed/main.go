// Command embed is a small feed poller that embeds the fetcher the way any
// Go service can: no Redis, no worker, just fetch, guard and policy with a
// sink of its own (a table standing in for the service's database).
//
//	go run ./examples/embed --allow-cidr 127.0.0.1/32 --polls 2 URL...
//
// Each poll fetches every URL at once with fetch.Fetcher.Get (retries,
// kind detection, conditional requests from a cache), so the second poll of
// an unchanged document is a 304 answered from the cache. Every request is
// judged by the destination guard (public unicast only, plus --allow-cidr)
// and spaced per host by a policy.Local pacer whose floors come from a
// policy.Table (--floor HOST=SECONDS, else 1 s).
//
// Exit status: 0 when every fetch of the last poll succeeded, 1 otherwise,
// 2 for usage errors.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/policy"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("embed", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: embed [flags] URL...\n\nPolls URLs through the guarded, paced fetcher into an in-process table.\n\nFlags:")
		fs.PrintDefaults()
	}
	var allow []netip.Prefix
	fs.Func("allow-cidr", "let the guard allow this `CIDR` (repeatable; e.g. 127.0.0.1/32)", func(v string) error {
		p, err := netip.ParsePrefix(v)
		if err != nil {
			return err
		}
		allow = append(allow, p)
		return nil
	})
	table := policy.NewTable()
	fs.Func("floor", "space requests to a host at least this far apart, `HOST=SECONDS` (repeatable)", func(v string) error {
		return applyFloor(table, v)
	})
	headers := map[string]string{}
	fs.Func("H", "request header `'Name: value'` (repeatable)", func(v string) error {
		name, value, ok := strings.Cut(v, ":")
		if !ok {
			return errors.New("want 'Name: value'")
		}
		headers[name] = strings.TrimSpace(value)
		return nil
	})
	polls := fs.Int("polls", 1, "how many times to poll every URL")
	every := fs.Duration("every", 0, "pause between polls (the pacer spaces each host anyway)")
	verbose := fs.Bool("v", false, "also log every fetch hop to stderr")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() == 0 || *polls < 1 || *every < 0 {
		fs.Usage()
		fmt.Fprintln(stderr, "embed: want at least one URL, --polls ≥ 1 and --every ≥ 0")
		return 2
	}
	// Screen once up front; Get would refuse the same headers on every call.
	// The error names the header, never its value.
	if err := guard.ScreenHeaders(headers); err != nil {
		fmt.Fprintf(stderr, "embed: %v\n", err)
		return 2
	}

	level := slog.LevelInfo // the table logs each write at INFO
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	p := &poller{
		fetcher: fetch.New(fetch.Options{
			Guard:  guard.New(guard.Options{Allow: allow}),
			Pacer:  policy.NewLocal(policy.LocalOptions{Floors: table}),
			Logger: log,
		}),
		blobs:   newBlobTable(log),
		cache:   fetch.NewMemoryCache(),
		headers: headers,
		out:     stdout,
	}
	defer p.fetcher.Close()

	var ok bool
	for i := range *polls {
		if i > 0 && *every > 0 {
			select {
			case <-time.After(*every):
			case <-ctx.Done():
				return 1
			}
		}
		fmt.Fprintf(stdout, "poll %d\n", i+1)
		ok = p.poll(ctx, fs.Args())
	}
	p.blobs.dump(stdout)
	if !ok {
		return 1
	}
	return 0
}

// applyFloor publishes HOST=SECONDS into the table as a fetch_policy_state,
// the same model workers read from content.fetch-policy.
func applyFloor(t *policy.Table, v string) error {
	host, secs, ok := strings.Cut(v, "=")
	s, err := strconv.ParseFloat(secs, 64)
	if !ok || host == "" || err != nil || s < 0 || math.IsNaN(s) || math.IsInf(s, 0) {
		return errors.New("want HOST=SECONDS, SECONDS a number ≥ 0")
	}
	return t.Apply(&envelope.FetchPolicyState{
		SchemaVersion:      envelope.SchemaVersion,
		OccurredAt:         time.Now().UTC(),
		Host:               strings.ToLower(host),
		MinIntervalSeconds: &s,
	})
}

// poller fetches a set of URLs into its table.
type poller struct {
	fetcher *fetch.Fetcher
	blobs   *blobTable
	cache   *fetch.MemoryCache
	headers map[string]string
	out     io.Writer
}

// poll fetches every URL at once and prints one line per URL, in the order
// given. It reports whether every fetch succeeded.
func (p *poller) poll(ctx context.Context, urls []string) bool {
	lines := make([]string, len(urls))
	oks := make([]bool, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Go(func() { lines[i], oks[i] = p.one(ctx, u) })
	}
	wg.Wait()
	all := true
	for i, line := range lines {
		fmt.Fprintln(p.out, line)
		all = all && oks[i]
	}
	return all
}

// one fetches u and describes the result.
func (p *poller) one(ctx context.Context, u string) (string, bool) {
	shown := guard.RedactURL(u)
	doc, err := p.fetcher.Get(ctx, u, fetch.GetOptions{
		Cache:   p.cache, // one cache per set of credentials
		Sink:    p.blobs,
		Headers: p.headers,
	})
	var status *fetch.StatusError
	switch {
	case errors.Is(err, guard.ErrRefused):
		// Private, loopback and other special-purpose addresses are refused
		// unless allowed: the fetcher cannot be aimed at the host's network.
		return fmt.Sprintf("  refused   %s: %v", shown, err), false
	case errors.As(err, &status):
		return fmt.Sprintf("  failed    %s: HTTP %d", shown, status.StatusCode), false
	case err != nil:
		return fmt.Sprintf("  failed    %s: %v", shown, err), false
	case doc.NotModified:
		return fmt.Sprintf("  unchanged %s kind=%s fingerprint=%s (304, from the cache)", shown, doc.Kind, doc.Blob.Fingerprint), true
	default:
		return fmt.Sprintf("  fetched   %s status=%d kind=%s size=%d fingerprint=%s new=%t attempts=%d",
			shown, doc.StatusCode, doc.Kind, doc.Blob.Size, doc.Blob.Fingerprint, doc.Blob.Created, doc.Attempts), true
	}
}
