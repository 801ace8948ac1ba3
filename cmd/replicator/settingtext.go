package main

import (
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// The texts of a setting as docs/settings.md shows them (Markdown) and as
// `replicator worker --help` prints them (plain): one wording, two
// renderings.

// shownDefault is the default as the docs show it.
func (s setting) shownDefault() string {
	switch {
	case s.shownDef != "":
		return s.shownDef
	case s.def == "":
		return "none"
	}
	if n, err := strconv.ParseInt(s.def, 10, 64); err == nil && n >= 1<<20 && strings.HasSuffix(s.name, "_BYTES") {
		// Grouped, so a long number reads at a glance.
		return strings.TrimPrefix(sizeNote(s.name, s.def), " ") + " = " + grouped(n) + " bytes"
	}
	return "`" + s.def + "`" + sizeNote(s.name, s.def)
}

// grouped writes n with a comma between groups of three digits.
func grouped(n int64) string {
	d := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, r := range d {
		if i > 0 && (len(d)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// sizeNote spells a large default in days or binary units, " (7 days)",
// so the docs need not repeat the number by hand.
func sizeNote(name, def string) string {
	n, err := strconv.ParseInt(def, 10, 64)
	if err != nil || n <= 0 {
		return ""
	}
	plural := func(n int64, unit string) string {
		if n == 1 {
			return fmt.Sprintf(" (1 %s)", unit)
		}
		return fmt.Sprintf(" (%d %ss)", n, unit)
	}
	switch {
	case strings.HasSuffix(name, "_SECONDS") && n%(24*3600) == 0:
		return plural(n/(24*3600), "day")
	case strings.HasSuffix(name, "_SECONDS") && n%3600 == 0:
		return plural(n/3600, "hour")
	case strings.HasSuffix(name, "_BYTES") && n%(1<<30) == 0:
		return fmt.Sprintf(" (%d GiB)", n>>30)
	case strings.HasSuffix(name, "_BYTES") && n%(1<<20) == 0:
		return fmt.Sprintf(" (%d MiB)", n>>20)
	}
	return ""
}

// blankSays is what a blank value (VAR=) means, as the docs show it.
func (s setting) blankSays() string {
	switch s.blank {
	case blankDefault:
		return "the default"
	case blankEmpty:
		return s.blankText
	}
	return "refused"
}

// mdLink matches a Markdown link, [label](target).
var mdLink = regexp.MustCompile(`\[([^\]]*)\]\(([^)]*)\)`)

// plainText renders the Markdown of a setting's text for a terminal: code
// spans lose their backticks and a link keeps its label, saying which file
// under docs/ it points into: "[storage.md, local](storage.md#local)"
// becomes "docs/storage.md, local", "[below](#x)" becomes "below in
// docs/settings.md".
func plainText(md string) string {
	md = mdLink.ReplaceAllStringFunc(md, func(link string) string {
		m := mdLink.FindStringSubmatch(link)
		label, target := m[1], m[2]
		file, _, _ := strings.Cut(target, "#")
		switch {
		case strings.HasPrefix(file, "../"):
			return label // outside docs/: the label names it
		case file == "":
			file = "settings.md"
		}
		if strings.HasPrefix(label, file) {
			return "docs/" + label
		}
		return label + " in docs/" + file
	})
	return strings.ReplaceAll(md, "`", "")
}

// writeSettingsHelp prints the worker's settings for `replicator worker --help`.
func writeSettingsHelp(w io.Writer) {
	const indent = "      "
	for _, s := range settings {
		if s.by != byWorker {
			continue
		}
		fmt.Fprintf(w, "  %s\n", s.name)
		facts := "default " + s.shownDefault() + "; values: " + s.forms + "; blank: " + s.blankSays()
		for _, text := range []string{s.meaning, facts} {
			for _, line := range wrap(plainText(text), 78-len(indent)) {
				fmt.Fprintf(w, "%s%s\n", indent, line)
			}
		}
	}
}

// wrap breaks text into lines of at most width bytes, at spaces; a longer
// word has a line of its own.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		switch {
		case line == "":
			line = word
		case len(line)+1+len(word) <= width:
			line += " " + word
		default:
			lines = append(lines, line)
			line = word
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
