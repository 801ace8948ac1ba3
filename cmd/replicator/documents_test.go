package main

// The README and docs/ say what the code does, once: these tests read the
// code's facts (the settings slice, the subcommands' flag sets, the reason
// constants of package envelope) and fail when a document names one the
// code does not have, when the code has one no document names, or when a
// relative link does not resolve.

import (
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the module root, seen from this package's directory.
const repoRoot = "../.."

// document is one markdown file of the README or docs/.
type document struct {
	path string // relative to repoRoot, slash-separated
	text string
}

// documents returns README.md and every docs/*.md.
func documents(t *testing.T) []document {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	paths = append([]string{filepath.Join(repoRoot, "README.md")}, paths...)
	var docs []document
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(repoRoot, p)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, document{path: filepath.ToSlash(rel), text: string(b)})
	}
	if len(docs) < 2 {
		t.Fatalf("found %d documents, want the README and docs/*.md", len(docs))
	}
	return docs
}

// mdLine is one line of prose, or one logical line of a fenced code block
// (backslash continuations joined).
type mdLine struct {
	n     int // 1-based line number where it starts
	text  string
	fence bool // inside a fenced code block
}

var fenceRE = regexp.MustCompile("^\\s*(```|~~~)")

// lines splits a markdown text into prose lines and code-block lines.
func lines(text string) []mdLine {
	var out []mdLine
	in := false
	raw := strings.Split(text, "\n")
	for i := 0; i < len(raw); i++ {
		l := raw[i]
		if fenceRE.MatchString(l) {
			in = !in
			continue
		}
		if !in {
			out = append(out, mdLine{n: i + 1, text: l})
			continue
		}
		start := i
		for strings.HasSuffix(l, "\\") && i+1 < len(raw) && !fenceRE.MatchString(raw[i+1]) {
			i++
			l = strings.TrimSuffix(l, "\\") + " " + raw[i]
		}
		out = append(out, mdLine{n: start + 1, text: l, fence: true})
	}
	return out
}

var codeSpanRE = regexp.MustCompile("`([^`]+)`")

// codeTexts returns what a document writes as code: every inline code span
// of its prose and every logical line of its code blocks.
func codeTexts(d document) []mdLine {
	var out []mdLine
	for _, l := range lines(d.text) {
		if l.fence {
			out = append(out, l)
			continue
		}
		for _, m := range codeSpanRE.FindAllStringSubmatch(l.text, -1) {
			out = append(out, mdLine{n: l.n, text: m[1]})
		}
	}
	return out
}

// --- settings ---

var settingRE = regexp.MustCompile(`REPLICATOR_[A-Z0-9]+(?:_[A-Z0-9]+)*(_?\*)?`)

// TestDocumentsNameOnlyRealSettings fails when the README or a docs file
// names a REPLICATOR_* variable the settings slice does not have (a name
// ending in "*" must be the prefix of one), and when a setting of the slice
// appears in no docs file.
func TestDocumentsNameOnlyRealSettings(t *testing.T) {
	known := map[string]bool{}
	for _, s := range settings {
		known[s.name] = true
	}
	docs := documents(t)
	for _, d := range docs {
		for _, l := range lines(d.text) {
			for _, m := range settingRE.FindAllStringSubmatch(l.text, -1) {
				name, wild := m[0], m[1] != ""
				if !wild {
					if !known[name] {
						t.Errorf("%s:%d: %s is not a setting of the worker", d.path, l.n, name)
					}
					continue
				}
				prefix := strings.TrimSuffix(name, "*")
				found := false
				for k := range known {
					found = found || strings.HasPrefix(k, prefix)
				}
				if !found {
					t.Errorf("%s:%d: no setting of the worker starts with %s", d.path, l.n, prefix)
				}
			}
		}
	}
	for _, s := range settings {
		if !mentionedInDocsDir(docs, s.name) {
			t.Errorf("setting %s appears in no docs/*.md", s.name)
		}
	}
}

// mentionedInDocsDir reports whether a docs/*.md file has word, delimited
// so that a name is not found inside a longer one.
func mentionedInDocsDir(docs []document, word string) bool {
	re := regexp.MustCompile(`(^|[^A-Za-z0-9_])` + regexp.QuoteMeta(word) + `($|[^A-Za-z0-9_])`)
	for _, d := range docs {
		if strings.HasPrefix(d.path, "docs/") && re.MatchString(d.text) {
			return true
		}
	}
	return false
}

