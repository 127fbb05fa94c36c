package outbox_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafkasink/kafkasink/outbox"
)

// BenchmarkTxn is the cost to the application of publishing one event per
// transaction: a transaction that updates one row and Emits, against the
// same transaction inserting the event into a Debezium-style outbox table
// (id, aggregatetype, aggregateid, type, payload jsonb). Compare the two
// in the same run:
//
//	eval "$(scripts/testenv.sh env)"
//	go test -run '^$' -bench BenchmarkTxn -count 6 ./outbox
//
// The table alone is not the whole cost of the table-based outbox: its
// rows must later be deleted (more WAL) or purged and vacuumed, which
// this leaves out in its favour.
func BenchmarkTxn(b *testing.B) {
	url := testPG(b)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	const table = "outbox_bench_rows"
	const outboxTable = "outbox_bench_outbox"
	for _, sql := range []string{
		"CREATE TABLE IF NOT EXISTS " + table + " (id int PRIMARY KEY, state text)",
		"INSERT INTO " + table + " VALUES (1, 'new') ON CONFLICT DO NOTHING",
		"CREATE TABLE IF NOT EXISTS " + outboxTable + " (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), aggregatetype text NOT NULL, aggregateid text NOT NULL, type text NOT NULL, payload jsonb)",
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() { conn.Exec(ctx, "DROP TABLE IF EXISTS "+table+", "+outboxTable) })
	value := []byte(`{"id":1,"state":"paid","amount":"12.50","currency":"EUR"}`)
	em := outbox.Emitter{Prefix: "outbox.bench"} // no slot reads it: the WAL record is written all the same
	emit := func(tx pgx.Tx) error {
		return em.Emit(ctx, tx, outbox.Message{Topic: "orders.events", Key: []byte("1"), Value: value,
			Headers: []outbox.Header{{Name: "type", Value: []byte("OrderPaid")}}})
	}
	insert := func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO "+outboxTable+" (aggregatetype, aggregateid, type, payload) VALUES ('orders', '1', 'OrderPaid', $1)", value)
		return err
	}
	// The two alternate, transaction by transaction, so that the load of
	// a shared machine weighs on both alike; each reports its own time.
	var spent [2]time.Duration
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		for k, publish := range []func(pgx.Tx) error{emit, insert} {
			began := time.Now()
			err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, "UPDATE "+table+" SET state = $1 WHERE id = 1", strconv.Itoa(i)); err != nil {
					return err
				}
				return publish(tx)
			})
			if err != nil {
				b.Fatal(err)
			}
			spent[k] += time.Since(began)
		}
	}
	b.ReportMetric(float64(spent[0].Nanoseconds())/float64(b.N), "emit-ns/txn")
	b.ReportMetric(float64(spent[1].Nanoseconds())/float64(b.N), "insert-ns/txn")
	b.ReportMetric(float64(spent[0])/float64(spent[1]), "emit/insert")
}
