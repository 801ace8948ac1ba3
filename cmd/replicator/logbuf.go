package main

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// The worker writes a log line per command, and at thousands of commands a
// second one write(2) per line is a measurable share of its work. So lines
// are gathered and written together: INFO and DEBUG lines wait at most
// logFlushEvery (or until logFlushBytes have gathered); a WARN or worse line
// is written at once with everything before it, so what an operator needs
// after a crash is out. Stopping the worker writes what remains.
const (
	logFlushEvery = 100 * time.Millisecond
	logFlushBytes = 64 << 10
)

// logBuffer gathers log lines for w. It is safe for concurrent use.
type logBuffer struct {
	w io.Writer

	mu  sync.Mutex
	buf []byte

	stop chan struct{}
	done chan struct{}
}

// newLogBuffer starts a logBuffer writing to w; Close it to write the rest.
func newLogBuffer(w io.Writer) *logBuffer {
	b := &logBuffer{w: w, stop: make(chan struct{}), done: make(chan struct{})}
	go b.run()
	return b
}

func (b *logBuffer) run() {
	defer close(b.done)
	t := time.NewTicker(logFlushEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			b.Flush()
		case <-b.stop:
			return
		}
	}
}

// Write gathers p, writing everything out once logFlushBytes have
// gathered.
func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) >= logFlushBytes {
		return len(p), b.flushLocked()
	}
	return len(p), nil
}

// Flush writes out what has gathered.
func (b *logBuffer) Flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.flushLocked()
}

func (b *logBuffer) flushLocked() error {
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.w.Write(b.buf)
	b.buf = b.buf[:0]
	return err
}

// Close stops the timer and writes out what remains.
func (b *logBuffer) Close() error {
	close(b.stop)
	<-b.done
	return b.Flush()
}

// flushOnWarn is a slog.Handler whose records at WARN or above are
// written out at once, with every line gathered before them.
type flushOnWarn struct {
	slog.Handler
	b *logBuffer
}

func (h flushOnWarn) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		if ferr := h.b.Flush(); err == nil {
			err = ferr
		}
	}
	return err
}

func (h flushOnWarn) WithAttrs(attrs []slog.Attr) slog.Handler {
	return flushOnWarn{h.Handler.WithAttrs(attrs), h.b}
}

func (h flushOnWarn) WithGroup(name string) slog.Handler {
	return flushOnWarn{h.Handler.WithGroup(name), h.b}
}
