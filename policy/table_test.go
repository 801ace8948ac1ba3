package policy

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/replicator-go/replicator/envelope"
)

var stamp0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// published is a live fetch_policy_state for host, stamped sec seconds after
// stamp0.
func published(host string, interval float64, sec int) *envelope.FetchPolicyState {
	return &envelope.FetchPolicyState{
		SchemaVersion:      envelope.SchemaVersion,
		OccurredAt:         stamp0.Add(time.Duration(sec) * time.Second),
		Host:               host,
		MinIntervalSeconds: &interval,
	}
}

// revoked is a tombstone for host, stamped sec seconds after stamp0.
func revoked(host string, sec int) *envelope.FetchPolicyState {
	return &envelope.FetchPolicyState{
		SchemaVersion: envelope.SchemaVersion,
		OccurredAt:    stamp0.Add(time.Duration(sec) * time.Second),
		Host:          host,
		Revoked:       true,
	}
}

// mustApply applies m, which the test needs in force.
func mustApply(t testing.TB, tab *Table, m envelope.Model) {
	t.Helper()
	if err := tab.Apply(m); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

// isRefusal reports whether err is the refusal want names: nil, ErrStale,
// or ErrIgnored for any other (so not ErrStale).
func isRefusal(err, want error) bool {
	switch want {
	case nil:
		return err == nil
	case ErrStale:
		return errors.Is(err, ErrStale)
	default:
		return errors.Is(err, want) && !errors.Is(err, ErrStale)
	}
}

func TestTableApply(t *testing.T) {
	withVersion := func(p *envelope.FetchPolicyState, v int) *envelope.FetchPolicyState {
		p.SchemaVersion = v
		return p
	}
	withInterval := func(p *envelope.FetchPolicyState, v *float64) *envelope.FetchPolicyState {
		p.MinIntervalSeconds = v
		return p
	}
	type floor struct {
		Interval time.Duration
		OK       bool
	}
	tests := []struct {
		name  string
		apply []envelope.Model
		// wantApply is each Apply's error: nil, ErrStale, or ErrIgnored
		// for every other refusal (not ErrStale).
		wantApply []error
		// want is each probed host's Floor after every apply.
		want    map[string]floor
		wantLen int
	}{
		{
			name:      "unknown host has no policy",
			want:      map[string]floor{"unknown.test": {}},
			wantLen:   0,
			apply:     nil,
			wantApply: nil,
		},
		{
			name:      "a policy is stored under its host",
			apply:     []envelope.Model{published("slow.test", 30, 0)},
			wantApply: []error{nil},
			want:      map[string]floor{"slow.test": {30 * time.Second, true}},
			wantLen:   1,
		},
		{
			name:      "a later policy replaces an earlier one",
			apply:     []envelope.Model{published("slow.test", 30, 0), published("slow.test", 5, 1)},
			wantApply: []error{nil, nil},
			want:      map[string]floor{"slow.test": {5 * time.Second, true}},
			wantLen:   1,
		},
		{
			name:      "zero is a real interval",
			apply:     []envelope.Model{published("fast.test", 0, 0)},
			wantApply: []error{nil},
			want:      map[string]floor{"fast.test": {0, true}},
			wantLen:   1,
		},
		{
			name:      "fractional seconds",
			apply:     []envelope.Model{published("a.test", 0.3, 0)},
			wantApply: []error{nil},
			want:      map[string]floor{"a.test": {300 * time.Millisecond, true}},
			wantLen:   1,
		},
		{
			name: "a republished set stamped with one instant applies whole",
			apply: []envelope.Model{
				published("a.test", 30, 0), published("b.test", 5, 0), published("c.test", 2, 0),
				published("a.test", 10, 0),
			},
			wantApply: []error{nil, nil, nil, nil},
			want: map[string]floor{
				"a.test": {10 * time.Second, true},
				"b.test": {5 * time.Second, true},
				"c.test": {2 * time.Second, true},
			},
			wantLen: 3,
		},
		{
			name:      "a stale republish does not revert a newer policy",
			apply:     []envelope.Model{published("slow.test", 30, 10), published("slow.test", 2, 5)},
			wantApply: []error{nil, ErrStale},
			want:      map[string]floor{"slow.test": {30 * time.Second, true}},
			wantLen:   1,
		},
		{
			name:      "a revoked host falls back",
			apply:     []envelope.Model{published("slow.test", 30, 0), revoked("slow.test", 1)},
			wantApply: []error{nil, nil},
			want:      map[string]floor{"slow.test": {}},
			wantLen:   0,
		},
		{
			name: "a stale republish after a revoke does not resurrect the host",
			apply: []envelope.Model{
				published("slow.test", 30, 0), revoked("slow.test", 10), published("slow.test", 30, 5),
			},
			wantApply: []error{nil, nil, ErrStale},
			want:      map[string]floor{"slow.test": {}},
			wantLen:   0,
		},
		{
			name: "a newer policy after a revoke applies",
			apply: []envelope.Model{
				published("slow.test", 30, 0), revoked("slow.test", 10), published("slow.test", 3, 10),
			},
			wantApply: []error{nil, nil, nil},
			want:      map[string]floor{"slow.test": {3 * time.Second, true}},
			wantLen:   1,
		},
		{
			name:      "a stale revoke does not drop a newer policy",
			apply:     []envelope.Model{published("slow.test", 30, 10), revoked("slow.test", 5)},
			wantApply: []error{nil, ErrStale},
			want:      map[string]floor{"slow.test": {30 * time.Second, true}},
			wantLen:   1,
		},
		{
			name:      "revoking a host never seen",
			apply:     []envelope.Model{revoked("never.test", 0)},
			wantApply: []error{nil},
			want:      map[string]floor{"never.test": {}},
			wantLen:   0,
		},
		{
			name:      "ordering is per host",
			apply:     []envelope.Model{published("a.test", 30, 10), published("b.test", 5, 0)},
			wantApply: []error{nil, nil},
			want:      map[string]floor{"a.test": {30 * time.Second, true}, "b.test": {5 * time.Second, true}},
			wantLen:   2,
		},
		{
			name:      "hosts are lower-cased on both sides",
			apply:     []envelope.Model{published("SLOW.Test", 30, 0)},
			wantApply: []error{nil},
			want:      map[string]floor{"slow.test": {30 * time.Second, true}, "Slow.TEST": {30 * time.Second, true}},
			wantLen:   1,
		},
		{
			name:      "an IDN is kept under the ASCII name that is dialed",
			apply:     []envelope.Model{published("Bücher.test.", 30, 0)},
			wantApply: []error{nil},
			want: map[string]floor{
				"xn--bcher-kva.test": {30 * time.Second, true}, "bücher.test": {30 * time.Second, true},
				"BÜCHER.TEST": {30 * time.Second, true}, "b\u00fccher.test.": {30 * time.Second, true},
			},
			wantLen: 1,
		},
		{
			name:      "a trailing dot names the same host",
			apply:     []envelope.Model{published("slow.test.", 30, 0)},
			wantApply: []error{nil},
			want:      map[string]floor{"slow.test": {30 * time.Second, true}, "SLOW.test.": {30 * time.Second, true}},
			wantLen:   1,
		},
		{
			name:      "every spelling of an address shares its entry",
			apply:     []envelope.Model{published("0x7f.1", 5, 0)},
			wantApply: []error{nil},
			want: map[string]floor{
				"127.0.0.1": {5 * time.Second, true}, "2130706433": {5 * time.Second, true},
				"127.1": {5 * time.Second, true}, "::ffff:127.0.0.1": {5 * time.Second, true},
				"[::ffff:7f00:1]": {5 * time.Second, true}, "１２７。０。０。１": {5 * time.Second, true},
				"127.0.0.2": {},
			},
			wantLen: 1,
		},
		{
			name:      "a later frame in another spelling replaces the earlier",
			apply:     []envelope.Model{published("127.0.0.1", 30, 0), published("2130706433", 5, 1), published("[::FFFF:127.0.0.1]", 7, 0)},
			wantApply: []error{nil, nil, ErrStale},
			want:      map[string]floor{"127.0.0.1": {5 * time.Second, true}},
			wantLen:   1,
		},
		{
			name: "bad intervals are ignored and do not stamp the host",
			apply: []envelope.Model{
				published("a.test", 5, 0),
				published("a.test", -1, 9),
				published("a.test", math.NaN(), 9),
				published("a.test", math.Inf(1), 9),
				withInterval(published("a.test", 0, 9), nil),
				published("a.test", 7, 1),
			},
			wantApply: []error{nil, ErrIgnored, ErrIgnored, ErrIgnored, ErrIgnored, nil},
			want:      map[string]floor{"a.test": {7 * time.Second, true}},
			wantLen:   1,
		},
		{
			name:      "an absurd interval is clamped, not overflowed",
			apply:     []envelope.Model{published("a.test", 1e300, 0)},
			wantApply: []error{nil},
			want:      map[string]floor{"a.test": {maxInterval, true}},
			wantLen:   1,
		},
		{
			name:      "other schema versions are ignored",
			apply:     []envelope.Model{withVersion(published("a.test", 5, 0), 2)},
			wantApply: []error{ErrIgnored},
			want:      map[string]floor{"a.test": {}},
			wantLen:   0,
		},
		{
			name: "other event types are ignored",
			apply: []envelope.Model{
				&envelope.BlobAvailable{SchemaVersion: 1, OccurredAt: stamp0, CommandID: "c1", URL: "https://a.test/"},
				&envelope.ContentFetch{SchemaVersion: 1, OccurredAt: stamp0, CommandID: "c2", URL: "https://a.test/"},
				nil,
				(*envelope.FetchPolicyState)(nil),
			},
			wantApply: []error{ErrIgnored, ErrIgnored, ErrIgnored, ErrIgnored},
			want:      map[string]floor{"a.test": {}},
			wantLen:   0,
		},
		{
			name:      "an empty host is ignored",
			apply:     []envelope.Model{published("", 5, 0)},
			wantApply: []error{ErrIgnored},
			want:      map[string]floor{"": {}},
			wantLen:   0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := NewTable()
			if len(tt.apply) != len(tt.wantApply) {
				t.Fatalf("%d models, %d wanted results", len(tt.apply), len(tt.wantApply))
			}
			for i, m := range tt.apply {
				if err := tab.Apply(m); !isRefusal(err, tt.wantApply[i]) {
					t.Errorf("Apply #%d error = %v; want %v", i, err, tt.wantApply[i])
				}
			}
			got := make(map[string]floor)
			for host := range tt.want {
				d, ok := tab.Floor(host)
				got[host] = floor{d, ok}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("floors (-want +got):\n%s", diff)
			}
			if got := tab.Len(); got != tt.wantLen {
				t.Errorf("Len() = %d; want %d", got, tt.wantLen)
			}
		})
	}
}

