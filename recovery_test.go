package kafkasink_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// shortTxn gives a sink a 3s transaction timeout, so a 1s commit timeout.
func shortTxn(c *kafkasink.Config) { c.TransactionTimeout = 3 * time.Second }

// A commit the broker applied but whose answer is lost, then a recovery
// that fails too: the sink must not plan the retried batch against the
// checkpoint it had before the commit (issue 8, defect 1).
func TestFailedRecoveryDoesNotCommitTwice(t *testing.T) {
	t.Parallel()
	c, brokers := sinktest.Cluster(t)
	const topic = "kafkasink.public.orders"
	s := newSink(t, brokers, "failed-recovery", shortTxn)
	a := sinktest.Inserts("public", "orders", 100, 1, 5)
	write(t, s, a)

	// Reading the checkpoint back fails, as it does while the
	// checkpoint partition's leader moves.
	unreadable := c.Fault(
		kfake.Fault{Keys: []kmsg.Key{kmsg.ListOffsets}, Err: kerr.LeaderNotAvailable, Count: -1},
		kfake.Fault{Keys: []kmsg.Key{kmsg.Metadata}, Topic: kafkasink.DefaultCheckpointTopic, Err: kerr.LeaderNotAvailable, Count: -1},
	)
	// The commit reaches the broker but is held there past the commit
	// timeout: the client gives up on it, then the broker applies it.
	release := make(chan struct{})
	b := sinktest.Inserts("public", "orders", 200, 6, 40)
	errc := writeHeldAt(t, c, s, kmsg.EndTxn, b, release)
	time.Sleep(1500 * time.Millisecond)
	close(release)
	if err := <-errc; err == nil || !kafkasink.IsRetryable(err) {
		t.Fatalf("Write with a lost commit and an unreadable checkpoint: %v, want a retryable error", err)
	}
	unreadable.Remove()

	// The caller writes the same batch again, as it should: the sink
	// reads the checkpoint back first, finds b committed, writes nothing.
	if retried, err := writeRetrying(ctxT(t), s, kafkasink.Batch{Events: b}); err != nil {
		t.Fatalf("Write again: %v (after %v)", err, retried)
	} else if len(retried) > 0 {
		t.Logf("retried %v", retried)
	}
	if got := s.Checkpoint().Position; got != b[len(b)-1].Position {
		t.Fatalf("checkpoint %s, want %s", got, b[len(b)-1].Position)
	}
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), append(a, b...))
}

// An older instance whose commit outcome is unclear while a newer one
// starts must never fence the newer one (issue 8, defect 2): its recovery
// keeps its producer identity, and the broker refuses it.
func TestZombieRecoveryNeverFencesNewerInstance(t *testing.T) {
	t.Parallel()
	c, brokers := sinktest.Cluster(t)
	const topic = "kafkasink.public.orders"
	a := sinktest.Inserts("public", "orders", 100, 1, 5)
	b := sinktest.Inserts("public", "orders", 200, 6, 5)
	zb := sinktest.Inserts("public", "orders", 250, 900, 5)
	d := sinktest.Inserts("public", "orders", 300, 11, 5)

	old := newSink(t, brokers, "zombie", shortTxn)
	write(t, old, a)

	// The old instance's commit hangs at the broker past its commit
	// timeout, so its outcome is unclear to it.
	release := make(chan struct{})
	oldErr := writeHeldAt(t, c, old, kmsg.EndTxn, zb, release)
	time.Sleep(1500 * time.Millisecond) // past the old instance's commit timeout

	// Meanwhile a newer instance takes over, and writes.
	newer := newSink(t, brokers, "zombie", shortTxn)
	write(t, newer, b)
	close(release)

	// The old instance's recovery learns it is the zombie; the newer
	// one goes on writing.
	if err := <-oldErr; !errors.Is(err, kafkasink.ErrFenced) {
		t.Fatalf("old instance's Write: %v, want ErrFenced", err)
	}
	if err := old.Write(ctxT(t), kafkasink.Batch{Events: zb}); !errors.Is(err, kafkasink.ErrFenced) {
		t.Fatalf("old instance's next Write: %v, want ErrFenced", err)
	}
	write(t, newer, d)
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), append(append(a, b...), d...))
}

