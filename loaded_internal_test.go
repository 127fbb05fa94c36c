package kafkasink

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestCommitWaitsForLoadedPartitions: a transaction must not commit while
// the client's producer has not loaded a partition it wrote to. franz-go
// leaves that state for a moment when it hands the first records of a
// topic new to the client to their partitions before it publishes the
// partitions (storePartitionsUpdate); under load the record was
// acknowledged and EndTransaction ran in that moment, which pgcdc's
// TestDebeziumConformance and TestMonitor hit in about one run in ten:
// franz-go found no partition added, turned the commit of a first,
// checkpoint-only Write into an abort and returned nil, and the next
// transaction's checkpoint batch kept its sequence number under the new
// epoch, which the broker refused for good (OUT_OF_ORDER_SEQUENCE_NUMBER).
//
// The moment cannot be held open from outside franz-go, so this test
// makes the same state for as long as it needs: Config.Guard, which runs
// between the acknowledgement and the commit, purges the checkpoint topic
// from the client's producer. Without txnend.Producer.AwaitLoaded the Write returns nil
// and the checkpoint it reports is not in Kafka (franz-go aborted it);
// with it the transaction is aborted as not committable, and the Write's
// next attempt, which produces to the topic afresh, commits it.
func TestCommitWaitsForLoadedPartitions(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	var (
		s     *Sink
		armed atomic.Bool
	)
	cfg := Config{Brokers: c.ListenAddrs(), SinkID: "loaded", CommitTimeout: time.Second, TransactionTimeout: 10 * time.Second,
		Guard: func() error {
			// Once the checkpoint partition is loaded, the record
			// was acknowledged: this is the guard before the commit.
			if leader, _, _ := s.cl.PartitionLeader(s.cfg.CheckpointTopic, 0); leader >= 0 && armed.CompareAndSwap(true, false) {
				s.cl.PurgeTopicsFromProducing(s.cfg.CheckpointTopic)
			}
			return nil
		}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if s, err = New(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())

	first := []byte(`{"w":1}`)
	armed.Store(true)
	if err := s.Write(ctx, Batch{Cursor: first}); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if armed.Load() {
		t.Fatal("the guard never purged the checkpoint topic: the test did not run")
	}
	if got := readBack(t, cfg); !bytes.Equal(got, first) {
		t.Fatalf("Write returned nil, but the checkpoint read back has cursor %s, want %s: the commit was not what Write reported", got, first)
	}
}

// readBack returns the cursor a new sink of cfg reads back.
func readBack(t *testing.T, cfg Config) []byte {
	t.Helper()
	cfg.Guard = nil
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := New(ctx, cfg)
	if err != nil {
		t.Fatalf("New reading the checkpoint back: %v", err)
	}
	defer s.Close(ctx)
	return s.Checkpoint().Cursor
}
