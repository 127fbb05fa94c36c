package kafkasinktest_test

import (
	"context"
	"fmt"
	"log"
	"testing"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// exampleT stands in for the *testing.T a test passes to the kit, which an
// example has not: it prints what an assertion reports and runs the
// cleanups when the example ends.
type exampleT struct {
	testing.TB
	cleanups []func()
}

func (t *exampleT) Helper()                           {}
func (t *exampleT) Cleanup(f func())                  { t.cleanups = append(t.cleanups, f) }
func (t *exampleT) Errorf(format string, args ...any) { fmt.Printf(format+"\n", args...) }
func (t *exampleT) Fatalf(format string, args ...any) { log.Fatalf(format, args...) }

func (t *exampleT) done() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}

// A sink whose commit is applied but its answer lost, and what a
// read_committed consumer sees afterwards: each event once.
func ExampleCluster_LoseCommitAnswer() {
	t := &exampleT{} // in a test: the test's t
	defer t.done()
	ctx := context.Background()

	cluster := kafkasinktest.NewCluster(t)
	cfg := kafkasink.Config{Brokers: cluster.Brokers(), SinkID: "example", Encoder: kafkasink.UpsertEncoder{},
		Topics: kafkasink.Topics{Partitions: 1}}
	sink, err := kafkasink.New(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer sink.Close(ctx)

	events := orders(0x100, 1, 2)
	lost := cluster.LoseCommitAnswer()
	for err := sink.Write(ctx, kafkasink.Batch{Events: events}); err != nil; err = sink.Write(ctx, kafkasink.Batch{Events: events}) {
		if !kafkasink.IsRetryable(err) {
			log.Fatal(err)
		}
	}
	fmt.Println("commit answer lost:", lost.Hits() > 0)
	for _, r := range kafkasinktest.ReadCommitted(t, cfg.Brokers, "kafkasink.public.orders") {
		fmt.Println(r.Topic, r.Offset, r.Op, r.Position, r.Encoding, r.Value["note"])
	}
	kafkasinktest.AssertExactlyOnce(t, kafkasinktest.ReadCommitted(t, cfg.Brokers, "kafkasink.public.orders"), events)
	// Output:
	// commit answer lost: true
	// kafkasink.public.orders 0 insert 0/100:0 upsert order 1
	// kafkasink.public.orders 1 insert 0/100:1 upsert order 2
}

// What AssertExactlyOnce reports when a record is missing and another is
// there twice.
func ExampleAssertExactlyOnce() {
	t := &exampleT{} // in a test: the test's t
	want := orders(0x100, 1, 3)
	got := []kafkasinktest.Record{
		{Topic: "orders", Partition: 0, Offset: 0, Key: "1", Op: kafkasink.OpInsert, Position: want[0].Position},
		{Topic: "orders", Partition: 0, Offset: 1, Key: "2", Op: kafkasink.OpInsert, Position: want[1].Position},
		{Topic: "orders", Partition: 0, Offset: 2, Key: "2", Op: kafkasink.OpInsert, Position: want[1].Position},
	}
	kafkasinktest.AssertExactlyOnce(t, got, want)
	// Output:
	// kafkasinktest: exactly once: 1 missing, 1 duplicated, 0 with another op, 0 unexpected, 0 out of order
	//   missing      0/100:2 insert of public.orders
	//   duplicated   0/100:1: 2 records, at orders[0]@1, orders[0]@2
}

// A source's retry loop against a Recorder whose second Write fails
// retryably: the batch is written again, each event is delivered once.
func ExampleRecorder() {
	ctx := context.Background()
	rec := kafkasinktest.NewRecorder(kafkasink.Checkpoint{})
	rec.FailWrite(2, kafkasinktest.ErrRetryable)
	for _, b := range []kafkasink.Batch{{Events: orders(0x100, 1, 2)}, {Events: orders(0x200, 3, 1)}} {
		for err := rec.Write(ctx, b); err != nil; err = rec.Write(ctx, b) {
			fmt.Println("retrying after:", err)
		}
	}
	for _, e := range rec.Events() {
		fmt.Println(e.Position, e.Op, e.After[0].Value)
	}
	fmt.Println("Writes:", rec.Writes(), "checkpoint:", rec.Checkpoint().Position)
	// Output:
	// retrying after: kafkasinktest: Write failed on purpose: kafkasink: transaction aborted, nothing of it is visible
	// 0/100:0 insert 1
	// 0/100:1 insert 2
	// 0/200:0 insert 3
	// Writes: 3 checkpoint: 0/200:0
}