// A Write that failed retryably must be written again before anything
// after it: a caller that moves on would lose it (issue 8, defect 4).
func TestWriteRefusesBatchSkippingFailedOne(t *testing.T) {
	t.Parallel()
	c, brokers := sinktest.Cluster(t)
	const topic = "kafkasink.public.orders"
	s := newSink(t, brokers, "skip-failed", shortTxn)
	a := sinktest.Inserts("public", "orders", 100, 1, 3)
	b := sinktest.Inserts("public", "orders", 200, 4, 3)
	d := sinktest.Inserts("public", "orders", 300, 7, 3)
	write(t, s, a)

	failing := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError, TopLevel: true, Count: -1})
	if err := tryWrite(t, s, kafkasink.Batch{Events: b}); !kafkasink.IsRetryable(err) {
		t.Fatalf("Write with failing commits: %v, want a retryable error", err)
	}
	failing.Remove()

	for _, next := range []kafkasink.Batch{{Events: d}, {Cursor: []byte(`{"after":"b"}`)}} {
		err := tryWrite(t, s, next)
		if !errors.Is(err, kafkasink.ErrInvalidBatch) || !strings.Contains(err.Error(), b[0].Position.String()) {
			t.Fatalf("Write past the failed batch: %v, want ErrInvalidBatch naming %s", err, b[0].Position)
		}
	}
	// Redelivering from earlier is fine: a is skipped, b written.
	write(t, s, append(a[1:], b...))
	write(t, s, d)
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), append(append(a, b...), d...))
}

func TestZeroPositionAndEmptySchemaRefused(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	s := newSink(t, brokers, "invalid-events")
	zero := sinktest.Inserts("public", "orders", 100, 1, 1)
	zero[0].Position = kafkasink.Position{}
	noSchema := sinktest.Inserts("", "orders", 100, 1, 1)
	for name, b := range map[string][]kafkasink.Event{"zero Position": zero, "empty Schema": noSchema} {
		err := tryWrite(t, s, kafkasink.Batch{Events: b})
		if !errors.Is(err, kafkasink.ErrInvalidBatch) || !kafkasink.IsFatal(err) {
			t.Errorf("%s: Write: %v, want ErrInvalidBatch", name, err)
		}
	}
}

// The caller's own context ending is in no class: a retry loop must not
// spin at shutdown. Every commit fails, so the Write is still retrying
// when the caller cancels.
func TestCallerContextEndIsInNoClass(t *testing.T) {
	t.Parallel()
	c, brokers := sinktest.Cluster(t)
	s := newSink(t, brokers, "caller-ctx", shortTxn)
	failing := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError, TopLevel: true, Count: -1})
	defer failing.Remove()
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("service shutting down")
	time.AfterFunc(300*time.Millisecond, func() { cancel(stop) })
	err := s.Write(ctx, kafkasink.Batch{Events: sinktest.Inserts("public", "orders", 100, 1, 3)})
	if !errors.Is(err, stop) || kafkasink.IsRetryable(err) || kafkasink.IsFatal(err) {
		t.Fatalf("Write after the caller cancelled: %v (retryable %v, fatal %v), want the cause, in no class",
			err, kafkasink.IsRetryable(err), kafkasink.IsFatal(err))
	}
}

