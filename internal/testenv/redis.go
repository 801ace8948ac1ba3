// Package testenv starts the real services the project's tests talk to:
// private redis-server processes on free loopback ports, and (in later
// files) a Redis Cluster, an in-process fake GCS server and hostile HTTP
// origins. Nothing here ever touches a server the machine already runs.
package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Redis is one private redis-server process bound to 127.0.0.1 on a port
// chosen for it. It keeps nothing on disk. Stop and Start may be called to
// simulate an outage; the port stays the same across restarts.
//
// A Redis is safe for concurrent use.
type Redis struct {
	// Addr is "127.0.0.1:PORT".
	Addr string
	// Port is the TCP port the server listens on.
	Port int

	dir   string
	extra []string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// RedisOptions tunes a server started by NewRedis. The zero value is a plain
// standalone server.
type RedisOptions struct {
	// Args are appended to the redis-server command line, e.g.
	// {"--cluster-enabled", "yes"}.
	Args []string
}

// ErrNoRedisServer reports that redis-server is not on PATH.
var ErrNoRedisServer = errors.New("testenv: redis-server not found on PATH (install it: apt-get install redis-server)")

// StartRedis starts a private redis-server for the test and stops it when the
// test ends. It fails the test (never skips it) when the server cannot start.
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	r, err := NewRedis(RedisOptions{})
	if err != nil {
		t.Fatalf("start redis: %v", err)
	}
	t.Cleanup(r.Close)
	return r
}

// NewRedis starts a private redis-server and waits until it answers PING.
// The caller must Close it. Use it from TestMain to share one server across a
// package's tests.
func NewRedis(opts RedisOptions) (*Redis, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, ErrNoRedisServer
	}
	dir, err := os.MkdirTemp("", "replicator-redis-*")
	if err != nil {
		return nil, fmt.Errorf("testenv: temp dir: %w", err)
	}
	var lastErr error
	// A port picked by the kernel can be taken by someone else before
	// redis-server binds it; try a few.
	for range 5 {
		port, err := FreePort()
		if err != nil {
			lastErr = err
			continue
		}
		r := &Redis{Addr: fmt.Sprintf("127.0.0.1:%d", port), Port: port, dir: dir, extra: opts.Args}
		if err := r.Start(); err != nil {
			lastErr = err
			continue
		}
		return r, nil
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

// URL returns a redis:// URL for database 0 of this server.
func (r *Redis) URL() string { return "redis://" + r.Addr + "/0" }

// Start launches the server process (again, after Stop) and waits for it to
// answer PING.
func (r *Redis) Start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		return nil
	}
	args := []string{
		"--port", strconv.Itoa(r.Port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", r.dir,
		"--protected-mode", "no",
		"--loglevel", "warning",
		"--logfile", filepath.Join(r.dir, fmt.Sprintf("redis-%d.log", r.Port)),
	}
	args = append(args, r.extra...)
	cmd := exec.Command("redis-server", args...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("testenv: start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if Ping(r.Addr) == nil {
			r.cmd = cmd
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("testenv: redis-server on port %d exited at start-up (see %s)", r.Port, r.dir)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited
			return fmt.Errorf("testenv: redis-server on port %d did not answer PING within 10s", r.Port)
		}
	}
}

// Stop kills the server process (SIGKILL: an outage, not a clean shutdown)
// and waits until the port no longer answers. Its data is lost.
func (r *Redis) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	r.cmd.Process.Kill()
	for range 500 {
		if Ping(r.Addr) != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.cmd = nil
}

// Close stops the server and removes its directory.
func (r *Redis) Close() {
	r.Stop()
	os.RemoveAll(r.dir)
}

// Do sends one command with the inline protocol and returns the first reply
// line. It exists for test set-up that should not depend on the client
// library under test.
func (r *Redis) Do(args ...string) (string, error) {
	return do(r.Addr, args...)
}

// Ping reports whether a Redis server at addr answers PING.
func Ping(addr string) error {
	reply, err := do(addr, "PING")
	if err != nil {
		return err
	}
	if reply != "+PONG" {
		return fmt.Errorf("testenv: unexpected PING reply %q", reply)
	}
	return nil
}

func do(addr string, args ...string) (string, error) {
	return exchange(addr, args, func(r *bufio.Reader) (string, error) {
		line, err := r.ReadString('\n')
		return strings.TrimRight(line, "\r\n"), err
	})
}

// exchange sends one command in RESP on a fresh connection and reads the
// reply with read.
func exchange(addr string, args []string, read func(*bufio.Reader) (string, error)) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", err
	}
	return read(bufio.NewReader(conn))
}

// FreePort asks the kernel for a free TCP port on 127.0.0.1.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("testenv: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
