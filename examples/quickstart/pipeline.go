package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinktest"
	"github.com/kafkasink/kafkasink/pgcdc"
)

// runPipeline is the whole pipeline on a real PostgreSQL at pgURL: pgcdc.Run
// streams inserts, updates and deletes of two tables into the in-process
// Kafka exactly once; the process "crashes" as a Write returns: the Write
// cancels Run's context before it returns, so Run cannot confirm that
// transaction to the slot. Changes go on while it is down, and the
// restarted Run gets the delivered transaction again, which the sink
// drops; a read_committed consumer then sees every change once.
func runPipeline(ctx context.Context, out io.Writer, pgURL string) error {
	db, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		return err
	}
	defer db.Close(context.Background())
	if _, err := db.Exec(ctx, `CREATE TABLE orders (id int PRIMARY KEY, status text NOT NULL, total numeric(10, 2) NOT NULL);
		CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL)`); err != nil {
		return err
	}

	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return err
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	sinkCfg := kafkasink.Config{
		Brokers: brokers,
		SinkID:  "quickstart",
		Topics:  kafkasink.Topics{Prefix: "shop", Partitions: 3},
		Encoder: kafkasink.UpsertEncoder{},
	}
	cdcCfg := pgcdc.Config{
		ConnString:        pgURL,
		Slot:              "quickstart",
		CreateSlot:        true,
		Publication:       "quickstart",
		CreatePublication: true,
		Tables:            []string{"public.orders", "public.customers"},
	}

	// The first run: two transactions, and a crash as the second one's
	// Write returns, before Run can confirm it to the slot.
	sink, err := kafkasink.New(ctx, sinkCfg)
	if err != nil {
		return err
	}
	first := &pipelineRun{sink: sink, crashOn: kafkasink.OpDelete}
	if err := first.start(ctx, cdcCfg); err != nil {
		return err
	}
	fmt.Fprintln(out, "pgcdc.Run streams from a new slot")
	if _, err := db.Exec(ctx, `BEGIN;
		INSERT INTO orders VALUES (1, 'new', 19.95);
		INSERT INTO customers VALUES (7, 'Ada');
		INSERT INTO orders VALUES (2, 'new', 5.00);
		COMMIT;
		BEGIN;
		UPDATE orders SET status = 'paid' WHERE id = 1;
		DELETE FROM orders WHERE id = 2;
		UPDATE customers SET name = 'Ada Lovelace' WHERE id = 7;
		COMMIT`); err != nil {
		return err
	}
	if err := first.wait(); !errors.Is(err, errCrash) {
		return fmt.Errorf("the first run ended with %v, want the crash", err)
	}
	fmt.Fprintf(out, "crash right after Write delivered the second transaction; checkpoint %s\n", sink.Checkpoint().Position)
	sink.Close(ctx)

	if _, err := db.Exec(ctx, `INSERT INTO orders VALUES (3, 'new', 7.50)`); err != nil {
		return err
	}
	end, err := currentLSN(ctx, db)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "while it is down: one more insert")

	// The restart: the checkpoint comes back from Kafka, the slot sends
	// again what it did not hear was delivered, and the sink drops it.
	restarted, err := kafkasink.New(ctx, sinkCfg)
	if err != nil {
		return err
	}
	defer restarted.Close(ctx)
	fmt.Fprintf(out, "restarted; checkpoint read back from Kafka: %s\n", restarted.Checkpoint().Position)
	second := &pipelineRun{sink: restarted}
	if err := second.start(ctx, cdcCfg); err != nil {
		return err
	}
	if err := second.waitFor(func(st pgcdc.RunStats) bool { return st.Confirmed >= end }); err != nil {
		return err
	}
	if err := second.stop(); err != nil {
		return err
	}
	if second.again > 0 {
		fmt.Fprintf(out, "the slot sent %d events again, at or below the checkpoint: the sink dropped them\n", second.again)
	} else {
		fmt.Fprintln(out, "the slot had confirmed everything before the crash: nothing came again")
	}
	fmt.Fprintf(out, "caught up; checkpoint %s\n\n", restarted.Checkpoint().Position)

	return printCommitted(ctx, out, brokers)
}

