package kafkasink_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// A broker process that dies and recovers its logs, killed with SIGKILL
// through scripts/testenv.sh between and during Writes. Not parallel: see
// the test kit (helpers_test.go) for why the tests that kill brokers run
// alone.

// loadEvents returns n inserts of public.load at commit LSN b<<24 whose
// rows carry pad bytes, over keys distinct ids: a batch a Write needs a
// while for.
func loadEvents(b, n, keys, pad int) []kafkasink.Event {
	events := sinktest.Inserts("public", "load", kafkasink.LSN(b)<<24, 0, n)
	padding := strings.Repeat("p", pad)
	for i := range events {
		events[i].After = kafkasink.Row{{Name: "id", Value: int64(i % keys)}, {Name: "name", Value: padding}}
	}
	return events
}

// firstCommit signals the first transaction committed after arm.
type firstCommit struct {
	armed atomic.Bool
	once  sync.Once
	C     chan struct{}
}

func newFirstCommit() *firstCommit { return &firstCommit{C: make(chan struct{})} }

func (f *firstCommit) arm() { f.armed.Store(true) }

func (f *firstCommit) OnTransactionCommitted(kafkasink.TransactionInfo) {
	if f.armed.Load() {
		f.once.Do(func() { close(f.C) })
	}
}

func TestBrokerRestartBetweenAndDuringWrites(t *testing.T) {
	// Not parallel: it stops the single node every other test uses; see
	// helpers_test.go.
	brokers, name := onRealBrokers(t, sinktest.EnvBrokers)
	nodes := testenvNodes(t)
	topic := name + ".public.load"
	commits := newFirstCommit()
	aborts := &hookLog{}
	s := newSink(t, brokers, name, func(c *kafkasink.Config) {
		c.CheckpointTopic = name + ".checkpoints"
		c.Topics.Prefix = name
		c.Topics.Partitions = 3
		c.MaxTransactionRecords = 4000
		c.Hooks = []kafkasink.Hook{commits, aborts}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const keys = 97
	var want []kafkasink.Event
	writeOK := func(what string, events []kafkasink.Event) {
		t.Helper()
		started := time.Now()
		retried, err := writeRetrying(ctx, s, kafkasink.Batch{Events: events})
		logRetried(t, what, retried)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		t.Logf("%s: delivered in %v after %d retries", what, time.Since(started).Round(time.Millisecond), len(retried))
		want = append(want, events...)
	}

	for b := 1; b <= 3; b++ {
		writeOK(fmt.Sprintf("batch %d", b), loadEvents(b, 200, keys, 100))
	}

	// Between two batches.
	nodes.kill(0)
	nodes.start(0)
	for b := 4; b <= 5; b++ {
		writeOK(fmt.Sprintf("batch %d after the restart", b), loadEvents(b, 200, keys, 100))
	}

	// During a Write: the kill lands once the first transaction of a
	// batch of ten has committed, while the next ones are producing.
	big := loadEvents(6, 40000, keys, 400)
	commits.arm()
	done := make(chan error, 1)
	started := time.Now()
	go func() { done <- s.Write(ctx, kafkasink.Batch{Events: big}) }()
	select {
	case <-commits.C:
	case err := <-done:
		t.Fatalf("the big Write returned before its first transaction committed: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the big Write committed no transaction within 60s")
	}
	nodes.kill(0)
	var writeErr error
	returned := false
	select {
	case writeErr = <-done:
		returned = true
		if writeErr == nil {
			t.Fatal("the big Write had succeeded before the broker died: the test proved nothing; make the batch bigger")
		}
	default:
	}
	nodes.start(0)
	if !returned {
		select {
		case writeErr = <-done:
		case <-time.After(90 * time.Second):
			t.Fatal("the Write running when the broker died did not return within 90s of the restart")
		}
	}
	t.Logf("the Write running when the broker was killed returned after %v: %v (retryable=%t fatal=%t)",
		time.Since(started).Round(time.Millisecond), writeErr, kafkasink.IsRetryable(writeErr), kafkasink.IsFatal(writeErr))
	switch {
	case writeErr == nil:
		if got, last := s.Checkpoint().Position, big[len(big)-1].Position; got != last {
			t.Fatalf("the Write returned nil with the checkpoint at %s, not at its last event %s: a silent partial write", got, last)
		}
		want = append(want, big...)
	case !kafkasink.IsRetryable(writeErr):
		t.Fatalf("the Write running when the broker died returned an error that is not retryable (fatal=%t): %v", kafkasink.IsFatal(writeErr), writeErr)
	default:
		t.Logf("checkpoint after the failed Write: %s (the batch ends at %s)", s.Checkpoint().Position, big[len(big)-1].Position)
		writeOK("the big batch again", big)
	}
	_, committed, aborted, _ := aborts.snapshot()
	t.Logf("transactions: %d committed, %d aborted", len(committed), len(aborted))
	for _, a := range aborted {
		t.Logf("aborted %s..%s: %v", a.info.First, a.info.Last, a.err)
	}

	writeOK("batch 7", loadEvents(7, 200, keys, 100))
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), want)
}
