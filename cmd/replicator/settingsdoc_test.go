package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/engine"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/guard"
	"github.com/replicator-go/replicator/policy"
	"github.com/replicator-go/replicator/policy/fleet"
)

var update = flag.Bool("update", false, "rewrite docs/settings.md's generated section from the settings table (go generate)")

// settingsDoc is docs/settings.md, from this package's directory.
const settingsDoc = "../../docs/settings.md"

// The generated section of docs/settings.md lies between these lines; the
// prose around it is written by hand.
const (
	docBegin = "<!-- Generated from the settings table in cmd/replicator/config.go by `go generate ./...`: edit the table, not this section. -->"
	docEnd   = "<!-- End of the generated section. -->"
)

// TestSettingsDoc fails while docs/settings.md's tables differ from the
// settings table; with -update (go generate) it rewrites them.
func TestSettingsDoc(t *testing.T) {
	old, err := os.ReadFile(settingsDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(old)
	before, rest, ok1 := strings.Cut(doc, docBegin+"\n")
	_, after, ok2 := strings.Cut(rest, docEnd+"\n")
	if !ok1 || !ok2 {
		t.Fatalf("%s lacks the lines that bound its generated section:\n%s\n%s", settingsDoc, docBegin, docEnd)
	}
	want := before + docBegin + "\n" + settingsTables() + docEnd + "\n" + after
	if *update {
		if want != doc {
			if err := os.WriteFile(settingsDoc, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	if want != doc {
		t.Errorf("docs/settings.md is stale: run `go generate ./...`\n%s", firstDifference(doc, want))
	}
}

// firstDifference shows the first line where the file and its regenerated
// text part.
func firstDifference(file, regenerated string) string {
	a, b := strings.Split(file, "\n"), strings.Split(regenerated, "\n")
	i := 0
	for i < min(len(a), len(b)) && a[i] == b[i] {
		i++
	}
	at := func(lines []string) string {
		if i < len(lines) {
			return lines[i]
		}
		return "(end of file)"
	}
	return fmt.Sprintf("line %d:\n  file:        %s\n  regenerated: %s", i+1, at(a), at(b))
}

// settingsTables renders the generated section: the worker's settings, the
// Python worker's and then the project's own; those the operator
// subcommands read; and the Python worker's this worker does not read.
func settingsTables() string {
	var b strings.Builder
	for _, part := range []struct {
		heading string
		keep    func(setting) bool
	}{
		{"The Python worker's", func(s setting) bool { return s.by == byWorker && !s.own }},
		{"The project's own", func(s setting) bool { return s.by == byWorker && s.own }},
		{"Read by `replicator check-redis` and `replicator notify-failure`", func(s setting) bool { return s.by == byCheckRedis || s.by == byNotify }},
		{"The Python worker's, not read here", func(s setting) bool { return s.by == byNone }},
	} {
		b.WriteString("\n### " + part.heading + "\n\n")
		b.WriteString("| Variable | Default | Values | Blank (`VAR=`) | Meaning |\n|---|---|---|---|---|\n")
		for _, s := range settings {
			if part.keep(s) {
				b.WriteString("| `" + s.name + "` | " + s.shownDefault() + " | " + s.forms + " | " + s.blankSays() + " | " + s.meaning + " |\n")
			}
		}
	}
	b.WriteString("\n")
	return b.String()
}

// TestSettingsTable checks what the renderings rely on: every setting says
// what it accepts and means, in text that fits a table cell, and its links
// lead to a heading that exists.
func TestSettingsTable(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range settings {
		if !strings.HasPrefix(s.name, "REPLICATOR_") || seen[s.name] {
			t.Errorf("%s: not a REPLICATOR_ name, or listed twice", s.name)
		}
		seen[s.name] = true
		if s.forms == "" || s.meaning == "" {
			t.Errorf("%s: say what it accepts (forms) and what it means (meaning)", s.name)
		}
		if s.blank == blankEmpty && s.blankText == "" {
			t.Errorf("%s: blankEmpty needs blankText, what a blank value means", s.name)
		}
		for _, text := range []string{s.shownDefault(), s.forms, s.meaning, s.blankSays()} {
			if strings.ContainsAny(text, "|\n") {
				t.Errorf("%s: %q cannot sit in a table cell", s.name, text)
			}
			for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
				checkDocLink(t, s.name, m[2])
			}
		}
	}
}

// heading matches a Markdown heading line.
var heading = regexp.MustCompile(`(?m)^#{1,6} +(.+)$`)

// checkDocLink fails unless target, relative to docs/settings.md, names a
// file that exists and, after a #, the anchor of one of its headings.
func checkDocLink(t *testing.T, name, target string) {
	t.Helper()
	file, anchor, _ := strings.Cut(target, "#")
	if file == "" {
		file = "settings.md"
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(settingsDoc), file))
	if err != nil {
		t.Errorf("%s: link to %s: %v", name, target, err)
		return
	}
	if anchor == "" {
		return
	}
	for _, m := range heading.FindAllStringSubmatch(string(b), -1) {
		if headingAnchor(m[1]) == anchor {
			return
		}
	}
	t.Errorf("%s: link to %s: no heading of %s has that anchor", name, target, file)
}

// headingAnchor is the anchor a Markdown renderer gives a heading: lower
// case, punctuation dropped but for hyphens and underscores, spaces as
// hyphens.
func headingAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestSettingsHelp: `replicator worker --help` says, for every setting, the
// words docs/settings.md says: its default, values, blank and meaning.
func TestSettingsHelp(t *testing.T) {
	var b strings.Builder
	writeSettingsHelp(&b)
	help := strings.Join(strings.Fields(b.String()), " ")
	for _, s := range settings {
		if s.by != byWorker {
			if strings.Contains(help, s.name) {
				t.Errorf("%s: not the worker's, yet in its help", s.name)
			}
			continue
		}
		for _, text := range []string{s.name, s.shownDefault(), s.forms, s.blankSays(), s.meaning} {
			if plain := strings.Join(strings.Fields(plainText(text)), " "); !strings.Contains(help, plain) {
				t.Errorf("%s: the help lacks %q", s.name, plain)
			}
		}
	}
}

// TestSettingsDocConstants holds the values in docs/settings.md's
// "Constants that are not settings" to the constants in the code.
func TestSettingsDocConstants(t *testing.T) {
	secs := func(d time.Duration) string { return seconds2text(d) + " s" }
	want := map[string]string{
		"request headers per command":                              strconv.Itoa(guard.MaxHeaders),
		"request header bytes per command":                         strconv.Itoa(guard.MaxHeaderBytes) + ", as `len(name) + len(value) + 4` each",
		"redirects followed":                                       fmt.Sprintf("%d (%d requests)", fetch.DefaultMaxRedirects, fetch.DefaultMaxRedirects+1),
		"per-operation timeout when a command gives none":          secs(guard.DefaultTimeout),
		"escalation: first step, headroom above the floor, reset":  strings.Join([]string{secs(policy.EscalationFirstStep), secs(policy.EscalationHeadroom), secs(policy.EscalationReset)}, ", "),
		"hosts a local pacer tracks before pruning":                fmt.Sprintf("at least %d", policy.DefaultMaxHosts),
		"commands held per host, commands per host in the handler": fmt.Sprintf("%d, %d", contentfetch.DefaultMaxHeldPerHost, contentfetch.DefaultMaxActivePerHost),
		"entry ids of commands left pending, to take back":         fmt.Sprintf("%d × `REPLICATOR_MAX_HELD`", engine.NotedPerHeld),
		"drain margin at shutdown":                                 secs(contentfetch.DrainMargin) + " after `REPLICATOR_MAX_FETCH_SECONDS`",
		"passthrough header length, `detail` length":               fmt.Sprintf("%d characters, %d bytes", contentfetch.MaxPassthroughLength, envelope.MaxDetailLength),
		"stream names, dedupe key prefix": "`" + strings.Join([]string{contentfetch.DefaultStream, contentfetch.DefaultFactsStream,
			contentfetch.DefaultDLQStream, fleet.DefaultPolicyStream, contentfetch.DefaultDedupePrefix}, "`, `") + "`",
		// the engine's fateTimeout is unexported: not checked here.
		"bound on one command's fate writes": "",
	}
	b, err := os.ReadFile(settingsDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Constants that are not settings\n")
	if !ok {
		t.Fatal(`docs/settings.md has no section "Constants that are not settings"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	seen := map[string]bool{}
	for line := range strings.SplitSeq(section, "\n") {
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if !strings.HasPrefix(line, "| ") || len(cells) != 3 || cells[0] == " Constant" {
			continue
		}
		label, value := strings.TrimSpace(cells[0]), strings.TrimSpace(cells[1])
		w, known := want[label]
		switch {
		case !known:
			t.Errorf("row %q: add what its value should be to this test", label)
		case w != "" && value != w:
			t.Errorf("row %q says %q; the code says %q", label, value, w)
		}
		seen[label] = true
	}
	for label := range want {
		if !seen[label] {
			t.Errorf("no row %q", label)
		}
	}
}
