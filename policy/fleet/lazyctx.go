package fleet

import (
	"context"
	"sync"
	"time"
)

// lazyDeadline is a context bounded by a deadline whose timer is made only
// when something asks for its Done, Err or Deadline. A lookup answered from
// the client-side cache returns without looking at its context, so most
// pacing decisions for an unspaced host make no timer at all; one that
// goes to Redis arms it, and is bounded as with context.WithDeadline.
type lazyDeadline struct {
	parent   context.Context
	deadline time.Time

	once   sync.Once
	bound  context.Context
	cancel context.CancelFunc
}

// withLazyDeadline returns ctx bounded by deadline, and the function that
// releases its timer, as context.WithDeadline does.
func withLazyDeadline(ctx context.Context, deadline time.Time) (*lazyDeadline, func()) {
	c := &lazyDeadline{parent: ctx, deadline: deadline}
	return c, c.release
}

func (c *lazyDeadline) arm() context.Context {
	c.once.Do(func() { c.bound, c.cancel = context.WithDeadline(c.parent, c.deadline) })
	return c.bound
}

// release ends the context: one armed is cancelled, one never armed is
// never armed afterwards and reads as cancelled.
func (c *lazyDeadline) release() {
	c.once.Do(func() { c.bound = released })
	if c.cancel != nil {
		c.cancel()
	}
}

// released is the context a released, never armed lazyDeadline reads as.
var released = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

func (c *lazyDeadline) Deadline() (time.Time, bool) { return c.arm().Deadline() }
func (c *lazyDeadline) Done() <-chan struct{}       { return c.arm().Done() }
func (c *lazyDeadline) Err() error                  { return c.arm().Err() }
func (c *lazyDeadline) Value(key any) any           { return c.parent.Value(key) }