// currentLSN is the server's current WAL position: once the slot is
// confirmed past it, every change committed before it was delivered.
func currentLSN(ctx context.Context, db *pgx.Conn) (kafkasink.LSN, error) {
	var text string
	if err := db.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&text); err != nil {
		return 0, err
	}
	return kafkasink.ParseLSN(text)
}

// printCommitted reads the two topics as a read_committed consumer and
// prints each record, in the order of the changes: read and decoded with
// the test kit (kafkasinktest), as a service's tests read them.
func printCommitted(ctx context.Context, out io.Writer, brokers []string) error {
	raw, err := kafkasinktest.FetchCommitted(ctx, brokers, "shop.public.orders", "shop.public.customers")
	if err != nil {
		return err
	}
	type seen struct {
		kafkasinktest.Record
		value []byte
	}
	records := make([]seen, len(raw))
	for i, r := range raw {
		if records[i].Record, err = kafkasinktest.Decode(r); err != nil {
			return err
		}
		records[i].value = r.Value
	}
	sort.Slice(records, func(i, j int) bool { return records[i].Position.Compare(records[j].Position) < 0 })
	fmt.Fprintf(out, "a read_committed consumer sees %d records, each change once:\n", len(records))
	for _, r := range records {
		value := string(r.value)
		if r.Encoding == kafkasinktest.Tombstone {
			value = "null (a tombstone: the upsert encoder's delete)"
		}
		fmt.Fprintf(out, "%-22s key=%-2s id=%-12s op=%-7s %s\n", r.Topic, r.Key, r.Position, r.Op, value)
	}
	return nil
}

// errCrash ends the first run right after a Write returned.
var errCrash = errors.New("quickstart: crash")

// pipelineRun is one pgcdc.Run of the quickstart into sink, which it
// wraps: it ends the run with errCrash right after the Write of a batch
// holding an event of op crashOn returned, and counts the events the sink
// got again (at or below its checkpoint).
type pipelineRun struct {
	sink    *kafkasink.Sink
	crashOn kafkasink.Op // 0: never
	again   int

	mon    *pgcdc.Monitor
	cancel context.CancelCauseFunc
	done   chan error
}

func (r *pipelineRun) Write(ctx context.Context, b kafkasink.Batch) error {
	ck := r.sink.Checkpoint().Position
	crash := false
	for _, e := range b.Events {
		if e.Position.Compare(ck) <= 0 {
			r.again++
		}
		crash = crash || (r.crashOn != 0 && e.Op == r.crashOn)
	}
	if err := r.sink.Write(ctx, b); err != nil {
		return err
	}
	if crash {
		r.cancel(errCrash)
	}
	return nil
}

func (r *pipelineRun) Checkpoint() kafkasink.Checkpoint { return r.sink.Checkpoint() }

// start starts Run and returns once its slot streams, so that changes
// committed from then on reach it.
func (r *pipelineRun) start(ctx context.Context, cfg pgcdc.Config) error {
	ctx, r.cancel = context.WithCancelCause(ctx)
	r.mon = &pgcdc.Monitor{}
	cfg.Monitor = r.mon
	r.done = make(chan error, 1)
	go func() {
		err := pgcdc.Run(ctx, cfg, r)
		if cause := context.Cause(ctx); cause != nil && errors.Is(err, context.Canceled) {
			err = cause
		}
		r.done <- err
	}()
	return r.waitFor(func(st pgcdc.RunStats) bool { return st.State == pgcdc.RunStreaming })
}

// waitFor polls Run's Monitor until cond holds; it fails when Run returns
// first.
func (r *pipelineRun) waitFor(cond func(pgcdc.RunStats) bool) error {
	for !cond(r.mon.Stats()) {
		select {
		case err := <-r.done:
			r.done <- err
			return fmt.Errorf("pgcdc.Run: %w", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// stop ends Run and waits for it.
func (r *pipelineRun) stop() error {
	r.cancel(nil)
	if err := r.wait(); !errors.Is(err, context.Canceled) {
		return fmt.Errorf("pgcdc.Run: %w", err)
	}
	return nil
}

func (r *pipelineRun) wait() error { return <-r.done }
