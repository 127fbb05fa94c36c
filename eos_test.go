package kafkasink_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
	"github.com/kafkasink/kafkasink/kafkasinktest"
)

func TestExactlyOnceWritesEachEventOnce(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	s := newSink(t, brokers, "basic")
	a := sinktest.Inserts("public", "orders", 100, 1, 5)
	b := sinktest.Inserts("public", "items", 200, 1, 3)
	write(t, s, a)
	write(t, s, b)
	if got := s.Checkpoint().Position; got != b[len(b)-1].Position {
		t.Fatalf("checkpoint %s, want %s", got, b[len(b)-1].Position)
	}
	recs := sinktest.ReadCommitted(t, brokers, "kafkasink.public.orders", "kafkasink.public.items")
	sinktest.CheckExactlyOnce(t, recs, append(a, b...))

	// A new sink reads the checkpoint back.
	s.Close(context.Background())
	s2 := newSink(t, brokers, "basic")
	if got := s2.Checkpoint().Position; got != b[len(b)-1].Position {
		t.Fatalf("checkpoint after restart %s, want %s", got, b[len(b)-1].Position)
	}
	if err := s.Write(context.Background(), kafkasink.Batch{Events: a}); !errors.Is(err, kafkasink.ErrClosed) {
		t.Fatalf("Write after Close: %v, want ErrClosed", err)
	}
}

func TestCrashBeforeCommitIsInvisibleAndRedelivered(t *testing.T) {
	t.Parallel()
	c, brokers := sinktest.Cluster(t)
	const topic = "kafkasink.public.orders"
	a := sinktest.Inserts("public", "orders", 100, 1, 5)
	b := sinktest.Inserts("public", "orders", 200, 6, 5)

	zombie := newSink(t, brokers, "crash")
	write(t, zombie, a)

	// The first sink produces b, then stalls before its commit reaches
	// the broker: as far as anyone can tell, it crashed.
	release := make(chan struct{})
	zombieErr := writeHeldAt(t, c, zombie, kmsg.EndTxn, b, release)
	// b's records are in the log, uncommitted: a read_committed reader
	// must not see them.
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), a)

	// The restarted sink fences the old one, aborting its transaction,
	// and resumes from the checkpoint of a.
	restarted := newSink(t, brokers, "crash")
	if got, want := restarted.Checkpoint().Position, a[len(a)-1].Position; got != want {
		t.Fatalf("checkpoint after the crash %s, want %s", got, want)
	}
	write(t, restarted, append(a[2:], b...)) // the source redelivers from before the checkpoint
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), append(a, b...))

	// The old sink, waking up, learns it was fenced, and stays stopped.
	close(release)
	if err := <-zombieErr; !errors.Is(err, kafkasink.ErrFenced) || !kafkasink.IsFatal(err) {
		t.Fatalf("zombie Write: %v, want ErrFenced", err)
	}
	if err := zombie.Write(ctxT(t), kafkasink.Batch{Events: sinktest.Inserts("public", "orders", 300, 11, 1)}); !errors.Is(err, kafkasink.ErrFenced) {
		t.Fatalf("zombie's next Write: %v, want ErrFenced", err)
	}
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), append(a, b...))
}

func TestCrashAfterCommitBeforeAckIsFilteredByCheckpoint(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	const topic = "kafkasink.public.orders"
	a := sinktest.Inserts("public", "orders", 100, 1, 5)
	b := sinktest.Inserts("public", "orders", 200, 6, 3)

	first := newSink(t, brokers, "ack")
	write(t, first, a)
	// The process dies here: Write returned, the source never heard.

	hook := &hookLog{}
	second := newSink(t, brokers, "ack", func(c *kafkasink.Config) { c.Hooks = []kafkasink.Hook{hook} })
	write(t, second, append(a, b...)) // the source redelivers a
	if got := hook.lastBatch(); got.Skipped != len(a) || got.Written != len(b) {
		t.Fatalf("BatchInfo skipped %d written %d, want %d and %d", got.Skipped, got.Written, len(a), len(b))
	}
	write(t, second, b) // and once more, all of it covered
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), append(a, b...))
}

