package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Cluster is a private Redis Cluster of three masters (no replicas) on free
// 127.0.0.1 ports, each a Redis started by NewRedis. The 16384 slots are
// spread over the three masters by redis-cli --cluster create.
//
// A node may be stopped and started again through Nodes to simulate an
// outage: it keeps its cluster configuration file across a restart and
// rejoins with the same slots (its data is lost).
//
// A Cluster is safe for concurrent use.
type Cluster struct {
	// Addrs are the masters' "127.0.0.1:PORT" addresses, in Nodes order; pass
	// them as rueidis.ClientOption.InitAddress.
	Addrs []string
	// Nodes are the three server processes.
	Nodes []*Redis
}

// ErrNoRedisCLI reports that redis-cli, which joins the nodes into a
// cluster, is not on PATH.
var ErrNoRedisCLI = errors.New("testenv: redis-cli not found on PATH (install it: apt-get install redis-tools)")

// clusterMasters is how many masters a Cluster has: the fewest redis-cli
// accepts for a cluster.
const clusterMasters = 3

// StartCluster starts a private three-master Redis Cluster for the test and
// stops it when the test ends. It fails the test (never skips it) when the
// cluster cannot start.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	return StartClusterWith(t, RedisOptions{})
}

// StartClusterWith is StartCluster with extra arguments for every node, e.g.
// {"--appendonly", "yes", "--appendfsync", "always"} so a node keeps its
// data across Stop and Start.
func StartClusterWith(t testing.TB, opts RedisOptions) *Cluster {
	t.Helper()
	c, err := NewClusterWith(opts)
	if err != nil {
		t.Fatalf("start redis cluster: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// NewCluster starts three cluster-enabled redis-server processes, joins them
// into one cluster and waits until every node reports cluster_state:ok. The
// caller must Close it. Use it from TestMain to share one cluster across a
// package's tests.
func NewCluster() (*Cluster, error) { return NewClusterWith(RedisOptions{}) }

// NewClusterWith is NewCluster with extra arguments for every node.
func NewClusterWith(opts RedisOptions) (*Cluster, error) {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		return nil, ErrNoRedisCLI
	}
	c := &Cluster{}
	for range clusterMasters {
		n, err := newClusterNode(opts.Args)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
		c.Addrs = append(c.Addrs, n.Addr)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.Command("redis-cli", args...).CombinedOutput()
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("testenv: redis-cli --cluster create: %w: %s", err, lastLines(string(out), 5))
	}
	if err := c.WaitReady(30 * time.Second); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// newClusterNode starts one cluster-enabled server. The cluster bus port is
// chosen explicitly: the default (port+10000) does not exist for the upper
// part of the ephemeral range the kernel hands out.
func newClusterNode(extra []string) (*Redis, error) {
	var lastErr error
	for range 5 {
		bus, err := FreePort()
		if err != nil {
			lastErr = err
			continue
		}
		n, err := NewRedis(RedisOptions{Args: append([]string{
			"--cluster-enabled", "yes",
			// Relative to the node's own --dir, which NewRedis makes unique,
			// so a restarted node finds its configuration again.
			"--cluster-config-file", "nodes.conf",
			"--cluster-port", strconv.Itoa(bus),
			"--cluster-node-timeout", "2000",
		}, extra...)})
		if err != nil {
			lastErr = err
			continue
		}
		return n, nil
	}
	return nil, lastErr
}

// WaitReady waits until every running node answers CLUSTER INFO with
// cluster_state:ok and knows all the masters, or the timeout passes. Call it
// after restarting a node.
func (c *Cluster) WaitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := c.ready()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("testenv: cluster not ready within %v: %w", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *Cluster) ready() error {
	for _, addr := range c.Addrs {
		info, err := ClusterInfo(addr)
		if err != nil {
			return err
		}
		if info["cluster_state"] != "ok" {
			return fmt.Errorf("%s: cluster_state:%s", addr, info["cluster_state"])
		}
		if info["cluster_known_nodes"] != strconv.Itoa(len(c.Addrs)) {
			return fmt.Errorf("%s: cluster_known_nodes:%s", addr, info["cluster_known_nodes"])
		}
		if info["cluster_slots_ok"] != "16384" {
			return fmt.Errorf("%s: cluster_slots_ok:%s", addr, info["cluster_slots_ok"])
		}
	}
	return nil
}

// Close stops every node and removes their directories.
func (c *Cluster) Close() {
	for _, n := range c.Nodes {
		n.Close()
	}
}

// ClusterInfo sends CLUSTER INFO to the server at addr and returns its
// fields (cluster_state, cluster_known_nodes, …).
func ClusterInfo(addr string) (map[string]string, error) {
	body, err := doBulk(addr, "CLUSTER", "INFO")
	if err != nil {
		return nil, err
	}
	info := make(map[string]string)
	for line := range strings.SplitSeq(body, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok {
			info[k] = v
		}
	}
	return info, nil
}

// doBulk sends one command and reads a bulk-string reply, which do (one
// line) cannot.
func doBulk(addr string, args ...string) (string, error) {
	return exchange(tcpDialer(addr), args, func(r *bufio.Reader) (string, error) {
		head, err := r.ReadString('\n')
		if err != nil {
			return "", err
		}
		head = strings.TrimRight(head, "\r\n")
		n, err := strconv.Atoi(strings.TrimPrefix(head, "$"))
		if !strings.HasPrefix(head, "$") || err != nil || n < 0 {
			return "", fmt.Errorf("testenv: %s: unexpected reply %q", args[0], head)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	})
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
