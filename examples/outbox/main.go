// Command outbox is a small service that pays an order and publishes an
// "OrderPaid" event in the same transaction, with no outbox table: the
// UPDATE and outbox.Emit commit together, and the kafkasink pipeline,
// running in-process, delivers the event exactly once to the topic
// orders.events, in the same Kafka transaction as the row change. A
// second payment is rolled back: its event never appears.
//
// It needs a PostgreSQL with wal_level=logical and a role with
// REPLICATION (scripts/testenv.sh starts one); without -brokers it uses
// an in-process fake Kafka cluster.
//
//	eval "$(scripts/testenv.sh env)"
//	go run ./examples/outbox -pg "$KAFKASINK_TEST_PG"
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/outbox"
	"github.com/kafkasink/kafkasink/pgcdc"
)

func main() {
	pg := flag.String("pg", os.Getenv("KAFKASINK_TEST_PG"), "postgres:// URL of a role with REPLICATION, wal_level=logical (default $KAFKASINK_TEST_PG)")
	brokers := flag.String("brokers", "", "Kafka brokers, comma-separated (default: an in-process fake cluster)")
	flag.Parse()
	if *pg == "" {
		fmt.Fprintln(os.Stderr, "outbox: -pg is required: a PostgreSQL with wal_level=logical (eval \"$(scripts/testenv.sh env)\" sets $KAFKASINK_TEST_PG)")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	seeds := strings.Split(*brokers, ",")
	if *brokers == "" {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders.events"))
		if err != nil {
			log.Fatal(err)
		}
		defer c.Close()
		seeds = c.ListenAddrs()
	}
	if err := run(ctx, *pg, seeds, "example_outbox", os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run creates the orders table, starts the pipeline, pays order 1 (and
// fails to pay order 2), and prints what a read_committed consumer of
// orders.events sees. name names the slot, publication, table and sink.
func run(ctx context.Context, pg string, brokers []string, name string, out io.Writer) error {
	db, err := pgx.Connect(ctx, pg)
	if err != nil {
		return err
	}
	defer db.Close(context.Background())
	defer cleanup(db, name)
	if _, err := db.Exec(ctx, "CREATE TABLE "+name+" (id int PRIMARY KEY, state text NOT NULL); INSERT INTO "+name+" VALUES (1, 'new'), (2, 'new')"); err != nil {
		return err
	}
	stop, err := startPipeline(ctx, pg, brokers, name)
	if err != nil {
		return err
	}
	defer stop()

	// The service: the row change and its event commit together.
	if err := pay(ctx, db, name, 1, true); err != nil {
		return err
	}
	if err := pay(ctx, db, name, 2, false); err != nil {
		return err
	}
	return printEvents(ctx, brokers, out)
}

// pay marks an order paid and emits its event in one transaction, which
// commits, or rolls back to show that its event never existed.
func pay(ctx context.Context, db *pgx.Conn, table string, id int, commit bool) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "UPDATE "+table+" SET state = 'paid' WHERE id = $1", id); err != nil {
		return err
	}
	err = outbox.Emit(ctx, tx, outbox.Message{
		Topic:   "orders.events",
		Key:     fmt.Appendf(nil, "%d", id),
		Value:   fmt.Appendf(nil, `{"order":%d,"state":"paid"}`, id),
		Headers: []outbox.Header{{Name: "type", Value: []byte("OrderPaid")}},
	})
	if err != nil || !commit {
		return err
	}
	return tx.Commit(ctx)
}

// startPipeline runs pgcdc into an exactly-once sink in the background,
// delivering the outbox's messages to orders.events only.
func startPipeline(ctx context.Context, pg string, brokers []string, name string) (stop func(), err error) {
	sink, err := kafkasink.New(ctx, kafkasink.Config{Brokers: brokers, SinkID: name, Topics: kafkasink.Topics{Prefix: name}})
	if err != nil {
		return nil, err
	}
	cfg := pgcdc.Config{ConnString: pg, Slot: name, Publication: name, Tables: []string{"public." + name},
		CreateSlot: true, CreatePublication: true, Outbox: &pgcdc.Outbox{Topics: []string{"orders.events"}}}
	rctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pgcdc.Run(rctx, cfg, sink) }()
	// The slot must exist before the service commits: changes before it
	// are not streamed.
	for ok := false; !ok; time.Sleep(50 * time.Millisecond) {
		if err := ctx.Err(); err != nil {
			cancel()
			return nil, err
		}
		db, err := pgx.Connect(ctx, pg)
		if err == nil {
			db.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_replication_slots WHERE slot_name = $1 AND active)", name).Scan(&ok)
			db.Close(ctx)
		}
	}
	return func() {
		cancel()
		<-done
		sink.Close(context.Background())
	}, nil
}

// printEvents prints the events on orders.events, read_committed, once
// the first arrived and nothing more came for a second.
func printEvents(ctx context.Context, brokers []string, out io.Writer) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("orders.events"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cl.Close()
	seen := 0
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("waiting for the event: %w", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			seen++
			fmt.Fprintf(out, "orders.events key=%s value=%s type=%s\n", r.Key, r.Value, header(r, "type"))
		})
		if seen > 0 && fs.NumRecords() == 0 {
			return nil
		}
	}
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// cleanup drops the example's slot, publication and table.
func cleanup(db *pgx.Conn, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active", name)
	db.Exec(ctx, "DROP PUBLICATION IF EXISTS "+name)
	db.Exec(ctx, "DROP TABLE IF EXISTS "+name)
}
