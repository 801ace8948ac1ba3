package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"
)

const notifyDescription = `Reports that a systemd unit entered a failed state: the OnFailure= handler
deploy/replicator-failure-notify@.service runs it with the failed unit's
name (%i). It first writes a CRITICAL journal line naming the unit, the host
and the build, then, when REPLICATOR_NOTIFY_URL is set, POSTs the same
incident there: as it is (REPLICATOR_NOTIFY_MODE=webhook, the default) or
wrapped in the cohort notifier's /dispatch request (notifier). A dispatch is
tried once, bounded by REPLICATOR_NOTIFY_TIMEOUT_SECONDS, and its outcome is
one more journal line. Settings come from the environment
(docs/settings.md); docs/operations.md, Failure notification, says more.

Exit status: always 0, whatever happens to the dispatch: it runs because
something has already failed, and must not add a failure of its own.`

// REPLICATOR_NOTIFY_MODE's values.
const (
	notifyWebhook  = "webhook"
	notifyNotifier = "notifier"
)

// notifyTimeoutMax caps REPLICATOR_NOTIFY_TIMEOUT_SECONDS well inside the
// handler unit's TimeoutStartSec, so a dispatch is ended by its own bound
// and never by systemd's kill.
const notifyTimeoutMax = 30

// notifyExcerpt bounds how much of an answer's body a journal line quotes.
const notifyExcerpt = 512

// idempotencyKeyMax is the longest idempotency_key the notifier takes.
const idempotencyKeyMax = 200

// ulidText matches a ULID in either case, as the notifier checks it.
var ulidText = regexp.MustCompile(`^[0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{26}$`)

// levelCritical is the journal level of the failure record.
const levelCritical = slog.LevelError + 4

// incident is what the handler records and sends: the Python worker's
// seven fields, in its order.
type incident struct {
	Level     string `json:"level"`
	Event     string `json:"event"`
	Unit      string `json:"unit"`
	Host      string `json:"host"`
	Build     string `json:"build"`
	Message   string `json:"message"`
	Timestamp string `json:"timestamp"`
}

func runNotify(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("notify-failure", "notify-failure UNIT", notifyDescription, stderr)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	unit := "<unknown>"
	if fs.NArg() > 0 && strings.TrimSpace(fs.Arg(0)) != "" {
		unit = fs.Arg(0)
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{ReplaceAttr: criticalLevel}))
	cfg, err := loadFrom(byNotify, os.Environ())
	if err != nil {
		// Recorded below all the same; only the dispatch is given up.
		cfg = Config{}
	}
	notifyFailure(ctx, log, unit, cfg, err)
	return 0
}

// criticalLevel names levelCritical as the journal reads it.
func criticalLevel(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.LevelKey && a.Value.Any() == levelCritical {
		a.Value = slog.StringValue("CRITICAL")
	}
	return a
}

// notifyFailure records the failure of unit, then dispatches it as cfg
// says. settingsErr, when not nil, is why cfg could not be read: the record
// is written and nothing dispatched.
func notifyFailure(ctx context.Context, log *slog.Logger, unit string, cfg Config, settingsErr error) {
	inc := newIncident(unit)
	// The floor, written before anything can fail or hang: the journal
	// holds the incident whatever happens to the dispatch.
	log.Log(ctx, levelCritical, inc.Message, "event", inc.Event, "unit", inc.Unit, "host", inc.Host,
		"build", inc.Build, "timestamp", inc.Timestamp)
	for _, w := range cfg.Warnings {
		log.Warn(w)
	}
	local := func(why string) {
		log.Warn(why+"; recorded in the journal only", "event", "unit_failed_not_dispatched", "unit", inc.Unit)
	}
	switch {
	case settingsErr != nil:
		local("settings unreadable: " + settingsErr.Error())
		return
	case cfg.NotifyURL == "":
		log.Info("no REPLICATOR_NOTIFY_URL; recorded in the journal only", "unit", inc.Unit)
		return
	}
	u, err := url.Parse(cfg.NotifyURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		local("REPLICATOR_NOTIFY_URL is not an http or https URL")
		return
	}
	body, authHeader, ok := notifyPayload(inc, cfg, local)
	if !ok {
		return
	}
	status, answer, err := dispatch(ctx, cfg, body, authHeader)
	attrs := []any{"unit", inc.Unit, "host", inc.Host, "build", inc.Build}
	switch {
	case err != nil:
		log.Error("dispatch failed; the incident is recorded above, not delivered", append(attrs, "event", "unit_failed_notify_failed",
			"notify_dispatched", false, "reason", dispatchReason(err, cfg.NotifyTimeout))...)
	case status/100 != 2:
		log.Error("dispatch failed; the incident is recorded above, not delivered", append(attrs, "event", "unit_failed_notify_failed",
			"notify_dispatched", false, "http_status", fmt.Sprint(status), "reason", fmt.Sprintf("the receiver answered %d, which is not a 2xx", status),
			"response", excerpt(answer))...)
	case cfg.NotifyMode == notifyWebhook:
		log.Info("unit failure notified", append(attrs, "event", "unit_failed_notified", "notify_dispatched", true, "http_status", fmt.Sprint(status))...)
	default:
		// The notifier answers 202 whether or not anyone was told; the
		// body's status is the delivery verdict.
		var verdict struct {
			Status any `json:"status"`
		}
		var delivery string
		if json.Unmarshal(answer, &verdict) == nil {
			delivery, _ = verdict.Status.(string)
		}
		attrs = append(attrs, "notify_dispatched", true, "http_status", fmt.Sprint(status))
		switch delivery {
		case "succeeded":
			log.Info("unit failure notified", append(attrs, "event", "unit_failed_notified", "delivery_status", delivery)...)
		case "partial":
			log.Warn("unit failure notified on some channels only", append(attrs, "event", "unit_failed_notify_degraded", "delivery_status", delivery)...)
		case "failed":
			log.Error("the notifier could not deliver the unit failure", append(attrs, "event", "unit_failed_notify_undelivered", "delivery_status", delivery)...)
		default:
			log.Warn("the notifier did not say whether the unit failure was delivered", append(attrs, "event", "unit_failed_notify_unconfirmed",
				"delivery_status", "unknown", "response", excerpt(answer))...)
		}
	}
}

