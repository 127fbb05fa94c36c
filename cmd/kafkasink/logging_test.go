package main

import (
	"bytes"
	"strings"
	"testing"
)

// -log-format auto writes JSON where no person reads (a pipe, a file, a
// buffer) and text on a terminal (TestTerminal); json and text force it;
// others are refused. Off a terminal the progress is a log record, so
// there is no status line.
func TestLogFormat(t *testing.T) {
	var buf bytes.Buffer
	for format, want := range map[string]string{"auto": `{"time":`, "json": `{"time":`, "text": "time="} {
		buf.Reset()
		logger, term, err := newLogger("info", format, &buf)
		if err != nil {
			t.Fatal(err)
		}
		logger.Info("hello")
		if !strings.HasPrefix(buf.String(), want) {
			t.Errorf("-log-format %s wrote %q, want it to start with %q", format, buf.String(), want)
		}
		if term != nil {
			t.Errorf("-log-format %s off a terminal: a status line, want none", format)
		}
	}
	if _, _, err := newLogger("info", "xml", &buf); err == nil || !strings.Contains(err.Error(), "-log-format") {
		t.Errorf("-log-format xml: %v, want an error naming the flag", err)
	}
	if _, _, err := newLogger("loud", "auto", &buf); err == nil || !strings.Contains(err.Error(), "-log-level") {
		t.Errorf("-log-level loud: %v, want an error naming the flag", err)
	}
}
