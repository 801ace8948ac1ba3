package fetch_test

import (
	"strconv"
	"testing"

	"github.com/replicator-go/replicator/engine/capability"
	"github.com/replicator-go/replicator/envelope"
	"github.com/replicator-go/replicator/internal/testenv"
	"github.com/replicator-go/replicator/internal/testenv/fetchenv"
)

// TestStatusesOutsideTheClasses checks the last status row of docs/taxonomy.md, Classifying the final response: a
// status that is not 2xx, 304, 5xx, 408 or 429 is permanent http_status,
// and so is one of 600 or more, which a first digit of 6 to 9 does not make
// a server error.
func TestStatusesOutsideTheClasses(t *testing.T) {
	for _, status := range []int{418, 451, 499, 600, 799, 999} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			h := fetchenv.New(t, testenv.Status(status, nil, "body"), fetchenv.Options{})
			out := h.Handle(t, fetchenv.Command(h.URL("origin.test", "/")))
			if out.Fate != capability.Close || out.Reason != string(envelope.ReasonHTTPStatus) || out.StatusCode != status {
				t.Fatalf("outcome = %v/%q status %d (%v), want permanent http_status %d", out.Name(), out.Reason, out.StatusCode, out.Err, status)
			}
		})
	}
}
