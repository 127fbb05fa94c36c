// Command crashavro streams one table through pgcdc.Run into an
// exactly-once sink with the Avro encoder, for kafkasinkavro's crash test:
// with -hold-column it stops, after Prepare registered the schema of a
// table version that has that column and before any record of the batch
// is produced, prints "prepared" and waits to be killed.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinkavro"
	"github.com/kafkasink/kafkasink/pgcdc"
)

// holdingEncoder is the Avro encoder, but for the hold.
type holdingEncoder struct {
	*kafkasinkavro.Encoder
	column string
}

func (h *holdingEncoder) Prepare(ctx context.Context, events []kafkasink.Event, routes []kafkasink.EventRoute) error {
	if err := h.Encoder.Prepare(ctx, events, routes); err != nil {
		return err
	}
	for i := range events {
		if _, ok := events[i].Relation.Column(h.column); ok && h.column != "" {
			fmt.Println("prepared")
			select {} // until killed
		}
	}
	return nil
}

func main() {
	var pg, brokers, registry, name, table, hold string
	flag.StringVar(&pg, "pg", "", "PostgreSQL URL")
	flag.StringVar(&brokers, "brokers", "", "Kafka brokers, comma-separated")
	flag.StringVar(&registry, "registry", "", "Schema Registry URL")
	flag.StringVar(&name, "name", "", "slot, publication, sink id and topic prefix")
	flag.StringVar(&table, "table", "", "schema.table to stream")
	flag.StringVar(&hold, "hold-column", "", "hold after preparing a table version with this column")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	reg, err := sr.NewClient(sr.URLs(registry))
	if err != nil {
		log.Fatal(err)
	}
	avro, err := kafkasinkavro.New(kafkasinkavro.Config{Registry: reg})
	if err != nil {
		log.Fatal(err)
	}
	sink, err := kafkasink.New(ctx, kafkasink.Config{Brokers: strings.Split(brokers, ","), SinkID: name,
		Encoder: &holdingEncoder{Encoder: avro, column: hold}, Topics: kafkasink.Topics{Prefix: name, Partitions: 1}})
	if err != nil {
		log.Fatal(err)
	}
	defer sink.Close(context.Background())
	err = pgcdc.Run(ctx, pgcdc.Config{ConnString: pg, Slot: name, Publication: name, Tables: []string{table},
		CreateSlot: true, CreatePublication: true, BatchMaxWait: 20 * time.Millisecond, StandbyInterval: time.Second,
		HeartbeatInterval: -1, ReconnectBackoff: 50 * time.Millisecond, ReconnectMax: time.Second,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}, sink)
	if err != nil && ctx.Err() == nil {
		log.Fatal(err)
	}
}
