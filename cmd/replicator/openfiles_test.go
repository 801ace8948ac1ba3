package main

import (
	"bytes"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/fetch"
)

func TestReportOpenFiles(t *testing.T) {
	const concurrency = 16384
	most, least := uint64(contentfetch.OpenFiles(concurrency)), uint64(contentfetch.MinOpenFiles(concurrency))
	tests := []struct {
		name  string
		limit uint64
		want  string // the line logged, "" for none
	}{
		{name: "unknown", limit: 0},
		{name: "too low", limit: least - 1, want: `"level":"WARN","msg":"the open-file limit is below what REPLICATOR_CONCURRENCY needs`},
		{name: "fitted at the least", limit: least, want: `"level":"INFO","msg":"fitting the open-file limit`},
		{name: "fitted", limit: 20000, want: `"bodies_storing_at_once":1680,"idle_connections":1680}`},
		{name: "room for all", limit: most},
		{name: "above", limit: most * 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			reportOpenFiles(slog.New(slog.NewJSONHandler(&buf, nil)), tt.limit, concurrency)
			out := buf.String()
			if tt.want == "" && out != "" || !strings.Contains(out, tt.want) {
				t.Fatalf("logged %q, want a line with %q", out, tt.want)
			}
		})
	}
}

// TestOpenFilesDocumented checks the figures docs/operations.md and the
// unit give for the open files against contentfetch.OpenFiles.
func TestOpenFilesDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	fixed := contentfetch.OpenFiles(0)
	_, pool := fetch.Options{}.OpenFiles()
	prose := strings.Join(strings.Fields(string(doc)), " ")
	for _, want := range []string{
		"2 × `REPLICATOR_CONCURRENCY` + " + grouped(int64(fixed)) + " descriptors",
		"up to " + grouped(int64(pool)) + " idle connections",
		"at least `REPLICATOR_CONCURRENCY` + " + grouped(int64(contentfetch.MinOpenFiles(0))) + " descriptors",
		"less " + grouped(int64(fixed-pool)) + ", is shared half and half",
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
	if covered < 30000 || contentfetch.OpenFiles(30000) > limit {
		t.Errorf("LimitNOFILE=%d covers a concurrency of %d, not about 30,000 as the documents say", limit, covered)
	}
	for name, text := range map[string]string{"docs/operations.md": string(doc), "deploy/replicator.service": string(unit)} {
		if !strings.Contains(strings.Join(strings.Fields(text), " "), "up to about 30,000") {
			t.Errorf("%s does not say the unit covers a concurrency up to about 30,000", name)
		}
	}
}