func TestSecondSinkFencesFirst(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	const topic = "kafkasink.public.orders"
	a := sinktest.Inserts("public", "orders", 100, 1, 4)
	b := sinktest.Inserts("public", "orders", 200, 5, 4)

	first := newSink(t, brokers, "twins")
	write(t, first, a)
	second := newSink(t, brokers, "twins")
	for range 2 {
		err := first.Write(ctxT(t), kafkasink.Batch{Events: b})
		if !errors.Is(err, kafkasink.ErrFenced) || !kafkasink.IsFatal(err) || kafkasink.IsRetryable(err) {
			t.Fatalf("fenced sink's Write: %v, want a fatal ErrFenced", err)
		}
	}
	write(t, second, b)
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), append(a, b...))
	if got := second.Checkpoint().Position; got != b[len(b)-1].Position {
		t.Fatalf("checkpoint %s, want %s", got, b[len(b)-1].Position)
	}
}

func TestProduceErrorOnOnePartitionAbortsWholeTransaction(t *testing.T) {
	t.Parallel()
	c, brokers := sinktest.Cluster(t)
	const topic = "kafkasink.public.orders"
	s := newSink(t, brokers, "partfail", func(c *kafkasink.Config) { c.Topics.Partitions = 4 })
	a := sinktest.Inserts("public", "orders", 100, 1, 3)
	write(t, s, a)
	b := sinktest.Inserts("public", "orders", 200, 4, 40)

	// INVALID_REQUEST: a failure the sink cannot pin to a record (one the
	// broker refuses is quarantined instead: refused_test.go).
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Partitions: []int32{1}, Err: kerr.InvalidRequest})
	err := s.Write(ctxT(t), kafkasink.Batch{Events: b})
	var we *kafkasink.WriteError
	if !errors.As(err, &we) || we.Topic != topic || we.Partition != 1 || !errors.Is(err, kerr.InvalidRequest) {
		t.Fatalf("Write: %v, want a *WriteError for %s[1] wrapping INVALID_REQUEST", err, topic)
	}
	if got := s.Checkpoint().Position; got != a[len(a)-1].Position {
		t.Fatalf("checkpoint moved to %s after a failed Write", got)
	}
	// The other partitions took b's records, and the abort hid them.
	ends, lerr := kadm.NewClient(sinktest.Client(t, brokers)).ListEndOffsets(ctxT(t), topic)
	if lerr != nil {
		t.Fatal(lerr)
	}
	var logged int64
	ends.Each(func(o kadm.ListedOffset) { logged += o.Offset })
	if logged <= int64(len(a))+1 {
		t.Fatalf("only %d offsets in %s: the failed transaction wrote nothing to abort, so this test proves nothing", logged, topic)
	}
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), a)

	write(t, s, b)
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), append(a, b...))
}