// --- reason tokens ---

// reasonTokens reads package envelope's source for the reason tokens the
// worker emits: every constant of type Reason, ReplicateReason or
// PersistReason, and the dead-letter reasons, the DLQ* string constants.
func reasonTokens(t *testing.T) map[string]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(repoRoot, "envelope", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{} // token → constant name
	fset := token.NewFileSet()
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				typ := ""
				if id, ok := vs.Type.(*ast.Ident); ok {
					typ = id.Name
				}
				for i, name := range vs.Names {
					if typ != "Reason" && typ != "ReplicateReason" && typ != "PersistReason" && !strings.HasPrefix(name.Name, "DLQ") {
						continue
					}
					if i >= len(vs.Values) {
						t.Fatalf("envelope.%s: a reason constant without its own value", name.Name)
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						t.Fatalf("envelope.%s: a reason constant that is not a string literal", name.Name)
					}
					v, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					tokens[v] = name.Name
				}
			}
		}
	}
	// A floor, so that a reader that found nothing cannot pass.
	for _, want := range []string{"too_large", "invalid_request_options", "alias_unknown", "malformed_frame"} {
		if tokens[want] == "" {
			t.Fatalf("reason token %q not found in package envelope: the reader is broken", want)
		}
	}
	return tokens
}

// reasonContextREs find the places where a document names a reason token:
// a fact and its token ("`fetch_failed` · `too_large`", "`fetch_failed`/`x`"),
// a token after the word that says what it is ("permanent `x`",
// "dead letter `x`", "DLQ `x`", "refused `x`"), and the key=value forms of
// logs, listings and metrics ("reason=x", "dlq_reason=x", `reason="x"`,
// `reason != "x"`; not the reason label of outcome="parked", which says what
// a parked command waits for). The last group is the token.
var reasonContextREs = []*regexp.Regexp{
	regexp.MustCompile("`(?:fetch_failed|replication_failed)`\\s*(?:·|/)\\s*`([a-z0-9_]+)`"),
	regexp.MustCompile("(?:[Pp]ermanent|[Dd]ead letter|DLQ|[Rr]efused)\\s+`([a-z0-9]+_[a-z0-9_]+)`"),
	regexp.MustCompile(`(outcome="parked",\s*)?\breason(?:=|="|\s*!=\s*")([a-z0-9_]+)`),
}

// reasonColumnHeads are the table headers whose column holds reason tokens.
var reasonColumnHeads = map[string]bool{"reason": true, "token": true, "`dlq_reason`": true, "dlq_reason": true}

var snakeSpanRE = regexp.MustCompile("^`([a-z0-9]+(?:_[a-z0-9]+)+)`$")

// reasonMentions returns the reason tokens a document names, by line.
func reasonMentions(d document) map[int][]string {
	out := map[int][]string{}
	// column is the reason column of the table being read: -1 outside a
	// table, -2 in a table without one.
	column := -1
	for _, l := range lines(d.text) {
		for _, re := range reasonContextREs {
			for _, m := range re.FindAllStringSubmatch(l.text, -1) {
				if len(m) > 2 && m[1] != "" {
					continue // a parked command's reason label
				}
				out[l.n] = append(out[l.n], m[len(m)-1])
			}
		}
		if l.fence {
			continue
		}
		cells, isRow := tableCells(l.text)
		switch {
		case !isRow:
			column = -1
		case column == -1: // the header row
			column = -2
			for i, c := range cells {
				if reasonColumnHeads[strings.ToLower(c)] {
					column = i
				}
			}
		case column >= 0 && column < len(cells):
			if m := snakeSpanRE.FindStringSubmatch(cells[column]); m != nil {
				out[l.n] = append(out[l.n], m[1])
			}
		}
	}
	return out
}

// tableCells splits a markdown table row into trimmed cells.
func tableCells(line string) ([]string, bool) {
	s := strings.TrimSpace(line)
	if !strings.HasPrefix(s, "|") || !strings.HasSuffix(s, "|") || len(s) < 2 {
		return nil, false
	}
	parts := strings.Split(s[1:len(s)-1], "|")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts, true
}

