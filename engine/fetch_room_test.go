package engine_test

import (
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/sink/local"
	"github.com/replicator-go/replicator/sink/sinktest"
)

// These tests run the worker on a real local sink whose ceiling leaves no
// room (docs/storage.md, local: Room and the ceiling).

// roomStore is a local sink under dir with a ceiling of maxTotal bytes,
// its free space not weighed, so that the tests do not depend on the disk
// they run on.
func roomStore(t *testing.T, e *wenv, dir string, maxTotal int64) *local.Sink {
	t.Helper()
	s, err := local.New(local.Options{Dir: dir, TTL: time.Hour, MaxTotalBytes: maxTotal, MinFreeBytes: local.None, Logger: e.log})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// gather reads every metric of reg, keyed as name{labels}.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			got[f.GetName()+labelString(m)] = metricValue(m)
		}
	}
	return got
}

const parkedForRoom = `replicator_commands_total{outcome="parked",reason="storage_full"}`

// temps lists the temp files left under dir.
func temps(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), ".put.") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWorkerParksUntilTheStoreHasRoom: with the blob tree over its ceiling,
// commands park (counted, with their reason) and no request reaches the
// origin, however often they come due; one line says the store has no
// room. Once a sweep frees space every command completes, and no temp is
// left behind.
func TestWorkerParksUntilTheStoreHasRoom(t *testing.T) {
	e := newEnv(t, standalone(t, testenv.StartRedis(t)).client, taxonomyOrigin())
	dir := filepath.Join(t.TempDir(), "blobs")
	// What an earlier run left: twice the ceiling.
	filler := filepath.Join(dir, "ab", "cd", "abcd"+strings.Repeat("0", 60)+".bin")
	if err := os.MkdirAll(filepath.Dir(filler), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filler, make([]byte, 2000), 0o644); err != nil {
		t.Fatal(err)
	}
	store := roomStore(t, e, dir, 1000)
	if _, err := store.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	wo := e.workerOptions()
	wo.Loop.Registerer = reg
	e.start(stackOptions{sink: store, maxWait: 100 * time.Millisecond}, wo)
	const n = 5
	for i := range n {
		e.addModel(e.command(fmt.Sprintf("c-%d", i), e.url(fmt.Sprintf("h%d.test", i), fmt.Sprintf("/ok/%d", i))))
	}
	// Each command is asked about at least three times.
	testenv.Eventually(t, 20*time.Second, "every command parked three times", func() bool {
		return gather(t, reg)[parkedForRoom] >= 3*n
	})
	got := gather(t, reg)
	if got[`replicator_parked_commands`] < 1 {
		t.Errorf("replicator_parked_commands = %v while every command waits for room", got[`replicator_parked_commands`])
	}
	if v := got[`replicator_commands_total{outcome="parked",reason="politeness"}`]; v != 0 {
		t.Errorf("%v commands counted as parked for politeness, want none", v)
	}
	if c := e.origin.Count(); c != 0 {
		t.Errorf("origin saw %d requests while the store had no room, want none", c)
	}
	if p := e.pending(); p != n {
		t.Errorf("%d entries pending, want all %d", p, n)
	}
	if f := e.factsNow(); len(f) != 0 {
		t.Errorf("facts published while the store had no room: %v", f)
	}
	if c := strings.Count(e.logs.String(), "the blob store has no room"); c != 1 {
		t.Errorf("%d lines say the store has no room, want one", c)
	}

	// A sweep frees the space.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	facts := e.waitFacts(n, 20*time.Second)
	e.waitSettled(10 * time.Second)
	for _, f := range facts {
		if _, ok := f.(*envelope.BlobAvailable); !ok {
			t.Errorf("fact %T, want blob_available for every command", f)
		}
	}
	if c := e.origin.Count(); c != n {
		t.Errorf("origin saw %d requests, want one per command", c)
	}
	if left := temps(t, dir); len(left) != 0 {
		t.Errorf("temps left behind: %v", left)
	}
	if !strings.Contains(e.logs.String(), "the blob store has room again") {
		t.Errorf("no line says the store has room again")
	}
}

// TestWorkerCeilingOvershootIsBounded: nine fetches begin at once against a
// ceiling with room for six of their declared lengths. Six are stored, the
// tree stays under its ceiling, and the other three park without another
// request until a sweep frees space; then they complete too.
func TestWorkerCeilingOvershootIsBounded(t *testing.T) {
	const (
		n    = 9
		size = 1000
	)
	var arrived atomic.Int32
	all := make(chan struct{})
	e := newEnv(t, standalone(t, testenv.StartRedis(t)).client, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The first nine answer together, so every fetch has passed its
		// check before the first is stored.
		if arrived.Add(1) == n {
			close(all)
		}
		select {
		case <-all:
		case <-time.After(10 * time.Second):
		}
		seed, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.Write(sinktest.Bytes(uint64(seed), size))
	}))
	dir := filepath.Join(t.TempDir(), "blobs")
	const ceiling = 6*size + size/2
	store := roomStore(t, e, dir, ceiling)

	reg := prometheus.NewRegistry()
	wo := e.workerOptions()
	wo.Loop.Registerer = reg
	e.start(stackOptions{sink: store, maxWait: 100 * time.Millisecond, slots: n}, wo)
	for i := range n {
		e.addModel(e.command(fmt.Sprintf("c-%d", i), e.url(fmt.Sprintf("h%d.test", i), fmt.Sprintf("/%d", i+1))))
	}
	e.waitFacts(6, 20*time.Second)
	// The three left over are asked about again and again.
	testenv.Eventually(t, 20*time.Second, "the three left over parked four times each", func() bool {
		return gather(t, reg)[parkedForRoom] >= 12
	})
	if f := e.factsNow(); len(f) != 6 {
		t.Errorf("%d facts with room for six bodies, want 6", len(f))
	}
	if u := store.Usage(); u > ceiling {
		t.Errorf("the tree holds %d bytes, over its ceiling of %d", u, ceiling)
	}
	if c := e.origin.Count(); c != n {
		t.Errorf("origin saw %d requests, want the %d that began at once and none while full", c, n)
	}

	// A sweep past the blobs' TTL frees the space.
	if _, err := store.SweepAt(context.Background(), time.Now().Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	e.waitFacts(n, 20*time.Second)
	e.waitSettled(10 * time.Second)
	if c := e.origin.Count(); c != n+3 {
		t.Errorf("origin saw %d requests, want %d", c, n+3)
	}
	if left := temps(t, dir); len(left) != 0 {
		t.Errorf("temps left behind: %v", left)
	}
}
