package kafkasink_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// The checkpoint topic under the real broker's log cleaner, which the fake
// cluster does not run.

// logCensus is what a read_uncommitted reader of a partition finds in it
// from its start to its high watermark.
type logCensus struct {
	end      int64 // high watermark
	data     int   // data records, aborted ones included
	control  int   // transaction markers
	bogus    int   // records of the test's aborted transactions
	size     int64 // bytes on disk, from DescribeLogDirs
	segments string
}

// takeLogCensus reads partition 0 of topic. bogusMark marks the values of
// the test's aborted records.
func takeLogCensus(ctx context.Context, brokers []string, topic string, bogusMark []byte) (logCensus, error) {
	var c logCensus
	admCl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return c, err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return c, err
	}
	end, ok := ends.Lookup(topic, 0)
	if !ok || end.Err != nil {
		return c, fmt.Errorf("end offset of %s[0]: %v", topic, end.Err)
	}
	c.end = end.Offset
	dirs, err := adm.DescribeAllLogDirs(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		return c, err
	}
	dirs.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) { c.size += p.Size })
	})

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(100*time.Millisecond),
	)
	if err != nil {
		return c, err
	}
	defer cl.Close()
	next := int64(0)
	for next < c.end {
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		fetches := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return c, ctx.Err()
		}
		if pctx.Err() != nil && fetches.NumRecords() == 0 {
			break // nothing more is readable
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset >= c.end {
				return
			}
			next = r.Offset + 1
			switch {
			case r.Attrs.IsControl():
				c.control++
			default:
				c.data++
				// The sinks never write tombstones: any is the test's.
				if r.Value == nil || bytes.Contains(r.Value, bogusMark) {
					c.bogus++
				}
			}
		})
	}
	return c, nil
}

// The streams of TestCheckpointSurvivesRealLogCleaner: sinks a and b
// write one transaction per event; crashsink (c) writes fewer, larger
// batches; an aborter writes bogus checkpoints and aborts them.
const (
	cleanerBatches, cleanerEvents, cleanerKeys    = 60, 5, 3
	cleanerCBatches, cleanerCEvents, cleanerCKeys = 12, 10, 4
	cleanerAborts                                 = 150 // aborted bogus checkpoints
	cleanerMore                                   = 10  // batches a and b write after the read-back
)

func TestCheckpointSurvivesRealLogCleaner(t *testing.T) {
	skipInShort(t, "waits for the real log cleaner and SIGKILLs child processes")
	t.Parallel()
	c := newCleanerRun(t)
	runPhases(t,
		phase{"create a checkpoint topic the cleaner works on all the time", c.createCheckpointTopic},
		phase{"write: sinks a and b, crashsink killed three times, bogus checkpoints aborted", c.writeUnderCrashesAndAborts},
		phase{"wait for the cleaner to clean the checkpoint topic", c.waitForCleaner},
		phase{"read back: a new sink of each id reads its latest committed checkpoint", c.readBack},
		phase{"continue the streams exactly once", c.continueExactlyOnce},
	)
}

// cleanerRun is the state TestCheckpointSurvivesRealLogCleaner's phases
// share. Sinks a and b run in this process, c is crashsink. They share
// the checkpoint topic, and so does a transactional producer that writes
// bogus checkpoints of all three, and aborts.
type cleanerRun struct {
	t         *testing.T
	ctx       context.Context
	brokers   []string
	name      string
	ckTopic   string
	ids       []string               // a, b, c
	sinks     []*kafkasink.Sink      // a and b
	hooks     []*hookLog             // of a and b
	bogusMark []byte                 // in every bogus checkpoint
	ack       string                 // crashsink's source acknowledgement file
	want      []kafkasink.Checkpoint // of a, b and c after the writes
	written   int                    // data records written to the checkpoint topic, at least
}

func newCleanerRun(t *testing.T) *cleanerRun {
	brokers, name := onRealBrokers(t, sinktest.EnvBrokers)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return &cleanerRun{
		t: t, ctx: ctx, brokers: brokers, name: name, ckTopic: name + ".checkpoints",
		ids:       []string{name + "-a", name + "-b", name + "-c"},
		bogusMark: []byte("bogus-" + name),
		ack:       filepath.Join(t.TempDir(), "ack"),
	}
}

// cursor is the source cursor of batch b.
func (c *cleanerRun) cursor(b int) json.RawMessage {
	return json.RawMessage(`{"batch":` + strconv.Itoa(b) + `}`)
}

