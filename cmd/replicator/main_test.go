package main

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/replicator-go/replicator/internal/testenv"
)

// binary is the replicator binary built once for the package's tests, so
// they exercise the real process: flags, environment, signals, exit codes.
var binary string

// Built without the race detector even under -race: the worker tests
// measure request spacing, and the package tests of fetch and policy run
// that code under the detector in-process.
func TestMain(m *testing.M) { testenv.MainWithBinary(m, ".", &binary) }

// result is what one run of the binary produced.
type result struct {
	stdout, stderr string
	code           int
}

// baseEnv is the test process's environment without any REPLICATOR_*
// variable, so the machine's settings never reach a test.
func baseEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REPLICATOR_") {
			out = append(out, kv)
		}
	}
	return out
}

// runBinary runs the binary to completion with env added to baseEnv,
// killing it after two minutes.
func runBinary(t *testing.T, env []string, args ...string) result {
	t.Helper()
	r, err := execBinary(t.Context(), env, args...)
	if err != nil {
		t.Fatalf("running %v: %v", args, err)
	}
	return r
}

// execBinary is runBinary for any goroutine: an error means the binary did
// not run to an exit status.
func execBinary(ctx context.Context, env []string, args ...string) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(baseEnv(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			return result{}, err
		}
		code = exit.ExitCode()
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}, nil
}

// redisClient connects the test itself to r.
func redisClient(t *testing.T, r *testenv.Redis) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr}, DisableCache: true})
	if err != nil {
		t.Fatalf("redis client: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// readStream returns every entry of stream.
func readStream(t *testing.T, c rueidis.Client, stream string) []rueidis.XRangeEntry {
	t.Helper()
	entries, err := c.Do(context.Background(), c.B().Xrange().Key(stream).Start("-").End("+").Build()).AsXRange()
	if err != nil {
		t.Fatalf("XRANGE %s: %v", stream, err)
	}
	return entries
}

// blobPath is the file a local-backend blob_uri names, failing the test
// when the URI is not a file:// URI.
func blobPath(t *testing.T, blobURI string) string {
	t.Helper()
	u, err := url.Parse(blobURI)
	if err != nil || u.Scheme != "file" {
		t.Fatalf("blob_uri %q is not a file:// URI", blobURI)
	}
	return u.Path
}
