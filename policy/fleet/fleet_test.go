package fleet

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/policy"
)

// fleetRequest is one request the workers sent, as the origin saw it.
type fleetRequest struct {
	slot   time.Time // when the pacer said it may go out (local clock)
	depart time.Time // when its headers were on the wire
	arrive time.Time // when the origin's handler saw it
}

// TestFleetPolitenessAtAnOrigin runs three workers, each with its own Redis
// client and pacer, against one loopback origin serving several hostnames,
// in real time (this is what it is for). Each worker does what the fetcher
// does: take a slot only when it is due (waiting until then), send at once,
// and report the departure with Sent. It checks that
//
//   - the slots handed out for one host are a full interval apart;
//   - requests leave a full interval apart (less 5 ms of timer jitter),
//     since Sent spaces the next slot from a late departure;
//   - at the origin, every gap between two requests to one host that the
//     loopback delivered promptly is at least the interval less 5 ms; a
//     loaded machine sometimes delivers a request several milliseconds
//     late, which shortens the gap after it however exact the pacing, so
//     such pairs are not judged — but they must stay a minority, or the
//     test fails as unable to measure;
//   - a backlogged host is served at no less than 90% of 1/interval.
func TestFleetPolitenessAtAnOrigin(t *testing.T) {
	srv := testenv.StartRedis(t)

	var (
		mu       sync.Mutex
		slots    = map[int]time.Time{}
		departs  = map[int]time.Time{}
		requests = map[string][]fleetRequest{}
		seq      int
	)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		mu.Lock()
		if slot, ok := slots[n]; ok {
			requests[host] = append(requests[host], fleetRequest{slot: slot, depart: departs[n], arrive: at})
		}
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(origin.Close)

	const (
		interval = 100 * time.Millisecond
		window   = 5 * time.Second
		noise    = 5 * time.Millisecond
	)
	tab := policy.NewTable()
	if err := tab.Set("slow.test", 250*time.Millisecond, stamp0); err != nil {
		t.Fatal(err)
	}
	floors := map[string]time.Duration{"busy.test": interval, "other.test": interval, "slow.test": 250 * time.Millisecond}
	// Each worker runs several handlers at once, as the real one does; two
	// per worker on busy.test keep it backlogged.
	handlers := []string{"busy.test", "busy.test", "other.test", "slow.test"}

	// send makes one request; wrote, when set, runs once its headers are
	// on the wire.
	send := func(ctx context.Context, c *http.Client, host string, n int, wrote func()) {
		if wrote != nil {
			ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteHeaders: wrote})
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, origin.URL+"/?n="+strconv.Itoa(n), nil)
		req.Host = host
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), window+300*time.Millisecond)
	defer cancel()
	var (
		wg     sync.WaitGroup
		pacers []*Pacer
	)
	for range 3 {
		pacer := NewPacer(newClient(t, srv.Addr), PacerOptions{
			Fallback:  policy.NewLocal(policy.LocalOptions{DefaultInterval: interval, Floors: tab}),
			KeyPrefix: "test:fleet:",
		})
		pacers = append(pacers, pacer)
		httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: len(handlers)}}
		t.Cleanup(httpc.CloseIdleConnections)
		// A worker that has been running has connections open and its clock
		// mapping settled; the very first round trips (connecting, loading
		// the script) are slow.
		for range 5 {
			if _, err := pacer.Reserve(context.Background(), "warm-up.test", 0); err != nil {
				t.Fatal(err)
			}
		}
		var warm sync.WaitGroup
		for range handlers {
			warm.Go(func() { send(context.Background(), httpc, "warm-up.test", -1, nil) })
		}
		warm.Wait()

		for _, host := range handlers {
			wg.Go(func() {
				for ctx.Err() == nil {
					// Only a slot that is due now is taken, so a late
					// departure reported by Sent moves every later slot.
					r, err := pacer.Reserve(ctx, host, 0)
					if err != nil {
						return
					}
					if !r.OK {
						if !sleepCtx(ctx, time.Until(r.At)) {
							return
						}
						continue
					}
					slot := r.At
					mu.Lock()
					seq++
					n := seq
					slots[n] = slot
					mu.Unlock()
					send(ctx, httpc, host, n, func() {
						now := time.Now()
						mu.Lock()
						departs[n] = now
						mu.Unlock()
						pacer.Sent(context.WithoutCancel(ctx), host)
					})
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
		reqs := requests[host]
		slices.SortFunc(reqs, func(a, b fleetRequest) int { return a.arrive.Compare(b.arrive) })
		if len(reqs) < 2 {
			t.Errorf("%s: %d requests; want a stream of them", host, len(reqs))
			continue
		}
		minGap, skipped := time.Duration(1<<63-1), 0
		for i := 1; i < len(reqs); i++ {
			prev, cur := reqs[i-1], reqs[i]
			if d := cur.slot.Sub(prev.slot); d < floor-time.Millisecond {
				t.Errorf("%s: slots %d and %d handed out %v apart; want at least %v", host, i-1, i, d, floor)
			}
			if d := cur.depart.Sub(prev.depart); d < floor-noise {
				t.Errorf("%s: requests %d and %d left %v apart; want at least %v", host, i-1, i, d, floor)
			}
			gap := cur.arrive.Sub(prev.arrive)
			if late := max(prev.arrive.Sub(prev.depart), cur.arrive.Sub(cur.depart)); late > noise {
				skipped++
				t.Logf("%s: requests %d and %d: delivered up to %v after leaving; not judging the %v gap", host, i-1, i, late, gap)
				continue
			}
			minGap = min(minGap, gap)
			if gap < floor-noise {
				t.Errorf("%s: requests %d and %d arrived %v apart; want at least %v", host, i-1, i, gap, floor)
			}
		}
		if skipped > len(reqs)/2 {
			t.Errorf("%s: %d of %d gaps were not judged; the machine is too loaded to measure", host, skipped, len(reqs)-1)
		}
		t.Logf("%s: %d requests, smallest judged gap %v (floor %v), %d not judged", host, len(reqs), minGap, floor, skipped)
	}
	busy := requests["busy.test"]
	if len(busy) > 0 {
		n := 0
		for _, r := range busy {
			if r.arrive.Sub(busy[0].arrive) < window {
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
