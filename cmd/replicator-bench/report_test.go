//go:build linux

package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestMedianAndPercentiles(t *testing.T) {
	tests := []struct {
		name       string
		xs         []float64
		wantMedian float64
	}{
		{name: "none", xs: nil, wantMedian: 0},
		{name: "odd", xs: []float64{3, 1, 2}, wantMedian: 2},
		{name: "even", xs: []float64{4, 1, 3, 2}, wantMedian: 2.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := median(tt.xs); got != tt.wantMedian {
				t.Errorf("median(%v) = %v, want %v", tt.xs, got, tt.wantMedian)
			}
		})
	}
	ds := make([]time.Duration, 100)
	for i := range ds {
		ds[i] = time.Duration(100-i) * time.Millisecond
	}
	p50, p90, p99, mx := latencies(ds)
	want := []time.Duration{50 * time.Millisecond, 90 * time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond}
	if diff := cmp.Diff(want, []time.Duration{p50, p90, p99, mx}); diff != "" {
		t.Errorf("latencies (-want +got):\n%s", diff)
	}
}

func TestWrongOutcome(t *testing.T) {
	blob := fact{event: "blob_available"}
	failed := func(reason string) fact { return fact{event: "fetch_failed", reason: reason} }
	dlq := func(reason string) deadLetter { return deadLetter{reason: reason} }
	tests := []struct {
		name  string
		kind  string
		facts []fact
		dls   []deadLetter
		wrong bool
	}{
		{name: "stored", kind: "ok", facts: []fact{blob}},
		{name: "stored twice", kind: "big", facts: []fact{blob, blob}},
		{name: "stored but failed", kind: "ok", facts: []fact{failed("http_status")}, wrong: true},
		{name: "stored then dead-lettered", kind: "ok", facts: []fact{blob}, dls: []deadLetter{dlq("http_status")}, wrong: true},
		{name: "404 fact and dead letter", kind: "not-found", facts: []fact{failed("http_status")}, dls: []deadLetter{dlq("http_status")}},
		{name: "404 dead letter, fact lost to a kill", kind: "not-found", dls: []deadLetter{dlq("http_status")}},
		{name: "404 fact, no dead letter", kind: "not-found", facts: []fact{failed("http_status")}, wrong: true},
		{name: "304 fact", kind: "not-modified", facts: []fact{failed("not_modified")}},
		{name: "304 dead-lettered", kind: "not-modified", facts: []fact{failed("not_modified")}, dls: []deadLetter{dlq("not_modified")}, wrong: true},
		{name: "malformed dead letter", kind: "malformed", dls: []deadLetter{dlq("malformed_frame")}},
		{name: "malformed with a fact", kind: "malformed", facts: []fact{blob}, dls: []deadLetter{dlq("malformed_frame")}, wrong: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			why := wrongOutcome(&command{kind: tt.kind}, tt.facts, tt.dls)
			if (why != "") != tt.wrong {
				t.Errorf("wrongOutcome = %q, want wrong=%v", why, tt.wrong)
			}
		})
	}
}

func TestCPUPerCommand(t *testing.T) {
	tests := []struct {
		r    tpResult
		want time.Duration
	}{
		{r: tpResult{commands: 20000, cpuWorker: 4.43}, want: 221500 * time.Nanosecond},
		{r: tpResult{commands: 1, cpuWorker: 0.0001}, want: 100 * time.Microsecond},
		{r: tpResult{commands: 0, cpuWorker: 1}, want: 0},
	}
	for _, tt := range tests {
		if got := tt.r.cpuPerCommand(); got != tt.want {
			t.Errorf("%d commands, %.4f s: CPU per command %v, want %v", tt.r.commands, tt.r.cpuWorker, got, tt.want)
		}
	}
}
