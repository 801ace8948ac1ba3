package contentfetch

import (
	"errors"
	"strconv"
	"time"
)

// Why a handling ended Transient before anything was sent, for errors.Is.
var (
	// ErrParked means a host's politeness window was further away than
	// HandlerOptions.MaxWait; nothing reached the origin for that hop. The
	// error is a *ParkedError telling when the host is due.
	ErrParked = errors.New("contentfetch: parked for politeness")
	// ErrStopping means Handle's stop channel closed during a politeness
	// wait; the wait was cut short and nothing was sent.
	ErrStopping = errors.New("contentfetch: stopping")
)

// ParkedError is the detail of ErrParked.
type ParkedError struct {
	// Host is the host whose window is not yet open.
	Host string
	// Wait is how long until the host is due, measured at the decision.
	Wait time.Duration
}

// Error names the host and how long until it is due.
func (e *ParkedError) Error() string {
	return "contentfetch: parked for politeness: " + e.Host + " is due in " + strconv.FormatInt(e.Wait.Milliseconds(), 10) + "ms"
}

// Unwrap makes errors.Is(err, ErrParked) true.
func (e *ParkedError) Unwrap() error { return ErrParked }
