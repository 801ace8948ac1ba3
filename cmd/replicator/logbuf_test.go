package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestLogBuffer: INFO lines gather until a flush; a WARN line goes out at
// once with the lines before it; enough gathered bytes go out by
// themselves; Close writes the rest. The ticker is not started: the test
// drives every flush.
func TestLogBuffer(t *testing.T) {
	var out bytes.Buffer
	b := &logBuffer{w: &out}
	log := slog.New(flushOnWarn{slog.NewJSONHandler(b, nil), b})

	log.Info("first")
	log.Info("second")
	if out.Len() != 0 {
		t.Fatalf("INFO lines written at once: %q", out.String())
	}
	log.Warn("trouble")
	if got := strings.Count(out.String(), "\n"); got != 3 || !strings.Contains(out.String(), `"msg":"trouble"`) {
		t.Fatalf("after a WARN line, written %q; want all three lines", out.String())
	}

	out.Reset()
	big := strings.Repeat("x", logFlushBytes)
	log.Info("big", "payload", big)
	if out.Len() < logFlushBytes {
		t.Errorf("%d bytes written after a line of over %d, want it out", out.Len(), logFlushBytes)
	}

	out.Reset()
	log.Info("last")
	b.stop, b.done = make(chan struct{}), make(chan struct{})
	close(b.done)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"msg":"last"`) {
		t.Errorf("Close wrote %q, want the gathered line", out.String())
	}
}