// TestDocumentsNameOnlyRealReasons fails when a document names, where it
// names a reason token (see reasonContextREs and reasonColumnHeads), one the
// code does not emit, and when a token the code emits appears in no
// docs/*.md.
func TestDocumentsNameOnlyRealReasons(t *testing.T) {
	tokens := reasonTokens(t)
	docs := documents(t)
	seen := 0
	for _, d := range docs {
		for n, ms := range reasonMentions(d) {
			for _, m := range ms {
				seen++
				if tokens[m] == "" {
					t.Errorf("%s:%d: %q is named as a reason token, but package envelope has no such token", d.path, n, m)
				}
			}
		}
	}
	if seen < len(tokens) {
		t.Errorf("recognised %d reason mentions in the documents, fewer than the %d tokens: the recognition is broken", seen, len(tokens))
	}
	for tok, name := range tokens {
		if !mentionedInDocsDir(docs, "`"+tok+"`") {
			t.Errorf("reason token %q (envelope.%s) appears in no docs/*.md", tok, name)
		}
	}
}

// --- the replicator command's flags ---

// commandFlags runs `replicator <path> --help` for every subcommand, and for
// every nested one a help text names ("'replicator seed replicate --help'"),
// and reads the flags each defines from its usage text.
func commandFlags(t *testing.T) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	nestedRE := regexp.MustCompile(`replicator ((?:[a-z]+ )+)--help`)
	flagRE := regexp.MustCompile(`(?m)^  -([A-Za-z0-9][A-Za-z0-9-]*)`)
	var visit func(path string)
	visit = func(path string) {
		if _, done := out[path]; done {
			return
		}
		var stderr bytes.Buffer
		args := append(strings.Fields(path), "--help")
		if code := run(context.Background(), args, io.Discard, &stderr); code != 0 {
			t.Fatalf("replicator %s --help: exit %d\n%s", path, code, stderr.String())
		}
		usage := stderr.String()
		if !strings.Contains(usage, "Usage: replicator "+path) {
			t.Fatalf("replicator %s --help prints no usage of its own:\n%s", path, usage)
		}
		flags := map[string]bool{"h": true, "help": true}
		if _, after, ok := strings.Cut(usage, "\nFlags:\n"); ok {
			for _, m := range flagRE.FindAllStringSubmatch(after, -1) {
				flags[m[1]] = true
			}
		}
		out[path] = flags
		for _, m := range nestedRE.FindAllStringSubmatch(usage, -1) {
			if nested := strings.TrimSpace(m[1]); nested != path && strings.HasPrefix(nested, path+" ") {
				visit(nested)
			}
		}
	}
	for _, c := range subcommands() {
		visit(c.name)
	}
	return out
}

// commandRE finds an invocation of the binary in a code span or a code
// line: "replicator", at the start or after white space, "/" or "(", then
// white space and a lower-case word.
var commandRE = regexp.MustCompile(`(?:^|[\s/(])replicator\s+([a-z]+(?:\s.*)?)$`)

// flagTokenRE is a flag on a command line: -x, --name, --name=value.
var flagTokenRE = regexp.MustCompile(`^--?([A-Za-z][A-Za-z0-9-]*)(=.*)?$`)

// shellEnd says where a command ends on a line.
func shellEnd(tok string) bool {
	switch tok {
	case "|", "||", "&&", ";", "&":
		return true
	}
	return strings.HasPrefix(tok, "#") || strings.HasPrefix(tok, ">") || strings.HasPrefix(tok, "2>") ||
		strings.HasPrefix(tok, "<") || strings.HasPrefix(tok, ")")
}

