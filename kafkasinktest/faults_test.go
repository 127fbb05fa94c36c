package kafkasinktest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// Each named fault against a real sink: the fault fires, and the sink
// does what the fault's documentation says.

func TestLoseCommitAnswer(t *testing.T) {
	t.Parallel()
	c := kafkasinktest.NewCluster(t)
	s, cfg := newSink(t, c, "lose-commit-answer")
	a, b := orders(100, 1, 3), orders(200, 4, 5)
	writeAgain(t, s, a)

	lost := c.LoseCommitAnswer()
	err := s.Write(context.Background(), kafkasink.Batch{Events: b})
	if err != nil && !kafkasink.IsRetryable(err) {
		t.Fatalf("Write with its commit's answer lost: %v, want nil or a retryable error", err)
	}
	if lost.Hits() == 0 {
		t.Fatal("the commit's answer was never lost: the fault did not fire")
	}
	// The broker applied the commit whatever Write said, and it was the
	// first transaction of b: the topic holds no aborted attempt.
	kafkasinktest.AssertExactlyOnce(t, kafkasinktest.ReadCommitted(t, cfg.Brokers, ordersTopic), join(a, b))
	all, ferr := kafkasinktest.FetchUncommitted(context.Background(), cfg.Brokers, ordersTopic)
	if ferr != nil {
		t.Fatal(ferr)
	}
	if len(all) != len(a)+len(b) {
		t.Fatalf("%d records in %s, want %d: the commit whose answer was lost did not apply, the sink wrote b again", len(all), ordersTopic, len(a)+len(b))
	}
	t.Logf("Write returned %v; %d answer(s) lost", err, lost.Hits())

	writeAgain(t, s, b) // the caller writes the batch again: nothing twice
	if got := s.Checkpoint().Position; got != b[len(b)-1].Position {
		t.Errorf("checkpoint %s, want %s", got, b[len(b)-1].Position)
	}
	kafkasinktest.AssertExactlyOnce(t, kafkasinktest.ReadCommitted(t, cfg.Brokers, ordersTopic), join(a, b))
	kafkasinktest.AssertCheckpoint(t, cfg, b[len(b)-1].Position)
}

func TestFailProduce(t *testing.T) {
	t.Parallel()
	c := kafkasinktest.NewCluster(t)
	s, cfg := newSink(t, c, "fail-produce", func(cfg *kafkasink.Config) { cfg.Topics.Partitions = 4 })
	a, b, d := orders(100, 1, 3), orders(200, 4, 40), orders(300, 44, 40)
	writeAgain(t, s, a)

	// Once: the sink aborts and writes the batch again itself.
	once := c.FailProduce(ordersTopic, 1, 1)
	if err := s.Write(context.Background(), kafkasink.Batch{Events: b}); err != nil {
		t.Fatalf("Write with partition 1 refusing records once: %v, want nil", err)
	}
	if once.Hits() != 1 {
		t.Fatalf("the fault answered %d produce requests, want 1", once.Hits())
	}
	// Until removed: the Write fails retryably, naming the partition.
	always := c.FailProduce(ordersTopic, 1, -1)
	err := s.Write(context.Background(), kafkasink.Batch{Events: d})
	var we *kafkasink.WriteError
	if !errors.As(err, &we) || we.Topic != ordersTopic || we.Partition != 1 || !kafkasink.IsRetryable(err) {
		t.Fatalf("Write with partition 1 refusing records: %v, want a retryable *WriteError for %s[1]", err, ordersTopic)
	}
	always.Remove()
	kafkasinktest.AssertCheckpoint(t, cfg, b[len(b)-1].Position)

	// The other partitions took records of the failed transactions; the
	// aborts hid them.
	all, ferr := kafkasinktest.FetchUncommitted(context.Background(), cfg.Brokers, ordersTopic)
	if ferr != nil {
		t.Fatal(ferr)
	}
	if len(all) <= len(a)+len(b) {
		t.Fatalf("%d records in %s: the failed transactions wrote nothing to abort, so this test proves nothing", len(all), ordersTopic)
	}
	kafkasinktest.AssertExactlyOnce(t, kafkasinktest.ReadCommitted(t, cfg.Brokers, ordersTopic), join(a, b))

	writeAgain(t, s, d)
	kafkasinktest.AssertExactlyOnce(t, kafkasinktest.ReadCommitted(t, cfg.Brokers, ordersTopic), join(a, b, d))
}

func TestRestartBroker(t *testing.T) {
	t.Parallel()
	c := kafkasinktest.NewCluster(t)
	s, cfg := newSink(t, c, "restart-broker")
	a, b, d := orders(100, 1, 10), orders(200, 11, 10), orders(300, 21, 10)
	writeAgain(t, s, a)

	// The coordinator between Writes, a partition leader during one.
	coordinator := c.Kfake().CoordinatorFor(cfg.TransactionalID)
	if coordinator < 0 {
		t.Fatalf("no coordinator for %s", cfg.TransactionalID)
	}
	if restarted := c.RestartBroker(coordinator, 300*time.Millisecond); restarted == coordinator {
		t.Fatalf("node %d restarted as %d", coordinator, restarted)
	}
	logRetried(t, "after the coordinator restarted", writeAgain(t, s, b))

	done := make(chan []error)
	go func() { done <- writeAgain(t, s, d) }()
	c.RestartBroker(c.Kfake().LeaderFor(ordersTopic, 0), 300*time.Millisecond)
	logRetried(t, "during a restart", <-done)

	kafkasinktest.AssertExactlyOnce(t, kafkasinktest.ReadCommitted(t, cfg.Brokers, ordersTopic), join(a, b, d))
	kafkasinktest.AssertCheckpoint(t, cfg, d[len(d)-1].Position)
}

