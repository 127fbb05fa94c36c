package kafkasinkotel_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinktest"
	"github.com/kafkasink/kafkasink/kafkasinktest/pgtest"
)

// realTable is the set-up of the tests that run a real pgcdc.Run: it
// skips t without the real PostgreSQL (KAFKASINK_TEST_PG), makes a table
// of ids 1 to rows, analyzed, and a sink on the test kit's fake cluster,
// and removes the table, its slot and publication (all named name) at
// the end. It returns the connection string, the name and the sink.
func realTable(t *testing.T, ctx context.Context, rows int) (pg, name string, sink *kafkasink.Sink) {
	t.Helper()
	pg = os.Getenv("KAFKASINK_TEST_PG")
	if pg == "" {
		t.Skip("KAFKASINK_TEST_PG not set: this test needs the real PostgreSQL; run scripts/testenv.sh up and eval \"$(scripts/testenv.sh env)\" (see the README)")
	}
	db, err := pgx.Connect(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	name = fmt.Sprintf("kafkasinkotel_%d", rand.Uint32())
	t.Cleanup(func() {
		bg := context.Background()
		pgtest.DropSlot(bg, db, name)
		db.Exec(bg, "DROP PUBLICATION IF EXISTS "+name)
		db.Exec(bg, "DROP TABLE IF EXISTS "+name)
		db.Close(bg)
	})
	for _, sql := range []string{"CREATE TABLE " + name + " (id int PRIMARY KEY)", fmt.Sprintf("INSERT INTO %s SELECT generate_series(1, %d)", name, rows), "ANALYZE " + name} {
		if _, err := db.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	sink, err = kafkasink.New(ctx, kafkasink.Config{Brokers: kafkasinktest.NewCluster(t).Brokers(), SinkID: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close(context.Background()) })
	return pg, name, sink
}
