package main

import (
	"bytes"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/replicator-go/replicator/contentfetch/worker"
	"github.com/replicator-go/replicator/fetch"
)

func TestWarnOpenFiles(t *testing.T) {
	need := uint64(worker.OpenFiles(16384))
	tests := []struct {
		name  string
		limit uint64
		warn  bool
	}{
		{name: "unknown", limit: 0, warn: false},
		{name: "below", limit: need - 1, warn: true},
		{name: "exactly", limit: need, warn: false},
		{name: "above", limit: need * 2, warn: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			warnOpenFiles(slog.New(slog.NewJSONHandler(&buf, nil)), tt.limit, 16384)
			out := buf.String()
			if got := strings.Contains(out, "open-file limit"); got != tt.warn {
				t.Fatalf("warned = %v, want %v: %s", got, tt.warn, out)
			}
			if tt.warn && !strings.Contains(out, `"needed":`) {
				t.Errorf("the warning does not say what is needed: %s", out)
			}
		})
	}
}

// TestOpenFilesDocumented checks the figures docs/operations.md and the
// unit give for the open files against worker.OpenFiles.
func TestOpenFilesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	fixed := worker.OpenFiles(0)
	prose := strings.Join(strings.Fields(string(doc)), " ")
	for _, want := range []string{
		"2 × `REPLICATOR_CONCURRENCY` + " + grouped(int64(fixed)) + " descriptors",
		"up to " + grouped(fetch.MaxIdleConns) + " idle connections",
	} {
		if !strings.Contains(prose, want) {
			t.Errorf("docs/operations.md does not say %q", want)
		}
	}
	// The unit's limit and the concurrency it is said to cover.
	unit, err := os.ReadFile("../../deploy/replicator.service")
	if err != nil {
		t.Fatal(err)
	}
	const limit = 65536
	if !strings.Contains(string(unit), "LimitNOFILE="+strconv.Itoa(limit)+"\n") {
		t.Fatalf("deploy/replicator.service does not set LimitNOFILE=%d", limit)
	}
	covered := (limit - fixed) / 2
	if covered < 30000 || worker.OpenFiles(30000) > limit {
		t.Errorf("LimitNOFILE=%d covers a concurrency of %d, not about 30,000 as the documents say", limit, covered)
	}
	for name, text := range map[string]string{"docs/operations.md": string(doc), "deploy/replicator.service": string(unit)} {
		if !strings.Contains(strings.Join(strings.Fields(text), " "), "up to about 30,000") {
			t.Errorf("%s does not say the unit covers a concurrency up to about 30,000", name)
		}
	}
}