func TestTableSetAndRevoke(t *testing.T) {
	tab := NewTable()
	at := func(sec int) time.Time { return stamp0.Add(time.Duration(sec) * time.Second) }

	if err := tab.Set("Bücher.test.", 30*time.Second, at(0)); err != nil {
		t.Fatalf("Set: %v", err)
	}
	if d, ok := tab.Floor("xn--bcher-kva.test"); !ok || d != 30*time.Second {
		t.Errorf("Floor after Set = %v, %v; want 30s under the HostKey", d, ok)
	}
	// An equal instant applies (a republished set); an older one does not.
	if err := tab.Set("bücher.test", 0, at(0)); err != nil {
		t.Errorf("Set at the same instant: %v; want applied", err)
	}
	if err := tab.Set("bücher.test", 5*time.Second, at(-1)); !errors.Is(err, ErrStale) || !errors.Is(err, ErrIgnored) {
		t.Errorf("Set at an older instant: %v; want ErrStale wrapping ErrIgnored", err)
	}
	if d, ok := tab.Floor("bücher.test"); !ok || d != 0 {
		t.Errorf("Floor = %v, %v; want the 0 set at the same instant", d, ok)
	}
	// A frame applied later is judged against what Set put in force.
	if err := tab.Apply(published("bücher.test", 9, -1)); !errors.Is(err, ErrStale) {
		t.Errorf("Apply of an older frame after Set: %v; want ErrStale", err)
	}

	if err := tab.Revoke("XN--BCHER-KVA.test", at(10)); err != nil {
		t.Fatalf("Revoke: %v", err)
	}
	if _, ok := tab.Floor("bücher.test"); ok || tab.Len() != 0 {
		t.Errorf("after Revoke: Floor ok = %v, Len = %d; want no policy", ok, tab.Len())
	}
	// The revocation's instant is remembered.
	if err := tab.Set("bücher.test", time.Second, at(5)); !errors.Is(err, ErrStale) {
		t.Errorf("Set older than the revocation: %v; want ErrStale", err)
	}
	if err := tab.Revoke("bücher.test", at(9)); !errors.Is(err, ErrStale) {
		t.Errorf("Revoke older than the revocation: %v; want ErrStale", err)
	}
	if err := tab.Set("bücher.test", time.Second, at(10)); err != nil || tab.Len() != 1 {
		t.Errorf("Set at the revocation's instant: %v, Len = %d; want applied", err, tab.Len())
	}

	for _, tc := range []struct {
		name string
		err  error
	}{
		{"an empty host", tab.Set("", time.Second, at(20))},
		{"an empty host revoked", tab.Revoke("", at(20))},
		{"a negative interval", tab.Set("a.test", -time.Nanosecond, at(20))},
		{"None", tab.Set("a.test", None, at(20))},
	} {
		if !isRefusal(tc.err, ErrIgnored) {
			t.Errorf("%s: %v; want ErrIgnored, not ErrStale", tc.name, tc.err)
		}
	}
	if _, ok := tab.Floor("a.test"); ok {
		t.Error("a refused Set left a policy in force")
	}
	if err := tab.Set("a.test", 1<<62, at(20)); err != nil {
		t.Fatal(err)
	}
	if d, _ := tab.Floor("a.test"); d != maxInterval {
		t.Errorf("a huge interval = %v; want clamped to %v", d, maxInterval)
	}
}
