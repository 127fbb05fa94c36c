package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
)

// -log-format auto writes JSON where no person reads (a pipe, a file, a
// buffer) and text on a terminal; json and text force it; others are
// refused.
func TestLogFormat(t *testing.T) {
	var buf bytes.Buffer
	for format, want := range map[string]string{"auto": `{"time":`, "json": `{"time":`, "text": "time="} {
		buf.Reset()
		h, err := logHandler(format, &buf, nil)
		if err != nil {
			t.Fatal(err)
		}
		slog.New(h).Info("hello")
		if !strings.HasPrefix(buf.String(), want) {
			t.Errorf("-log-format %s wrote %q, want it to start with %q", format, buf.String(), want)
		}
	}
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		defer tty.Close()
		if h, _ := logHandler("auto", tty, nil); fmt.Sprintf("%T", h) != "*slog.TextHandler" {
			t.Errorf("-log-format auto on a terminal: %T, want text", h)
		}
	}
	if _, err := logHandler("xml", &buf, nil); err == nil || !strings.Contains(err.Error(), "-log-format") {
		t.Errorf("-log-format xml: %v, want an error naming the flag", err)
	}
}
