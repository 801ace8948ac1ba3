package contentfetch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/policy"
	"github.com/replicator-go/replicator/sink"
)

// The labels of the two ways a fetch completes, in metrics and logs; every
// other outcome is named by its fate.
const (
	// Stored: the bytes are stored; the fact is blob_available.
	Stored = "stored"
	// NotModified: the origin answered 304; the fact is fetch_failed with
	// reason not_modified, and the command completes without a blob.
	NotModified = "not_modified"
)

// Outcome is the result of fetching one command: the engine's outcome
// (capability.Outcome: its fate, fact and reason) and what the fetch found.
//
//	Complete      Stored (blob_available) or NotModified (not_modified)
//	Close         a permanent failure: fetch_failed, then the dead letter
//	Retry         a transient failure: no fact, retried through the reclaim
//	Park          the host's window or room in the store is further away
//	              than HandlerOptions.MaxWait: Park holds the detail
//	Unclassified  a panic, or a store refused for good (sink.ErrPermanent)
type Outcome struct {
	capability.Outcome
	// StatusCode is the final response's status, 0 when none arrived.
	StatusCode int
	// Park is set when the fate is Park: the host whose window is not yet
	// open and how long until it is, or the store's lack of room
	// (Park.Cause wraps fetch.ErrStorageFull).
	Park *ParkedError
	// Result is the fetch's final response, nil when none arrived.
	Result *fetch.Result
	// Duration is how long handling took.
	Duration time.Duration
}

// HandlerOptions configures a Handler. Fetcher and Sink are required.
type HandlerOptions struct {
	// Fetcher performs the fetch.
	Fetcher *fetch.Fetcher
	// Sink stores the bodies.
	Sink sink.Sink
	// MaxTimeout is the largest timeout_seconds a command may ask for. Zero
	// means guard.DefaultMaxTimeout.
	MaxTimeout time.Duration
	// MaxWait is the longest politeness wait a command sleeps through, per
	// hop; a longer one ends the handling with the fate Park (ErrParked)
	// and nothing sent, so a worker can hold the command until its host is
	// due without a goroutine asleep on it. Zero means sleep through any
	// wait.
	MaxWait time.Duration
	// ParkAfter, when set and below MaxWait (or MaxWait unset), is the longest wait a
	// command that has not parked yet sleeps through (Command.Parks, when
	// the engine runs the Handler); a longer one parks it. Once parked, it
	// sleeps through waits up to MaxWait, so a redirect chain whose every
	// hop waits for its host still makes progress. Zero means MaxWait.
	ParkAfter time.Duration
	// RoomWait is how long a command the sink has no room for is parked
	// before the sink is asked again. Zero means MaxWait, or
	// DefaultRoomWait without one.
	RoomWait time.Duration
	// Logger receives one line per unusual event. Nil means slog.Default().
	Logger *slog.Logger
}

// Handler turns a decoded content_fetch command into exactly one Outcome.
// It is safe for concurrent use, and it is the capability's
// capability.Handler (capability.go).
type Handler struct {
	fetcher    *fetch.Fetcher
	sink       sink.Sink
	maxTimeout time.Duration
	maxWait    time.Duration
	parkAfter  time.Duration
	roomWait   time.Duration
	log        *slog.Logger
	clock      clock
	// noRoom is the store's last word: true once it said it has no room,
	// so that, and its end, are logged once each.
	noRoom atomic.Bool
}

