package fetch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/replicator-go/replicator/envelope"
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
	// was longer than the fetcher's MaxWait, or the sink had no room for
	// the body (Park.Cause wraps ErrStorageFull).
	Park *ParkedError
	// Result is the fetch's final response, nil when none arrived.
	Result *Result
	// Duration is how long handling took.
	Duration time.Duration
}

// HandlerOptions configures a Handler. Fetcher and Sink are required.
type HandlerOptions struct {
	// Fetcher performs the fetch.
	Fetcher *Fetcher
	// Sink stores the bodies.
	Sink sink.Sink
	// MaxTimeout is the largest timeout_seconds a command may ask for. Zero
	// means guard.DefaultMaxTimeout.
	MaxTimeout time.Duration
	// Logger receives one line per unusual event. Nil means slog.Default().
	Logger *slog.Logger
}

// Handler turns a decoded content_fetch command into exactly one Outcome.
// It is safe for concurrent use.
type Handler struct {
	fetcher    *Fetcher
	sink       sink.Sink
	maxTimeout time.Duration
	log        *slog.Logger
	clock      clock
}

// NewHandler returns a Handler configured by opts.
func NewHandler(opts HandlerOptions) *Handler {
	h := &Handler{
		fetcher:    opts.Fetcher,
		sink:       opts.Sink,
		maxTimeout: opts.MaxTimeout,
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

// Fetcher returns the Fetcher the Handler fetches with.
func (h *Handler) Fetcher() *Fetcher { return h.fetcher }

// Handle handles one command, in the order of the contract: request
// options, URL, destination guard, storage ceiling, pacing, fetch,
// classification. Every refusal happens before anything reaches the origin.
// A panic inside is recovered as an Unclassified outcome.
func (h *Handler) Handle(ctx context.Context, cmd *envelope.ContentFetch) (out Outcome) {
	start := h.clock.now()
	defer func() {
		if p := recover(); p != nil {
			out = Outcome{Kind: Unclassified, Err: fmt.Errorf("fetch: handler panic: %v\n%s", p, debug.Stack())}
		}
		out.Duration = h.clock.now().Sub(start)
	}()

	opts, err := guard.SanitizeOptions(cmd.Headers, cmd.TimeoutSeconds, h.maxTimeout)
	if err != nil {
		return h.permanent(cmd, envelope.ReasonInvalidRequestOptions, err, 0, nil)
	}
	res, err := h.fetcher.Fetch(ctx, Request{URL: cmd.URL, Headers: opts.Headers, Timeout: opts.Timeout}, h.sink)
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

// classify maps a fetch error onto an outcome (Classify).
func (h *Handler) classify(cmd *envelope.ContentFetch, res *Result, err error) Outcome {
	c := Classify(err)
	switch c.Kind {
	case Permanent:
		return h.permanent(cmd, c.Reason, err, c.StatusCode, res)
	case Unclassified:
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
	out := Outcome{Kind: Transient, Err: err, Result: res}
	if res != nil {
		out.StatusCode = res.StatusCode
	}
	return out
}

func (h *Handler) permanent(cmd *envelope.ContentFetch, reason envelope.Reason, err error, statusCode int, res *Result) Outcome {
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
		"command_id", cmd.CommandID, "url", envelope.RedactURL(cmd.URL), "status_code", http.StatusNotModified)
}
