package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
)

// newLogger returns the program's logger: -log-level and -log-format,
// writing to w.
func newLogger(level, format string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("-log-level %q: want debug, info, warn or error", level)
	}
	h, err := logHandler(format, w, &slog.HandlerOptions{Level: l})
	if err != nil {
		return nil, err
	}
	return slog.New(h), nil
}

// logHandler returns the log handler of -log-format: auto is text when w is
// a terminal, where a person reads it, and JSON otherwise, where a log
// collector does.
func logHandler(format string, w io.Writer, opts *slog.HandlerOptions) (slog.Handler, error) {
	if format == "auto" {
		format = "json"
		if f, ok := w.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				format = "text"
			}
		}
	}
	switch format {
	case "json":
		return slog.NewJSONHandler(w, opts), nil
	case "text":
		return slog.NewTextHandler(w, opts), nil
	}
	return nil, fmt.Errorf("-log-format %q: want json, text or auto", format)
}