func TestRestartBrokerRefusesOneBroker(t *testing.T) {
	t.Parallel()
	rec := &recordingTB{TB: t}
	c := kafkasinktest.NewCluster(rec, kafkasinktest.Brokers(1))
	done := make(chan struct{})
	go func() { defer close(done); c.RestartBroker(0, 0) }()
	<-done
	if !rec.fatal || !strings.Contains(rec.report(), "Brokers(3)") {
		t.Fatalf("RestartBroker on one broker reported %s, want a fatal error naming Brokers(3)", rec.report())
	}
}

func TestMoveCoordinator(t *testing.T) {
	t.Parallel()
	c := kafkasinktest.NewCluster(t)
	s, cfg := newSink(t, c, "move-coordinator")
	a, b := orders(100, 1, 5), orders(200, 6, 5)
	writeAgain(t, s, a)
	before := c.Kfake().CoordinatorFor(cfg.TransactionalID)
	c.MoveCoordinator(cfg.TransactionalID)
	if after := c.Kfake().CoordinatorFor(cfg.TransactionalID); after == before {
		t.Fatalf("the coordinator of %s stayed on node %d", cfg.TransactionalID, before)
	}
	logRetried(t, "after the coordinator moved", writeAgain(t, s, b))
	kafkasinktest.AssertExactlyOnce(t, kafkasinktest.ReadCommitted(t, cfg.Brokers, ordersTopic), join(a, b))
	kafkasinktest.AssertCheckpoint(t, cfg, b[len(b)-1].Position)
}

func TestHoldTransactionOnDataPartition(t *testing.T) {
	t.Parallel()
	c := kafkasinktest.NewCluster(t)
	s, cfg := newSink(t, c, "hold-data", func(cfg *kafkasink.Config) { cfg.Topics.Partitions = 1 })
	a, b := orders(100, 1, 3), orders(200, 4, 3)
	writeAgain(t, s, a)
	held := c.HoldTransaction(ordersTopic, 0)
	writeAgain(t, s, b)
	// b is committed, but behind the open transaction.
	kafkasinktest.AssertExactlyOnce(t, kafkasinktest.ReadCommitted(t, cfg.Brokers, ordersTopic), a)
	held.Remove()
	kafkasinktest.AssertExactlyOnce(t, kafkasinktest.ReadCommitted(t, cfg.Brokers, ordersTopic), join(a, b))
}

func TestHoldTransactionOnCheckpointPartition(t *testing.T) {
	t.Parallel()
	c := kafkasinktest.NewCluster(t)
	s, cfg := newSink(t, c, "hold-checkpoint")
	a := orders(100, 1, 3)
	writeAgain(t, s, a)
	s.Close(context.Background())

	held := c.HoldTransaction(kafkasink.DefaultCheckpointTopic, 0)
	started := make(chan *kafkasink.Sink, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		s, err := kafkasink.New(ctx, cfg)
		if err != nil {
			t.Errorf("New behind a held transaction: %v", err)
		}
		started <- s
	}()
	select {
	case <-started:
		t.Fatal("New returned while a transaction held its checkpoint partition: it cannot have read to the high watermark")
	case <-time.After(time.Second):
	}
	held.Remove()
	restarted := <-started
	if restarted == nil {
		t.FailNow()
	}
	defer restarted.Close(context.Background())
	if got := restarted.Checkpoint().Position; got != a[len(a)-1].Position {
		t.Fatalf("New read the checkpoint %s back, want %s", got, a[len(a)-1].Position)
	}
}

func TestSlowCommits(t *testing.T) {
	t.Parallel()
	c := kafkasinktest.NewCluster(t)
	s, cfg := newSink(t, c, "slow-commits")
	a, b := orders(100, 1, 3), orders(200, 4, 3)
	writeAgain(t, s, a)
	slow := c.SlowCommits(1500 * time.Millisecond) // the commit timeout is 1s
	err := s.Write(context.Background(), kafkasink.Batch{Events: b})
	if err != nil && !kafkasink.IsRetryable(err) {
		t.Fatalf("Write with a commit slower than the commit timeout: %v, want nil or a retryable error", err)
	}
	slow.Remove()
	if slow.Hits() == 0 {
		t.Fatal("no commit was slowed")
	}
	t.Logf("Write returned %v; %d commit(s) slowed", err, slow.Hits())
	writeAgain(t, s, b)
	kafkasinktest.AssertExactlyOnce(t, kafkasinktest.ReadCommitted(t, cfg.Brokers, ordersTopic), join(a, b))
	kafkasinktest.AssertCheckpoint(t, cfg, b[len(b)-1].Position)
}

func TestSlowResponses(t *testing.T) {
	t.Parallel()
	c := kafkasinktest.NewCluster(t)
	s, cfg := newSink(t, c, "slow-responses")
	a := orders(100, 1, 3)
	slow := c.SlowResponses(20 * time.Millisecond)
	started := time.Now()
	writeAgain(t, s, a)
	took := time.Since(started)
	slow.Remove()
	if n := slow.Hits(); n == 0 || took < 20*time.Millisecond {
		t.Fatalf("%d requests slowed, Write took %v: want requests slowed by 20ms", n, took)
	}
	kafkasinktest.AssertExactlyOnce(t, kafkasinktest.ReadCommitted(t, cfg.Brokers, ordersTopic), a)
}

// logRetried logs the retryable errors a Write went through.
func logRetried(t *testing.T, what string, retried []error) {
	t.Helper()
	for i, err := range retried {
		t.Logf("%s: attempt %d: %v", what, i+1, err)
	}
}
