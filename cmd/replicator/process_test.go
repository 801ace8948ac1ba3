package main

import (
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replicator-go/replicator/internal/testenv"
)

// process is a long-running replicator (a worker) started by a test.
type process struct {
	cmd    *exec.Cmd
	stdout testenv.LogBuffer
	stderr testenv.LogBuffer
	done   chan struct{}
	code   int
}

// startBinary starts the binary in the background. The process is killed
// when the test ends if it is still running.
func startBinary(t *testing.T, env []string, args ...string) *process {
	t.Helper()
	p := &process{done: make(chan struct{})}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Env = append(baseEnv(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %v: %v", args, err)
	}
	go func() {
		err := p.cmd.Wait()
		p.code = 0
		if err != nil {
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				p.code = exit.ExitCode()
			} else {
				p.code = -1
			}
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s stderr:\n%s", strings.Join(args, " "), tail(p.stderr.String(), 4000))
		}
	})
	return p
}

// stop sends SIGTERM and returns the exit code, failing the test if the
// process does not exit within timeout.
func (p *process) stop(t *testing.T, timeout time.Duration) int {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	return p.wait(t, timeout)
}

// wait returns the exit code once the process exits, failing the test if it
// does not exit within timeout.
func (p *process) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(timeout):
		t.Fatalf("process did not exit within %v", timeout)
		return -1
	}
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
