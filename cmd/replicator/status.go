package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/engine"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/redisacl"
	"github.com/replicator-go/replicator/internal/redisclock"
	"github.com/replicator-go/replicator/internal/streamstate"
	"github.com/replicator-go/replicator/policy"
	"github.com/replicator-go/replicator/policy/fleet"
)

const statusDescription = `Shows the fleet's state as Redis holds it, on one screen, read-only:

  - content.fetch and content.replicate: length, and per consumer group the
    lag (entries not yet delivered), pending entries, the oldest pending
    entry's idle time, and each consumer with its idle time; a consumer
    idle for more than 3 × the claim time is flagged as likely dead;
  - the dead letters of each, by reason, with the oldest and newest;
  - the politeness floors published on content.fetch-policy;
  - the hosts the fleet pacer holds back beyond their floor after a 429 or
    503, and until when.

--watch redraws it every --interval; --json prints the same as one JSON
document (with --watch, one per line). Nothing is acknowledged, claimed or
removed. docs/operations.md explains each number.

When Redis refuses a command to this Redis user, one line names the
command and the grant it needs, and the exit status is 1. When the one
refused is reading the held-back hosts (HMGET on the fleet pacer's keys),
the rest of the screen is still shown, with that line in their place.

Exit status: 0 when Redis was read (a fresh Redis shows "nothing yet"), 1
when it could not be, or not all of it, 2 for usage errors.`

// likelyDeadFactor flags a consumer idle this many claim times as likely
// dead: a live worker reads every REPLICATOR_READ_BLOCK_MS.
const likelyDeadFactor = 3

// statusDLQScan bounds the dead letters status reads to tally by reason.
const statusDLQScan = 10000

// statusTimeout bounds one read of the whole state.
const statusTimeout = 30 * time.Second

// statusReport is what status shows; its JSON is the --json document.
type statusReport struct {
	Redis       string         `json:"redis"`
	At          time.Time      `json:"at"`
	NothingYet  bool           `json:"nothing_yet"`
	ClaimIdle   float64        `json:"claim_min_idle_seconds"`
	Streams     []statusStream `json:"streams"`
	DeadLetters []statusDLQ    `json:"dead_letters"`
	Floors      []statusFloor  `json:"floors"`
	HeldBack    []statusHold   `json:"held_back"`
	// HeldBackDenied says which grant reading the held-back hosts needs,
	// when Redis refused it to this user; HeldBack is then incomplete.
	HeldBackDenied string `json:"held_back_denied,omitempty"`

	heldBackDenied *redisacl.Denied
}

type statusStream struct {
	Stream string        `json:"stream"`
	Exists bool          `json:"exists"`
	Length int64         `json:"length"`
	Groups []statusGroup `json:"groups"`
}

type statusGroup struct {
	Group   string `json:"group"`
	Lag     int64  `json:"lag"`
	Pending int64  `json:"pending"`
	// LagCounted: Redis could not say the lag; it was counted, up to
	// streamstate.MaxLagCount.
	LagCounted           bool             `json:"lag_counted,omitempty"`
	OldestPendingSeconds float64          `json:"oldest_pending_seconds"`
	Consumers            []statusConsumer `json:"consumers"`
}

type statusConsumer struct {
	Name        string  `json:"name"`
	Pending     int64   `json:"pending"`
	IdleSeconds float64 `json:"idle_seconds"`
	LikelyDead  bool    `json:"likely_dead"`
}

type statusDLQ struct {
	Stream    string         `json:"stream"`
	Length    int64          `json:"length"`
	Oldest    *time.Time     `json:"oldest,omitempty"`
	Newest    *time.Time     `json:"newest,omitempty"`
	Reasons   []statusReason `json:"reasons"`
	Truncated bool           `json:"truncated,omitempty"`
}

type statusReason struct {
	Reason string    `json:"reason"`
	Count  int64     `json:"count"`
	Oldest time.Time `json:"oldest"`
	Newest time.Time `json:"newest"`
}

type statusFloor struct {
	Host               string  `json:"host"`
	MinIntervalSeconds float64 `json:"min_interval_seconds"`
}