// newIncident describes unit's failure on this host.
func newIncident(unit string) incident {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "<unknown>"
	}
	build := "<n/a>"
	// The build is the worker's, so only the worker's units carry it: any
	// other unit sent through the handler would be credited a build it
	// never had.
	if isWorkerUnit(unit) {
		build = buildID()
	}
	msg := unit + " entered a failed state on " + host
	if build != "<n/a>" {
		msg += " (build " + build + ")"
	}
	return incident{Level: "CRITICAL", Event: "unit_failed", Unit: unit, Host: host, Build: build, Message: msg,
		Timestamp: time.Now().UTC().Format("2006-01-02T15:04:05.000000Z")}
}

// isWorkerUnit reports whether unit runs the worker: replicator.service or
// an instance of a replicator@.service template.
func isWorkerUnit(unit string) bool {
	return unit == "replicator.service" || strings.HasPrefix(unit, "replicator@") && strings.HasSuffix(unit, ".service")
}

// notifyPayload is the request body for cfg's mode and the header its
// credential rides in; ok is false, after local says why, when nothing is
// to be sent.
func notifyPayload(inc incident, cfg Config, local func(string)) (body []byte, authHeader string, ok bool) {
	switch cfg.NotifyMode {
	case notifyWebhook:
		b, _ := json.Marshal(inc)
		return b, "Authorization", true
	case notifyNotifier:
	default:
		// Not webhook as a fallback: the likeliest unknown mode is a
		// misspelt notifier, and the flat payload would be refused there.
		local("REPLICATOR_NOTIFY_MODE is neither webhook nor notifier")
		return nil, "", false
	}
	// Lengths only: a mis-paste into these lines is likeliest the API key.
	if id := cfg.NotifyTemplateID; id == "" {
		local("notifier mode needs REPLICATOR_NOTIFY_TEMPLATE_ID")
		return nil, "", false
	} else if !ulidText.MatchString(id) {
		local(fmt.Sprintf("REPLICATOR_NOTIFY_TEMPLATE_ID (%d characters) is not a 26-character ULID", len(id)))
		return nil, "", false
	}
	if len(cfg.NotifyChannelIDs) == 0 {
		local("notifier mode needs REPLICATOR_NOTIFY_CHANNEL_IDS")
		return nil, "", false
	}
	for _, c := range cfg.NotifyChannelIDs {
		if !ulidText.MatchString(c) {
			local(fmt.Sprintf("a REPLICATOR_NOTIFY_CHANNEL_IDS entry (%d characters) is not a 26-character ULID", len(c)))
			return nil, "", false
		}
	}
	// One key per failure, from the failed run's InvocationID, so a POST
	// that landed but timed out is not delivered twice; none without it,
	// since a key that could repeat would swallow a later alert.
	var key *string
	if id := strings.TrimSpace(os.Getenv("MONITOR_INVOCATION_ID")); id != "" {
		k := inc.Unit + ":" + id
		if len(k) > idempotencyKeyMax {
			k = id
		}
		key = &k
	}
	b, _ := json.Marshal(struct {
		TemplateID     string            `json:"template_id"`
		ChannelIDs     []string          `json:"channel_ids"`
		Variables      incident          `json:"variables"`
		IdempotencyKey *string           `json:"idempotency_key"`
		Metadata       map[string]string `json:"metadata"`
	}{cfg.NotifyTemplateID, cfg.NotifyChannelIDs, inc, key, map[string]string{"event": "unit_failed"}})
	return b, "X-API-Key", true
}

// dispatch POSTs body once, bounded by cfg.NotifyTimeout, and returns the
// status and up to 64 KiB of the answer. Redirects are not followed.
func dispatch(ctx context.Context, cfg Config, body []byte, authHeader string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.NotifyTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.NotifyURL, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if cfg.NotifyToken != "" {
		if authHeader == "Authorization" {
			req.Header.Set(authHeader, "Bearer "+cfg.NotifyToken)
		} else {
			req.Header.Set(authHeader, cfg.NotifyToken)
		}
	}
	client := &http.Client{
		Transport:     &http.Transport{Proxy: http.ProxyFromEnvironment},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, answer, nil
}

// dispatchReason says in words why a dispatch got no answer. Errors are
// not quoted as they are: they repeat the URL, which may carry a secret.
func dispatchReason(err error, timeout time.Duration) string {
	var dnsErr *net.DNSError
	var opErr *net.OpError
	switch {
	case errors.Is(err, context.DeadlineExceeded) || os.IsTimeout(err):
		return fmt.Sprintf("timed out after %s s", seconds2text(timeout))
	case errors.As(err, &dnsErr):
		return "could not resolve the receiver's host"
	case strings.Contains(err.Error(), "tls:") || strings.Contains(err.Error(), "x509:"):
		return "TLS handshake or certificate failure"
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return "the receiver refused the connection or could not be reached"
	}
	return "the request failed before an answer"
}

// excerpt is the start of an answer's body in printable ASCII, so any body
// leaves a readable line.
func excerpt(b []byte) string {
	b = b[:min(len(b), notifyExcerpt)]
	out := make([]byte, len(b))
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			c = ' '
		}
		out[i] = c
	}
	return string(out)
}
