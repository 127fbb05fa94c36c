// Command crashsink is the process the integration tests kill. It plays a
// CDC source and a sink together: the source is a deterministic stream of
// batches that resumes from what it last acknowledged, as a replication
// slot does; the sink is kafkasink, writing to a real broker. It can
// SIGKILL itself at an exact point of the protocol, so a test can crash it
// where it wants, and it can be killed from outside at any moment.
//
// Usage (all flags; see -h):
//
//	crashsink -brokers 127.0.0.1:19092 -sink-id s1 -topic-prefix t1 \
//	    -ack-file /tmp/ack -batches 50 -events 20 -crash after-produce:7
//
// Exit status: 0 when the stream is fully delivered, 3 when fenced, 1 on
// any other error. The last line on stdout is "done <checkpoint>" on
// success.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

func main() {
	var (
		brokers    = flag.String("brokers", os.Getenv("KAFKASINK_TEST_BROKERS"), "seed brokers, comma-separated")
		sinkID     = flag.String("sink-id", "crashsink", "Config.SinkID")
		prefix     = flag.String("topic-prefix", "crashsink", "Config.Topics.Prefix")
		ckTopic    = flag.String("checkpoint-topic", kafkasink.DefaultCheckpointTopic, "Config.CheckpointTopic")
		mode       = flag.String("mode", "exactly-once", "exactly-once, idempotent or plain")
		ackFile    = flag.String("ack-file", "", "file holding the source's acknowledged position (the slot's confirmed flush)")
		batches    = flag.Int("batches", 20, "batches in the stream")
		events     = flag.Int("events", 10, "events per batch")
		keys       = flag.Int("keys", 7, "distinct row ids, so keys repeat and order per key matters")
		partitions = flag.Int("partitions", 3, "partitions of the topics the sink creates")
		rf         = flag.Int("replication-factor", -1, "replication factor of the topics the sink creates")
		crash      = flag.String("crash", "", "where to SIGKILL itself: after-produce:N (records of batch N acknowledged by the broker, before the commit) or after-commit:N (Write of batch N returned, before the source is acknowledged)")
		pause      = flag.Duration("pause", 0, "sleep between batches, so a test can act between them")
		retries    = flag.Int("retries", 20, "how often to retry a retryable Write error, with 1s pauses")
		txnTimeout = flag.Duration("transaction-timeout", 30*time.Second, "Config.TransactionTimeout")
		verbose    = flag.Bool("v", false, "log at debug level to stderr")
	)
	flag.Parse()
	if *brokers == "" {
		log.Fatal("crashsink: -brokers or KAFKASINK_TEST_BROKERS is required")
	}
	m, err := kafkasink.ParseMode(*mode)
	if err != nil {
		log.Fatal(err)
	}
	crashAt, crashBatch := parseCrash(*crash)

	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	// The batch being written, for the after-produce crash hook.
	var current atomic.Int64
	var opts []kgo.Opt
	if crashAt == "after-produce" {
		opts = append(opts, kgo.WithHooks(produceCrashHook{topicPrefix: *prefix + ".", batch: &current, crashBatch: crashBatch}))
	}
	ctx := context.Background()
	sink, err := kafkasink.New(ctx, kafkasink.Config{
		Brokers:            strings.Split(*brokers, ","),
		SinkID:             *sinkID,
		Mode:               m,
		CheckpointTopic:    *ckTopic,
		TransactionTimeout: *txnTimeout,
		Topics:             kafkasink.Topics{Prefix: *prefix, Partitions: int32(*partitions), ReplicationFactor: int16(*rf)},
		Logger:             logger,
		ClientOptions:      opts,
	})
	if err != nil {
		exit(err)
	}
	defer sink.Close(ctx)

	// The source resumes after what it acknowledged, which may be below
	// the sink's checkpoint: that is the redelivery a real slot does.
	acked := readAck(*ackFile)
	fmt.Printf("started checkpoint=%s acked=%d\n", sink.Checkpoint().Position, acked)
	for b := acked + 1; b <= *batches; b++ {
		current.Store(int64(b))
		batch := kafkasink.Batch{Events: sinktest.Stream(b, *events, *keys)}
		for attempt := 0; ; attempt++ {
			err = sink.Write(ctx, batch)
			if err == nil || !kafkasink.IsRetryable(err) || attempt == *retries {
				break
			}
			logger.Warn("retryable Write error; retrying", "batch", b, "error", err)
			time.Sleep(time.Second)
		}
		if err != nil {
			exit(err)
		}
		if crashAt == "after-commit" && b == crashBatch {
			fmt.Printf("crashing after-commit batch=%d\n", b)
			kill()
		}
		writeAck(*ackFile, b)
		fmt.Printf("acked batch=%d checkpoint=%s\n", b, sink.Checkpoint().Position)
		time.Sleep(*pause)
	}
	fmt.Printf("done %s\n", sink.Checkpoint().Position)
}

func parseCrash(s string) (string, int) {
	if s == "" {
		return "", 0
	}
	at, n, ok := strings.Cut(s, ":")
	b, err := strconv.Atoi(n)
	if !ok || err != nil || (at != "after-produce" && at != "after-commit") {
		log.Fatalf("crashsink: -crash %q: want after-produce:N or after-commit:N", s)
	}
	return at, b
}

// produceCrashHook kills the process when the broker has acknowledged a
// record of the chosen batch: it is in the log, its transaction is not
// committed. kgo calls OnProduceRecordUnbuffered synchronously, before the
// record's promise, and the sink commits only after every promise has run,
// so the kill always lands before the commit. (OnProduceBatchWritten would
// not do: kgo calls it on a goroutine of its own, possibly after the
// commit.)
type produceCrashHook struct {
	topicPrefix string
	batch       *atomic.Int64
	crashBatch  int
}

func (h produceCrashHook) OnProduceRecordUnbuffered(r *kgo.Record, err error) {
	if err == nil && strings.HasPrefix(r.Topic, h.topicPrefix) && h.batch.Load() == int64(h.crashBatch) {
		fmt.Printf("crashing after-produce batch=%d\n", h.crashBatch)
		kill()
	}
}

// kill sends SIGKILL to this process: no deferred function, no Close, no
// flush runs; exactly what a crash leaves behind.
func kill() {
	os.Stdout.Sync()
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

func readAck(file string) int {
	if file == "" {
		return 0
	}
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		log.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		log.Fatalf("crashsink: ack file %s: %v", file, err)
	}
	return n
}

// writeAck records the acknowledged batch atomically (write, fsync,
// rename), as a slot's confirmed flush position survives a crash.
func writeAck(file string, b int) {
	if file == "" {
		return
	}
	tmp := file + ".tmp"
	f, err := os.Create(tmp)
	if err == nil {
		_, err = fmt.Fprintln(f, b)
		if err == nil {
			err = f.Sync()
		}
		f.Close()
	}
	if err == nil {
		err = os.Rename(tmp, file)
	}
	if err != nil {
		log.Fatal(err)
	}
}

func exit(err error) {
	fmt.Printf("error fatal=%t retryable=%t fenced=%t: %v\n", kafkasink.IsFatal(err), kafkasink.IsRetryable(err), errors.Is(err, kafkasink.ErrFenced), err)
	if errors.Is(err, kafkasink.ErrFenced) {
		os.Exit(3)
	}
	os.Exit(1)
}