type statusHold struct {
	Host            string  `json:"host"`
	IntervalSeconds float64 `json:"interval_seconds"`
	// FloorSeconds is the published floor; null when the host has none
	// and the workers' REPLICATOR_MIN_HOST_INTERVAL_SECONDS applies.
	FloorSeconds *float64  `json:"floor_seconds"`
	Since        time.Time `json:"since"`
	Until        time.Time `json:"until"`
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("status", "status [--redis-url URL] [--watch [--interval D]] [--json]", statusDescription, stderr)
	redisURL := fs.String("redis-url", envRedisURL(), "Redis `URL` (default $REPLICATOR_REDIS_URL or "+defaultRedisURL+")")
	watch := fs.Bool("watch", false, "redraw every --interval until interrupted")
	interval := fs.Duration("interval", 2*time.Second, "how often --watch redraws")
	asJSON := fs.Bool("json", false, "print one JSON document")
	claim := fs.Duration("claim-min-idle", envClaimMinIdle(), "the workers' claim time, for flagging dead consumers (default $REPLICATOR_CLAIM_MIN_IDLE_MS or 60s)")
	if code, ok := parseNoArgs(fs, args, stderr); !ok {
		return code
	}
	if *interval <= 0 || *claim <= 0 {
		fmt.Fprintln(stderr, "replicator status: --interval and --claim-min-idle must be positive")
		return 2
	}
	client, err := newRedisClient(*redisURL)
	if err != nil {
		fmt.Fprintf(stderr, "replicator status: %s\n", oneLine(err))
		return redisExit(err)
	}
	defer client.Close()
	user := redisUser(*redisURL)
	code := 0
	for {
		rctx, cancel := context.WithTimeout(ctx, statusTimeout)
		r, err := readStatus(rctx, client, *claim)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return code // interrupted while watching
			}
			if !reportDenied(stderr, "replicator status", *redisURL, err) {
				fmt.Fprintf(stderr, "replicator status: reading redis at %s: %s\n", envelope.RedactURL(*redisURL), oneLine(err))
			}
			return 1
		}
		r.Redis = envelope.RedactURL(*redisURL)
		code = 0
		if r.heldBackDenied != nil {
			r.HeldBackDenied = redisacl.Sentence(user, r.heldBackDenied)
			code = 1
		}
		switch {
		case *asJSON && *watch:
			b, _ := json.Marshal(r)
			fmt.Fprintf(stdout, "%s\n", b)
		case *asJSON:
			b, _ := json.MarshalIndent(r, "", "  ")
			fmt.Fprintf(stdout, "%s\n", b)
		default:
			if *watch {
				fmt.Fprint(stdout, "\x1b[H\x1b[2J") // home, clear: redraw in place
			}
			renderStatus(stdout, r)
		}
		if !*watch {
			if r.HeldBackDenied != "" {
				fmt.Fprintf(stderr, "replicator status: %s\n", r.HeldBackDenied)
			}
			return code
		}
		select {
		case <-ctx.Done():
			return code
		case <-time.After(*interval):
		}
	}
}

// envClaimMinIdle is REPLICATOR_CLAIM_MIN_IDLE_MS when set and valid, else
// its default.
func envClaimMinIdle() time.Duration {
	if ms, err := strconv.ParseFloat(strings.TrimSpace(os.Getenv("REPLICATOR_CLAIM_MIN_IDLE_MS")), 64); err == nil && ms > 0 && ms < 1e12 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	return engine.DefaultClaimMinIdle
}

