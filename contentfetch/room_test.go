package contentfetch_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replicator-go/replicator/contentfetch"
	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/fetch"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/internal/testenv/fetchenv"
	"github.com/replicator-go/replicator/sink"
	"github.com/replicator-go/replicator/sink/memory"
)

// roomSink is a memory sink with room while full is unset, and for bodies
// declared at most fits bytes long; it records the sizes it was given.
type roomSink struct {
	*memory.Sink
	full  atomic.Bool
	fits  int64
	mu    sync.Mutex
	sizes []int64
}

func (s *roomSink) Room(int64) error {
	if s.full.Load() {
		return fmt.Errorf("test: %w: over the ceiling", sink.ErrNoRoom)
	}
	return nil
}

func (s *roomSink) Put(ctx context.Context, r io.Reader, opts sink.PutOptions) (sink.Blob, error) {
	s.mu.Lock()
	s.sizes = append(s.sizes, opts.Size)
	s.mu.Unlock()
	if opts.Size > s.fits {
		return sink.Blob{}, fmt.Errorf("test: %w: %d bytes declared", sink.ErrNoRoom, opts.Size)
	}
	return s.Sink.Put(ctx, r, opts)
}

func (s *roomSink) declared() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int64(nil), s.sizes...)
}

// wantParkedForRoom checks an outcome parked for want of room, to be tried
// again after wait.
func wantParkedForRoom(t *testing.T, out contentfetch.Outcome, wait time.Duration) {
	t.Helper()
	if out.Fate != capability.Park || out.Park == nil || out.Fact != nil {
		t.Fatalf("outcome = %v, park %v, fact %v (%v); want parked, no fact", out.Name(), out.Park, out.Fact, out.Err)
	}
	if out.Reason != "storage_full" || out.Wait != wait || out.Key != "" {
		t.Errorf("reason %q, wait %v, key %q; want storage_full, %v, the command's own key", out.Reason, out.Wait, out.Key, wait)
	}
	for _, target := range []error{contentfetch.ErrParked, fetch.ErrStorageFull, sink.ErrNoRoom} {
		if !errors.Is(out.Err, target) {
			t.Errorf("error %q does not wrap %v", out.Err, target)
		}
	}
	if out.Park.Host != "" || out.Park.Wait != wait || !errors.Is(out.Park.Cause, fetch.ErrStorageFull) {
		t.Errorf("park = %+v, want no host, a wait of %v and ErrStorageFull as its cause", out.Park, wait)
	}
}

// TestHandleParksWhileTheSinkHasNoRoom: a sink with no room parks the
// command before its first request, for the handler's MaxWait; a body
// whose declared length the sink refuses is parked the same way, unread;
// once there is room the body is stored, its declared length handed to
// the sink (docs/storage.md, local: Room).
func TestHandleParksWhileTheSinkHasNoRoom(t *testing.T) {
	const wait = 700 * time.Millisecond
	h := fetchenv.New(t, testenv.Body(5000, true), fetchenv.Options{})
	rs := &roomSink{Sink: memory.New(memory.Options{}), fits: 4999}
	handler := contentfetch.NewHandler(contentfetch.HandlerOptions{Fetcher: h.Fetcher, Sink: rs, MaxWait: wait, Logger: fetchenv.Quiet})
	ctx := fetchenv.Ctx(t)

	rs.full.Store(true)
	wantParkedForRoom(t, handler.Fetch(ctx, fetchenv.Command(h.URL("origin.test", "/full")), nil), wait)
	if n := h.Origin.Count(); n != 0 {
		t.Errorf("origin saw %d requests while the sink had no room, want none", n)
	}
	// Get goes through its own wrapper around the sink, which must not
	// hide the store's answer.
	if _, err := h.Fetcher.Get(ctx, h.URL("origin.test", "/get"), fetch.GetOptions{Sink: rs}); !errors.Is(err, fetch.ErrStorageFull) {
		t.Errorf("Get with no room = %v, want ErrStorageFull", err)
	}
	if n := h.Origin.Count(); n != 0 {
		t.Errorf("origin saw %d requests while the sink had no room, want none", n)
	}

	rs.full.Store(false)
	wantParkedForRoom(t, handler.Fetch(ctx, fetchenv.Command(h.URL("origin.test", "/declared")), nil), wait)
	if n := h.Origin.Count(); n != 1 {
		t.Errorf("origin saw %d requests, want the one whose declared length was refused", n)
	}

	rs.fits = 5000
	out := handler.Fetch(ctx, fetchenv.Command(h.URL("origin.test", "/fits")), nil)
	if out.Label != contentfetch.Stored || out.Result.Blob.Size != 5000 {
		t.Fatalf("outcome = %v (%v), want 5000 bytes stored", out.Name(), out.Err)
	}
	if got := rs.declared(); len(got) != 2 || got[0] != 5000 || got[1] != 5000 {
		t.Errorf("sizes handed to the sink = %v, want the Content-Length 5000 twice", got)
	}

	// Without a MaxWait the sink is asked again after DefaultRoomWait.
	rs.full.Store(true)
	out = contentfetch.NewHandler(contentfetch.HandlerOptions{Fetcher: h.Fetcher, Sink: rs, Logger: fetchenv.Quiet}).Fetch(ctx, fetchenv.Command(h.URL("origin.test", "/default")), nil)
	wantParkedForRoom(t, out, contentfetch.DefaultRoomWait)
}
