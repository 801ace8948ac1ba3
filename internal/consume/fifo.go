package consume

import "time"

// FIFO is a Scheduler for commands that wait for nothing but a free
// handler: they start in arrival order, at most its limit at once, and are
// never requeued. A full loop admits nothing more (nothing waits for a
// time, so nothing could give up its place).
type FIFO[C, R any] struct {
	limit   int
	active  int
	waiting []*Held[C]
}

var _ Scheduler[int, int] = (*FIFO[int, int])(nil)

// NewFIFO returns a FIFO that lets limit commands run at once (at least 1).
func NewFIFO[C, R any](limit int) *FIFO[C, R] { return &FIFO[C, R]{limit: max(limit, 1)} }

// Admit queues h unless the loop is full.
func (f *FIFO[C, R]) Admit(h *Held[C], full bool, _ time.Time) (bool, string, *Held[C]) {
	if full {
		return false, "worker full", nil
	}
	f.waiting = append(f.waiting, h)
	return true, "", nil
}

// Evictable is always 0: no command waits for a time.
func (f *FIFO[C, R]) Evictable() int { return 0 }

// Start returns the oldest waiting commands while fewer than the limit run.
func (f *FIFO[C, R]) Start(time.Time) []*Held[C] {
	n := min(f.limit-f.active, len(f.waiting))
	if n <= 0 {
		return nil
	}
	started := make([]*Held[C], n)
	copy(started, f.waiting)
	clear(f.waiting[:n])
	f.waiting = f.waiting[n:]
	f.active += n
	return started
}

// Recall names nothing: Admit turns a command away only when the loop is
// full, and then notes nothing.
func (f *FIFO[C, R]) Recall(int, time.Time) []string { return nil }

// Wake is always zero: nothing waits for a time.
func (f *FIFO[C, R]) Wake() time.Time { return time.Time{} }

// Done frees h's place; nothing is requeued.
func (f *FIFO[C, R]) Done(*Held[C], R, bool, time.Time) bool {
	f.active--
	return false
}

// Remove drops a waiting h.
func (f *FIFO[C, R]) Remove(h *Held[C]) bool {
	for i, x := range f.waiting {
		if x == h {
			f.waiting = append(f.waiting[:i], f.waiting[i+1:]...)
			return true
		}
	}
	return false
}

// Drain drops every waiting command and returns them.
func (f *FIFO[C, R]) Drain() []*Held[C] {
	d := f.waiting
	f.waiting = nil
	return d
}

// Parked is always 0.
func (f *FIFO[C, R]) Parked() int { return 0 }
