package pgcdc_test

import (
	"context"
	"errors"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/pgcdc"
)

// Run is the whole pipeline: it stops when a signal cancels its context,
// after the Write in progress has committed or aborted, and returns a
// fatal error (fencing, a refused configuration, a gap at the source) for
// the program to exit on.
func ExampleRun() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	sink, err := kafkasink.New(ctx, kafkasink.Config{Brokers: []string{"127.0.0.1:9092"}, SinkID: "shop"})
	if err != nil {
		log.Fatal(err)
	}
	defer sink.Close(context.Background())

	err = pgcdc.Run(ctx, pgcdc.Config{
		ConnString:        "postgres://cdc:secret@127.0.0.1:5432/shop",
		Slot:              "shop",
		Publication:       "shop",
		Tables:            []string{"public.orders", "public.customers"},
		CreateSlot:        true,
		CreatePublication: true,
		Snapshot:          true,
	}, sink)
	switch {
	case errors.Is(err, context.Canceled):
		log.Print("stopped by a signal; the next start resumes from the checkpoint")
	case errors.Is(err, kafkasink.ErrFenced):
		log.Fatal("another instance took over: ", err)
	case err != nil:
		log.Fatal(err)
	}
}

// A Decoder turns pgoutput into events inside a replication loop of your
// own, built on pglogrepl. Write each transaction's events (or several
// transactions' at once), and confirm the commit's end to the server only
// after Write returned nil: the sink's checkpoint is what a restart
// resumes from, and the slot must keep everything after it.
func ExampleDecoder() {
	ctx := context.Background()
	sink, err := kafkasink.New(ctx, kafkasink.Config{Brokers: []string{"127.0.0.1:9092"}, SinkID: "shop"})
	if err != nil {
		log.Fatal(err)
	}
	defer sink.Close(ctx)
	conn, err := pgconn.Connect(ctx, "postgres://cdc:secret@127.0.0.1:5432/shop?replication=database")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)

	var (
		events    []kafkasink.Event
		confirmed pglogrepl.LSN // flushed: everything up to it is in Kafka
	)
	dec, err := pgcdc.NewDecoder(pgcdc.DecoderConfig{
		OnEvent: func(e kafkasink.Event) error { events = append(events, e); return nil },
		OnCommit: func(tx pgcdc.Txn) error {
			if err := sink.Write(ctx, kafkasink.Batch{Events: events}); err != nil {
				return err // retry while kafkasink.IsRetryable(err); stop otherwise
			}
			events = events[:0]
			confirmed = pglogrepl.LSN(tx.EndLSN)
			return nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer dec.Close()

	// Resume after the sink's checkpoint: the server skips what the slot
	// confirmed, and the sink skips what it already delivered.
	start := pglogrepl.LSN(sink.Checkpoint().Position.LSN)
	err = pglogrepl.StartReplication(ctx, conn, "shop", start, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '2'", "publication_names 'shop'", "messages 'true'", "streaming 'on'"},
	})
	if err != nil {
		log.Fatal(err)
	}
	status := func() error {
		return pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{
			WALWritePosition: confirmed, WALFlushPosition: confirmed, WALApplyPosition: confirmed,
		})
	}
	next := time.Now().Add(10 * time.Second)
	for {
		if time.Now().After(next) {
			if err := status(); err != nil {
				log.Fatal(err)
			}
			next = time.Now().Add(10 * time.Second)
		}
		rctx, cancel := context.WithDeadline(ctx, next)
		msg, err := conn.ReceiveMessage(rctx)
		cancel()
		if pgconn.Timeout(err) {
			continue
		}
		if err != nil {
			log.Fatal(err)
		}
		cd, ok := msg.(*pgproto3.CopyData)
		if !ok {
			continue
		}
		switch cd.Data[0] {
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			k, err := pglogrepl.ParsePrimaryKeepaliveMessage(cd.Data[1:])
			if err != nil {
				log.Fatal(err)
			}
			if k.ReplyRequested {
				next = time.Time{} // answer at once
			}
		case pglogrepl.XLogDataByteID:
			x, err := pglogrepl.ParseXLogData(cd.Data[1:])
			if err != nil {
				log.Fatal(err)
			}
			if err := dec.Decode(kafkasink.LSN(x.WALStart), x.WALData); err != nil {
				log.Fatal(err)
			}
		}
	}
}
