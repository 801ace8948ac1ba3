package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// MainWithBinary is a TestMain body for packages whose tests run a built
// program: it builds pkg (a path as `go build` takes it, relative to the
// package under test) into a temporary directory, stores the binary's path
// in *bin, runs the tests and exits with their status. The binary is built
// without the race detector even under -race: tests that run it measure
// its timing, while the code inside it runs under the detector in its own
// packages' tests.
func MainWithBinary(m *testing.M, pkg string, bin *string) {
	dir, err := os.MkdirTemp("", "replicator-bin-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*bin = filepath.Join(dir, filepath.Base(filepath.Clean(pkg)))
	if pkg == "." {
		if wd, err := os.Getwd(); err == nil {
			*bin = filepath.Join(dir, filepath.Base(wd))
		}
	}
	build := exec.Command("go", "build", "-o", *bin, pkg)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: building %s: %v\n", pkg, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
