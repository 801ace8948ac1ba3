package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"google.golang.org/api/option"
)

// GCS is a fake Google Cloud Storage server (fake-gcs-server) answering its
// real JSON and XML HTTP API on 127.0.0.1, with a client pointed at it.
// The fake honours ifGenerationMatch=0 (412 when the object exists) and
// customTime on create and on patch, which is what the gcs sink relies on;
// gcs_test.go in this package pins both.
type GCS struct {
	// URL is the server's base URL, "http://127.0.0.1:PORT".
	URL string
	// Client talks to the server over HTTP without credentials.
	Client *storage.Client
	// Server is the in-process server, for test set-up that should not go
	// through the client under test. It is nil for StartGCSProcess.
	Server *fakestorage.Server

	stop func()
}

// StartGCS starts an in-process fake GCS server on a free loopback port with
// the given buckets created, and stops it when the test ends. It fails the
// test (never skips it) when the server cannot start.
func StartGCS(t testing.TB, buckets ...string) *GCS {
	t.Helper()
	g, err := NewGCS(buckets...)
	if err != nil {
		t.Fatalf("start fake gcs: %v", err)
	}
	t.Cleanup(g.Close)
	return g
}

// NewGCS is StartGCS for callers without a testing.TB (TestMain). The caller
// must Close it. Objects are kept in memory.
func NewGCS(buckets ...string) (*GCS, error) {
	srv, err := newFakeGCS("", buckets)
	if err != nil {
		return nil, err
	}
	client, err := GCSClient(context.Background(), srv.URL())
	if err != nil {
		srv.Stop()
		return nil, err
	}
	return &GCS{URL: srv.URL(), Client: client, Server: srv, stop: srv.Stop}, nil
}

// Close closes the client and stops the server.
func (g *GCS) Close() {
	g.Client.Close()
	g.stop()
}

// GCSClient returns a storage client for the fake server at baseURL, with
// no credentials. It reads through the JSON API (storage.WithJSONReads),
// which the real service also serves: the fake answers XML-API downloads
// only on its public host name, not on 127.0.0.1.
func GCSClient(ctx context.Context, baseURL string) (*storage.Client, error) {
	c, err := storage.NewClient(ctx,
		option.WithEndpoint(baseURL+"/storage/v1/"),
		option.WithoutAuthentication(),
		storage.WithJSONReads(),
	)
	if err != nil {
		return nil, fmt.Errorf("testenv: gcs client: %w", err)
	}
	return c, nil
}

func newFakeGCS(storageRoot string, buckets []string) (*fakestorage.Server, error) {
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme: "http",
		Host:   "127.0.0.1",
		// Port 0 keeps httptest's listener: 127.0.0.1 on a port the kernel
		// picked, so nothing can take it between choosing and binding.
		StorageRoot: storageRoot,
		Writer:      io.Discard,
	})
	if err != nil {
		return nil, fmt.Errorf("testenv: start fake gcs: %w", err)
	}
	if !strings.HasPrefix(srv.URL(), "http://127.0.0.1:") {
		srv.Stop()
		return nil, fmt.Errorf("testenv: fake gcs listens on %s, want loopback", srv.URL())
	}
	for _, b := range buckets {
		srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: b})
	}
	return srv, nil
}

// gcsChildEnv carries the bucket list to a child started by
// StartGCSProcess.
const gcsChildEnv = "REPLICATOR_TESTENV_GCS_CHILD"

// ServeGCSChild turns this process into the server half of
// StartGCSProcess when it was started as one, and otherwise returns at
// once. A package using StartGCSProcess calls it first thing in TestMain.
// The child serves until its standard input closes, which happens when the
// parent exits for any reason, so no server outlives its test binary.
func ServeGCSChild() {
	spec, ok := os.LookupEnv(gcsChildEnv)
	if !ok {
		return
	}
	dir, err := os.MkdirTemp("", "replicator-gcs-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var buckets []string
	if spec != "" {
		buckets = strings.Split(spec, ",")
	}
	srv, err := newFakeGCS(dir, buckets)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	fmt.Println(srv.URL())
	io.Copy(io.Discard, os.Stdin)
	srv.Stop()
	os.RemoveAll(dir)
	os.Exit(0)
}

// StartGCSProcess runs the fake GCS server in a child process (this test
// binary re-executed; see ServeGCSChild) keeping objects on disk. It is for
// benchmarks that measure this process's memory: the fake holds every
// upload's bytes in its own heap while receiving it, which would otherwise
// be counted against the code under test. Server is nil.
func StartGCSProcess(t testing.TB, buckets ...string) *GCS {
	t.Helper()
	g, err := newGCSProcess(buckets)
	if err != nil {
		t.Fatalf("start fake gcs process: %v", err)
	}
	t.Cleanup(g.Close)
	return g
}

func newGCSProcess(buckets []string) (*GCS, error) {
	return NewGCSProcess(exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$"), buckets...)
}

// NewGCSProcess starts cmd, a binary whose main (or TestMain) calls
// ServeGCSChild first, as a fake GCS server with buckets created, and waits
// for it to report its loopback URL. cmd's environment (os.Environ() when
// nil) gains the variable that tells the child to serve; set anything else
// (TMPDIR for where objects go, SysProcAttr) before the call. Close stops
// the child.
func NewGCSProcess(cmd *exec.Cmd, buckets ...string) (*GCS, error) {
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, gcsChildEnv+"="+strings.Join(buckets, ","))
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("testenv: start fake gcs process: %w", err)
	}
	stop := func() {
		stdin.Close() // the child serves until its stdin closes
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- strings.TrimSpace(line)
		io.Copy(io.Discard, stdout)
	}()
	var url string
	select {
	case url = <-lines:
	case <-time.After(30 * time.Second):
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		stop()
		return nil, errors.New("testenv: fake gcs process did not report a loopback URL (does it call testenv.ServeGCSChild first?)")
	}
	client, err := GCSClient(context.Background(), url)
	if err != nil {
		stop()
		return nil, err
	}
	return &GCS{URL: url, Client: client, stop: stop}, nil
}
