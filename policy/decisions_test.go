package policy_test

import (
	"testing"

	"github.com/replicator-go/replicator/policy"
	"github.com/replicator-go/replicator/policy/internal/pacertest"
)

// TestLocalDecisions plays every decision case on Local at the cases'
// explicit times; policy/fleet plays the clock-free ones on the Redis pacer.
func TestLocalDecisions(t *testing.T) {
	for _, c := range pacertest.Cases {
		t.Run(c.Name, func(t *testing.T) {
			pacertest.Run(t, c, 0, func(opts policy.LocalOptions) pacertest.Decider {
				return policy.NewLocal(opts)
			})
		})
	}
}