// TestDocumentsNameOnlyRealFlags fails when a document shows the replicator
// command (in a code span or a code block: `replicator <subcommand> …`,
// `./replicator …`, `go run ./cmd/replicator …`) with a subcommand it does
// not have, or with a flag that subcommand does not define.
func TestDocumentsNameOnlyRealFlags(t *testing.T) {
	cmds := commandFlags(t)
	checked := 0
	for _, d := range documents(t) {
		for _, l := range codeTexts(d) {
			// A line may hold several invocations ("a && replicator b");
			// each starts at its own "replicator".
			for rest := l.text; ; {
				loc := commandRE.FindStringSubmatchIndex(rest)
				if loc == nil {
					break
				}
				words := strings.Fields(rest[loc[2]:loc[3]])
				rest = rest[loc[2]:]
				// The longest subcommand path the words start with.
				path := ""
				for i := 1; i <= len(words); i++ {
					if _, ok := cmds[strings.Join(words[:i], " ")]; ok {
						path = strings.Join(words[:i], " ")
					}
				}
				if path == "" {
					if w := words[0]; regexp.MustCompile(`^[a-z]+$`).MatchString(w) && len(words) > 1 && strings.HasPrefix(words[1], "-") {
						t.Errorf("%s:%d: `replicator %s` is not a subcommand", d.path, l.n, w)
					}
					continue
				}
				for _, w := range words[len(strings.Fields(path)):] {
					if shellEnd(w) {
						break
					}
					m := flagTokenRE.FindStringSubmatch(w)
					if m == nil {
						continue
					}
					checked++
					if !cmds[path][m[1]] {
						t.Errorf("%s:%d: `replicator %s` has no flag -%s", d.path, l.n, path, m[1])
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Error("recognised no flag of the replicator command in the documents: the recognition is broken")
	}
}

// --- links ---

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocumentLinksResolve fails when a relative link in the README or a
// docs file names a path that does not exist, or an anchor that no heading
// of the markdown file it points into produces (GitHub's slugs).
func TestDocumentLinksResolve(t *testing.T) {
	anchors := map[string]map[string]bool{} // file → its anchors
	anchorsOf := func(file string) map[string]bool {
		if a, ok := anchors[file]; ok {
			return a
		}
		b, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(file)))
		if err != nil {
			t.Fatal(err)
		}
		a := headingAnchors(string(b))
		anchors[file] = a
		return a
	}
	links := 0
	for _, d := range documents(t) {
		for _, l := range lines(d.text) {
			if l.fence {
				continue
			}
			prose := codeSpanRE.ReplaceAllString(l.text, "")
			for _, m := range linkRE.FindAllStringSubmatch(prose, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				file, anchor, _ := strings.Cut(target, "#")
				resolved := d.path
				if file != "" {
					resolved = filepath.ToSlash(filepath.Join(filepath.Dir(d.path), file))
					if strings.HasPrefix(resolved, "../") || filepath.IsAbs(file) {
						t.Errorf("%s:%d: link %q leaves the repository", d.path, l.n, target)
						continue
					}
					if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(resolved))); err != nil {
						t.Errorf("%s:%d: link %q: %s does not exist", d.path, l.n, target, resolved)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(resolved, ".md") {
					t.Errorf("%s:%d: link %q: an anchor into a file that is not markdown", d.path, l.n, target)
					continue
				}
				if !anchorsOf(resolved)[anchor] {
					t.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", d.path, l.n, target, resolved, anchor)
				}
			}
		}
	}
	if links == 0 {
		t.Error("found no relative link in the documents: the reader is broken")
	}
}

var (
	headingRE    = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	inlineLinkRE = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// headingAnchors returns the anchors GitHub gives a markdown file's headings:
// the heading's text lower-cased, links reduced to their text, every
// character but letters, digits, spaces, '-' and '_' dropped, spaces turned
// into '-'; a repeated anchor gets "-1", "-2", … appended.
func headingAnchors(text string) map[string]bool {
	out := map[string]bool{}
	count := map[string]int{}
	for _, l := range lines(text) {
		if l.fence {
			continue
		}
		m := headingRE.FindStringSubmatch(l.text)
		if m == nil {
			continue
		}
		s := inlineLinkRE.ReplaceAllString(m[2], "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(s) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		slug := b.String()
		if n := count[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		count[slug]++
	}
	return out
}

// --- the README's commands ---

// TestReadmeCommands checks the two quick-start commands are the README's,
// and that CI runs the README's test command exactly.
func TestReadmeCommands(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	quick := regexp.MustCompile("\\*\\*Run the tests:\\*\\* `([^`]+)`").FindSubmatch(readme)
	if quick == nil {
		t.Fatal("README: no \"**Run the tests:** `command`\" in the quick start")
	}
	testCmd := string(quick[1])
	if testCmd != "go test -race -count=1 ./..." {
		t.Errorf("README's test command is %q, want go test -race -count=1 ./...", testCmd)
	}
	if !bytes.Contains(readme, []byte("`go run ./cmd/replicator fetch URL`")) {
		t.Error("README: the quick start does not show `go run ./cmd/replicator fetch URL`")
	}
	ci, err := os.ReadFile(filepath.Join(repoRoot, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	var ran []string
	for _, l := range strings.Split(string(ci), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "go test ") {
			ran = append(ran, strings.TrimSpace(l))
		}
	}
	sort.Strings(ran)
	if i := sort.SearchStrings(ran, testCmd); i == len(ran) || ran[i] != testCmd {
		t.Errorf(".ci/run does not run the README's test command %q; its go test lines: %q", testCmd, ran)
	}
}
