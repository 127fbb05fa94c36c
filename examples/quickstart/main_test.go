package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestQuickstart runs the quickstart and checks what its consumer saw: the
// seven events once each, the redelivered batch not duplicated.
func TestQuickstart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, &out); err != nil {
		t.Fatalf("quickstart: %v\n%s", err, out.String())
	}
	text := out.String()
	if !strings.Contains(text, "a read_committed consumer sees 7 records") {
		t.Fatalf("unexpected record count:\n%s", text)
	}
	ids := regexp.MustCompile(`id=(\S+)`).FindAllStringSubmatch(text, -1)
	seen := map[string]bool{}
	for _, m := range ids {
		if seen[m[1]] {
			t.Errorf("event %s printed twice", m[1])
		}
		seen[m[1]] = true
	}
	if len(seen) != 7 {
		t.Errorf("%d distinct events, want 7:\n%s", len(seen), text)
	}
	if !strings.Contains(text, "checkpoint: position 0/3000:0, mode exactly-once") {
		t.Errorf("final checkpoint missing:\n%s", text)
	}
}
