package testenv

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Tinyproxy is a real HTTP proxy (Debian's tinyproxy) on a free loopback
// port, with its own configuration and log, stopped when the test ends.
type Tinyproxy struct {
	// URL is the proxy's URL, http://127.0.0.1:PORT.
	URL    *url.URL
	log    string
	probes int // connections the start-up made
}

// StartTinyproxy starts tinyproxy on 127.0.0.1, accepting clients from
// 127.0.0.1 and tunnelling to any port. It fails the test when the
// tinyproxy binary is missing (.ci/run installs it).
func StartTinyproxy(t testing.TB) *Tinyproxy {
	t.Helper()
	bin, err := exec.LookPath("tinyproxy")
	if err != nil {
		for _, p := range []string{"/usr/bin/tinyproxy", "/usr/sbin/tinyproxy"} {
			if _, statErr := os.Stat(p); statErr == nil {
				bin, err = p, nil
				break
			}
		}
	}
	if err != nil {
		t.Fatalf("tinyproxy not found (apt-get install tinyproxy): %v", err)
	}
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, port, _ := net.SplitHostPort(addr)
	p := &Tinyproxy{URL: &url.URL{Scheme: "http", Host: addr}, log: filepath.Join(dir, "tinyproxy.log")}
	// No ConnectPort line: CONNECT reaches any port, as the test origins
	// listen on ephemeral ones.
	conf := fmt.Sprintf(`Port %s
Listen 127.0.0.1
Timeout 30
LogFile %q
LogLevel Connect
PidFile %q
MaxClients 64
Allow 127.0.0.1
DisableViaHeader Yes
`, port, p.log, filepath.Join(dir, "tinyproxy.pid"))
	confFile := filepath.Join(dir, "tinyproxy.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-d", "-c", confFile)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting tinyproxy: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			// The probe is a connection too: Connections counts from
			// after it, once the proxy has logged it.
			for p.connectLines() == 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			p.probes = p.connectLines()
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("tinyproxy did not listen on %s: %v\n%s", addr, err, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Requests returns the request lines the proxy logged so far, such as
// "CONNECT 127.0.0.1:443 HTTP/1.1" or "GET http://host/ HTTP/1.1".
func (p *Tinyproxy) Requests() []string {
	b, _ := os.ReadFile(p.log)
	var out []string
	for line := range strings.Lines(string(b)) {
		if _, req, ok := strings.Cut(line, "Request (file descriptor "); ok {
			if _, req, ok = strings.Cut(req, "): "); ok {
				out = append(out, strings.TrimSpace(req))
			}
		}
	}
	return out
}

// Connections counts the client connections the proxy logged since it
// started.
func (p *Tinyproxy) Connections() int { return p.connectLines() - p.probes }

func (p *Tinyproxy) connectLines() int {
	b, _ := os.ReadFile(p.log)
	return strings.Count(string(b), "Connect (file descriptor ")
}