// oneLine keeps an error on one line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// readStatus reads everything status shows.
func readStatus(ctx context.Context, c rueidis.Client, claim time.Duration) (statusReport, error) {
	r := statusReport{ClaimIdle: claim.Seconds(), Streams: []statusStream{}, DeadLetters: []statusDLQ{}, Floors: []statusFloor{}, HeldBack: []statusHold{}}
	var err error
	if r.At, err = redisclock.Now(ctx, c); err != nil {
		return r, err
	}
	for _, key := range []string{streamCommands, streamReplicate} {
		st, err := streamstate.ReadStream(ctx, c, key)
		if err != nil {
			return r, err
		}
		groups, err := streamstate.ReadGroups(ctx, c, key, r.At)
		if err != nil {
			return r, err
		}
		s := statusStream{Stream: key, Exists: st.Exists, Length: st.Length, Groups: []statusGroup{}}
		for _, g := range groups {
			sg := statusGroup{Group: g.Name, Lag: g.Lag, LagCounted: g.LagCounted, Pending: g.Pending,
				OldestPendingSeconds: inSeconds(g.OldestPendingIdle), Consumers: []statusConsumer{}}
			for _, cs := range g.Consumers {
				sg.Consumers = append(sg.Consumers, statusConsumer{Name: cs.Name, Pending: cs.Pending,
					IdleSeconds: inSeconds(cs.Idle), LikelyDead: cs.Idle > likelyDeadFactor*claim})
			}
			s.Groups = append(s.Groups, sg)
		}
		r.Streams = append(r.Streams, s)
	}
	for _, key := range []string{streamDLQ, streamReplicateDLQ} {
		st, err := streamstate.ReadStream(ctx, c, key)
		if err != nil {
			return r, err
		}
		d := statusDLQ{Stream: key, Length: st.Length, Reasons: []statusReason{}}
		if st.Length > 0 {
			d.Oldest, d.Newest = &st.Oldest, &st.Newest
			stats, err := streamstate.CountDeadLetters(ctx, c, key, streamstate.Filter{}, statusDLQScan)
			if err != nil {
				return r, err
			}
			d.Truncated = stats.Truncated
			for _, t := range stats.ByReason {
				d.Reasons = append(d.Reasons, statusReason{Reason: t.Key, Count: t.Count, Oldest: t.Oldest, Newest: t.Newest})
			}
		}
		r.DeadLetters = append(r.DeadLetters, d)
	}
	table := policy.NewTable()
	quiet := slog.New(slog.DiscardHandler)
	if err := fleet.NewReader(c, table, fleet.ReaderOptions{Logger: quiet}).ReplayOnce(ctx); err != nil {
		return r, fmt.Errorf("reading %s: %w", streamPolicy, redisacl.Check(err, "XRANGE", streamPolicy))
	}
	floors := table.Snapshot()
	for _, host := range slices.Sorted(maps.Keys(floors)) {
		r.Floors = append(r.Floors, statusFloor{Host: host, MinIntervalSeconds: floors[host].Seconds()})
	}
	// In a deployment without fleet pacing there is no pacing key to read;
	// with it, reading them is a grant of its own (HMGET): without it the
	// rest of the status is still shown.
	holds, err := fleet.Holds(ctx, c, "")
	if !errors.As(err, &r.heldBackDenied) && err != nil {
		return r, err
	}
	for _, h := range holds {
		sh := statusHold{Host: h.Host, IntervalSeconds: h.Interval.Seconds(), Since: h.Since, Until: h.Until}
		if f, ok := floors[h.Host]; ok {
			if h.Interval <= f {
				continue // not beyond its floor
			}
			secs := f.Seconds()
			sh.FloorSeconds = &secs
		}
		r.HeldBack = append(r.HeldBack, sh)
	}
	r.NothingYet = len(r.Floors) == 0 && len(r.HeldBack) == 0 && r.heldBackDenied == nil
	for _, s := range r.Streams {
		r.NothingYet = r.NothingYet && !s.Exists
	}
	for _, d := range r.DeadLetters {
		r.NothingYet = r.NothingYet && d.Length == 0
	}
	return r, nil
}

