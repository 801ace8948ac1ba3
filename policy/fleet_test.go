package policy

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/replicator-go/replicator/internal/testenv"
)

// TestFleetPolitenessAtAnOrigin runs three workers, each with its own Redis
// client and pacer, against one loopback origin serving several hostnames.
// It measures at the origin, in real time (this is what it is for): every
// gap between two requests to one host is at least the host's interval (less
// 5 ms of scheduling noise), and a backlogged host is served at no less than
// 90% of 1/interval.
func TestFleetPolitenessAtAnOrigin(t *testing.T) {
	srv := testenv.StartRedis(t)

	var (
		mu       sync.Mutex
		arrivals = map[string][]time.Time{}
	)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		mu.Lock()
		arrivals[host] = append(arrivals[host], at)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(origin.Close)

	const (
		interval = 100 * time.Millisecond
		window   = 5 * time.Second
		noise    = 5 * time.Millisecond
	)
	tab := NewTable()
	tab.Apply(published("slow.test", 0.25, 0))
	floors := map[string]time.Duration{"busy.test": interval, "other.test": interval, "slow.test": 250 * time.Millisecond}
	// Each worker runs several handlers at once, as the real one does; two
	// per worker on busy.test keep it backlogged.
	handlers := []string{"busy.test", "busy.test", "other.test", "slow.test"}

	ctx, cancel := context.WithTimeout(context.Background(), window+300*time.Millisecond)
	defer cancel()
	var (
		wg     sync.WaitGroup
		pacers []*Redis
	)
	for range 3 {
		pacer := NewRedis(newClient(t, srv.Addr), RedisOptions{
			DefaultInterval: ptr(interval), Floors: tab, KeyPrefix: "test:fleet:",
		})
		pacers = append(pacers, pacer)
		httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: len(handlers)}}
		t.Cleanup(httpc.CloseIdleConnections)
		for _, host := range handlers {
			wg.Go(func() {
				for ctx.Err() == nil {
					r, err := pacer.Reserve(ctx, host, time.Second)
					if err != nil {
						return
					}
					if !r.OK {
						sleepCtx(ctx, 10*time.Millisecond)
						continue
					}
					if !sleepCtx(ctx, r.Wait) {
						return // never send unpaced; the slot just goes unused
					}
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, origin.URL+"/", nil)
					req.Host = host
					if resp, err := httpc.Do(req); err == nil {
						resp.Body.Close()
					}
				}
			})
		}
	}
	wg.Wait()
	for i, p := range pacers {
		if p.Degraded() {
			t.Errorf("worker %d's pacer fell back to local pacing; the fleet was not shared", i)
		}
	}

	mu.Lock()
	defer mu.Unlock()
	for host, floor := range floors {
		at := arrivals[host]
		slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
		if len(at) < 2 {
			t.Errorf("%s: %d requests; want a stream of them", host, len(at))
			continue
		}
		minGap := time.Duration(1<<63 - 1)
		for i := 1; i < len(at); i++ {
			gap := at[i].Sub(at[i-1])
			minGap = min(minGap, gap)
			if gap < floor-noise {
				t.Errorf("%s: requests %d and %d arrived %v apart; want at least %v", host, i-1, i, gap, floor)
			}
		}
		t.Logf("%s: %d requests, smallest gap %v (floor %v)", host, len(at), minGap, floor)
	}
	busy := arrivals["busy.test"]
	if len(busy) > 0 {
		n := 0
		for _, a := range busy {
			if a.Sub(busy[0]) < window {
				n++
			}
		}
		want := int(0.9 * float64(window/interval))
		if n < want {
			t.Errorf("busy.test: %d requests in the first %v; want at least %d (90%% of 1/interval)", n, window, want)
		}
		t.Logf("busy.test: %d requests in %v (ideal %d)", n, window, window/interval)
	}
}
