//go:build linux

package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replicator-go/replicator/contentfetch"
)

// TestNaiveLoop runs the naive loop over a few commands against a private
// Redis and the bench's origin: every new command gets a blob_available
// naming the stored bytes, its dedupe key and its ack; a command whose
// dedupe key exists is acked without a fact.
func TestNaiveLoop(t *testing.T) {
	var out bytes.Buffer
	b := testBench(t, &out)
	ctx, cancel, err := b.begin(t.Context(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	o, err := startOrigin(fixedBody(1024), false)
	if err != nil {
		t.Fatal(err)
	}
	defer o.close()
	hosts := hostNames("naive", 3)
	cmds := make([]*command, 13)
	for i := range cmds {
		cmds[i] = &command{id: fmt.Sprintf("naive-%02d", i), url: o.url(hosts[i%len(hosts)], fmt.Sprintf("/n/%02d", i))}
	}
	done := cmds[len(cmds)-1] // handled before: its dedupe key exists
	if err := b.client.Do(ctx, b.client.B().Set().Key(contentfetch.DefaultDedupePrefix+done.id).Value("1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := publish(ctx, b.client, cmds); err != nil {
		t.Fatal(err)
	}
	blobs := t.TempDir()
	sum, err := naiveLoop(ctx, naiveConfig{redisURL: b.url, originAddr: "127.0.0.1:" + o.port, blobDir: blobs, commands: len(cmds), inFlight: 4})
	if err != nil {
		t.Fatalf("naiveLoop: %v", err)
	}
	if sum.Done != len(cmds) || sum.Skipped != 1 || sum.Errors != 0 {
		t.Errorf("summary = %+v, want %d done, 1 skipped, no errors", *sum, len(cmds))
	}

	oc := newOutcomes()
	if err := oc.poll(ctx, b.client); err != nil {
		t.Fatal(err)
	}
	if oc.undecod != 0 || oc.nFacts != len(cmds)-1 {
		t.Errorf("%d facts (%d undecodable), want %d", oc.nFacts, oc.undecod, len(cmds)-1)
	}
	for i, c := range cmds[:len(cmds)-1] {
		fs := oc.facts[c.id]
		if len(fs) != 1 || fs[0].event != "blob_available" {
			t.Errorf("%s: facts %+v, want one blob_available", c.id, fs)
			continue
		}
		path, ok := strings.CutPrefix(fs[0].uri, "file://")
		if !ok || !strings.HasPrefix(path, blobs+string(filepath.Separator)) {
			t.Errorf("%s: blob_uri %q is not under %s", c.id, fs[0].uri, blobs)
			continue
		}
		body, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v", c.id, err)
			continue
		}
		sha := sha256.Sum256(body)
		want := bodyFor(fmt.Sprintf("/n/%02d", i), 1024, padding(1024))
		if hex.EncodeToString(sha[:]) != fs[0].fingerprint || filepath.Base(path) != fs[0].fingerprint+".bin" ||
			int64(len(body)) != fs[0].size || !bytes.Equal(body, want) {
			t.Errorf("%s: stored %d bytes at %s, fact says %s, %d bytes", c.id, len(body), path, fs[0].fingerprint, fs[0].size)
		}
		n, err := b.client.Do(ctx, b.client.B().Exists().Key(contentfetch.DefaultDedupePrefix+c.id).Build()).AsInt64()
		if err != nil || n != 1 {
			t.Errorf("%s: dedupe key exists = %d, %v; want 1", c.id, n, err)
		}
	}
	if len(oc.facts[done.id]) != 0 {
		t.Errorf("%s, already handled, got a fact", done.id)
	}
	if p, err := pendingCount(ctx, b.client); err != nil || p != 0 {
		t.Errorf("pending = %d, %v; want 0", p, err)
	}
}