// renderStatus writes the status screen.
func renderStatus(w io.Writer, r statusReport) {
	fmt.Fprintf(w, "replicator status: %s at %s (Redis's clock)\n\n", r.Redis, r.At.Format(time.RFC3339))
	if r.NothingYet {
		fmt.Fprintf(w, "Nothing yet: no %s or %s stream, no dead letters, no published floors and no held-back hosts.\n",
			streamCommands, streamReplicate)
		fmt.Fprintln(w, "A worker creates its consumer groups when it starts; `replicator seed` publishes commands.")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STREAM\tGROUP\tLENGTH\tLAG\tPENDING\tOLDEST PENDING")
	for _, s := range r.Streams {
		if !s.Exists {
			fmt.Fprintf(tw, "%s\t(no stream yet)\t0\t\t\t\n", s.Stream)
			continue
		}
		if len(s.Groups) == 0 {
			fmt.Fprintf(tw, "%s\t(no group yet: no worker has started)\t%d\t\t\t\n", s.Stream, s.Length)
		}
		for _, g := range s.Groups {
			lag := strconv.FormatInt(g.Lag, 10)
			if g.LagCounted {
				lag += "*"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\n", s.Stream, g.Group, s.Length, lag, g.Pending, secs(g.OldestPendingSeconds))
			for _, c := range g.Consumers {
				flag := ""
				if c.LikelyDead {
					flag = fmt.Sprintf("  LIKELY DEAD: idle over %d × the claim time (%s)", likelyDeadFactor, secs(r.ClaimIdle))
				}
				fmt.Fprintf(tw, "  consumer %s\t\t\t\t%d\tidle %s%s\n", c.Name, c.Pending, secs(c.IdleSeconds), flag)
			}
		}
	}
	tw.Flush()
	if lagCounted(r) {
		fmt.Fprintf(w, "* counted, up to %d: Redis could not say the lag\n", streamstate.MaxLagCount)
	}

	fmt.Fprintln(w, "\nDEAD LETTERS")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, d := range r.DeadLetters {
		if d.Length == 0 {
			fmt.Fprintf(tw, "%s\t0\t\t\n", d.Stream)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\toldest %s\tnewest %s\n", d.Stream, d.Length, ago(r.At, *d.Oldest), ago(r.At, *d.Newest))
		for _, reason := range d.Reasons {
			fmt.Fprintf(tw, "  %s\t%d\toldest %s\tnewest %s\n", reason.Reason, reason.Count, ago(r.At, reason.Oldest), ago(r.At, reason.Newest))
		}
		if d.Truncated {
			fmt.Fprintf(tw, "  (reasons of the oldest %d only: replicator dlq stats reads them all)\t\t\t\n", statusDLQScan)
		}
	}
	tw.Flush()

	fmt.Fprintf(w, "\nPOLITENESS FLOORS (%s)\n", streamPolicy)
	if len(r.Floors) == 0 {
		fmt.Fprintln(w, "  none published: every host is spaced by REPLICATOR_MIN_HOST_INTERVAL_SECONDS")
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, f := range r.Floors {
		fmt.Fprintf(tw, "  %s\t%s\n", f.Host, secs(f.MinIntervalSeconds))
	}
	tw.Flush()

	fmt.Fprintln(w, "\nHELD BACK BEYOND THEIR FLOOR (429/503 escalation, fleet pacer)")
	if r.HeldBackDenied != "" {
		fmt.Fprintf(w, "  not read: %s\n", r.HeldBackDenied)
	} else if len(r.HeldBack) == 0 {
		fmt.Fprintln(w, "  none")
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, h := range r.HeldBack {
		floor := "default"
		if h.FloorSeconds != nil {
			floor = secs(*h.FloorSeconds)
		}
		fmt.Fprintf(tw, "  %s\tevery %s\t(floor %s)\tuntil %s (%s)\n", h.Host, secs(h.IntervalSeconds), floor,
			h.Until.Format(time.RFC3339), "in "+dur(h.Until.Sub(r.At)))
	}
	tw.Flush()
}

func lagCounted(r statusReport) bool {
	for _, s := range r.Streams {
		for _, g := range s.Groups {
			if g.LagCounted {
				return true
			}
		}
	}
	return false
}

// inSeconds is d in seconds, to the millisecond.
func inSeconds(d time.Duration) float64 { return float64(d.Milliseconds()) / 1000 }

// secs renders seconds as a short duration.
func secs(s float64) string { return dur(time.Duration(s * float64(time.Second))) }

// dur renders d rounded for a person: to the millisecond under a second,
// to the second above.
func dur(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// ago renders an instant and how long before now it was.
func ago(now, t time.Time) string {
	return t.Format(time.RFC3339) + " (" + dur(now.Sub(t)) + " ago)"
}
