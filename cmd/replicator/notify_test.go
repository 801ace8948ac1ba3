package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// receiver is a loopback HTTP server that records each request and answers
// with status and body.
type receiver struct {
	*httptest.Server
	got chan *recorded
}

type recorded struct {
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T, status int, body string) *receiver {
	t.Helper()
	r := &receiver{got: make(chan *recorded, 4)}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.got <- &recorded{req.Header.Clone(), b}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(r.Close)
	return r
}

// received returns the one request the receiver got, failing if none.
func (r *receiver) received(t *testing.T) *recorded {
	t.Helper()
	select {
	case got := <-r.got:
		return got
	default:
		t.Fatal("the receiver got no request")
		return nil
	}
}

// TestNotifyWebhook runs the handler as the unit does, end to end: the
// journal record first, then the incident POSTed as it is with the bearer
// token, and the outcome; exit 0; the token never logged.
func TestNotifyWebhook(t *testing.T) {
	rcv := newReceiver(t, http.StatusNoContent, "")
	res := runBinary(t, []string{"REPLICATOR_NOTIFY_URL=" + rcv.URL + "/hook", "REPLICATOR_NOTIFY_TOKEN=s3cret-token", "BUILD_ID=abc1234"},
		"notify-failure", "replicator.service")
	if res.code != 0 {
		t.Fatalf("exit %d, want 0:\n%s", res.code, res.stderr)
	}
	got := rcv.received(t)
	if h := got.header.Get("Authorization"); h != "Bearer s3cret-token" {
		t.Errorf("Authorization = %q", h)
	}
	var inc map[string]string
	if err := json.Unmarshal(got.body, &inc); err != nil {
		t.Fatalf("body %s: %v", got.body, err)
	}
	host, _ := os.Hostname()
	want := map[string]string{"level": "CRITICAL", "event": "unit_failed", "unit": "replicator.service", "host": host, "build": "abc1234",
		"message": "replicator.service entered a failed state on " + host + " (build abc1234)"}
	for k, v := range want {
		if inc[k] != v {
			t.Errorf("incident %s = %q, want %q", k, inc[k], v)
		}
	}
	if len(inc) != 7 || !strings.HasSuffix(inc["timestamp"], "Z") {
		t.Errorf("incident %v: want the seven fields, a UTC timestamp", inc)
	}
	lines := strings.Split(strings.TrimSpace(res.stderr), "\n")
	if !strings.Contains(lines[0], `"level":"CRITICAL"`) || !strings.Contains(lines[0], `"event":"unit_failed"`) {
		t.Errorf("first journal line is not the failure record: %s", lines[0])
	}
	if !strings.Contains(res.stderr, `"event":"unit_failed_notified"`) {
		t.Errorf("no delivery record:\n%s", res.stderr)
	}
	if strings.Contains(res.stderr, "s3cret") {
		t.Errorf("the token reached the journal:\n%s", res.stderr)
	}
}

