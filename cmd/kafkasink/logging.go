package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
)

// newLogger returns the program's logger: -log-level and -log-format,
// writing to w. When w is a terminal and the format text, it also returns
// the terminal, where the progress is one line rewritten in place below
// the log; otherwise the progress is a log record like the others.
func newLogger(level, format string, w io.Writer) (*slog.Logger, *terminal, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, nil, fmt.Errorf("-log-level %q: want debug, info, warn or error", level)
	}
	onTerminal := isTerminal(w)
	if format == "auto" {
		format = "json"
		if onTerminal {
			format = "text"
		}
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil, nil
	case "text":
		if onTerminal {
			term := &terminal{w: w}
			return slog.New(slog.NewTextHandler(term, opts)), term, nil
		}
		return slog.New(slog.NewTextHandler(w, opts)), nil, nil
	}
	return nil, nil, fmt.Errorf("-log-format %q: want json, text or auto", format)
}

// isTerminal reports whether w is a terminal, where a person reads.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// terminal writes log records to a terminal above a status line (the
// progress), which it rewrites in place. It is safe for concurrent use:
// the logger writes records and the progress goroutine the line.
type terminal struct {
	mu   sync.Mutex
	w    io.Writer
	line string // the status line shown; "" when none
}

// clearLine moves to the start of the line and erases it.
const clearLine = "\r\033[K"

// Write writes a log record (slog writes each in one call), and the
// status line again below it.
func (t *terminal) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.line != "" {
		io.WriteString(t.w, clearLine)
	}
	n, err := t.w.Write(p)
	if t.line != "" {
		io.WriteString(t.w, t.line)
	}
	return n, err
}

// show replaces the status line with line.
func (t *terminal) show(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	io.WriteString(t.w, clearLine+line)
	t.line = line
}

// finish leaves the status line as it is, as the last thing written
// before the log records that follow.
func (t *terminal) finish() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.line != "" {
		io.WriteString(t.w, "\n")
		t.line = ""
	}
}
