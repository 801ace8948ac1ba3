package contentfetch_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/internal/testenv/fetchenv"
	"github.com/replicator-go/replicator/sink/memory"
)

// TestCapabilitySizes: the capability's concurrency is its Fetcher's
// MaxInFlight (DefaultConcurrency when unbounded), MaxHeld follows it, and
// the drain outlasts the longest fetch (docs/settings.md).
func TestCapabilitySizes(t *testing.T) {
	tests := []struct {
		name            string
		maxInFlight     int
		wantConcurrency int
	}{
		{name: "unbounded fetcher", wantConcurrency: contentfetch.DefaultConcurrency},
		{name: "bounded fetcher", maxInFlight: 300, wantConcurrency: 300},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fetch.New(fetch.Options{MaxInFlight: tt.maxInFlight, MaxFetchTime: 42 * time.Second, Logger: fetchenv.Quiet})
			t.Cleanup(f.Close)
			h := contentfetch.NewHandler(contentfetch.HandlerOptions{Fetcher: f, Sink: memory.New(memory.Options{}), Logger: fetchenv.Quiet})
			c := contentfetch.Capability(h)
			if c.Handler != capability.Handler(h) || c.Name != "fetch" || c.MetricsPrefix != contentfetch.MetricsPrefix {
				t.Errorf("handler %v, name %q, prefix %q; want h, fetch, %q", c.Handler, c.Name, c.MetricsPrefix, contentfetch.MetricsPrefix)
			}
			if c.Stream != contentfetch.DefaultStream || c.Group != contentfetch.DefaultGroup || c.FactsStream != contentfetch.DefaultFactsStream ||
				c.DLQStream != contentfetch.DefaultDLQStream || c.DedupePrefix != contentfetch.DefaultDedupePrefix || c.Consumer != "" {
				t.Errorf("keys = %+v, want the defaults", c)
			}
			want := tt.wantConcurrency + contentfetch.SpareHandlings
			if c.Concurrency != want || c.MaxHeld != contentfetch.DefaultMaxHeld(tt.wantConcurrency) {
				t.Errorf("concurrency %d, max held %d; want %d, %d", c.Concurrency, c.MaxHeld, want, contentfetch.DefaultMaxHeld(tt.wantConcurrency))
			}
			if c.MaxHeldPerKey != contentfetch.DefaultMaxHeldPerHost || c.MaxActivePerKey != contentfetch.DefaultMaxActivePerHost {
				t.Errorf("per host: held %d, active %d", c.MaxHeldPerKey, c.MaxActivePerKey)
			}
			if want := 42*time.Second + contentfetch.DrainMargin; c.DrainTimeout != want {
				t.Errorf("drain timeout %v, want %v", c.DrainTimeout, want)
			}
		})
	}
	if got := contentfetch.DefaultMaxHeld(1); got != contentfetch.MinDefaultMaxHeld {
		t.Errorf("DefaultMaxHeld(1) = %d, want the floor %d", got, contentfetch.MinDefaultMaxHeld)
	}
	if got := contentfetch.DefaultMaxHeld(1000); got != contentfetch.DefaultHeldPerRequest*1000 {
		t.Errorf("DefaultMaxHeld(1000) = %d, want %d", got, contentfetch.DefaultHeldPerRequest*1000)
	}
}

