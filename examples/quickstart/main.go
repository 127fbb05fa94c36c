// Command quickstart shows kafkasink end to end with no broker to install.
//
// Where it can, it runs the whole pipeline: a throwaway PostgreSQL 17 (its
// binaries fetched once with Maven into ~/.cache/kafkasink, run as the
// postgres user when started as root, which PostgreSQL refuses), an
// in-process fake Kafka cluster, and pgcdc.Run streaming inserts, updates
// and deletes of two tables exactly once through a crash and a restart;
// then a read_committed consumer reads every change back once.
//
// Where PostgreSQL cannot run (as root without a postgres user, or with
// nothing cached and no Maven, or offline), it says why in one line and
// shows the sink with a hand-made source instead: the same kind of
// changes written as events, a crash and a restart that redelivers the
// last batch, read back and printed with the checkpoint.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kafkasink/kafkasink"
)

func main() {
	// A signal ends the run like an error: the throwaway PostgreSQL is
	// stopped and its directory removed on the way out.
	sctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(sctx, 2*time.Minute)
	defer cancel()
	if err := runAny(ctx, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// runAny runs the whole pipeline on a throwaway PostgreSQL, or, where
// none can run, says why and runs the hand-made source.
func runAny(ctx context.Context, out io.Writer) error {
	pg, err := startPostgres(ctx)
	var no *unavailableError
	if errors.As(err, &no) {
		fmt.Fprintf(out, "no PostgreSQL here: %s; showing the sink with a hand-made source instead\n\n", no)
		return run(ctx, out)
	}
	if err != nil {
		return err
	}
	defer pg.stop()
	fmt.Fprintf(out, "PostgreSQL %s on 127.0.0.1:%d, wal_level = logical\n", pgRelease, pg.port)
	return runPipeline(ctx, out, pg.url())
}

// run is the sink with a hand-made source: events written as a source
// would write them, a crash and a restart that redelivers the last batch.
func run(ctx context.Context, out io.Writer) error {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return err
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	cfg := kafkasink.Config{
		Brokers: brokers,
		SinkID:  "quickstart",
		Topics:  kafkasink.Topics{Prefix: "shop", Partitions: 3},
		// The upsert document, with a tombstone for deletes, suits
		// compacted topics; the default is the full change event.
		Encoder: kafkasink.UpsertEncoder{},
	}
	sink, err := kafkasink.New(ctx, cfg)
	if err != nil {
		return err
	}

	commit := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	first := kafkasink.Batch{Events: []kafkasink.Event{
		insert(0x1000, 0, commit, "orders", row("id", int64(1), "status", "new", "total", kafkasink.Decimal("19.95"))),
		insert(0x1000, 1, commit, "customers", row("id", int64(7), "name", "Ada")),
		insert(0x1000, 2, commit, "orders", row("id", int64(2), "status", "new", "total", kafkasink.Decimal("5.00"))),
	}}
	second := kafkasink.Batch{Events: []kafkasink.Event{
		update(0x2000, 0, commit.Add(time.Second), "orders", row("id", int64(1), "status", "paid", "total", kafkasink.Decimal("19.95"))),
		remove(0x2000, 1, commit.Add(time.Second), "orders", row("id", int64(2))),
		update(0x2000, 2, commit.Add(time.Second), "customers", row("id", int64(7), "name", "Ada Lovelace")),
	}}
	for _, b := range []kafkasink.Batch{first, second} {
		if err := sink.Write(ctx, b); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "wrote 2 batches; checkpoint %s\n", sink.Checkpoint().Position)

	// The process "crashes" after the second Write returned but before
	// it acknowledged its source, so the source will send the second
	// batch again.
	fmt.Fprintln(out, "crash: the source never heard that the second batch was delivered")

	restarted, err := kafkasink.New(ctx, cfg)
	if err != nil {
		return err
	}
	defer restarted.Close(ctx)
	fmt.Fprintf(out, "restarted; checkpoint read back from Kafka: %s\n", restarted.Checkpoint().Position)
	third := kafkasink.Batch{Events: append(second.Events,
		insert(0x3000, 0, commit.Add(2*time.Second), "orders", row("id", int64(3), "status", "new", "total", kafkasink.Decimal("7.50"))))}
	if err := restarted.Write(ctx, third); err != nil {
		return err
	}
	fmt.Fprintf(out, "redelivered the second batch plus one new event; checkpoint %s\n\n", restarted.Checkpoint().Position)

	if err := printCommitted(ctx, out, brokers); err != nil {
		return err
	}
	ck := restarted.Checkpoint()
	fmt.Fprintf(out, "\ncheckpoint: position %s, mode %s\n", ck.Position, ck.Mode)
	return nil
}

func row(kv ...any) kafkasink.Row {
	var r kafkasink.Row
	for i := 0; i < len(kv); i += 2 {
		r = append(r, kafkasink.Column{Name: kv[i].(string), Value: kv[i+1]})
	}
	return r
}

func event(op kafkasink.Op, lsn kafkasink.LSN, idx uint64, commit time.Time, table string) kafkasink.Event {
	return kafkasink.Event{Op: op, Schema: "public", Table: table, Key: []string{"id"},
		Position: kafkasink.Position{LSN: lsn, Index: idx}, LSN: lsn - 0x100 + kafkasink.LSN(idx)*8, XID: uint32(lsn >> 8), Commit: commit}
}

func insert(lsn kafkasink.LSN, idx uint64, commit time.Time, table string, after kafkasink.Row) kafkasink.Event {
	e := event(kafkasink.OpInsert, lsn, idx, commit, table)
	e.After = after
	return e
}

func update(lsn kafkasink.LSN, idx uint64, commit time.Time, table string, after kafkasink.Row) kafkasink.Event {
	e := event(kafkasink.OpUpdate, lsn, idx, commit, table)
	e.After = after
	return e
}

func remove(lsn kafkasink.LSN, idx uint64, commit time.Time, table string, before kafkasink.Row) kafkasink.Event {
	e := event(kafkasink.OpDelete, lsn, idx, commit, table)
	e.Before = before
	return e
}
