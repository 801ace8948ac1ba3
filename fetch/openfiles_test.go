package fetch_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/internal/testenv/fetchenv"
	"github.com/replicator-go/replicator/policy"
	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/memory"
)

func TestOptionsOpenFiles(t *testing.T) {
	_, pool := fetch.Options{}.OpenFiles()
	tests := []struct {
		open, inFlight        int
		wantStoring, wantIdle int
	}{
		// No bound: every body at once, the whole idle pool.
		{open: 0, inFlight: 1024, wantStoring: 0, wantIdle: pool},
		{open: 1000, inFlight: 0, wantStoring: 0, wantIdle: pool},
		// Room for everything: a store per request, the whole idle pool.
		{open: 65536 - 256, inFlight: 1024, wantStoring: 1024, wantIdle: pool},
		// 16,384 in flight under a limit of 20,000: 3,360 left, halved.
		{open: 20000 - 256, inFlight: 16384, wantStoring: 1680, wantIdle: 1680},
		// The idle pool takes what the stores cannot use, up to its bound.
		{open: 1000, inFlight: 100, wantStoring: 100, wantIdle: 800},
		// Nothing left: one body at a time and no idle connection.
		{open: 100, inFlight: 100, wantStoring: 1, wantIdle: 0},
		{open: 102, inFlight: 100, wantStoring: 1, wantIdle: 1},
	}
	for _, tt := range tests {
		storing, idle := fetch.Options{MaxOpenFiles: tt.open, MaxInFlight: tt.inFlight}.OpenFiles()
		if storing != tt.wantStoring || idle != tt.wantIdle {
			t.Errorf("Options{MaxOpenFiles: %d, MaxInFlight: %d}.OpenFiles() = %d, %d; want %d, %d", tt.open, tt.inFlight, storing, idle, tt.wantStoring, tt.wantIdle)
		}
	}
}

// heldSink holds the first Put until release is closed and refuses any
// Put that starts while another runs, so a second body streaming at once
// shows as a store error instead of a deadlock.
type heldSink struct {
	mem     *memory.Sink
	release chan struct{}
	active  atomic.Int64
	entered atomic.Int64
}

func (s *heldSink) Put(ctx context.Context, r io.Reader, opts sink.PutOptions) (sink.Blob, error) {
	s.entered.Add(1)
	defer s.active.Add(-1)
	if s.active.Add(1) > 1 {
		return sink.Blob{}, errors.New("two bodies streaming to the sink at once")
	}
	<-s.release
	return s.mem.Put(ctx, r, opts)
}

func (s *heldSink) Open(ctx context.Context, fp string) (io.ReadCloser, error) {
	return s.mem.Open(ctx, fp)
}

// TestMaxOpenFilesBoundsStores: with room for one body streaming at once,
// the other fetches wait for it, here until their whole-fetch bound runs
// out, and no second Put starts.
func TestMaxOpenFilesBoundsStores(t *testing.T) {
	origin := testenv.StartOrigin(t, testenv.Status(200, map[string]string{"Content-Type": "text/plain"}, "body"))
	const inFlight = 4
	f := fetch.New(fetch.Options{
		Guard:        fetchenv.Guard(),
		Pacer:        policy.NewLocal(policy.LocalOptions{DefaultInterval: policy.None}),
		MaxInFlight:  inFlight,
		MaxOpenFiles: inFlight + 1, // one store, no idle connection
		MaxFetchTime: 2 * time.Second,
		Logger:       fetchenv.Quiet,
	})
	t.Cleanup(f.Close)
	blobs := &heldSink{mem: memory.New(memory.Options{}), release: make(chan struct{})}

	errs := make(chan error, inFlight)
	for range inFlight {
		go func() {
			_, err := f.Fetch(fetchenv.Ctx(t), fetch.Request{URL: origin.URLFor("origin.test", "/")}, blobs)
			errs <- err
		}()
	}
	// The fetch whose body streams is held until the others have ended.
	for range inFlight - 1 {
		if err := <-errs; !errors.Is(err, fetch.ErrDeadline) {
			t.Errorf("a fetch waiting for its store ended with %v, want ErrDeadline", err)
		}
	}
	close(blobs.release)
	<-errs
	if n := blobs.entered.Load(); n != 1 {
		t.Errorf("%d Puts started, want 1", n)
	}
}

// TestMaxOpenFilesWithoutIdle: a bound that leaves no idle connection
// closes each one after its response, where the unbounded Fetcher reuses
// it.
func TestMaxOpenFilesWithoutIdle(t *testing.T) {
	var mu sync.Mutex
	conns := map[string]bool{}
	origin := testenv.StartOrigin(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		conns[r.RemoteAddr] = true
		mu.Unlock()
		io.WriteString(w, "body")
	}))
	for _, tt := range []struct {
		name      string
		open      int
		wantConns int
	}{
		{name: "unbounded", open: 0, wantConns: 1},
		{name: "no idle", open: 2, wantConns: 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			clear(conns)
			mu.Unlock()
			f := fetch.New(fetch.Options{
				Guard:        fetchenv.Guard(),
				Pacer:        policy.NewLocal(policy.LocalOptions{DefaultInterval: policy.None}),
				MaxInFlight:  1,
				MaxOpenFiles: tt.open,
				Logger:       fetchenv.Quiet,
			})
			defer f.Close()
			for range 3 {
				if _, err := f.Fetch(fetchenv.Ctx(t), fetch.Request{URL: origin.URLFor("origin.test", "/")}, memory.New(memory.Options{})); err != nil {
					t.Fatal(err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(conns) != tt.wantConns {
				t.Errorf("3 fetches used %d connections, want %d", len(conns), tt.wantConns)
			}
		})
	}
}

// panickingSink panics on every Put.
type panickingSink struct{}

func (panickingSink) Put(context.Context, io.Reader, sink.PutOptions) (sink.Blob, error) {
	panic("sink failed")
}

func (panickingSink) Open(context.Context, string) (io.ReadCloser, error) {
	return nil, sink.ErrNotFound
}

// TestMaxOpenFilesAfterPanic: a sink that panics (a caller may recover
// it) still gives its place among the bodies streaming back, or the next
// fetch would wait for it until its deadline.
func TestMaxOpenFilesAfterPanic(t *testing.T) {
	origin := testenv.StartOrigin(t, testenv.Status(200, nil, "body"))
	f := fetch.New(fetch.Options{
		Guard:        fetchenv.Guard(),
		Pacer:        policy.NewLocal(policy.LocalOptions{DefaultInterval: policy.None}),
		MaxInFlight:  1,
		MaxOpenFiles: 2, // one body at a time
		MaxFetchTime: 2 * time.Second,
		Logger:       fetchenv.Quiet,
	})
	t.Cleanup(f.Close)
	req := fetch.Request{URL: origin.URLFor("origin.test", "/")}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the sink's panic did not reach the caller")
			}
		}()
		f.Fetch(fetchenv.Ctx(t), req, panickingSink{})
	}()
	if _, err := f.Fetch(fetchenv.Ctx(t), req, memory.New(memory.Options{})); err != nil {
		t.Fatalf("the fetch after a panicking store: %v", err)
	}
}