// crashsinkArgs are the flags of a crashsink run delivering total batches.
func (c *cleanerRun) crashsinkArgs(total int) []string {
	return []string{"-sink-id", c.ids[2], "-topic-prefix", c.ids[2], "-checkpoint-topic", c.ckTopic, "-ack-file", c.ack,
		"-batches", strconv.Itoa(total), "-events", strconv.Itoa(cleanerCEvents), "-keys", strconv.Itoa(cleanerCKeys), "-transaction-timeout", "10s"}
}

// createCheckpointTopic: segments roll every 100ms (Kafka 4 refuses
// segment.bytes below 1 MiB, so time rolls them), any dirt is worth
// cleaning, and tombstones and transaction markers may go after 100ms.
func (c *cleanerRun) createCheckpointTopic() {
	configs := map[string]string{
		"cleanup.policy":            "compact",
		"segment.bytes":             "1048576",
		"segment.ms":                "100",
		"min.cleanable.dirty.ratio": "0.01",
		"delete.retention.ms":       "100",
		"min.compaction.lag.ms":     "0",
	}
	createTopic(c.t, c.brokers, c.ckTopic, 1, configs)
}

// writeUnderCrashesAndAborts writes the streams of a and b while
// crashsink is killed three times and the aborter aborts bogus
// checkpoints, then finishes crashsink's stream.
func (c *cleanerRun) writeUnderCrashesAndAborts() {
	t, ctx, brokers, ids := c.t, c.ctx, c.brokers, c.ids
	c.sinks = make([]*kafkasink.Sink, 2)
	c.hooks = make([]*hookLog, 2)
	for i := range c.sinks {
		c.hooks[i] = &hookLog{}
		c.sinks[i] = newSink(t, brokers, ids[i], func(cfg *kafkasink.Config) {
			cfg.CheckpointTopic = c.ckTopic
			cfg.Topics.Prefix = ids[i]
			cfg.MaxTransactionRecords = 1 // a transaction per event
			cfg.Hooks = []kafkasink.Hook{c.hooks[i]}
		})
	}
	crashsink(t) // built before the clock matters

	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for i, s := range c.sinks {
		wg.Go(func() {
			for b := 1; b <= cleanerBatches; b++ {
				if _, err := writeRetrying(ctx, s, kafkasink.Batch{Events: sinktest.Stream(b, cleanerEvents, cleanerKeys), Cursor: c.cursor(b)}); err != nil {
					errs <- fmt.Errorf("sink %s batch %d: %w", ids[i], b, err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		if err := c.abortBogusCheckpoints(); err != nil {
			errs <- err
		}
	})

	for _, crash := range []string{"after-produce:3", "after-produce:6", "after-commit:8"} {
		r := runCrashsink(t, ctx, brokers, append(c.crashsinkArgs(cleanerCBatches), "-crash", crash)...)
		if !r.killed || !strings.Contains(r.out, "crashing "+strings.Replace(crash, ":", " batch=", 1)) {
			t.Fatalf("crashsink -crash %s: not killed where asked (exit %d):\n%s", crash, r.exitCode, r.out)
		}
	}
	if r := runCrashsink(t, ctx, brokers, c.crashsinkArgs(cleanerCBatches)...); r.exitCode != 0 || !strings.Contains(r.out, "done ") {
		t.Fatalf("crashsink final run: exit %d:\n%s", r.exitCode, r.out)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	c.want = []kafkasink.Checkpoint{c.sinks[0].Checkpoint(), c.sinks[1].Checkpoint(),
		{Position: streamEvents(cleanerCBatches, cleanerCEvents, cleanerCKeys)[cleanerCBatches*cleanerCEvents-1].Position}}
	c.written = cleanerAborts
	for i, s := range c.sinks {
		s.Close(ctx)
		_, committed, _, _ := c.hooks[i].snapshot()
		c.written += len(committed)
	}
}

// abortBogusCheckpoints writes bogus checkpoints of all three ids in
// transactions it aborts. Safe to run in its own goroutine.
func (c *cleanerRun) abortBogusCheckpoints() error {
	ctx, ids, bogusMark := c.ctx, c.ids, c.bogusMark
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.brokers...), kgo.TransactionalID(c.name+"-aborter"), kgo.TransactionTimeout(10*time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	for i := range cleanerAborts {
		id := ids[i%len(ids)]
		r := &kgo.Record{Topic: c.ckTopic, Key: []byte(id)}
		switch i % 3 {
		case 0: // far ahead of any real checkpoint
			r.Value = []byte(fmt.Sprintf(`{"version":1,"sink_id":%q,"mode":"exactly-once","position":"FFFFFFFF/FFFFFFFF:%d","cursor":{"m":%q},"written_at":"2026-01-01T00:00:00Z"}`, id, i, bogusMark))
		case 1: // a format no reader knows
			r.Value = []byte(fmt.Sprintf(`{"version":99,"sink_id":%q,"m":%q}`, id, bogusMark))
		case 2: // a tombstone would reset the checkpoint
			r.Headers = []kgo.RecordHeader{{Key: "m", Value: bogusMark}}
		}
		if err := cl.BeginTransaction(); err != nil {
			return fmt.Errorf("aborter: %w", err)
		}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			return fmt.Errorf("aborter: producing: %w", err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
			return fmt.Errorf("aborter: aborting: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// waitForCleaner waits until the cleaner has dropped the superseded
// checkpoints and the aborted records, leaving few data records of the
// hundreds written.
func (c *cleanerRun) waitForCleaner() {
	t, ckTopic, written := c.t, c.ckTopic, c.written
	var census logCensus
	var err error
	start := time.Now()
	for deadline := start.Add(60 * time.Second); ; time.Sleep(2 * time.Second) {
		census, err = takeLogCensus(c.ctx, c.brokers, ckTopic, c.bogusMark)
		if err != nil {
			t.Fatalf("reading %s: %v", ckTopic, err)
		}
		if census.data*10 < written {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log cleaner did not clean %s within 60s: %d data records (%d of them aborted bogus ones) and %d markers remain of %d offsets, %d bytes; at least %d data records were written",
				ckTopic, census.data, census.bogus, census.control, census.end, census.size, written)
		}
	}
	t.Logf("after %v the cleaner left %d data records (%d aborted bogus ones) and %d markers of %d offsets (%d bytes); %d data records were written at least",
		time.Since(start).Round(time.Millisecond), census.data, census.bogus, census.control, census.end, census.size, written)
}

// readBack starts a new sink of each id, which must read exactly its
// latest committed checkpoint; the new a and b go on in the next phase.
func (c *cleanerRun) readBack() {
	t, want := c.t, c.want
	for i, id := range c.ids {
		s := newSink(t, c.brokers, id, func(cfg *kafkasink.Config) { cfg.CheckpointTopic = c.ckTopic; cfg.Topics.Prefix = id })
		got := s.Checkpoint()
		if got.Position != want[i].Position || !bytes.Equal(got.Cursor, want[i].Cursor) || got.Mode != kafkasink.ExactlyOnce {
			t.Errorf("sink %s read back checkpoint %s cursor %s mode %s, want %s cursor %s exactly-once",
				id, got.Position, got.Cursor, got.Mode, want[i].Position, want[i].Cursor)
		}
		if i < len(c.sinks) {
			c.sinks[i] = s
		} else {
			s.Close(c.ctx)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// continueExactlyOnce continues every stream: the sources redeliver
// their last two batches, and every topic still holds each event once.
func (c *cleanerRun) continueExactlyOnce() {
	t, ctx, brokers, ids := c.t, c.ctx, c.brokers, c.ids
	for i, s := range c.sinks {
		for b := cleanerBatches - 1; b <= cleanerBatches+cleanerMore; b++ {
			retried, err := writeRetrying(ctx, s, kafkasink.Batch{Events: sinktest.Stream(b, cleanerEvents, cleanerKeys), Cursor: c.cursor(b)})
			logRetried(t, fmt.Sprintf("sink %s batch %d", ids[i], b), retried)
			if err != nil {
				t.Fatalf("sink %s batch %d: %v", ids[i], b, err)
			}
		}
	}
	if r := runCrashsink(t, ctx, brokers, c.crashsinkArgs(cleanerCBatches+3)...); r.exitCode != 0 || !strings.Contains(r.out, "done ") {
		t.Fatalf("crashsink continuing: exit %d:\n%s", r.exitCode, r.out)
	}
	for i := range c.sinks {
		want := streamEvents(cleanerBatches+cleanerMore, cleanerEvents, cleanerKeys)
		sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, ids[i]+".public.items"), want)
	}
	wantC := streamEvents(cleanerCBatches+3, cleanerCEvents, cleanerCKeys)
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, ids[2]+".public.items"), wantC)
}