// NewHandler returns a Handler configured by opts.
func NewHandler(opts HandlerOptions) *Handler {
	h := &Handler{
		fetcher:    opts.Fetcher,
		sink:       opts.Sink,
		maxTimeout: opts.MaxTimeout,
		maxWait:    opts.MaxWait,
		parkAfter:  cmp.Or(opts.ParkAfter, opts.MaxWait),
		roomWait:   cmp.Or(opts.RoomWait, opts.MaxWait, DefaultRoomWait),
		log:        opts.Logger,
		clock:      wallClock,
	}
	if h.maxTimeout <= 0 {
		h.maxTimeout = guard.DefaultMaxTimeout
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	return h
}

// Fetch handles one command, in the order of the contract: request
// options, URL, destination guard, storage ceiling, pacing, fetch,
// classification. Every refusal happens before anything reaches the origin.
// A panic inside is recovered as an Unclassified outcome.
//
// stop, when closed, cuts a politeness wait short: the fate is Retry
// (ErrStopping) and nothing is sent, so a worker shutting down never
// fetches unpaced, while fetches already sent run on (cancel ctx to end
// them). Nil means only ctx ends a wait.
func (h *Handler) Fetch(ctx context.Context, cmd *envelope.ContentFetch, stop <-chan struct{}) Outcome {
	return h.fetch(ctx, cmd, stop, h.maxWait)
}

// fetch is Fetch with the longest politeness wait slept through.
func (h *Handler) fetch(ctx context.Context, cmd *envelope.ContentFetch, stop <-chan struct{}, maxWait time.Duration) (out Outcome) {
	start := h.clock.now()
	defer func() {
		if p := recover(); p != nil {
			out = Outcome{Outcome: capability.Outcome{Err: fmt.Errorf("contentfetch: handler panic: %v\n%s", p, debug.Stack())}}
		}
		out.Duration = h.clock.now().Sub(start)
		h.noteRoom(ctx, out)
	}()

	opts, err := guard.SanitizeOptions(cmd.Headers, cmd.TimeoutSeconds, h.maxTimeout)
	if err != nil {
		return h.classify(cmd, nil, err)
	}
	req := fetch.Request{URL: cmd.URL, Headers: opts.Headers, Timeout: opts.Timeout, PacingWait: h.pacingWait(stop, maxWait)}
	res, err := h.fetcher.Fetch(ctx, req, h.sink)
	if err == nil {
		if res.NotModified() {
			h.logUnbidden304(ctx, cmd)
			fact := FailedFact(cmd, envelope.ReasonNotModified, "origin answered 304 Not Modified", res.StatusCode, 0, h.clock.now())
			return Outcome{Outcome: capability.Outcome{Fate: capability.Complete, Label: NotModified, Fact: fact,
				Reason: string(envelope.ReasonNotModified), Paced: res.Paced}, StatusCode: res.StatusCode, Result: res}
		}
		return Outcome{Outcome: capability.Outcome{Fate: capability.Complete, Label: Stored, Fact: blobFact(cmd, res, h.clock.now()),
			Paced: res.Paced, Stored: res.Blob.Size}, StatusCode: res.StatusCode, Result: res}
	}
	return h.classify(cmd, res, err)
}

// pacingWait spends a hop's politeness wait: slept through up to MaxWait,
// refused beyond it (ErrParked), cut short by stop (ErrStopping).
func (h *Handler) pacingWait(stop <-chan struct{}, maxWait time.Duration) func(ctx context.Context, host string, waited, wait time.Duration) error {
	return func(ctx context.Context, host string, waited, wait time.Duration) error {
		if maxWait > 0 && waited+wait > maxWait {
			return &ParkedError{Host: host, Wait: wait}
		}
		return h.clock.sleep(ctx, stop, wait)
	}
}

// classify maps a fetch error onto an outcome (fetch.Classify). A store
// refused for good is nobody's fault on the wire, so no reason token fits:
// as in the reference, the command waits out the delivery ceiling (an
// operator's window to mend the grant) and then closes as handler_error
// instead of retrying silently for ever.
func (h *Handler) classify(cmd *envelope.ContentFetch, res *fetch.Result, err error) Outcome {
	c := fetch.Classify(err)
	switch {
	case c.Permanent():
		return h.permanent(cmd, reason(c.Cause), err, c.StatusCode, res)
	case errors.Is(err, sink.ErrPermanent):
		return withResult(Outcome{Outcome: capability.Outcome{Err: err}}, res)
	}
	var parked *ParkedError
	if errors.As(err, &parked) {
		return park(err, parked)
	}
	if errors.Is(err, fetch.ErrStorageFull) {
		// Asked again a RoomWait later: no request goes out while the
		// store has no room (docs/storage.md).
		p := &ParkedError{Wait: h.roomWait, Cause: err}
		return park(p, p)
	}
	return withResult(Outcome{Outcome: capability.Outcome{Fate: capability.Retry, Err: err}}, res)
}

// The reasons a command parks: the reason label of its parked count.
const (
	parkedPoliteness  = "politeness"
	parkedStorageFull = "storage_full"
)

// park is the outcome of a command put off until p.Wait has passed, in
// the queue of the host it waits for.
func park(err error, p *ParkedError) Outcome {
	reason := parkedPoliteness
	if errors.Is(p.Cause, fetch.ErrStorageFull) {
		reason = parkedStorageFull
	}
	return Outcome{Outcome: capability.Outcome{Fate: capability.Park, Err: err, Reason: reason,
		Wait: p.Wait, Key: policy.HostKey(p.Host)}, Park: p}
}

// withResult adds what a fetch that failed still found.
func withResult(out Outcome, res *fetch.Result) Outcome {
	if res != nil {
		out.Result, out.StatusCode, out.Paced = res, res.StatusCode, res.Paced
	}
	return out
}

func (h *Handler) permanent(cmd *envelope.ContentFetch, reason envelope.Reason, err error, statusCode int, res *fetch.Result) Outcome {
	out := withResult(Outcome{Outcome: capability.Outcome{
		Fate:   capability.Close,
		Fact:   FailedFact(cmd, reason, err.Error(), statusCode, 0, h.clock.now()),
		Reason: string(reason),
		Err:    err,
	}}, res)
	out.StatusCode = statusCode
	return out
}

// noteRoom logs when the blob store runs out of room, and when it has room
// again: one line each, not one per parked command.
func (h *Handler) noteRoom(ctx context.Context, out Outcome) {
	switch {
	case out.Reason == parkedStorageFull && out.Fate == capability.Park:
		if !h.noRoom.Swap(true) {
			h.log.WarnContext(ctx, "the blob store has no room: fetches park, and no request goes out, until it has",
				"reason", out.Reason, "error", out.Park.Cause.Error())
		}
	case out.Label == Stored:
		if h.noRoom.Load() && h.noRoom.Swap(false) {
			h.log.InfoContext(ctx, "the blob store has room again: parked fetches resume as they come due")
		}
	}
}

// logUnbidden304 warns when a 304 arrives for a command that sent no
// validator: the origin is behaving oddly, and this line is the only
// place that shows.
func (h *Handler) logUnbidden304(ctx context.Context, cmd *envelope.ContentFetch) {
	for name := range cmd.Headers {
		switch strings.ToLower(name) {
		case "if-none-match", "if-modified-since":
			return
		}
	}
	h.log.WarnContext(ctx, "origin answered 304 to a command that sent no validator",
		"command_id", cmd.CommandID, "url", guard.RedactURL(cmd.URL), "status_code", http.StatusNotModified)
}
