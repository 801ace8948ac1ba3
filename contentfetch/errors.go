package contentfetch

import (
	"errors"
	"strconv"
	"time"
)

// Why a handling ended Transient before anything was sent, for errors.Is.
var (
	// ErrParked means the command is put off, to be tried again once
	// ParkedError.Wait has passed: a host's politeness window was further
	// away than HandlerOptions.MaxWait (nothing reached the origin for that
	// hop), or the sink had no room for the body (fetch.ErrStorageFull as
	// well). The error is a *ParkedError.
	ErrParked = errors.New("contentfetch: parked")
	// ErrStopping means Handle's stop channel closed during a politeness
	// wait; the wait was cut short and nothing was sent.
	ErrStopping = errors.New("contentfetch: stopping")
)

// DefaultRoomWait is how long a command the sink has no room for is parked
// when HandlerOptions.MaxWait is zero.
const DefaultRoomWait = 5 * time.Second

// ParkedError is the detail of ErrParked.
type ParkedError struct {
	// Host is the host whose window is not yet open; "" when the command
	// waits for room in the sink.
	Host string
	// Wait is how long until the host is due, measured at the decision, or
	// until the sink is asked again for room.
	Wait time.Duration
	// Cause is nil for a politeness window; otherwise what the command
	// waits for: an error wrapping fetch.ErrStorageFull.
	Cause error
}

// Error names the host and how long until it is due, or the cause.
func (e *ParkedError) Error() string {
	wait := strconv.FormatInt(e.Wait.Milliseconds(), 10) + "ms"
	if e.Cause != nil {
		return "contentfetch: parked for " + wait + ": " + e.Cause.Error()
	}
	return "contentfetch: parked for politeness: " + e.Host + " is due in " + wait
}

// Unwrap makes errors.Is(err, ErrParked) true, and reaches the Cause.
func (e *ParkedError) Unwrap() []error {
	if e.Cause == nil {
		return []error{ErrParked}
	}
	return []error{ErrParked, e.Cause}
}
