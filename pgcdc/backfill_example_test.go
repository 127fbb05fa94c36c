package pgcdc_test

import (
	"context"
	"log"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/pgcdc"
)

// ExampleBackfills reads the European orders again while the pipeline
// streams. It needs a database and a broker, so it only compiles.
func ExampleBackfills() {
	ctx := context.Background()
	sink, err := kafkasink.New(ctx, kafkasink.Config{Brokers: []string{"localhost:9092"}, SinkID: "orders"})
	if err != nil {
		log.Fatal(err)
	}
	defer sink.Close(ctx)

	backfills := &pgcdc.Backfills{}
	go func() {
		err := pgcdc.Run(ctx, pgcdc.Config{
			ConnString:  "postgres://cdc@localhost/shop",
			Slot:        "orders",
			Publication: "orders",
			Backfills:   backfills,
			// Also take Debezium's signals sent with
			// pg_logical_emit_message(true, 'kafkasink.signal', ...).
			SignalPrefix: "kafkasink.signal",
		}, sink)
		log.Fatal(err)
	}()

	st, err := backfills.Request(ctx, pgcdc.BackfillRequest{Table: "public.orders", Where: "region = 'eu'"})
	if err != nil {
		log.Fatal(err) // a *pgcdc.BackfillError says what is wrong
	}
	log.Printf("backfill %s of %s accepted", st.ID, st.Table)
}
