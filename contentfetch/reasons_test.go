package contentfetch

import (
	"fmt"
	"testing"

	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/fetch"
)

// TestEveryCauseHasItsReason: every cause of a permanent failure fetch
// tells apart reaches the wire as a token of its own, none as the token of
// a bug, so no distinction is lost on the way.
func TestEveryCauseHasItsReason(t *testing.T) {
	seen := map[envelope.Reason]fetch.Cause{}
	for c := fetch.CauseNone + 1; c.String() != fmt.Sprintf("Cause(%d)", c); c++ {
		r := reason(c)
		if r == envelope.ReasonHandlerError {
			t.Errorf("cause %v has no reason token", c)
			continue
		}
		if other, ok := seen[r]; ok {
			t.Errorf("causes %v and %v both map to %s", other, c, r)
		}
		seen[r] = c
	}
	if len(seen) == 0 {
		t.Fatal("no cause found")
	}
}
