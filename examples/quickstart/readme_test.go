package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestREADMEShowsOutput checks the output the README shows for the
// quickstart: each of its lines is a line the quickstart prints.
func TestREADMEShowsOutput(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := bytes.Cut(readme, []byte("It prints"))
	_, rest, ok2 := bytes.Cut(rest, []byte("```text\n"))
	shown, _, ok3 := bytes.Cut(rest, []byte("```"))
	if !ok || !ok2 || !ok3 {
		t.Fatal("README.md: no ```text block after \"It prints\"")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, &out); err != nil {
		t.Fatalf("quickstart: %v\n%s", err, out.String())
	}
	printed := strings.Split(out.String(), "\n")
	lines := 0
	for line := range strings.Lines(string(shown)) {
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			continue
		}
		lines++
		found := false
		for _, p := range printed {
			found = found || p == line
		}
		if !found {
			t.Errorf("README.md shows a line the quickstart does not print:\n%s\nit prints:\n%s", line, out.String())
		}
	}
	if lines < 5 {
		t.Errorf("README.md shows %d lines of the quickstart's output; the block is cut short", lines)
	}
}
