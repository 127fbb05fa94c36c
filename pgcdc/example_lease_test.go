package pgcdc_test

import (
	"context"
	"errors"
	"log"
	"os"
	"os/signal"
	"syscall"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/pgcdc"
)

// Replicas started with the same configuration take turns: each waits for
// the slot's lease before it creates its sink (kafkasink.New fences the
// instance it replaces), and stops when the lease is lost.
func ExampleAcquireLease() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := pgcdc.Config{
		ConnString:        "postgres://cdc:secret@127.0.0.1:5432/shop",
		Slot:              "shop",
		Publication:       "shop",
		Tables:            []string{"public.orders"},
		CreateSlot:        true,
		CreatePublication: true,
	}

	// Blocks while another replica holds the lease.
	lease, err := pgcdc.AcquireLease(ctx, pgcdc.LeaseConfig{ConnString: cfg.ConnString, Slot: cfg.Slot})
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-lease.Lost():
			cancel(lease.Err())
		case <-ctx.Done():
		}
	}()

	// Guard: once the lease may be gone (this process was frozen past
	// its timeout), the sink sends nothing more under its transactional
	// id, which the next holder now owns.
	sink, err := kafkasink.New(ctx, kafkasink.Config{Brokers: []string{"127.0.0.1:9092"}, SinkID: "shop", Guard: lease.Check})
	if err != nil {
		log.Fatal(err)
	}
	defer sink.Close(context.Background())
	err = pgcdc.Run(ctx, cfg, sink)
	switch {
	case errors.Is(err, pgcdc.ErrLeaseLost), errors.Is(err, kafkasink.ErrFenced):
		log.Fatal("another instance took over: ", err)
	case errors.Is(err, context.Canceled):
		log.Print("stopped by a signal; a standby takes over")
	case err != nil:
		log.Fatal(err)
	}
}
