package testenv

import (
	"strings"
	"testing"
	"time"
)

func TestClusterStartsWithAllSlotsCovered(t *testing.T) {
	c := StartCluster(t)
	if len(c.Addrs) != 3 || len(c.Nodes) != 3 {
		t.Fatalf("got %d addrs, %d nodes; want 3 of each", len(c.Addrs), len(c.Nodes))
	}
	for _, addr := range c.Addrs {
		info, err := ClusterInfo(addr)
		if err != nil {
			t.Fatalf("CLUSTER INFO %s: %v", addr, err)
		}
		if info["cluster_state"] != "ok" || info["cluster_slots_assigned"] != "16384" {
			t.Errorf("%s: state %q, slots assigned %q; want ok, 16384", addr, info["cluster_state"], info["cluster_slots_assigned"])
		}
	}
	// A key lands on exactly one master; the others redirect.
	var owners, moved int
	for _, n := range c.Nodes {
		got, err := n.Do("SET", "{probe}k", "v")
		switch {
		case err != nil:
			t.Fatalf("SET on %s: %v", n.Addr, err)
		case got == "+OK":
			owners++
		case strings.HasPrefix(got, "-MOVED"):
			moved++
		default:
			t.Fatalf("SET on %s = %q", n.Addr, got)
		}
	}
	if owners != 1 || moved != 2 {
		t.Errorf("owners=%d moved=%d; want 1 and 2", owners, moved)
	}
}

func TestClusterNodeRejoinsAfterRestart(t *testing.T) {
	c := StartCluster(t)
	n := c.Nodes[1]
	n.Stop()
	if err := n.Start(); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if err := c.WaitReady(30 * time.Second); err != nil {
		t.Fatal(err)
	}
}
