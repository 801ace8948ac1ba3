// Package testenv starts the real services the project's tests talk to:
// private redis-server processes on free loopback ports, and (in later
// files) a Redis Cluster, an in-process fake GCS server and hostile HTTP
// origins. Nothing here ever touches a server the machine already runs.
package testenv

import (
	"bufio"
	"crypto/tls"
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

	// TLS is set for a server started with RedisOptions.TLS: it then
	// listens with TLS only, on Port.
	TLS *RedisTLS

	dir   string
	extra []string
	// admin authenticates testenv's own connections on a server whose
	// users come from an ACL file (see RedisOptions.ACLFile).
	admin bool

	mu  sync.Mutex
	cmd *exec.Cmd
}

// RedisOptions tunes a server started by NewRedis. The zero value is a plain
// standalone server.
type RedisOptions struct {
	// Args are appended to the redis-server command line, e.g.
	// {"--cluster-enabled", "yes"}.
	Args []string
	// TLS makes the server listen with TLS only, with a CA and certificates
	// made for it (see RedisTLS).
	TLS *TLSOptions
	// ACLFile loads the server's users from this aclfile, as a broker
	// with per-service users does (see acl.go).
	ACLFile string
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
		if opts.ACLFile != "" {
			if err := r.useACLFile(opts.ACLFile); err != nil {
				os.RemoveAll(dir)
				return nil, err
			}
		}
		if opts.TLS != nil && r.TLS == nil {
			if r.TLS, err = newRedisTLS(dir, *opts.TLS); err != nil {
				os.RemoveAll(dir)
				return nil, err
			}
		}
		if err := r.Start(); err != nil {
			lastErr = err
			continue
		}
		return r, nil
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

// URL returns a redis:// URL for database 0 of this server, rediss:// for
// a TLS one (which needs its CA, e.g. as ?ssl_ca_certs=, to be trusted).
func (r *Redis) URL() string {
	if r.TLS != nil {
		return "rediss://" + r.Addr + "/0"
	}
	return "redis://" + r.Addr + "/0"
}

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
	}
	if r.TLS != nil {
		args = []string{
			"--port", "0",
			"--tls-port", strconv.Itoa(r.Port),
			"--tls-cert-file", r.TLS.serverCert,
			"--tls-key-file", r.TLS.serverKey,
			"--tls-ca-cert-file", r.TLS.CAFile,
			"--tls-auth-clients", r.TLS.authClients,
		}
	}
	args = append(args,
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", r.dir,
		"--protected-mode", "no",
		"--loglevel", "warning",
		"--logfile", filepath.Join(r.dir, fmt.Sprintf("redis-%d.log", r.Port)),
	)
	args = append(args, r.extra...)
	cmd := exec.Command("redis-server", args...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("testenv: start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if r.ping() == nil {
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
		if r.ping() != nil {
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
	return exchange(r.dial, args, readLine)
}

// ping is Ping over this server's own transport (TLS when it has it).
func (r *Redis) ping() error {
	reply, err := exchange(r.dial, []string{"PING"}, readLine)
	if err != nil {
		return err
	}
	if reply != "+PONG" {
		return fmt.Errorf("testenv: unexpected PING reply %q", reply)
	}
	return nil
}

// dial opens a connection to the server, with TLS (and the client
// certificate) when it listens with TLS.
func (r *Redis) dial() (net.Conn, error) {
	var (
		conn net.Conn
		err  error
	)
	if r.TLS == nil {
		conn, err = net.DialTimeout("tcp", r.Addr, time.Second)
	} else {
		d := &net.Dialer{Timeout: time.Second}
		conn, err = tls.DialWithDialer(d, "tcp", r.Addr, r.TLS.ClientConfig())
	}
	if err != nil || !r.admin {
		return conn, err
	}
	if err := authenticate(conn, AdminUser, AdminPassword); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
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
	return exchange(tcpDialer(addr), args, readLine)
}

func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	return strings.TrimRight(line, "\r\n"), err
}

func tcpDialer(addr string) func() (net.Conn, error) {
	return func() (net.Conn, error) { return net.DialTimeout("tcp", addr, time.Second) }
}

// exchange sends one command in RESP on a fresh connection and reads the
// reply with read.
func exchange(dial func() (net.Conn, error), args []string, read func(*bufio.Reader) (string, error)) (string, error) {
	conn, err := dial()
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