func TestCommitOutcomeUnknown(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		inject func(t *testing.T, c *kafkasinktest.Cluster)
	}{
		{"response lost after commit applied", func(t *testing.T, c *kafkasinktest.Cluster) {
			lost := c.LoseCommitAnswer()
			t.Cleanup(func() {
				if lost.Hits() == 0 {
					t.Error("no commit answer was lost: the fault never fired")
				}
			})
		}},
		{"commit answered REQUEST_TIMED_OUT before it applied", func(_ *testing.T, c *kafkasinktest.Cluster) {
			c.Kfake().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.RequestTimedOut, TopLevel: true, Count: 3})
		}},
		{"connection dropped before commit applied", func(_ *testing.T, c *kafkasinktest.Cluster) {
			c.Kfake().ControlKey(kmsg.EndTxn.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
				return nil, errors.New("connection dropped by test"), true
			})
		}},
		{"commit slower than CommitTimeout", func(_ *testing.T, c *kafkasinktest.Cluster) {
			release := make(chan struct{})
			pauseNext(c.Kfake(), kmsg.EndTxn, release)
			go func() { time.Sleep(3 * time.Second); close(release) }()
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := kafkasinktest.NewCluster(t, kafkasinktest.Brokers(1))
			brokers := c.Brokers()
			const topic = "kafkasink.public.orders"
			s := newSink(t, brokers, "ambiguous", func(c *kafkasink.Config) { c.CommitTimeout = time.Second })
			a := sinktest.Inserts("public", "orders", 100, 1, 3)
			b := sinktest.Inserts("public", "orders", 200, 4, 3)
			write(t, s, a)
			tc.inject(t, c)
			if err := s.Write(ctxT(t), kafkasink.Batch{Events: b}); err != nil {
				if !kafkasink.IsRetryable(err) {
					t.Fatalf("Write: %v, want nil or a retryable error", err)
				}
				write(t, s, b) // the caller retries
			}
			if got := s.Checkpoint().Position; got != b[len(b)-1].Position {
				t.Fatalf("checkpoint %s, want %s", got, b[len(b)-1].Position)
			}
			kafkasinktest.AssertExactlyOnce(t, kafkasinktest.ReadCommitted(t, brokers, topic), append(a, b...))
			kafkasinktest.AssertCheckpoint(t, kafkasink.Config{Brokers: brokers, SinkID: "ambiguous"}, b[len(b)-1].Position)
		})
	}
}

func TestCheckpointReadWaitsForOtherSinksOpenTransaction(t *testing.T) {
	t.Parallel()
	cluster := kafkasinktest.NewCluster(t, kafkasinktest.Brokers(1))
	brokers := cluster.Brokers()
	a := sinktest.Inserts("public", "orders", 100, 1, 2)
	b := sinktest.Inserts("public", "orders", 200, 3, 2)
	s := newSink(t, brokers, "shared")
	write(t, s, a)

	// Another sink opens a transaction on the shared checkpoint
	// partition and leaves it open: the last stable offset stops there.
	other := cluster.HoldTransaction(kafkasink.DefaultCheckpointTopic, 0)
	// Our newer checkpoint lands above it.
	write(t, s, b)

	type started struct {
		s   *kafkasink.Sink
		err error
	}
	done := make(chan started, 1)
	go func() {
		s2, err := startSink(t, brokers, "shared")
		done <- started{s2, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("New returned (checkpoint %v, err %v) while the last stable offset was below our checkpoint: it must read to the high watermark", r.s.Checkpoint().Position, r.err)
	case <-time.After(1500 * time.Millisecond):
	}
	other.Remove()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := r.s.Checkpoint().Position; got != b[len(b)-1].Position {
		t.Fatalf("checkpoint %s, want %s: the read stopped early", got, b[len(b)-1].Position)
	}
}

func TestConcurrentTransactionsAndLeaderMovesAreRetriedInsideWrite(t *testing.T) {
	t.Parallel()
	cluster := kafkasinktest.NewCluster(t, kafkasinktest.Brokers(3))
	c, brokers := cluster.Kfake(), cluster.Brokers()
	const topic = "kafkasink.public.orders"
	s := newSink(t, brokers, "churn", func(c *kafkasink.Config) {
		c.Topics.Partitions = 3
		// kgo backs off up to 1s between retries; fine in
		// production, slow in a test.
		c.ClientOptions = []kgo.Opt{kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond })}
	})
	var all []kafkasink.Event
	for i := range 6 {
		batch := sinktest.Inserts("public", "orders", kafkasink.LSN(100*(i+1)), 10*i, 10)
		switch i {
		case 1:
			c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.ConcurrentTransactions, TopLevel: true, Count: 3})
		case 2:
			c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: kerr.NotLeaderForPartition, Count: 2})
		case 3:
			c.ShufflePartitionLeaders()
		case 4:
			c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.InitProducerID, kmsg.FindCoordinator}, Err: kerr.CoordinatorNotAvailable, TopLevel: true, Count: 2})
			cluster.MoveCoordinator("kafkasink-churn")
		case 5:
			c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: kafkasink.DefaultCheckpointTopic, Err: kerr.NotEnoughReplicas, Count: 2})
		}
		write(t, s, batch)
		all = append(all, batch...)
	}
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), all)
}

