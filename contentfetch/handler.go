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
	"time"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/sink"
)

// Kind is what became of one command; the worker switches on it to pick the
// command's fate.
type Kind int

// The outcomes of handling a command.
const (
	// Stored: the bytes are stored; publish the blob_available fact, set
	// the dedupe key, ack.
	Stored Kind = iota + 1
	// NotModified: completed without a blob (304); publish the
	// fetch_failed/not_modified fact, set the dedupe key, ack. No DLQ.
	NotModified
	// Permanent: publish the terminal fetch_failed fact, then dead-letter.
	Permanent
	// Transient: publish nothing; leave the entry pending for a retry.
	Transient
	// Unclassified: a bug (a panic) or a store that refused for good
	// (sink.ErrPermanent); leave pending until the delivery ceiling, then
	// publish handler_error and dead-letter.
	Unclassified
)

// String returns the kind's name as it appears in logs and metrics.
func (k Kind) String() string {
	switch k {
	case Stored:
		return "stored"
	case NotModified:
		return "not_modified"
	case Permanent:
		return "permanent"
	case Transient:
		return "transient"
	case Unclassified:
		return "unclassified"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Outcome is the result of handling one command.
type Outcome struct {
	// Kind says what the worker does with the command next.
	Kind Kind
	// Fact is the fact to publish: *envelope.BlobAvailable for Stored,
	// *envelope.FetchFailed for NotModified and Permanent; nil otherwise.
	Fact envelope.Model
	// Reason is the failure token for NotModified and Permanent.
	Reason envelope.Reason
	// StatusCode is the final response's status, 0 when none arrived.
	StatusCode int
	// Err says why, for Transient, Permanent and Unclassified. Safe to log:
	// it never carries a header value or a URL password.
	Err error
	// Park is set when the outcome is Transient because the command should
	// wait in memory before it is tried again: its host's politeness window
	// was longer than HandlerOptions.MaxWait, or the sink had no room for
	// the body (Park.Cause wraps fetch.ErrStorageFull).
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
	// hop; a longer one ends the handling Transient with Outcome.Park set
	// (ErrParked) and nothing sent, so a worker can hold the command until
	// its host is due without a goroutine asleep on it. Zero means sleep
	// through any wait.
	MaxWait time.Duration
	// Logger receives one line per unusual event. Nil means slog.Default().
	Logger *slog.Logger
}

// Handler turns a decoded content_fetch command into exactly one Outcome.
// It is safe for concurrent use.
type Handler struct {
	fetcher    *fetch.Fetcher
	sink       sink.Sink
	maxTimeout time.Duration
	maxWait    time.Duration
	log        *slog.Logger
	clock      clock
}

// NewHandler returns a Handler configured by opts.
func NewHandler(opts HandlerOptions) *Handler {
	h := &Handler{
		fetcher:    opts.Fetcher,
		sink:       opts.Sink,
		maxTimeout: opts.MaxTimeout,
		maxWait:    opts.MaxWait,
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

// Handle handles one command, in the order of the contract: request
// options, URL, destination guard, storage ceiling, pacing, fetch,
// classification. Every refusal happens before anything reaches the origin.
// A panic inside is recovered as an Unclassified outcome.
//
// stop, when closed, cuts a politeness wait short: the outcome is
// Transient (ErrStopping) and nothing is sent, so a worker shutting down
// never fetches unpaced, while fetches already sent run on (cancel ctx to
// end them). Nil means only ctx ends a wait.
func (h *Handler) Handle(ctx context.Context, cmd *envelope.ContentFetch, stop <-chan struct{}) (out Outcome) {
	start := h.clock.now()
	defer func() {
		if p := recover(); p != nil {
			out = Outcome{Kind: Unclassified, Err: fmt.Errorf("contentfetch: handler panic: %v\n%s", p, debug.Stack())}
		}
		out.Duration = h.clock.now().Sub(start)
	}()

	opts, err := guard.SanitizeOptions(cmd.Headers, cmd.TimeoutSeconds, h.maxTimeout)
	if err != nil {
		return h.classify(cmd, nil, err)
	}
	req := fetch.Request{URL: cmd.URL, Headers: opts.Headers, Timeout: opts.Timeout, PacingWait: h.pacingWait(stop)}
	res, err := h.fetcher.Fetch(ctx, req, h.sink)
	if err == nil {
		if res.NotModified() {
			h.logUnbidden304(ctx, cmd)
			fact := FailedFact(cmd, envelope.ReasonNotModified, "origin answered 304 Not Modified", res.StatusCode, 0, h.clock.now())
			return Outcome{Kind: NotModified, Fact: fact, Reason: envelope.ReasonNotModified, StatusCode: res.StatusCode, Result: res}
		}
		return Outcome{Kind: Stored, Fact: blobFact(cmd, res, h.clock.now()), StatusCode: res.StatusCode, Result: res}
	}
	return h.classify(cmd, res, err)
}

// pacingWait spends a hop's politeness wait: slept through up to MaxWait,
// refused beyond it (ErrParked), cut short by stop (ErrStopping).
func (h *Handler) pacingWait(stop <-chan struct{}) func(ctx context.Context, host string, waited, wait time.Duration) error {
	return func(ctx context.Context, host string, waited, wait time.Duration) error {
		if h.maxWait > 0 && waited+wait > h.maxWait {
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
		out := Outcome{Kind: Unclassified, Err: err, Result: res}
		if res != nil {
			out.StatusCode = res.StatusCode
		}
		return out
	}
	var parked *ParkedError
	if errors.As(err, &parked) {
		return Outcome{Kind: Transient, Err: err, Park: parked}
	}
	if errors.Is(err, fetch.ErrStorageFull) {
		// Asked again a MaxWait later: no request goes out while the
		// store has no room (docs/storage.md).
		park := &ParkedError{Wait: cmp.Or(h.maxWait, DefaultRoomWait), Cause: err}
		return Outcome{Kind: Transient, Err: park, Park: park}
	}
	out := Outcome{Kind: Transient, Err: err, Result: res}
	if res != nil {
		out.StatusCode = res.StatusCode
	}
	return out
}

func (h *Handler) permanent(cmd *envelope.ContentFetch, reason envelope.Reason, err error, statusCode int, res *fetch.Result) Outcome {
	return Outcome{
		Kind:       Permanent,
		Fact:       FailedFact(cmd, reason, err.Error(), statusCode, 0, h.clock.now()),
		Reason:     reason,
		StatusCode: statusCode,
		Err:        err,
		Result:     res,
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
