package testenv

import (
	"bytes"
	"strings"
	"sync"
)

// LogBuffer collects log output written from many goroutines (or a child
// process's stderr) so a test can search it afterwards. The zero value is
// ready to use; it is safe for concurrent use.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Count returns how many times sub occurs in what was written.
func (l *LogBuffer) Count(sub string) int { return strings.Count(l.String(), sub) }