func TestCloseWithDoneContextClosesIdleSink(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 20 {
		s := newSink(t, brokers, "close-done")
		if err := s.Close(done); err != nil {
			t.Fatalf("run %d: Close with a done ctx and no Write running: %v", i, err)
		}
		if err := s.Close(done); err != nil {
			t.Fatalf("run %d: second Close: %v", i, err)
		}
		if err := tryWrite(t, s, kafkasink.Batch{Events: sinktest.Inserts("public", "orders", 100, 1, 1)}); !errors.Is(err, kafkasink.ErrClosed) {
			t.Fatalf("run %d: Write after Close: %v, want ErrClosed", i, err)
		}
	}
}

type skipHook struct {
	mu    sync.Mutex
	infos []kafkasink.SkipInfo
}

func (h *skipHook) OnEventsSkipped(i kafkasink.SkipInfo) {
	h.mu.Lock()
	h.infos = append(h.infos, i)
	h.mu.Unlock()
}

func TestSkippedEventsAreReported(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	hook := new(skipHook)
	s := newSink(t, brokers, "skipped", func(c *kafkasink.Config) { c.Hooks = []kafkasink.Hook{hook} })
	a := sinktest.Inserts("public", "orders", 100, 1, 4)
	write(t, s, a)
	write(t, s, a[1:]) // all redelivered
	want := kafkasink.SkipInfo{First: a[1].Position, Last: a[3].Position, Events: 3, Checkpoint: a[3].Position}
	if len(hook.infos) != 1 || hook.infos[0] != want {
		t.Fatalf("skip reports %+v, want one %+v", hook.infos, want)
	}
}

// A broker that confirms a commit and then loses it: the sink must stop
// and say so, not carry on from a checkpoint that is not in Kafka. The
// fake broker turns one commit into an abort and answers it as committed,
// which is what a real one ends up doing when it completes a commit
// without writing the commit markers and the producer's next transaction
// aborts (seen with Kafka 4.4 after a broker restart; see
// checkpointlog.LostError). That next transaction fails here on purpose, in
// each way that ends in an abort or an unclear outcome, and the sink's
// retry would commit the batch after the lost one and leave a gap no
// reader or caller ever hears of.
func TestLostCommitStopsTheSink(t *testing.T) {
	t.Parallel()
	const topic = "kafkasink.public.orders"
	for name, nextFails := range map[string]kfake.Fault{
		"records refused":    {Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: kerr.UnknownServerError, Count: 1},
		"commit answer lost": {Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError, TopLevel: true, Count: 1},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, brokers := sinktest.Cluster(t)
			s := newSink(t, brokers, "lost-commit", shortTxn)
			a := sinktest.Inserts("public", "orders", 100, 1, 3)
			b := sinktest.Inserts("public", "orders", 200, 4, 3)
			d := sinktest.Inserts("public", "orders", 300, 7, 3)
			write(t, s, a)

			var once sync.Once
			c.ControlKey(kmsg.EndTxn.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
				if end := req.(*kmsg.EndTxnRequest); end.Commit {
					once.Do(func() { end.Commit = false })
					c.DropControl()
				}
				return nil, nil, false
			})
			write(t, s, b) // the broker answers the commit as done
			if got := sinktest.ReadCommitted(t, brokers, topic); len(got) != len(a) {
				t.Fatalf("the fake broker's lost commit: a read_committed reader sees %d records, want a's %d", len(got), len(a))
			}

			c.Fault(nextFails)
			err := tryWrite(t, s, kafkasink.Batch{Events: d})
			if !kafkasink.IsFatal(err) || !errors.Is(err, kafkasink.ErrCheckpoint) || !strings.Contains(err.Error(), b[len(b)-1].Position.String()) {
				t.Fatalf("Write after the broker lost a commit: %v, want a fatal ErrCheckpoint naming checkpoint %s", err, b[len(b)-1].Position)
			}
			if err := tryWrite(t, s, kafkasink.Batch{Events: d}); !errors.Is(err, kafkasink.ErrCheckpoint) {
				t.Fatalf("next Write: %v, want the same ErrCheckpoint", err)
			}
			// Nothing of d was committed on top of the gap.
			sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), a)
		})
	}
}
