package worker_test

import (
	"time"

	"github.com/replicator-go/replicator/policy"
)

// spacing is d as a policy.LocalOptions.DefaultInterval: None when d is
// zero, so a zero interval means no spacing as the tests intend.
func spacing(d time.Duration) time.Duration {
	if d == 0 {
		return policy.None
	}
	return d
}