// TestNotifyNotifierMode: the incident wrapped in the notifier's request,
// the key in X-API-Key, the idempotency key from the failed run's
// invocation, and delivery scored on the answer's status.
func TestNotifyNotifierMode(t *testing.T) {
	const tmpl, ch1, ch2 = "01J9Z8Y7X6W5V4T3S2R1Q0P9N8", "01J9Z8Y7X6W5V4T3S2R1Q0P9N7", "01j9z8y7x6w5v4t3s2r1q0p9n6"
	for _, tt := range []struct{ answer, event string }{
		{`{"status":"succeeded","attempts":[{"status":"failed"}]}`, "unit_failed_notified"},
		{`{"status":"partial"}`, "unit_failed_notify_degraded"},
		{`{"status":"failed"}`, "unit_failed_notify_undelivered"},
		{`<html>accepted</html>`, "unit_failed_notify_unconfirmed"},
	} {
		rcv := newReceiver(t, http.StatusAccepted, tt.answer)
		res := runBinary(t, []string{"REPLICATOR_NOTIFY_URL=" + rcv.URL + "/api/v1/dispatch", "REPLICATOR_NOTIFY_MODE=notifier",
			"REPLICATOR_NOTIFY_TOKEN=nk_key", "REPLICATOR_NOTIFY_TEMPLATE_ID=" + tmpl,
			"REPLICATOR_NOTIFY_CHANNEL_IDS= " + ch1 + " ,, " + ch2, "MONITOR_INVOCATION_ID=0123abcd"},
			"notify-failure", "smoke-test.service")
		if res.code != 0 {
			t.Fatalf("exit %d:\n%s", res.code, res.stderr)
		}
		got := rcv.received(t)
		if h := got.header.Get("X-API-Key"); h != "nk_key" || got.header.Get("Authorization") != "" {
			t.Errorf("X-API-Key = %q, Authorization = %q", h, got.header.Get("Authorization"))
		}
		var req struct {
			TemplateID     string            `json:"template_id"`
			ChannelIDs     []string          `json:"channel_ids"`
			Variables      map[string]string `json:"variables"`
			IdempotencyKey *string           `json:"idempotency_key"`
			Metadata       map[string]string `json:"metadata"`
		}
		if err := json.Unmarshal(got.body, &req); err != nil {
			t.Fatal(err)
		}
		if req.TemplateID != tmpl || strings.Join(req.ChannelIDs, ",") != ch1+","+ch2 || req.Metadata["event"] != "unit_failed" ||
			req.IdempotencyKey == nil || *req.IdempotencyKey != "smoke-test.service:0123abcd" {
			t.Errorf("request %s", got.body)
		}
		if req.Variables["build"] != "<n/a>" || strings.Contains(req.Variables["message"], "build") {
			t.Errorf("another unit is credited the worker's build: %v", req.Variables)
		}
		if !strings.Contains(res.stderr, `"event":"`+tt.event+`"`) {
			t.Errorf("answer %s: want %s in\n%s", tt.answer, tt.event, res.stderr)
		}
	}
}

// TestNotifyFailsSoft: nothing the dispatch meets makes the handler fail,
// and nothing is sent where it could only be refused.
func TestNotifyFailsSoft(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	for _, tt := range []struct {
		name, want string
		env        []string
		status     int
	}{
		{name: "no URL: the record only", want: "recorded in the journal only"},
		{name: "a 500", status: 500, want: `"reason":"the receiver answered 500`},
		{name: "nobody listening", env: []string{"REPLICATOR_NOTIFY_URL=" + downURL}, want: `"event":"unit_failed_notify_failed"`},
		{name: "an unknown mode", status: 200, env: []string{"REPLICATOR_NOTIFY_MODE=notifer"}, want: "neither webhook nor notifier"},
		{name: "a template id that is not a ULID", status: 200, env: []string{"REPLICATOR_NOTIFY_MODE=notifier",
			"REPLICATOR_NOTIFY_TEMPLATE_ID=<id from step 1>", "REPLICATOR_NOTIFY_CHANNEL_IDS=01J9Z8Y7X6W5V4T3S2R1Q0P9N7"}, want: "(16 characters) is not a 26-character ULID"},
		{name: "a bad timeout is named and the default used", status: 200, env: []string{"REPLICATOR_NOTIFY_TIMEOUT_SECONDS=ten"},
			want: `REPLICATOR_NOTIFY_TIMEOUT_SECONDS=\"ten\" is not a whole number of seconds above 0; using the default, 10`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := tt.env
			var rcv *receiver
			if tt.status != 0 {
				rcv = newReceiver(t, tt.status, "oops\x00\xff")
				env = append([]string{"REPLICATOR_NOTIFY_URL=" + rcv.URL}, env...)
			}
			res := runBinary(t, env, "notify-failure", "replicator.service")
			if res.code != 0 || !strings.Contains(res.stderr, `"level":"CRITICAL"`) || !strings.Contains(res.stderr, tt.want) {
				t.Errorf("exit %d, want 0 and %s in:\n%s", res.code, tt.want, res.stderr)
			}
			if rcv != nil && strings.Contains(tt.want, "ULID") || strings.Contains(tt.want, "neither") {
				select {
				case <-rcv.got:
					t.Error("a request was sent that could only be refused")
				default:
				}
			}
		})
	}
}
