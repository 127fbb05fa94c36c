package kafkasink_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// These tests crash a real process, internal/cmd/crashsink, with SIGKILL and
// check what a read_committed consumer sees afterwards. They run against
// the broker in KAFKASINK_TEST_BROKERS when it is set (see
// scripts/testenv.sh), else against an in-process fake cluster that the
// child process reaches over loopback.

// crashStream is one deterministic stream of crashsink runs: the same
// sink id, topics and source acknowledgement file across restarts.
type crashStream struct {
	name                  string
	batches, events, keys int
	args                  []string // the flags every run shares
}

func newCrashStream(t *testing.T, batches, events, keys int, extra ...string) crashStream {
	name := sinktest.UniqueName(t)
	args := append([]string{"-sink-id", name, "-topic-prefix", name, "-ack-file", filepath.Join(t.TempDir(), "ack"),
		"-batches", fmt.Sprint(batches), "-events", fmt.Sprint(events), "-keys", fmt.Sprint(keys)}, extra...)
	return crashStream{name: name, batches: batches, events: events, keys: keys, args: args}
}

// topic is where the stream's events go.
func (c crashStream) topic() string { return c.name + ".public.items" }

// want is every event of the stream.
func (c crashStream) want() []kafkasink.Event { return streamEvents(c.batches, c.events, c.keys) }

// run runs crashsink once more on the stream, with more flags.
func (c crashStream) run(t *testing.T, ctx context.Context, brokers []string, more ...string) crashRun {
	return runCrashsink(t, ctx, brokers, append(append([]string(nil), c.args...), more...)...)
}

func TestSIGKILLAtEachProtocolPointExactlyOnce(t *testing.T) {
	skipInShort(t, "builds and SIGKILLs a child process")
	t.Parallel()
	brokers := testBrokers(t)
	stream := newCrashStream(t, 12, 15, 7)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	for _, crash := range []string{"after-produce:3", "after-commit:5", "after-produce:6", "after-commit:6", "after-produce:11"} {
		r := stream.run(t, ctx, brokers, "-crash", crash)
		if !r.killed || !strings.Contains(r.out, "crashing "+strings.Replace(crash, ":", " batch=", 1)) {
			t.Fatalf("crash %s: the process was not killed where asked (exit %d):\n%s", crash, r.exitCode, r.out)
		}
	}
	if r := stream.run(t, ctx, brokers); r.exitCode != 0 || !strings.Contains(r.out, "done ") {
		t.Fatalf("final run: exit %d:\n%s", r.exitCode, r.out)
	}
	want := stream.want()
	// The after-produce crashes left records of unfinished transactions
	// in the log; read_committed readers must not see them.
	if all := sinktest.ReadUncommitted(t, brokers, stream.topic()); len(all) <= len(want) {
		t.Fatalf("the log holds %d records for %d events: the crashes left nothing behind, so this test proves nothing", len(all), len(want))
	} else {
		t.Logf("the log holds %d records for %d events; %d belong to transactions the crashes left unfinished", len(all), len(want), len(all)-len(want))
	}
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, stream.topic()), want)
	checkWithExternalReaders(t, brokers, stream.topic(), want)
}

func TestSIGKILLAtRandomMomentsExactlyOnce(t *testing.T) {
	skipInShort(t, "builds and SIGKILLs a child process")
	t.Parallel()
	brokers := testBrokers(t)
	stream := newCrashStream(t, 80, 10, 5, "-pause", "40ms")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	crashsink(t) // build it before the kill timers start
	kills := 0
	for range 6 {
		kctx, kcancel := context.WithTimeout(ctx, time.Duration(150+rand.IntN(500))*time.Millisecond)
		r := stream.run(t, kctx, brokers) // CommandContext sends SIGKILL
		kcancel()
		if r.killed {
			kills++
		} else if r.exitCode != 0 {
			t.Fatalf("run failed: exit %d:\n%s", r.exitCode, r.out)
		}
	}
	if r := stream.run(t, ctx, brokers); r.exitCode != 0 {
		t.Fatalf("final run: exit %d:\n%s", r.exitCode, r.out)
	}
	t.Logf("killed %d times at random moments", kills)
	if kills == 0 {
		t.Fatal("no run was killed: the test proved nothing")
	}
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, stream.topic()), stream.want())
}

func TestSIGKILLAtLeastOnceModesLoseNothing(t *testing.T) {
	skipInShort(t, "builds and SIGKILLs a child process")
	t.Parallel()
	for _, mode := range []string{"idempotent", "plain"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			brokers := testBrokers(t)
			stream := newCrashStream(t, 10, 12, 6, "-mode", mode)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			for _, crash := range []string{"after-produce:2", "after-commit:4", "after-produce:7"} {
				if r := stream.run(t, ctx, brokers, "-crash", crash); !r.killed {
					t.Fatalf("crash %s: not killed (exit %d):\n%s", crash, r.exitCode, r.out)
				}
			}
			if r := stream.run(t, ctx, brokers); r.exitCode != 0 {
				t.Fatalf("final run: exit %d:\n%s", r.exitCode, r.out)
			}
			records := sinktest.ReadCommitted(t, brokers, stream.topic())
			seen := make(map[string]int)
			for _, r := range records {
				seen[sinktest.Header(r, kafkasink.HeaderID)]++
			}
			dups := 0
			for _, e := range stream.want() {
				switch n := seen[e.ID()]; {
				case n == 0:
					t.Errorf("event %s lost", e.ID())
				case n > 1:
					dups += n - 1
				}
			}
			// Only a crash between a batch's records and its checkpoint
			// duplicates, and only that batch: two after-produce crashes.
			bound := 2 * stream.events
			t.Logf("%s: %d records for %d events, %d duplicates (bound %d)", mode, len(records), stream.batches*stream.events, dups, bound)
			if dups > bound {
				t.Fatalf("%d duplicates, more than the %d events written after the last checkpoints", dups, bound)
			}
		})
	}
}

func TestTwoProcessesSameSinkIDOlderIsFenced(t *testing.T) {
	skipInShort(t, "builds and runs two child processes")
	t.Parallel()
	brokers := testBrokers(t)
	stream := newCrashStream(t, 30, 5, 4, "-retries", "0")
	ack := stream.args[slices.Index(stream.args, "-ack-file")+1]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	older := make(chan crashRun, 1)
	go func() { older <- stream.run(t, ctx, brokers, "-pause", "150ms") }()
	// Let the older process deliver a few batches first.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if b, _ := os.ReadFile(ack); len(b) > 0 {
			if n, err := strconv.Atoi(string(bytes.TrimSpace(b))); err == nil && n >= 3 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the older process never acknowledged a batch")
		}
	}
	newer := stream.run(t, ctx, brokers)
	if newer.exitCode != 0 {
		t.Fatalf("newer process: exit %d:\n%s", newer.exitCode, newer.out)
	}
	o := <-older
	if o.exitCode != 3 || !strings.Contains(o.out, "fenced=true") {
		t.Fatalf("older process: exit %d, want 3 (ErrFenced):\n%s", o.exitCode, o.out)
	}
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, stream.topic()), stream.want())
}
