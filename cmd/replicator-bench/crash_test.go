//go:build linux

package main

import (
	"bytes"
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/replicator-go/replicator/internal/testenv"
)

// workerBin is the replicator binary built once for the package's tests,
// without the race detector even under -race: it is the process being
// killed, and its timing is the real binary's.
var workerBin string

func TestMain(m *testing.M) { testenv.MainWithBinary(m, "../replicator", &workerBin) }

// testBench is a bench for one test: a private Redis, the prebuilt
// worker, a scratch dir the test owns.
func testBench(t *testing.T, out *bytes.Buffer) *bench {
	t.Helper()
	b, err := newBench(t.Context(), options{
		workerBin: workerBin,
		scratch:   t.TempDir(),
		runs:      1,
		timeout:   4 * time.Minute,
		verbose:   testing.Verbose(),
	}, out, out)
	if err != nil {
		t.Fatalf("newBench: %v", err)
	}
	t.Cleanup(b.close)
	return b
}

// TestCrashSuite is the crash suite at a reduced size: three workers over
// 1,500 commands published over eight seconds, a random worker killed
// with SIGKILL and restarted at ten random moments. Every command must end
// with a fact or a dead letter, every blob_available must name bytes that
// are stored and hash to its fingerprint, and nothing may stay pending.
// The full size (10,000 commands) is `replicator-bench crash`.
func TestCrashSuite(t *testing.T) {
	var out bytes.Buffer
	b := testBench(t, &out)
	cfg := crashConfig{
		commands:   1500,
		hosts:      50,
		workers:    3,
		kills:      10,
		publishFor: 8 * time.Second,
		settle:     2 * time.Minute,
		seed:       rand.Uint64(),
	}
	r, err := b.crashOnce(t.Context(), cfg)
	if err != nil {
		t.Fatalf("crash suite (seed %d): %v\n%s", cfg.seed, err, out.String())
	}
	r.print(&out, 1)
	t.Log("\n" + out.String())
	if err := r.failed(); err != nil {
		t.Errorf("crash suite (seed %d): %v", cfg.seed, err)
		for _, list := range [][]string{r.unresolved, r.wrong, r.blobsBad, r.strayBlobs} {
			for _, s := range list[:min(len(list), 10)] {
				t.Log(s)
			}
		}
	}
	if r.blobsChecked == 0 {
		t.Error("no blob_available was checked")
	}
}

func TestHelpDocumentsEveryMode(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("--help exited %d", code)
	}
	help := stderr.String()
	for _, m := range modes() {
		if !strings.Contains(help, "\n  "+m.name+"\n") {
			t.Errorf("--help does not document mode %q:\n%s", m.name, help)
		}
	}
	for _, want := range []string{"BENCHMARKS.md", "-redis-url", "-runs", "-worker"} {
		if !strings.Contains(help, want) {
			t.Errorf("--help does not mention %s", want)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "no mode", args: nil, want: "name at least one mode"},
		{name: "unknown mode", args: []string{"speed"}, want: `unknown mode "speed"`},
		{name: "unknown variant", args: []string{"-only", "serial,turbo", "throughput"}, want: `unknown variant "turbo"`},
		{name: "zero runs", args: []string{"-runs", "0", "latency"}, want: "-runs must be at least 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tt.args, &stdout, &stderr); code != 2 {
				t.Errorf("exit code = %d, want 2", code)
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("stderr does not say %q:\n%s", tt.want, stderr.String())
			}
		})
	}
}
