package persist_test

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replicator-go/replicator/persist"
)

// docs/persist.md's table of defaults says what the constants say.
func TestDocsDefaultsTable(t *testing.T) {
	b, err := os.ReadFile("../docs/persist.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "\n## Defaults of the package\n")
	if !ok {
		t.Fatal("docs/persist.md has no section Defaults of the package")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	seconds := func(d time.Duration) string { return strconv.Itoa(int(d/time.Second)) + " s" }
	want := map[string]string{
		"persist.DefaultStream":       "`" + persist.DefaultStream + "`",
		"persist.DefaultGroup":        "`" + persist.DefaultGroup + "`",
		"persist.DefaultFactsStream":  "`" + persist.DefaultFactsStream + "`",
		"persist.DefaultDLQStream":    "`" + persist.DefaultDLQStream + "`",
		"persist.DefaultDedupePrefix": "`" + persist.DefaultDedupePrefix + "`",
		"persist.DefaultConcurrency":  strconv.Itoa(persist.DefaultConcurrency),
		"persist.DefaultMaxHeld":      strconv.Itoa(persist.DefaultMaxHeld),
		"persist.DefaultTimeout":      seconds(persist.DefaultTimeout),
		"persist.DrainMargin":         seconds(persist.DrainMargin),
	}
	seen := 0
	for _, l := range strings.Split(table, "\n") {
		cells := strings.Split(strings.Trim(strings.TrimSpace(l), "|"), "|")
		if len(cells) != 2 {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[0]), "`")
		w, ok := want[name]
		if !ok {
			continue
		}
		seen++
		if got := strings.TrimSpace(cells[1]); !strings.HasPrefix(got, w) {
			t.Errorf("docs/persist.md: %s is %q, the code says %s", name, got, w)
		}
	}
	if seen != len(want) {
		t.Errorf("docs/persist.md lists %d of the %d defaults", seen, len(want))
	}
}
