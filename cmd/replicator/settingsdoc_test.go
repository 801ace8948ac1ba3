package main

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
		t.Errorf("docs/settings.md is stale: run `go generate ./...` (-file +table):\n%s", cmp.Diff(strings.Split(doc, "\n"), strings.Split(want, "\n")))
	}
}

// settingsTables renders the generated section: one table for the Python
// worker's settings and one for the project's own.
func settingsTables() string {
	var b strings.Builder
	for _, part := range []struct {
		heading string
		own     bool
	}{{"The Python worker's", false}, {"The project's own", true}} {
		b.WriteString("\n### " + part.heading + "\n\n")
		b.WriteString("| Variable | Default | Values | Blank (`VAR=`) | Meaning |\n|---|---|---|---|---|\n")
		for _, s := range settings {
			if s.own == part.own {
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
		for _, text := range []string{s.name, s.shownDefault(), s.forms, s.blankSays(), s.meaning} {
			if plain := strings.Join(strings.Fields(plainText(text)), " "); !strings.Contains(help, plain) {
				t.Errorf("%s: the help lacks %q", s.name, plain)
			}
		}
	}
}
