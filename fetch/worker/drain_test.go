package worker_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/replicator-go/replicator/envelope"
)

// TestWorkerTakesBackOnlyWhatIsStillItsOwn: commands over their host's
// bound are left pending and taken back once the host has room, except one
// another consumer has taken over meanwhile (it is left to that consumer)
// and one trimmed from the stream (acked away with a warning).
func TestWorkerTakesBackOnlyWhatIsStillItsOwn(t *testing.T) {
	for _, b := range bothBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			release := make(chan struct{})
			e := newEnv(t, b.client, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				select {
				case <-release:
				case <-req.Context().Done():
					return
				}
				okBody(w, req)
			}))
			wo := e.workerOptions()
			wo.ClaimMinIdle = 10 * time.Minute // nothing is reclaimed during the test
			wo.MaxHeldPerHost = 2
			e.start(stackOptions{}, wo)
			cmds := make([]*envelope.ContentFetch, 6)
			for i := range cmds {
				cmds[i] = e.command(fmt.Sprintf("c%d", i), e.url("w.test", fmt.Sprintf("/%d", i)))
			}
			ids := e.addMany(cmds)
			eventually(t, 10*time.Second, "four commands left pending", func() bool {
				return strings.Count(e.logs.String(), `"msg":"left a command pending"`) == 4 && e.lastDelivered() == ids[5]
			})
			// c3 is reclaimed by another worker; c4 is trimmed from the stream.
			if err := e.do(e.client.B().Xclaim().Key(e.stream).Group(e.group).Consumer("other").MinIdleTime("0").Id(ids[3]).Justid().Build()).Error(); err != nil {
				t.Fatal(err)
			}
			if err := e.do(e.client.B().Xdel().Key(e.stream).Id(ids[4]).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			close(release)

			facts := e.waitFacts(4, 10*time.Second)
			eventually(t, 10*time.Second, "only the other consumer's entry pending", func() bool { return e.pending() == 1 })
			if diff := cmp.Diff([]string{"c0", "c1", "c2", "c5"}, commandIDs(facts), cmpSorted); diff != "" {
				t.Errorf("facts (-want +got):\n%s", diff)
			}
			if owner := e.owner(ids[3]); owner != "other" {
				t.Errorf("c3 is pending for %q, want other", owner)
			}
			if !strings.Contains(e.logs.String(), `"msg":"pending entry was trimmed from the stream; acking it away","message_id":"`+ids[4]) {
				t.Error("no warning for the trimmed entry")
			}
			if n := e.requests("w.test"); n != 4 {
				t.Errorf("the origin saw %d requests, want 4", n)
			}
		})
	}
}
