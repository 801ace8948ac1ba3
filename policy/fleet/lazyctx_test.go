package fleet

import (
	"context"
	"errors"
	"testing"
	"time"
)

type ctxKey struct{}

func TestLazyDeadline(t *testing.T) {
	parentWith := func() (context.Context, context.CancelFunc) {
		return context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	}

	t.Run("nothing asked, nothing armed", func(t *testing.T) {
		parent, cancel := parentWith()
		defer cancel()
		c, release := withLazyDeadline(parent, time.Now().Add(time.Hour))
		if got := c.Value(ctxKey{}); got != "v" {
			t.Errorf("Value = %v, want the parent's", got)
		}
		if c.bound != nil {
			t.Fatal("armed by Value alone")
		}
		release()
		if c.cancel != nil {
			t.Error("release armed a timer")
		}
		if err := c.Err(); !errors.Is(err, context.Canceled) {
			t.Errorf("Err after release = %v, want Canceled", err)
		}
		<-c.Done()
	})

	t.Run("armed, it ends at its deadline", func(t *testing.T) {
		parent, cancel := parentWith()
		defer cancel()
		at := time.Now().Add(-time.Millisecond)
		c, release := withLazyDeadline(parent, at)
		defer release()
		if dl, ok := c.Deadline(); !ok || !dl.Equal(at) {
			t.Errorf("Deadline = %v, %v; want %v, true", dl, ok, at)
		}
		<-c.Done()
		if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Err = %v, want DeadlineExceeded", err)
		}
	})

	t.Run("armed, it ends with its parent", func(t *testing.T) {
		parent, cancel := parentWith()
		c, release := withLazyDeadline(parent, time.Now().Add(time.Hour))
		defer release()
		done := c.Done()
		if c.Err() != nil {
			t.Fatalf("Err = %v before anything ended", c.Err())
		}
		cancel()
		<-done
		if err := c.Err(); !errors.Is(err, context.Canceled) {
			t.Errorf("Err = %v, want Canceled", err)
		}
	})

	t.Run("armed, release cancels it", func(t *testing.T) {
		parent, cancel := parentWith()
		defer cancel()
		c, release := withLazyDeadline(parent, time.Now().Add(time.Hour))
		done := c.Done()
		release()
		<-done
		if err := c.Err(); !errors.Is(err, context.Canceled) {
			t.Errorf("Err = %v, want Canceled", err)
		}
	})

	t.Run("the parent's earlier deadline wins", func(t *testing.T) {
		early := time.Now().Add(time.Minute)
		parent, cancel := context.WithDeadline(context.Background(), early)
		defer cancel()
		c, release := withLazyDeadline(parent, early.Add(time.Hour))
		defer release()
		if dl, _ := c.Deadline(); !dl.Equal(early) {
			t.Errorf("Deadline = %v, want the parent's %v", dl, early)
		}
	})
}
