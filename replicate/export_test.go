package replicate

import "time"

// SetClock replaces the Handler's clock, for tests that pin fact times and
// durations.
func SetClock(h *Handler, now func() time.Time) { h.now = now }

// PublicURL exposes publicURL to the tests.
var PublicURL = publicURL

// LoadAliasesAt is LoadAliases on a given clock.
var LoadAliasesAt = loadAliases
