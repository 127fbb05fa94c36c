// Command e2esink is the program pgcdc's end-to-end test runs and kills:
// pgcdc.Run streaming a publication into Kafka through an exactly-once
// kafkasink sink, configured by its flags only, each named after the
// Config field it sets. It is a test fixture, so that editing
// cmd/kafkasink cannot break a library test; read pgcdc's ExampleRun, not
// this, to learn how to wire the two.
//
//	e2esink -pg postgres://... -brokers 127.0.0.1:19092 -tables public.t \
//	    -slot t -publication t -sink-id t -topic-prefix t -checkpoint-topic t.checkpoints
//
// It logs pgcdc's and the sink's records to stderr at info level (the test
// waits for "replication started"). SIGINT and SIGTERM stop it: the Write
// in progress commits or aborts as a whole, the sink is closed, and the
// exit status is 0. Any other end is status 1, after a record "stopped"
// with the error; a usage error is status 2.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/pgcdc"
)

func main() {
	var (
		pg          = flag.String("pg", "", "pgcdc Config.ConnString: a postgres:// URL of a role with REPLICATION")
		brokers     = flag.String("brokers", "", "kafkasink Config.Brokers, comma-separated host:port")
		tables      = flag.String("tables", "", "pgcdc Config.Tables, comma-separated schema.table")
		slot        = flag.String("slot", "", "pgcdc Config.Slot, created when missing")
		publication = flag.String("publication", "", "pgcdc Config.Publication, created when missing")
		sinkID      = flag.String("sink-id", "", "kafkasink Config.SinkID")
		prefix      = flag.String("topic-prefix", "", "kafkasink Config.Topics.Prefix")
		ckptTopic   = flag.String("checkpoint-topic", "", "kafkasink Config.CheckpointTopic (empty: the default)")
		partitions  = flag.Int("partitions", 0, "kafkasink Config.Topics.Partitions (0: the broker's default)")
		batchEvents = flag.Int("batch-max-events", 0, "pgcdc Config.BatchMaxEvents (0: the default)")
		txnTimeout  = flag.Duration("transaction-timeout", 0, "kafkasink Config.TransactionTimeout (0: the default)")
		outboxTo    = flag.String("outbox-topics", "", "pgcdc Config.Outbox.Topics, comma-separated (empty: no outbox)")
		outboxPfx   = flag.String("outbox-prefix", "", "pgcdc Config.Outbox.Prefix (empty: the default)")
		deadLetters = flag.String("dead-letter-topic", "", "kafkasink Config.DeadLetterTopic (empty: none)")
	)
	flag.Parse()
	var problems []string
	for _, f := range []struct{ name, value string }{{"-pg", *pg}, {"-brokers", *brokers}, {"-tables", *tables},
		{"-slot", *slot}, {"-publication", *publication}, {"-sink-id", *sinkID}, {"-topic-prefix", *prefix}} {
		if f.value == "" {
			problems = append(problems, f.name+" is required")
		}
	}
	if flag.NArg() > 0 {
		problems = append(problems, fmt.Sprintf("unexpected arguments %q: every setting is a flag", flag.Args()))
	}
	if problems != nil {
		fmt.Fprintf(os.Stderr, "e2esink: %s (see -h)\n", strings.Join(problems, "; "))
		os.Exit(2)
	}

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	kcfg := kafkasink.Config{
		Brokers:            strings.Split(*brokers, ","),
		SinkID:             *sinkID,
		Mode:               kafkasink.ExactlyOnce,
		TransactionTimeout: *txnTimeout,
		CheckpointTopic:    *ckptTopic,
		Topics:             kafkasink.Topics{Prefix: *prefix, Partitions: int32(*partitions)},
		DeadLetterTopic:    *deadLetters,
		Logger:             logger,
	}
	pcfg := pgcdc.Config{
		ConnString:        *pg,
		Slot:              *slot,
		Publication:       *publication,
		Tables:            strings.Split(*tables, ","),
		CreateSlot:        true,
		CreatePublication: true,
		BatchMaxEvents:    *batchEvents,
		Logger:            logger,
	}
	if *outboxTo != "" {
		pcfg.Outbox = &pgcdc.Outbox{Prefix: *outboxPfx, Topics: strings.Split(*outboxTo, ",")}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, kcfg, pcfg, logger)
	stop()
	if err != nil {
		logger.Error("stopped", "error", err)
		os.Exit(1)
	}
}

// run streams until ctx ends, and returns nil when that is what stopped
// it.
func run(ctx context.Context, kcfg kafkasink.Config, pcfg pgcdc.Config, logger *slog.Logger) error {
	// New reads the checkpoint back; bound it so an unreachable cluster
	// ends the program instead of hanging it.
	nctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	sink, err := kafkasink.New(nctx, kcfg)
	cancel()
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := sink.Close(cctx); err != nil {
			logger.Warn("closing the sink", "error", err)
		}
	}()
	err = pgcdc.Run(ctx, pcfg, sink)
	if ctx.Err() != nil && errors.Is(err, context.Cause(ctx)) {
		logger.Info("stopped by signal", "checkpoint", sink.Checkpoint().Position.String())
		return nil
	}
	return err
}
