package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
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

// TestQuickstartPipeline runs the whole pipeline on a throwaway PostgreSQL
// and checks what the consumer saw: the seven changes once each, though
// the crash left the second transaction unconfirmed to the slot, and the
// topics' last records are the tables' rows.
func TestQuickstartPipeline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, err := startPostgres(ctx)
	var no *unavailableError
	if errors.As(err, &no) {
		t.Skipf("no PostgreSQL here: %s", no)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer pg.stop()
	var out bytes.Buffer
	if err := runPipeline(ctx, &out, pg.url()); err != nil {
		t.Fatalf("pipeline: %v\n%s", err, out.String())
	}
	text := out.String()
	// Whether the slot sends the second transaction again depends on
	// where the restarted Run asks it to start: at the later of the slot's
	// confirmed position and the checkpoint, so either line may show; the
	// records below must be the same either way.
	if !regexp.MustCompile(`the slot sent [1-9][0-9]* events? again, at or below the checkpoint: the sink dropped them|nothing came again`).MatchString(text) {
		t.Errorf("the restarted run's redelivery is not reported:\n%s", text)
	}
	if !strings.Contains(text, "a read_committed consumer sees 7 records") {
		t.Fatalf("unexpected record count:\n%s", text)
	}
	ids := regexp.MustCompile(`id=(\S+)`).FindAllStringSubmatch(text, -1)
	seen := map[string]bool{}
	for _, m := range ids {
		if seen[m[1]] {
			t.Errorf("change %s printed twice", m[1])
		}
		seen[m[1]] = true
	}
	if len(seen) != 7 {
		t.Errorf("%d distinct changes, want 7:\n%s", len(seen), text)
	}
	last := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^(\S+) +key=(\S+) .* op=\S+ +(.*)$`).FindAllStringSubmatch(text, -1) {
		last[m[1]+"/"+m[2]] = m[3]
	}
	for key, want := range map[string]string{
		"shop.public.orders/1":    `"document":{"id":1,"status":"paid","total":"19.95"}`,
		"shop.public.orders/2":    "null (a tombstone",
		"shop.public.orders/3":    `"document":{"id":3,"status":"new","total":"7.50"}`,
		"shop.public.customers/7": `"document":{"id":7,"name":"Ada Lovelace"}`,
	} {
		if !strings.Contains(last[key], want) {
			t.Errorf("last record of %s is %q, want %s", key, last[key], want)
		}
	}
}

// TestQuickstartFallsBack runs the quickstart where PostgreSQL cannot run:
// it says why in one line and runs the hand-made source.
func TestQuickstartFallsBack(t *testing.T) {
	// A Maven that fails as one offline does, found first on the PATH.
	offline := t.TempDir()
	mvn := "#!/bin/sh\necho '[ERROR] Could not transfer artifact: repo.maven.apache.org: Temporary failure in name resolution'\nexit 1\n"
	if err := os.WriteFile(filepath.Join(offline, "mvn"), []byte(mvn), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path, why string
	}{
		// No binaries, no Maven, and as root no runuser either.
		{"nothing on the PATH", t.TempDir(), ""},
		{"offline", offline + string(os.PathListSeparator) + os.Getenv("PATH"), "Temporary failure in name resolution"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("KAFKASINK_CACHE", t.TempDir())
			t.Setenv("PATH", c.path)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var out bytes.Buffer
			if err := runAny(ctx, &out); err != nil {
				t.Fatalf("quickstart: %v\n%s", err, out.String())
			}
			first, rest, _ := strings.Cut(out.String(), "\n")
			if !strings.HasPrefix(first, "no PostgreSQL here: ") || !strings.HasSuffix(first, "; showing the sink with a hand-made source instead") ||
				!strings.Contains(first, c.why) {
				t.Errorf("first line %q, want why PostgreSQL cannot run (%q) and that the hand-made source runs", first, c.why)
			}
			if !strings.HasPrefix(rest, "\nwrote 2 batches") || !strings.Contains(rest, "a read_committed consumer sees 7 records") {
				t.Errorf("after the first line, want the hand-made source's run:\n%s", rest)
			}
		})
	}
}
