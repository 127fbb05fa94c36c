package kafkasink_test

import (
	"context"
	"fmt"
	"iter"
	"log"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kafkasink/kafkasink"
)

// The README's "Using it" quotes the lines between the two README markers
// below; TestREADMEQuotesServiceExample keeps the two equal.

// README begin

// Source is where a service reads its changes, such as a replication loop
// of its own on pglogrepl (for PostgreSQL, pgcdc.Run is all of this, ready-made).
type Source interface {
	Batches(after kafkasink.Checkpoint) iter.Seq[kafkasink.Batch] // whole transactions, in order
	Ack(upTo kafkasink.Position)                                  // confirm to the database: it may free its log
}

// runService delivers every batch of src exactly once and acknowledges it.
func runService(ctx context.Context, brokers []string, src Source) error {
	sink, err := kafkasink.New(ctx, kafkasink.Config{
		Brokers: brokers,
		SinkID:  "orders-to-kafka", // stable across restarts; keys the checkpoint
		Topics:  kafkasink.Topics{Template: "cdc.{schema}.{table}", Partitions: 6},
	})
	if err != nil {
		return err // a *kafkasink.ConfigError lists every problem at once
	}
	defer sink.Close(ctx)

	for batch := range src.Batches(sink.Checkpoint()) { // resume where the last run stopped
		if err := writeUntilDelivered(ctx, sink, batch); err != nil {
			return err // fatal (fenced, auth, missing topic...), rejected events, or ctx ended
		}
		src.Ack(sink.Checkpoint().Position)
	}
	return nil
}

// writeUntilDelivered writes the same batch until it is delivered. A
// retryable error never duplicates anything; moving on to the next batch
// instead would lose this one for good (the sink refuses that with
// ErrInvalidBatch until the failed batch is written again).
func writeUntilDelivered(ctx context.Context, sink *kafkasink.Sink, b kafkasink.Batch) error {
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
		err := sink.Write(ctx, b)
		if err == nil || !kafkasink.IsRetryable(err) {
			return err // an error of the caller's own ctx is in no class: it stops here
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(backoff):
		}
	}
}

// README end

// memSource is a Source of the batches it holds, resuming after the
// sink's checkpoint.
type memSource struct {
	batches []kafkasink.Batch
	read    int // batches yielded, over all runs
	acked   kafkasink.Position
}

func (m *memSource) Batches(after kafkasink.Checkpoint) iter.Seq[kafkasink.Batch] {
	return func(yield func(kafkasink.Batch) bool) {
		for _, b := range m.batches {
			if last := b.Events[len(b.Events)-1].Position; last.Compare(after.Position) <= 0 {
				continue
			}
			m.read++
			if !yield(b) {
				return
			}
		}
	}
}

func (m *memSource) Ack(upTo kafkasink.Position) { m.acked = upTo }

// A service's loop (runService, as the README shows it) against an
// in-process fake cluster: run, then run again after the source got a
// third batch, which is all the second run reads.
func Example_service() {
	ctx := context.Background()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()

	order := func(lsn kafkasink.LSN, index uint64, id int64) kafkasink.Event {
		return kafkasink.Event{Op: kafkasink.OpInsert, Schema: "public", Table: "orders", Key: []string{"id"},
			Position: kafkasink.Position{LSN: lsn, Index: index}, After: kafkasink.Row{{Name: "id", Value: id}}}
	}
	src := &memSource{batches: []kafkasink.Batch{
		{Events: []kafkasink.Event{order(0x1000, 0, 1), order(0x1000, 1, 2)}},
		{Events: []kafkasink.Event{order(0x2000, 0, 3)}},
	}}
	for _, more := range []kafkasink.Batch{{}, {Events: []kafkasink.Event{order(0x3000, 0, 4)}}} {
		if more.Events != nil {
			src.batches = append(src.batches, more)
		}
		if err := runService(ctx, cluster.ListenAddrs(), src); err != nil {
			log.Fatal(err)
		}
		fmt.Println("batches read:", src.read, "acknowledged up to", src.acked)
	}
	// Output:
	// batches read: 2 acknowledged up to 0/2000:0
	// batches read: 3 acknowledged up to 0/3000:0
}