func wire(t *testing.T, cmd *envelope.ContentFetch) map[string]string {
	t.Helper()
	fields, err := envelope.ToWire(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return fields
}

// TestDecodeKeysByHost: every spelling of one host shares one queue (the
// pacer's key), and an unparseable URL gets the empty key, to be refused
// when handled (docs/politeness.md, Spacing: per host).
func TestDecodeKeysByHost(t *testing.T) {
	h := contentfetch.NewHandler(contentfetch.HandlerOptions{Sink: memory.New(memory.Options{}), Logger: fetchenv.Quiet})
	for url, want := range map[string]string{
		"http://bücher.test/1":           "xn--bcher-kva.test",
		"http://XN--BCHER-KVA.test.:81/": "xn--bcher-kva.test",
		"https://Origin.Test/a?b":        "origin.test",
		"http://[::1":                    "",
	} {
		cmd := fetchenv.Command(url)
		c, err := h.Decode(wire(t, cmd))
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		if c.Key != want || c.ID != cmd.CommandID {
			t.Errorf("%s: key %q, id %q; want %q, %q", url, c.Key, c.ID, want, cmd.CommandID)
		}
		if got, ok := c.Value.(*envelope.ContentFetch); !ok || got.URL != url {
			t.Errorf("%s: value %#v, want the decoded command", url, c.Value)
		}
	}
}

// TestDecodeRefusals: what the engine dead-letters, and the fact it
// announces for a schema version it does not read.
func TestDecodeRefusals(t *testing.T) {
	h := contentfetch.NewHandler(contentfetch.HandlerOptions{Sink: memory.New(memory.Options{}), Logger: fetchenv.Quiet})
	if c, err := h.Decode(map[string]string{"payload": "{"}); err == nil || c != nil {
		t.Errorf("a malformed frame: %v, %v; want an error and no command", c, err)
	}
	other, err := envelope.ToWire(&envelope.ContentReplicate{SchemaVersion: envelope.SchemaVersion, CommandID: "01JREP",
		OccurredAt: time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC), BlobURI: "file:///x.bin", Provider: "gcs", CredentialsAlias: "a", Destination: "d"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Decode(other); !errors.Is(err, envelope.ErrForeignPayload) {
		t.Errorf("another model: %v, want ErrForeignPayload", err)
	}

	cmd := fetchenv.Command("http://origin.test/")
	cmd.SchemaVersion = 2
	c, err := h.Decode(wire(t, cmd))
	if !errors.Is(err, envelope.ErrUnsupportedVersion) || c == nil {
		t.Fatalf("schema version 2: %v, %v; want ErrUnsupportedVersion with the command", c, err)
	}
	fact, ok := h.Failed(c, string(envelope.ReasonUnsupportedSchemaVersion), "", 0, time.Time{}).(*envelope.FetchFailed)
	if !ok || fact.Reason != envelope.ReasonUnsupportedSchemaVersion || !fact.Terminal || fact.Detail == nil || *fact.Detail != "schema_version=2" {
		t.Errorf("announced %+v, want a terminal unsupported_schema_version naming schema_version=2", fact)
	}
}

// TestFailedHandlerError is the fact the engine publishes at the delivery
// ceiling.
func TestFailedHandlerError(t *testing.T) {
	h := contentfetch.NewHandler(contentfetch.HandlerOptions{Sink: memory.New(memory.Options{}), Logger: fetchenv.Quiet})
	cmd := fetchenv.Command("http://origin.test/")
	c, err := h.Decode(wire(t, cmd))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	got := h.Failed(c, string(envelope.ReasonHandlerError), "boom", 5, at)
	want := contentfetch.FailedFact(cmd, envelope.ReasonHandlerError, "boom", 0, 5, at)
	a, _ := envelope.ToWire(got)
	b, _ := envelope.ToWire(want)
	if a["payload"] != b["payload"] {
		t.Errorf("fact %s, want %s", a["payload"], b["payload"])
	}
}

// TestHandleIsFetch: the engine's Handle is Fetch of the decoded command,
// with the line's attributes added and Stop cutting a politeness wait
// short.
func TestHandleIsFetch(t *testing.T) {
	stop := make(chan struct{})
	h := fetchenv.New(t, testenv.Status(http.StatusOK, nil, "hello"), fetchenv.Options{Interval: time.Hour})
	c, err := h.Handler.Decode(wire(t, fetchenv.Command(h.URL("origin.test", "/"))))
	if err != nil {
		t.Fatal(err)
	}
	c.Stop = stop
	out := h.Handler.Handle(t.Context(), c)
	if out.Fate != capability.Complete || out.Label != contentfetch.Stored || out.Stored != 5 {
		t.Fatalf("outcome %v, stored %d (%v); want stored, 5 bytes", out.Name(), out.Stored, out.Err)
	}
	attrs := map[string]string{}
	for _, a := range out.Attrs {
		attrs[a.Key] = a.Value.String()
	}
	if attrs["status_code"] != "200" || attrs["size_bytes"] != "5" || attrs["paced_ms"] == "" {
		t.Errorf("attrs = %v, want status_code 200, size_bytes 5 and paced_ms", attrs)
	}

	// The host's next window is an hour away: closing Stop ends the wait,
	// nothing sent.
	close(stop)
	out = h.Handler.Handle(t.Context(), c)
	if out.Fate != capability.Retry || !errors.Is(out.Err, contentfetch.ErrStopping) {
		t.Errorf("after stop: %v (%v), want transient ErrStopping", out.Name(), out.Err)
	}
	if n := h.Origin.Count(); n != 1 {
		t.Errorf("origin saw %d requests, want 1", n)
	}
}

// TestHandleParksOnlyBeforeItHasParked: a command that has not parked yet
// parks for any wait over ParkAfter; once parked, it sleeps through waits
// up to MaxWait, so a redirect chain whose every hop waits for its host
// ends instead of starting over at each park.
func TestHandleParksOnlyBeforeItHasParked(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/a", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/b", http.StatusFound) })
	mux.HandleFunc("/b", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("end")) })
	const interval = 50 * time.Millisecond
	h := fetchenv.New(t, mux, fetchenv.Options{Interval: interval, MaxWait: 5 * time.Second, ParkAfter: time.Millisecond})
	c, err := h.Handler.Decode(wire(t, fetchenv.Command(h.URL("origin.test", "/a"))))
	if err != nil {
		t.Fatal(err)
	}

	// The first hop goes at once; the second waits for the host: parked.
	out := h.Handler.Handle(t.Context(), c)
	if out.Fate != capability.Park || out.Wait <= 0 || out.Wait > interval || out.Key != "origin.test" {
		t.Fatalf("first handling: %v, wait %v, key %q (%v); want parked up to %v for origin.test", out.Name(), out.Wait, out.Key, out.Err, interval)
	}
	// Parked once, it sleeps through each hop's window: the chain ends.
	c.Parks = 1
	out = h.Handler.Handle(t.Context(), c)
	if out.Fate != capability.Complete || out.Label != contentfetch.Stored {
		t.Fatalf("after a park: %v (%v), want stored", out.Name(), out.Err)
	}
	if n := h.Origin.Count(); n != 3 {
		t.Errorf("origin saw %d requests, want 3 (a, then a and b)", n)
	}
}