func TestTransactionTimeoutMidWriteRecovers(t *testing.T) {
	t.Parallel()
	c, brokers := sinktest.Cluster(t)
	const topic = "kafkasink.public.orders"
	s := newSink(t, brokers, "slow", func(c *kafkasink.Config) {
		c.TransactionTimeout = 2 * time.Second
		c.CommitTimeout = 500 * time.Millisecond
	})
	a := sinktest.Inserts("public", "orders", 100, 1, 3)
	write(t, s, a)

	// The broker sits on the next produce for longer than the
	// transaction may live.
	release := make(chan struct{})
	pauseNext(c, kmsg.Produce, release)
	go func() { time.Sleep(4 * time.Second); close(release) }()
	b := sinktest.Inserts("public", "orders", 200, 4, 3)
	err := s.Write(ctxT(t), kafkasink.Batch{Events: b})
	if !errors.Is(err, kafkasink.ErrTransactionTimeout) || !kafkasink.IsRetryable(err) {
		t.Fatalf("Write: %v, want a retryable ErrTransactionTimeout", err)
	}
	<-release
	write(t, s, b)
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), append(a, b...))
}

func TestLargeBatchSplitsIntoCheckpointedTransactions(t *testing.T) {
	t.Parallel()
	c, brokers := sinktest.Cluster(t)
	const topic = "kafkasink.public.orders"
	s := newSink(t, brokers, "split", func(c *kafkasink.Config) { c.MaxTransactionRecords = 4 })
	batch := sinktest.Inserts("public", "orders", 100, 1, 10)

	// Every commit after the first fails: the first part stays committed
	// with its own checkpoint, the second is retried inside Write until
	// Write gives up.
	var ends atomic.Int32
	failing := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError, TopLevel: true, Count: -1,
		When: func(kmsg.Request) bool { return ends.Add(1) >= 2 }})
	err := s.Write(ctxT(t), kafkasink.Batch{Events: batch, Cursor: []byte(`{"chunk":1}`)})
	if !errors.Is(err, kafkasink.ErrTransactionAborted) || !errors.Is(err, kerr.UnknownServerError) || !kafkasink.IsRetryable(err) {
		t.Fatalf("Write: %v, want a retryable ErrTransactionAborted wrapping UNKNOWN_SERVER_ERROR", err)
	}
	failing.Remove()
	ck := s.Checkpoint()
	if ck.Position != batch[3].Position || ck.Cursor != nil {
		t.Fatalf("checkpoint %s cursor %s, want %s and no cursor (the batch cursor goes with its last part only)", ck.Position, ck.Cursor, batch[3].Position)
	}
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), batch[:4])

	hook := &hookLog{}
	s2 := newSink(t, brokers, "split", func(c *kafkasink.Config) { c.MaxTransactionRecords = 4; c.Hooks = []kafkasink.Hook{hook} })
	if err := s2.Write(ctxT(t), kafkasink.Batch{Events: batch, Cursor: []byte(`{"chunk":1}`)}); err != nil {
		t.Fatal(err)
	}
	if got := hook.lastBatch(); got.Skipped != 4 || got.Transactions != 2 {
		t.Fatalf("BatchInfo %+v, want 4 skipped in 2 transactions", got)
	}
	if ck := s2.Checkpoint(); ck.Position != batch[9].Position || string(ck.Cursor) != `{"chunk":1}` {
		t.Fatalf("checkpoint %s cursor %s", ck.Position, ck.Cursor)
	}
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), batch)
}
