package main

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// pythonDeniedRanges is the Python worker's default destination deny set,
// what it refuses when REPLICATOR_BLOCKED_DESTINATIONS is unset. The guard
// refuses every one of them already (docs/security.md); the list is kept to
// tell an operator which of them a configured list leaves out.
var pythonDeniedRanges = []string{
	"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
	"172.16.0.0/12", "192.168.0.0/16", "224.0.0.0/4", "240.0.0.0/4",
	"::/128", "::1/128", "fc00::/7", "fe80::/10", "ff00::/8",
}

// parseBlocked reads REPLICATOR_BLOCKED_DESTINATIONS as the Python worker
// does: comma-separated networks, white space around each dropped, an
// address alone meaning itself, and host bits set refused (its strict
// parse). A value naming no range is refused: there is no spelling of the
// setting that means "fetch anything".
func parseBlocked(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for part := range strings.SplitSeq(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, err := parseNetwork(part)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, errors.New("names no range: unset it for the default; no value means fetch anything")
	}
	return out, nil
}

// parseNetwork parses one network, strictly.
func parseNetwork(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%q is not a network", s)
		}
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a network", s)
	}
	if p != p.Masked() {
		return netip.Prefix{}, fmt.Errorf("%q has host bits set (the network is %s)", s, p.Masked())
	}
	return p, nil
}

// openedByBlocked lists the ranges of the Python worker's default set that
// blocked does not cover: what that worker would fetch under this list and
// this one still refuses.
func openedByBlocked(blocked []netip.Prefix) []string {
	var left []string
	for _, d := range pythonDeniedRanges {
		dp := netip.MustParsePrefix(d)
		covered := false
		for _, b := range blocked {
			if b.Bits() <= dp.Bits() && b.Contains(dp.Addr()) {
				covered = true
				break
			}
		}
		if !covered {
			left = append(left, d)
		}
	}
	return left
}
