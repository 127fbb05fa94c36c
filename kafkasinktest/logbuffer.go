package kafkasinktest

import (
	"bytes"
	"sync"
)

// LogBuffer collects what a sink logs (a slog handler on it as
// Config.Logger) or a child process writes, while the test reads it.
// Unlike a bytes.Buffer it is safe for concurrent use: the sink logs from
// goroutines of its own. The zero value is an empty buffer.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p; it never fails.
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
