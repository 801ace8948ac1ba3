package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/policy"
	"github.com/replicator-go/replicator/policy/fleet"
	"github.com/replicator-go/replicator/sink/memory"
)

func runPolicy(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &stdout, &stderr)
	t.Logf("policy %s\nstdout:\n%sstderr:\n%s", strings.Join(args, " "), stdout.String(), stderr.String())
	return code, stdout.String()
}

func newClient(t *testing.T, r *testenv.Redis) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// refuseOverASecond refuses a politeness wait longer than a second, as a
// worker parks such a command.
func refuseOverASecond(ctx context.Context, host string, waited, wait time.Duration) error {
	if waited+wait > time.Second {
		return &parked{wait: wait}
	}
	return nil
}

type parked struct{ wait time.Duration }

func (p *parked) Error() string { return "parked for " + p.wait.String() }

// twice fetches url twice through a fetcher paced by table's floors (no
// spacing for hosts without one) and returns the second fetch's error: a
// floor longer than a second parks it.
func twice(t *testing.T, table *policy.Table, url string) error {
	t.Helper()
	f := fetch.New(fetch.Options{
		Guard: guard.New(guard.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}),
		Pacer: policy.NewLocal(policy.LocalOptions{DefaultInterval: policy.None, Floors: table}),
	})
	defer f.Close()
	var err error
	for i := range 2 {
		if _, err = f.Fetch(context.Background(), fetch.Request{URL: url, PacingWait: refuseOverASecond}, memory.New(memory.Options{})); err != nil && i == 0 {
			t.Fatalf("first fetch: %v", err)
		}
	}
	return err
}

func TestPolicy(t *testing.T) {
	r := testenv.StartRedis(t)
	client := newClient(t, r)
	o := testenv.StartOrigin(t, testenv.Status(http.StatusOK, nil, "ok"))
	url := o.URL + "/"
	ctx := context.Background()

	// A worker's view: replay the stream into a fresh table.
	view := func(t *testing.T) *policy.Table {
		t.Helper()
		table, _, err := replay(ctx, client)
		if err != nil {
			t.Fatal(err)
		}
		return table
	}

	t.Run("set publishes the whole set under one instant", func(t *testing.T) {
		code, out := runPolicy(t, "--redis-url", r.URL(), "set", "3600", "127.0.0.1", "LOCALHOST.")
		if code != 0 {
			t.Fatalf("exit %d, want 0", code)
		}
		entries, err := client.Do(ctx, client.B().Xrange().Key(fleet.DefaultPolicyStream).Start("-").End("+").Build()).AsXRange()
		if err != nil {
			t.Fatal(err)
		}
		var hosts, stamps []string
		for _, e := range entries {
			m, err := envelope.FromWire(e.FieldValues)
			if err != nil {
				t.Fatalf("entry %s does not decode: %v", e.ID, err)
			}
			p := m.(*envelope.FetchPolicyState)
			hosts = append(hosts, p.Host)
			stamps = append(stamps, e.FieldValues[envelope.FieldOccurredAt])
		}
		if diff := cmp.Diff([]string{"127.0.0.1", "localhost"}, hosts); diff != "" {
			t.Errorf("hosts published (-want +got):\n%s", diff)
		}
		if len(stamps) != 2 || stamps[0] != stamps[1] {
			t.Errorf("occurred_at of the set = %v, want one instant", stamps)
		}
		if !strings.Contains(out, "127.0.0.1                      1h0m0s apart (published)") {
			t.Errorf("output does not show the floor in force")
		}
		if floor, ok := view(t).Floor("localhost"); !ok || floor != time.Hour {
			t.Errorf("replayed floor of localhost = %v, %t; want 1h", floor, ok)
		}
	})

	t.Run("a published floor holds the host's next request back", func(t *testing.T) {
		err := twice(t, view(t), url)
		var p *parked
		if !errors.As(err, &p) || p.wait < 59*time.Minute {
			t.Fatalf("second fetch = %v, want parked for about an hour", err)
		}
	})

	t.Run("revoke returns the host to the default", func(t *testing.T) {
		code, out := runPolicy(t, "--redis-url", r.URL(), "revoke", "127.0.0.1")
		if code != 0 {
			t.Fatalf("exit %d, want 0", code)
		}
		if !strings.Contains(out, "revoked=true") || !strings.Contains(out, "min_interval_seconds=null") {
			t.Errorf("output does not show a revocation")
		}
		table := view(t)
		if _, ok := table.Floor("127.0.0.1"); ok {
			t.Errorf("127.0.0.1 still has a floor after its revocation")
		}
		if _, ok := table.Floor("localhost"); !ok {
			t.Errorf("revoking one host dropped another's floor")
		}
		if err := twice(t, table, url); err != nil {
			t.Errorf("second fetch after the revocation: %v", err)
		}
	})

	t.Run("show publishes nothing", func(t *testing.T) {
		before, _ := client.Do(ctx, client.B().Xlen().Key(fleet.DefaultPolicyStream).Build()).AsInt64()
		code, out := runPolicy(t, "--redis-url", r.URL(), "show", "localhost", "127.0.0.1")
		after, _ := client.Do(ctx, client.B().Xlen().Key(fleet.DefaultPolicyStream).Build()).AsInt64()
		if code != 0 || before != after {
			t.Errorf("exit %d, stream %d → %d entries; want 0 and no change", code, before, after)
		}
		if !strings.Contains(out, "localhost                      1h0m0s apart") || !strings.Contains(out, "127.0.0.1                      the default") {
			t.Errorf("output does not show both hosts' floors")
		}
	})
}

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"nothing", nil, "want an action"},
		{"unknown action", []string{"drop", "example.com"}, "unknown action"},
		{"set without hosts", []string{"set", "5"}, "at least one host"},
		{"negative seconds", []string{"set", "-1", "example.com"}, "finite number"},
		{"NaN seconds", []string{"set", "NaN", "example.com"}, "finite number"},
		{"a port", []string{"revoke", "example.com:443"}, "without scheme or port"},
		{"a URL", []string{"revoke", "https://example.com/"}, "without scheme or port"},
		{"a bad label", []string{"show", "exa mple.com"}, "not a DNS label"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tc.args, &stdout, &stderr); code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tc.want)
			}
		})
	}
}

func TestNormalizeHost(t *testing.T) {
	for raw, want := range map[string]string{
		"Example.COM.":  "example.com",
		"[2001:DB8::1]": "2001:db8::1",
		"10.0.0.1":      "10.0.0.1",
		"my_host-1.lan": "my_host-1.lan",
	} {
		if got, err := normalizeHost(raw); err != nil || got != want {
			t.Errorf("normalizeHost(%q) = %q, %v; want %q", raw, got, err, want)
		}
	}
}
