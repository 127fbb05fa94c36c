package kafkasink_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// Stats counts what the sink did, as its hooks are told it, and shows a
// transaction while it is open; it is read here while a Write runs (the
// race detector checks that is safe).
func TestStats(t *testing.T) {
	t.Parallel()
	c, brokers := sinktest.Cluster(t)
	const topic = "kafkasink.public.orders"
	hooks := &hookLog{}
	s := newSink(t, brokers, "stats", func(cfg *kafkasink.Config) {
		cfg.DeadLetterTopic = "stats.dlq"
		cfg.Hooks = []kafkasink.Hook{hooks}
	})
	a := sinktest.Inserts("public", "orders", 100, 1, 5)
	b := sinktest.Inserts("public", "orders", 200, 6, 5)
	b[2] = withColumn(b[2], "blob", make(chan int)) // unencodable: dead-lettered
	d := sinktest.Inserts("public", "orders", 300, 11, 5)

	write(t, s, a)
	write(t, s, append(a, b...)) // a again: skipped as delivered
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: kerr.UnknownServerError, Count: 1})
	write(t, s, d) // its first transaction aborts; the retry commits

	batches, committed, aborted, _ := hooks.snapshot()
	st := s.Stats()
	want := kafkasink.Stats{
		Writes: 3, Events: 20, Written: 14, Rejected: 1, DeadLettered: 1, SkippedRedelivered: 5,
		Committed: int64(len(committed)), Aborted: 1, Retries: 1,
	}
	var records, bytes int64
	for _, bi := range batches {
		records += int64(bi.Records)
		bytes += int64(bi.Bytes)
	}
	want.Records, want.Bytes = records, bytes
	got := st
	got.TransactionDurations, got.Checkpoint, got.OpenTransaction = kafkasink.Histogram{}, kafkasink.Checkpoint{}, 0
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Stats counters\n got %+v\nwant %+v", got, want)
	}
	if len(aborted) != 1 || st.Committed < 3 {
		t.Errorf("hooks saw %d commits and %d aborts, want at least 3 and 1", len(committed), len(aborted))
	}
	h := st.TransactionDurations
	var inBuckets int64
	for _, n := range h.Counts {
		inBuckets += n
	}
	if h.Count != st.Committed || inBuckets != h.Count || len(h.Counts) != len(h.Bounds)+1 || h.Sum <= 0 {
		t.Errorf("TransactionDurations %+v, want the %d commits in its buckets and a positive sum", h, st.Committed)
	}
	if st.Checkpoint.Position != d[len(d)-1].Position || st.OpenTransaction != 0 {
		t.Errorf("Stats checkpoint %s, open transaction %v; want %s and none", st.Checkpoint.Position, st.OpenTransaction, d[len(d)-1].Position)
	}

	// While a commit is held at the broker, the transaction is open.
	release := make(chan struct{})
	errc := writeHeldAt(t, c, s, kmsg.EndTxn, sinktest.Inserts("public", "orders", 400, 16, 3), release)
	time.Sleep(50 * time.Millisecond)
	if open := s.Stats().OpenTransaction; open < 50*time.Millisecond {
		t.Errorf("OpenTransaction %v while a commit is held, want at least 50ms", open)
	}
	close(release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if open := s.Stats().OpenTransaction; open != 0 {
		t.Errorf("OpenTransaction %v after the Write, want 0", open)
	}
}

// Ping answers nil while the sink can write, the error that stopped it
// once it is fenced, and ErrClosed after Close; a broker that does not
// answer makes it fail retryably.
func TestPing(t *testing.T) {
	t.Parallel()
	c, brokers := sinktest.Cluster(t) // fences like Kafka (kafkasinktest.FenceLikeKafka)
	old := newSink(t, brokers, "ping")
	if err := old.Ping(ctxT(t)); err != nil {
		t.Fatalf("Ping of a new sink: %v", err)
	}
	write(t, old, sinktest.Inserts("public", "orders", 100, 1, 3))

	down := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListOffsets}, Err: kerr.LeaderNotAvailable, Count: -1})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	err := old.Ping(ctx)
	cancel()
	if err == nil {
		t.Fatal("Ping while the checkpoint partition has no leader: nil, want an error")
	}
	down.Remove()

	newSink(t, brokers, "ping") // claims the transactional id: old is fenced
	if err := old.Write(ctxT(t), kafkasink.Batch{Events: sinktest.Inserts("public", "orders", 200, 4, 3)}); !errors.Is(err, kafkasink.ErrFenced) {
		t.Fatalf("Write of the fenced instance: %v, want ErrFenced", err)
	}
	if err := old.Ping(ctxT(t)); !errors.Is(err, kafkasink.ErrFenced) {
		t.Fatalf("Ping of the fenced instance: %v, want ErrFenced", err)
	}
	closed := newSink(t, brokers, "ping-closed")
	closed.Close(ctxT(t))
	if err := closed.Ping(ctxT(t)); !errors.Is(err, kafkasink.ErrClosed) {
		t.Fatalf("Ping after Close: %v, want ErrClosed", err)
	}
}
