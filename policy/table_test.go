package policy

import (
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
		name      string
		apply     []envelope.Model
		wantApply []bool
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
			wantApply: []bool{true},
			want:      map[string]floor{"slow.test": {30 * time.Second, true}},
			wantLen:   1,
		},
		{
			name:      "a later policy replaces an earlier one",
			apply:     []envelope.Model{published("slow.test", 30, 0), published("slow.test", 5, 1)},
			wantApply: []bool{true, true},
			want:      map[string]floor{"slow.test": {5 * time.Second, true}},
			wantLen:   1,
		},
		{
			name:      "zero is a real interval",
			apply:     []envelope.Model{published("fast.test", 0, 0)},
			wantApply: []bool{true},
			want:      map[string]floor{"fast.test": {0, true}},
			wantLen:   1,
		},
		{
			name:      "fractional seconds",
			apply:     []envelope.Model{published("a.test", 0.3, 0)},
			wantApply: []bool{true},
			want:      map[string]floor{"a.test": {300 * time.Millisecond, true}},
			wantLen:   1,
		},
		{
			name: "a republished set stamped with one instant applies whole",
			apply: []envelope.Model{
				published("a.test", 30, 0), published("b.test", 5, 0), published("c.test", 2, 0),
				published("a.test", 10, 0),
			},
			wantApply: []bool{true, true, true, true},
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
			wantApply: []bool{true, false},
			want:      map[string]floor{"slow.test": {30 * time.Second, true}},
			wantLen:   1,
		},
		{
			name:      "a revoked host falls back",
			apply:     []envelope.Model{published("slow.test", 30, 0), revoked("slow.test", 1)},
			wantApply: []bool{true, true},
			want:      map[string]floor{"slow.test": {}},
			wantLen:   0,
		},
		{
			name: "a stale republish after a revoke does not resurrect the host",
			apply: []envelope.Model{
				published("slow.test", 30, 0), revoked("slow.test", 10), published("slow.test", 30, 5),
			},
			wantApply: []bool{true, true, false},
			want:      map[string]floor{"slow.test": {}},
			wantLen:   0,
		},
		{
			name: "a newer policy after a revoke applies",
			apply: []envelope.Model{
				published("slow.test", 30, 0), revoked("slow.test", 10), published("slow.test", 3, 10),
			},
			wantApply: []bool{true, true, true},
			want:      map[string]floor{"slow.test": {3 * time.Second, true}},
			wantLen:   1,
		},
		{
			name:      "a stale revoke does not drop a newer policy",
			apply:     []envelope.Model{published("slow.test", 30, 10), revoked("slow.test", 5)},
			wantApply: []bool{true, false},
			want:      map[string]floor{"slow.test": {30 * time.Second, true}},
			wantLen:   1,
		},
		{
			name:      "revoking a host never seen",
			apply:     []envelope.Model{revoked("never.test", 0)},
			wantApply: []bool{true},
			want:      map[string]floor{"never.test": {}},
			wantLen:   0,
		},
		{
			name:      "ordering is per host",
			apply:     []envelope.Model{published("a.test", 30, 10), published("b.test", 5, 0)},
			wantApply: []bool{true, true},
			want:      map[string]floor{"a.test": {30 * time.Second, true}, "b.test": {5 * time.Second, true}},
			wantLen:   2,
		},
		{
			name:      "hosts are lower-cased on both sides",
			apply:     []envelope.Model{published("SLOW.Test", 30, 0)},
			wantApply: []bool{true},
			want:      map[string]floor{"slow.test": {30 * time.Second, true}, "Slow.TEST": {30 * time.Second, true}},
			wantLen:   1,
		},
		{
			name:      "an IDN is kept under the ASCII name that is dialed",
			apply:     []envelope.Model{published("Bücher.test.", 30, 0)},
			wantApply: []bool{true},
			want: map[string]floor{
				"xn--bcher-kva.test": {30 * time.Second, true}, "bücher.test": {30 * time.Second, true},
				"BÜCHER.TEST": {30 * time.Second, true}, "b\u00fccher.test.": {30 * time.Second, true},
			},
			wantLen: 1,
		},
		{
			name:      "a trailing dot names the same host",
			apply:     []envelope.Model{published("slow.test.", 30, 0)},
			wantApply: []bool{true},
			want:      map[string]floor{"slow.test": {30 * time.Second, true}, "SLOW.test.": {30 * time.Second, true}},
			wantLen:   1,
		},
		{
			name:      "every spelling of an address shares its entry",
			apply:     []envelope.Model{published("0x7f.1", 5, 0)},
			wantApply: []bool{true},
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
			wantApply: []bool{true, true, false},
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
			wantApply: []bool{true, false, false, false, false, true},
			want:      map[string]floor{"a.test": {7 * time.Second, true}},
			wantLen:   1,
		},
		{
			name:      "an absurd interval is clamped, not overflowed",
			apply:     []envelope.Model{published("a.test", 1e300, 0)},
			wantApply: []bool{true},
			want:      map[string]floor{"a.test": {maxInterval, true}},
			wantLen:   1,
		},
		{
			name:      "other schema versions are ignored",
			apply:     []envelope.Model{withVersion(published("a.test", 5, 0), 2)},
			wantApply: []bool{false},
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
			wantApply: []bool{false, false, false, false},
			want:      map[string]floor{"a.test": {}},
			wantLen:   0,
		},
		{
			name:      "an empty host is ignored",
			apply:     []envelope.Model{published("", 5, 0)},
			wantApply: []bool{false},
			want:      map[string]floor{"": {}},
			wantLen:   0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := NewTable()
			var gotApply []bool
			for _, m := range tt.apply {
				gotApply = append(gotApply, tab.Apply(m))
			}
			if diff := cmp.Diff(tt.wantApply, gotApply); diff != "" {
				t.Errorf("Apply results (-want +got):\n%s", diff)
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
