package persist

import "time"

// SetNow sets the clock the Handler stamps facts with.
func SetNow(h *Handler, now func() time.Time) { h.now = now }
