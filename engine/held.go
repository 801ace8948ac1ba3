package engine

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/replicator-go/replicator/engine/capability"
)

// field is one field of a stream entry.
type field struct{ Name, Value string }

// entry is one stream entry as delivered, its fields in stream order.
type entry struct {
	ID     string
	Fields []field
}

// task is a command the loop holds in memory, from the read that delivered
// it to its fate, or until it is dropped and left pending.
type task struct {
	entry
	Command   *capability.Command
	CommandID string
	// Key is the scheduler's grouping key; a parked command may move to
	// another key (a redirect's host).
	Key   string
	Attrs []slog.Attr

	state heldState
	lost  bool // another consumer took it, or it was trimmed
	// renewedAt (unix nanoseconds) is no later than when the entry was last
	// delivered to this consumer or its claim renewed: its idle time is at
	// most the time since (see run.own).
	renewedAt atomic.Int64

	// What of its fate is written, so a fate tried again writes each step
	// once: its fact, its dedupe key, its dead letter; and, for an
	// unclassified failure, how many failures of the entry it makes.
	published, remembered, deadLettered bool
	attempts                            int

	// The scheduler's state: arrival order, when a parked command is due,
	// its queue, whether it is inside the Handler, how often it parked.
	seq       uint64
	due       time.Time
	q         *keyQueue
	inHandler bool
	parks     int
}

type heldState int

const (
	// waiting: in the scheduler, not in the Handler.
	waiting heldState = iota
	// active: inside the Handler.
	active
	// closing: handled, its fate being written.
	closing
)
