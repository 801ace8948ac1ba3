package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// goPackage is what TestLayoutMatchesGoList reads of `go list -json`.
type goPackage struct {
	ImportPath string
	Imports    []string
	Deps       []string
	Module     *struct {
		Path string
		Main bool
	}
}

// goList runs the go command in the module root and returns its output.
func goList(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = repoRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// moduleFacts is the module's layout as the go command sees it: for every
// package of the module (by path relative to the module), what it imports
// from the module and which of go.mod's direct requirements it compiles.
type moduleFacts struct {
	imports  map[string][]string
	compiles map[string][]string
}

func readModuleFacts(t *testing.T) moduleFacts {
	t.Helper()
	var mod struct {
		Module  struct{ Path string }
		Require []struct {
			Path     string
			Indirect bool
		}
	}
	if err := json.Unmarshal(goList(t, "mod", "edit", "-json"), &mod); err != nil {
		t.Fatal(err)
	}
	direct := map[string]bool{}
	for _, r := range mod.Require {
		if !r.Indirect {
			direct[r.Path] = true
		}
	}
	pkgs := map[string]goPackage{}
	dec := json.NewDecoder(bytes.NewReader(goList(t, "list", "-deps", "-json", "./...")))
	for {
		var p goPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs[p.ImportPath] = p
	}
	prefix := mod.Module.Path + "/"
	f := moduleFacts{imports: map[string][]string{}, compiles: map[string][]string{}}
	for path, p := range pkgs {
		if p.Module == nil || !p.Module.Main || !strings.HasPrefix(path, prefix) {
			continue
		}
		rel := strings.TrimPrefix(path, prefix)
		imports := []string{}
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, prefix) {
				imports = append(imports, strings.TrimPrefix(imp, prefix))
			}
		}
		compiles := []string{}
		for _, dep := range p.Deps {
			if m := pkgs[dep].Module; m != nil && direct[m.Path] && !slices.Contains(compiles, m.Path) {
				compiles = append(compiles, m.Path)
			}
		}
		slices.Sort(imports)
		slices.Sort(compiles)
		f.imports[rel] = imports
		f.compiles[rel] = compiles
	}
	if len(f.imports) < 10 {
		t.Fatalf("go list found %d packages in the module: the reader is broken", len(f.imports))
	}
	return f
}

// section returns the text of a markdown file's "## heading" section.
func section(t *testing.T, text, heading string) string {
	t.Helper()
	_, after, ok := strings.Cut(text, "\n## "+heading+"\n")
	if !ok {
		t.Fatalf("docs/layout.md has no section %q", heading)
	}
	if i := strings.Index(after, "\n## "); i >= 0 {
		after = after[:i]
	}
	return after
}

var backtickedRE = regexp.MustCompile("`([^`]+)`")

// names returns the backticked names of a table cell; "—" is none.
func names(cell string) []string {
	out := []string{}
	for _, m := range backtickedRE.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	slices.Sort(out)
	return out
}

// TestLayoutMatchesGoList checks docs/layout.md against the go command:
// the table of "What each package imports" has a row for every package of
// the module and no other, each with the module packages it imports and the
// direct requirements it compiles; every import between two packages of the
// "Dependency direction" diagram points at a higher row; and the
// "Packages" table names only packages or directories that exist, and
// covers every package.
func TestLayoutMatchesGoList(t *testing.T) {
	facts := readModuleFacts(t)
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "layout.md"))
	if err != nil {
		t.Fatal(err)
	}
	layout := string(b)

	// The dependency table.
	rows := map[string]bool{}
	for _, l := range strings.Split(section(t, layout, "What each package imports"), "\n") {
		cells, ok := tableCells(l)
		if !ok || len(cells) != 3 || !strings.HasPrefix(cells[0], "`") {
			continue
		}
		pkg := strings.Trim(cells[0], "`")
		rows[pkg] = true
		imports, known := facts.imports[pkg]
		if !known {
			t.Errorf("docs/layout.md, What each package imports: %s is not a package of the module", pkg)
			continue
		}
		if got := names(cells[1]); !slices.Equal(got, imports) {
			t.Errorf("docs/layout.md: %s imports %q from the module, go list says %q", pkg, got, imports)
		}
		if got := names(cells[2]); !slices.Equal(got, facts.compiles[pkg]) {
			t.Errorf("docs/layout.md: %s compiles %q, go list says %q", pkg, got, facts.compiles[pkg])
		}
	}
	for pkg := range facts.imports {
		if !rows[pkg] {
			t.Errorf("docs/layout.md, What each package imports: no row for %s", pkg)
		}
	}

	// The diagram: rows of packages separated by arrows, top first.
	diagram, _, _ := strings.Cut(section(t, layout, "Dependency direction"), "\n```\n\n")
	_, diagram, _ = strings.Cut(diagram, "```\n")
	level := map[string]int{}
	n := 0
	for _, l := range strings.Split(diagram, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || l == "↑" {
			continue
		}
		for _, name := range strings.FieldsFunc(l, func(r rune) bool { return strings.ContainsRune(",()+ ", r) }) {
			if _, ok := facts.imports[name]; !ok {
				t.Errorf("docs/layout.md, Dependency direction: %s is not a package of the module", name)
			}
			if _, dup := level[name]; dup {
				t.Errorf("docs/layout.md, Dependency direction: %s is on two rows", name)
			}
			level[name] = n
		}
		n++
	}
	if n < 3 {
		t.Fatalf("docs/layout.md, Dependency direction: read %d rows: the reader is broken", n)
	}
	for pkg, l := range level {
		for _, imp := range facts.imports[pkg] {
			if li, ok := level[imp]; ok && li >= l {
				t.Errorf("docs/layout.md, Dependency direction: %s imports %s, which is not above it", pkg, imp)
			}
		}
	}

	// The Packages table.
	var listed []string
	for _, l := range strings.Split(section(t, layout, "Packages"), "\n") {
		cells, ok := tableCells(l)
		if !ok || !strings.HasPrefix(cells[0], "`") {
			continue
		}
		name := strings.Trim(cells[0], "`")
		listed = append(listed, name)
		if strings.HasSuffix(name, "/") {
			if fi, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(name))); err != nil || !fi.IsDir() {
				t.Errorf("docs/layout.md, Packages: %s is not a directory of the repository", name)
			}
		} else if _, ok := facts.imports[name]; !ok {
			t.Errorf("docs/layout.md, Packages: %s is not a package of the module", name)
		}
	}
	for pkg := range facts.imports {
		covered := false
		for _, name := range listed {
			covered = covered || name == pkg || (strings.HasSuffix(name, "/") && strings.HasPrefix(pkg+"/", name))
		}
		if !covered {
			t.Errorf("docs/layout.md, Packages: no row covers %s", pkg)
		}
	}
}
