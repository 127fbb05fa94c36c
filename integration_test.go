package kafkasink_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// These tests need the real Kafka of scripts/testenv.sh: what the fake
// cluster does not model (a broker process dying and recovering its logs,
// replication and leader election, the log cleaner, the broker's own
// auto-creation). Each reads its target from the environment and skips,
// naming the missing variable, when it is unset:
//
//	scripts/testenv.sh up --brokers 3
//	eval "$(scripts/testenv.sh env)"
//
// The broker is long-lived and shared, so every sink id, topic prefix and
// checkpoint topic comes from uniqueName.
//
// The tests that kill brokers (TestBrokerRestartBetweenAndDuringWrites,
// TestThreeBrokerKillDuringStream) do not call t.Parallel: the testing
// package finishes every sequential top-level test before it lets any
// parallel one run, so no other test of this package has the broker taken
// away under it. They run one after the other. Test binaries of other
// packages, or other users of the same environment, can still notice the
// single node's restart (a few seconds of connection errors).

// loadEvents returns n inserts of public.load at commit LSN b<<24 whose
// rows carry pad bytes, over keys distinct ids: a batch a Write needs a
// while for.
func loadEvents(b, n, keys, pad int) []kafkasink.Event {
	events := sinktest.Inserts("public", "load", kafkasink.LSN(b)<<24, 0, n)
	padding := strings.Repeat("p", pad)
	for i := range events {
		events[i].After = kafkasink.Row{{Name: "id", Value: int64(i % keys)}, {Name: "name", Value: padding}}
	}
	return events
}

// firstCommit signals the first transaction committed after arm.
type firstCommit struct {
	armed atomic.Bool
	once  sync.Once
	C     chan struct{}
}

func newFirstCommit() *firstCommit { return &firstCommit{C: make(chan struct{})} }

func (f *firstCommit) arm() { f.armed.Store(true) }

func (f *firstCommit) OnTransactionCommitted(kafkasink.TransactionInfo) {
	if f.armed.Load() {
		f.once.Do(func() { close(f.C) })
	}
}

func TestBrokerRestartBetweenAndDuringWrites(t *testing.T) {
	// Not parallel: it stops the single node every other test uses; see
	// the comment at the top of the file.
	brokers := sinktest.RealBrokers(t, sinktest.EnvBrokers)
	nodes := testenvNodes(t)
	name := sinktest.UniqueName(t)
	deleteTopicsAtEnd(t, brokers, name)
	topic := name + ".public.load"
	commits := newFirstCommit()
	aborts := &hookLog{}
	s := newSink(t, brokers, name, func(c *kafkasink.Config) {
		c.CheckpointTopic = name + ".checkpoints"
		c.Topics.Prefix = name
		c.Topics.Partitions = 3
		c.MaxTransactionRecords = 4000
		c.Hooks = []kafkasink.Hook{commits, aborts}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const keys = 97
	var want []kafkasink.Event
	writeOK := func(what string, events []kafkasink.Event) {
		t.Helper()
		started := time.Now()
		retried, err := writeRetrying(ctx, s, kafkasink.Batch{Events: events})
		logRetried(t, what, retried)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		t.Logf("%s: delivered in %v after %d retries", what, time.Since(started).Round(time.Millisecond), len(retried))
		want = append(want, events...)
	}

	for b := 1; b <= 3; b++ {
		writeOK(fmt.Sprintf("batch %d", b), loadEvents(b, 200, keys, 100))
	}

	// Between two batches.
	nodes.kill(0)
	nodes.start(0)
	for b := 4; b <= 5; b++ {
		writeOK(fmt.Sprintf("batch %d after the restart", b), loadEvents(b, 200, keys, 100))
	}

	// During a Write: the kill lands once the first transaction of a
	// batch of ten has committed, while the next ones are producing.
	big := loadEvents(6, 40000, keys, 400)
	commits.arm()
	done := make(chan error, 1)
	started := time.Now()
	go func() { done <- s.Write(ctx, kafkasink.Batch{Events: big}) }()
	select {
	case <-commits.C:
	case err := <-done:
		t.Fatalf("the big Write returned before its first transaction committed: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the big Write committed no transaction within 60s")
	}
	nodes.kill(0)
	var writeErr error
	returned := false
	select {
	case writeErr = <-done:
		returned = true
		if writeErr == nil {
			t.Fatal("the big Write had succeeded before the broker died: the test proved nothing; make the batch bigger")
		}
	default:
	}
	nodes.start(0)
	if !returned {
		select {
		case writeErr = <-done:
		case <-time.After(90 * time.Second):
			t.Fatal("the Write running when the broker died did not return within 90s of the restart")
		}
	}
	t.Logf("the Write running when the broker was killed returned after %v: %v (retryable=%t fatal=%t)",
		time.Since(started).Round(time.Millisecond), writeErr, kafkasink.IsRetryable(writeErr), kafkasink.IsFatal(writeErr))
	switch {
	case writeErr == nil:
		if got, last := s.Checkpoint().Position, big[len(big)-1].Position; got != last {
			t.Fatalf("the Write returned nil with the checkpoint at %s, not at its last event %s: a silent partial write", got, last)
		}
		want = append(want, big...)
	case !kafkasink.IsRetryable(writeErr):
		t.Fatalf("the Write running when the broker died returned an error that is not retryable (fatal=%t): %v", kafkasink.IsFatal(writeErr), writeErr)
	default:
		t.Logf("checkpoint after the failed Write: %s (the batch ends at %s)", s.Checkpoint().Position, big[len(big)-1].Position)
		writeOK("the big batch again", big)
	}
	_, committed, aborted, _ := aborts.snapshot()
	t.Logf("transactions: %d committed, %d aborted", len(committed), len(aborted))
	for _, a := range aborted {
		t.Logf("aborted %s..%s: %v", a.info.First, a.info.Last, a.err)
	}

	writeOK("batch 7", loadEvents(7, 200, keys, 100))
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), want)
}

func TestMustExistMissingTopicIsFatalWithAutoCreateOn(t *testing.T) {
	t.Parallel()
	brokers := sinktest.RealBrokers(t, sinktest.EnvBrokers)
	name := sinktest.UniqueName(t)
	deleteTopicsAtEnd(t, brokers, name)
	absent := name + ".public.absent"

	// The broker does auto-create topics: a metadata request that allows
	// it creates one. Without that, the check at the end could not fail.
	control := name + ".public.control"
	cl := mustClient(t, brokers)
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(control)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = true
	if _, err := req.RequestWith(ctxT(t), cl); err != nil {
		t.Fatalf("metadata request for %s: %v", control, err)
	}
	for deadline := time.Now().Add(10 * time.Second); !topicExists(t, brokers, control); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the broker did not auto-create %s: auto.create.topics.enable seems off, so this test would prove nothing", control)
		}
	}

	s, err := startSink(t, brokers, name, func(c *kafkasink.Config) {
		c.CheckpointTopic = name + ".checkpoints"
		c.Topics.Prefix = name
		c.Topics.MustExist = true
	})
	if err == nil {
		err = tryWrite(t, s, kafkasink.Batch{Events: sinktest.Inserts("public", "absent", 100, 1, 3)})
	} else {
		t.Logf("New failed: %v", err)
	}
	if !errors.Is(err, kafkasink.ErrTopicMissing) || !kafkasink.IsFatal(err) || kafkasink.IsRetryable(err) {
		t.Fatalf("New or the first Write: %v, want a fatal ErrTopicMissing", err)
	}
	if !strings.Contains(err.Error(), absent) {
		t.Errorf("error %q does not name topic %s", err, absent)
	}
	if s != nil {
		// Trying again changes nothing.
		if err := tryWrite(t, s, kafkasink.Batch{Events: sinktest.Inserts("public", "absent", 100, 1, 3)}); !errors.Is(err, kafkasink.ErrTopicMissing) {
			t.Errorf("second Write: %v, want ErrTopicMissing again", err)
		}
		if got := s.Checkpoint(); !got.IsZero() {
			t.Errorf("checkpoint %s after failed Writes, want none", got.Position)
		}
	}
	// Auto-creation would be immediate; give a late one a moment anyway.
	time.Sleep(time.Second)
	if topicExists(t, brokers, absent) {
		t.Fatalf("topic %s exists after the failed Write: the sink let the broker auto-create it", absent)
	}
}

func TestTopicDeletedMidRunIsFatal(t *testing.T) {
	t.Parallel()
	brokers := sinktest.RealBrokers(t, sinktest.EnvBrokers)
	name := sinktest.UniqueName(t)
	deleteTopicsAtEnd(t, brokers, name)
	topic := name + ".public.doomed"
	const txnTimeout = 10 * time.Second
	s := newSink(t, brokers, name, func(c *kafkasink.Config) {
		c.CheckpointTopic = name + ".checkpoints"
		c.Topics.Prefix = name
		c.Topics.Partitions = 3
		c.TransactionTimeout = txnTimeout
	})
	first := sinktest.Inserts("public", "doomed", 100, 1, 20)
	write(t, s, first)

	resp, err := admin(t, brokers).DeleteTopics(ctxT(t), topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("deleting %s: %v", topic, err)
	}
	for deadline := time.Now().Add(20 * time.Second); topicExists(t, brokers, topic); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s still exists 20s after it was deleted", topic)
		}
	}

	started := time.Now()
	err = tryWrite(t, s, kafkasink.Batch{Events: sinktest.Inserts("public", "doomed", 200, 21, 20)})
	took := time.Since(started)
	t.Logf("Write after the deletion returned after %v: %v", took.Round(time.Millisecond), err)
	if !errors.Is(err, kafkasink.ErrTopicMissing) || !kafkasink.IsFatal(err) || kafkasink.IsRetryable(err) {
		t.Fatalf("Write after the topic was deleted: %v, want a fatal ErrTopicMissing", err)
	}
	var we *kafkasink.WriteError
	if !errors.As(err, &we) || we.Topic != topic {
		t.Errorf("error %v, want a *WriteError for %s", err, topic)
	}
	// The transaction deadline (9/10 of the timeout) plus the sink's
	// metadata check (at most 10s) bound it.
	if bound := txnTimeout + 10*time.Second; took > bound {
		t.Errorf("the Write took %v to report the deleted topic, more than %v", took, bound)
	}
	if got := s.Checkpoint().Position; got != first[len(first)-1].Position {
		t.Errorf("checkpoint %s, want unchanged %s", got, first[len(first)-1].Position)
	}
	if topicExists(t, brokers, topic) {
		t.Errorf("%s was recreated after the failed Write (the broker auto-creates topics)", topic)
	}
}

func TestOversizedEventRejectedNeighboursDelivered(t *testing.T) {
	t.Parallel()
	brokers := sinktest.RealBrokers(t, sinktest.EnvBrokers)
	name := sinktest.UniqueName(t)
	deleteTopicsAtEnd(t, brokers, name)
	topic := name + ".public.big"
	dlq := name + ".dead-letters"
	ckTopic := name + ".checkpoints"
	// The dead-letter topic is as small, so the big value does not fit
	// there either and is dropped from the dead letter.
	createTopic(t, brokers, topic, 1, map[string]string{"max.message.bytes": "4096"})
	createTopic(t, brokers, dlq, 1, map[string]string{"max.message.bytes": "4096"})
	events := sinktest.Inserts("public", "big", 100, 1, 5)
	events[2] = withColumn(events[2], "name", strings.Repeat("x", 10<<10))
	neighbours := []kafkasink.Event{events[0], events[1], events[3], events[4]}
	config := func(c *kafkasink.Config) {
		c.CheckpointTopic = ckTopic
		c.Topics.Prefix = name
	}

	t.Run("without dead-letter topic", func(t *testing.T) {
		id := name + "-plain"
		s := newSink(t, brokers, id, config)
		err := tryWrite(t, s, kafkasink.Batch{Events: events})
		r := checkRejected(t, err, events[2], kafkasink.ReasonTooLarge, topic, "max.message.bytes 4096")
		t.Logf("rejection: %s", r.String())
		if got := s.Checkpoint(); !got.IsZero() {
			t.Errorf("checkpoint moved to %s", got.Position)
		}
		if got := sinktest.ReadCommitted(t, brokers, topic); len(got) != 0 {
			t.Fatalf("read_committed sees %d records in %s: the rejected batch was (partly) committed", len(got), topic)
		}
		// Exactly-once sends a batch's first records while it encodes
		// the rest, so the records before the rejected event were
		// produced, in a transaction that was aborted; nothing else.
		sent := map[string]bool{events[0].Position.String(): true, events[1].Position.String(): true}
		for _, r := range sinktest.ReadUncommitted(t, brokers, topic) {
			if id := sinktest.Header(r, kafkasink.HeaderID); !sent[id] {
				t.Errorf("read_uncommitted sees event %s of the rejected batch; only those before the rejected one may have been produced", id)
			}
		}
		for _, r := range sinktest.ReadUncommitted(t, brokers, ckTopic) {
			if string(r.Key) == id {
				t.Fatalf("read_uncommitted sees a checkpoint of %s at offset %d: the rejected batch's transaction got as far as its checkpoint", id, r.Offset)
			}
		}
	})

	t.Run("with dead-letter topic", func(t *testing.T) {
		h := &hookLog{}
		s := newSink(t, brokers, name+"-dlq", config, func(c *kafkasink.Config) {
			c.DeadLetterTopic = dlq
			c.Hooks = []kafkasink.Hook{h}
		})
		write(t, s, events)
		delivered := sinktest.ReadCommitted(t, brokers, topic)
		sinktest.CheckExactlyOnce(t, delivered, neighbours)
		dead := sinktest.ReadCommitted(t, brokers, dlq)
		if len(dead) != 1 {
			t.Fatalf("%d dead-letter records, want 1", len(dead))
		}
		d := dead[0]
		hdr := func(k string) string { return sinktest.Header(d, k) }
		if got := hdr(kafkasink.HeaderID); got != events[2].ID() {
			t.Errorf("dead letter of event %s, want %s", got, events[2].ID())
		}
		if got := hdr(kafkasink.HeaderReason); got != string(kafkasink.ReasonTooLarge) {
			t.Errorf("dead letter reason %q, want %q", got, kafkasink.ReasonTooLarge)
		}
		if got := hdr(kafkasink.HeaderTopic); got != topic {
			t.Errorf("dead letter topic header %q, want %q", got, topic)
		}
		if d.Value != nil {
			t.Errorf("dead letter value has %d bytes, want null: it does not fit the dead-letter topic", len(d.Value))
		}
		// One transaction: one producer id and epoch for all of it, one
		// commit for five events and the checkpoint.
		for _, r := range delivered {
			if r.ProducerID != d.ProducerID || r.ProducerEpoch != d.ProducerEpoch {
				t.Errorf("record %s by producer %d/%d, the dead letter by %d/%d: not one transaction",
					sinktest.Header(r, kafkasink.HeaderID), r.ProducerID, r.ProducerEpoch, d.ProducerID, d.ProducerEpoch)
			}
		}
		_, committed, aborted, _ := h.snapshot()
		if len(committed) != 1 || committed[0].Records != len(events)+1 || len(aborted) != 0 {
			t.Errorf("transactions: %+v committed, %d aborted; want one of %d records", committed, len(aborted), len(events)+1)
		}
		if got := sinktest.ReadUncommitted(t, brokers, topic, dlq); len(got) != len(events) {
			t.Errorf("read_uncommitted sees %d records in %s and %s, want %d: something was produced and aborted", len(got), topic, dlq, len(events))
		}
	})
}

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

func TestCheckpointSurvivesRealLogCleaner(t *testing.T) {
	t.Parallel()
	brokers := sinktest.RealBrokers(t, sinktest.EnvBrokers)
	name := sinktest.UniqueName(t)
	deleteTopicsAtEnd(t, brokers, name)
	ckTopic := name + ".checkpoints"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// A checkpoint topic the cleaner works on all the time: segments roll
	// every 100ms (Kafka 4 refuses segment.bytes below 1 MiB, so time
	// rolls them), any dirt is worth cleaning, and tombstones and
	// transaction markers may go after 100ms.
	configs := map[string]string{
		"cleanup.policy":            "compact",
		"segment.bytes":             "1048576",
		"segment.ms":                "100",
		"min.cleanable.dirty.ratio": "0.01",
		"delete.retention.ms":       "100",
		"min.compaction.lag.ms":     "0",
	}
	createTopic(t, brokers, ckTopic, 1, configs)

	// Sinks a and b run in this process, c is crashsink, killed three
	// times. They share the checkpoint topic, and so does a transactional
	// producer that writes bogus checkpoints of all three, and aborts.
	ids := []string{name + "-a", name + "-b", name + "-c"}
	const batches, events, keys = 60, 5, 3
	const cBatches, cEvents, cKeys = 12, 10, 4
	sinks := make([]kafkasink.Sink, 2)
	hooks := make([]*hookLog, 2)
	for i := range sinks {
		hooks[i] = &hookLog{}
		sinks[i] = newSink(t, brokers, ids[i], func(c *kafkasink.Config) {
			c.CheckpointTopic = ckTopic
			c.Topics.Prefix = ids[i]
			c.MaxTransactionRecords = 1 // a transaction per event
			c.Hooks = []kafkasink.Hook{hooks[i]}
		})
	}
	cursor := func(b int) json.RawMessage { return json.RawMessage(`{"batch":` + strconv.Itoa(b) + `}`) }
	crashsink(t) // built before the clock matters

	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for i, s := range sinks {
		wg.Go(func() {
			for b := 1; b <= batches; b++ {
				if _, err := writeRetrying(ctx, s, kafkasink.Batch{Events: sinktest.Stream(b, events, keys), Cursor: cursor(b)}); err != nil {
					errs <- fmt.Errorf("sink %s batch %d: %w", ids[i], b, err)
					return
				}
			}
		})
	}
	bogusMark := []byte("bogus-" + name)
	const aborts = 150
	wg.Go(func() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID(name+"-aborter"), kgo.TransactionTimeout(10*time.Second))
		if err != nil {
			errs <- err
			return
		}
		defer cl.Close()
		for i := range aborts {
			id := ids[i%len(ids)]
			r := &kgo.Record{Topic: ckTopic, Key: []byte(id)}
			switch i % 3 {
			case 0: // far ahead of any real checkpoint
				r.Value = []byte(fmt.Sprintf(`{"version":1,"sink_id":%q,"mode":"exactly-once","position":"FFFFFFFF/FFFFFFFF:%d","cursor":{"m":%q},"written_at":"2026-01-01T00:00:00Z"}`, id, i, bogusMark))
			case 1: // a format no reader knows
				r.Value = []byte(fmt.Sprintf(`{"version":99,"sink_id":%q,"m":%q}`, id, bogusMark))
			case 2: // a tombstone would reset the checkpoint
				r.Headers = []kgo.RecordHeader{{Key: "m", Value: bogusMark}}
			}
			if err := cl.BeginTransaction(); err != nil {
				errs <- fmt.Errorf("aborter: %w", err)
				return
			}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				errs <- fmt.Errorf("aborter: producing: %w", err)
				return
			}
			if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
				errs <- fmt.Errorf("aborter: aborting: %w", err)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})

	ack := filepath.Join(t.TempDir(), "ack")
	cArgs := func(total int) []string {
		return []string{"-sink-id", ids[2], "-topic-prefix", ids[2], "-checkpoint-topic", ckTopic, "-ack-file", ack,
			"-batches", strconv.Itoa(total), "-events", strconv.Itoa(cEvents), "-keys", strconv.Itoa(cKeys), "-transaction-timeout", "10s"}
	}
	for _, crash := range []string{"after-produce:3", "after-produce:6", "after-commit:8"} {
		r := runCrashsink(t, ctx, brokers, append(cArgs(cBatches), "-crash", crash)...)
		if !r.killed || !strings.Contains(r.out, "crashing "+strings.Replace(crash, ":", " batch=", 1)) {
			t.Fatalf("crashsink -crash %s: not killed where asked (exit %d):\n%s", crash, r.exitCode, r.out)
		}
	}
	if r := runCrashsink(t, ctx, brokers, cArgs(cBatches)...); r.exitCode != 0 || !strings.Contains(r.out, "done ") {
		t.Fatalf("crashsink final run: exit %d:\n%s", r.exitCode, r.out)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	want := []kafkasink.Checkpoint{sinks[0].Checkpoint(), sinks[1].Checkpoint(),
		{Position: streamEvents(cBatches, cEvents, cKeys)[cBatches*cEvents-1].Position}}
	written := aborts
	for i, s := range sinks {
		s.Close(ctx)
		_, committed, _, _ := hooks[i].snapshot()
		written += len(committed)
	}

	// Wait for the cleaner: it must drop the superseded checkpoints and
	// the aborted records, leaving few data records of the hundreds
	// written.
	var census logCensus
	var err error
	start := time.Now()
	for deadline := start.Add(60 * time.Second); ; time.Sleep(2 * time.Second) {
		census, err = takeLogCensus(ctx, brokers, ckTopic, bogusMark)
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

	// A new sink of each id reads exactly its latest committed checkpoint.
	for i, id := range ids {
		s := newSink(t, brokers, id, func(c *kafkasink.Config) { c.CheckpointTopic = ckTopic; c.Topics.Prefix = id })
		got := s.Checkpoint()
		if got.Position != want[i].Position || !bytes.Equal(got.Cursor, want[i].Cursor) || got.Mode != kafkasink.ExactlyOnce {
			t.Errorf("sink %s read back checkpoint %s cursor %s mode %s, want %s cursor %s exactly-once",
				id, got.Position, got.Cursor, got.Mode, want[i].Position, want[i].Cursor)
		}
		if i < len(sinks) {
			sinks[i] = s
		} else {
			s.Close(ctx)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Continuing the streams stays exactly once; the sources redeliver
	// their last two batches.
	const more = 10
	for i, s := range sinks {
		for b := batches - 1; b <= batches+more; b++ {
			retried, err := writeRetrying(ctx, s, kafkasink.Batch{Events: sinktest.Stream(b, events, keys), Cursor: cursor(b)})
			logRetried(t, fmt.Sprintf("sink %s batch %d", ids[i], b), retried)
			if err != nil {
				t.Fatalf("sink %s batch %d: %v", ids[i], b, err)
			}
		}
	}
	if r := runCrashsink(t, ctx, brokers, cArgs(cBatches+3)...); r.exitCode != 0 || !strings.Contains(r.out, "done ") {
		t.Fatalf("crashsink continuing: exit %d:\n%s", r.exitCode, r.out)
	}
	for i := range sinks {
		want := streamEvents(batches+more, events, keys)
		sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, ids[i]+".public.items"), want)
	}
	wantC := streamEvents(cBatches+3, cEvents, cKeys)
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, ids[2]+".public.items"), wantC)
}

// streamer writes the deterministic stream batch by batch, retrying
// retryable errors, until stopped.
type streamer struct {
	acked   atomic.Int64
	stop    chan struct{}
	done    chan error
	mu      sync.Mutex
	retried []string
}

func startStreamer(ctx context.Context, s kafkasink.Sink, events, keys int) *streamer {
	st := &streamer{stop: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		for b := 1; ; b++ {
			select {
			case <-st.stop:
				st.done <- nil
				return
			default:
			}
			started := time.Now()
			retried, err := writeRetrying(ctx, s, kafkasink.Batch{Events: sinktest.Stream(b, events, keys)})
			st.mu.Lock()
			for _, e := range retried {
				st.retried = append(st.retried, fmt.Sprintf("batch %d: %v", b, e))
			}
			if len(retried) > 0 || time.Since(started) > 2*time.Second {
				st.retried = append(st.retried, fmt.Sprintf("batch %d: delivered after %d retries, %v", b, len(retried), time.Since(started).Round(time.Millisecond)))
			}
			st.mu.Unlock()
			if err != nil {
				st.done <- fmt.Errorf("batch %d: %w", b, err)
				return
			}
			st.acked.Store(int64(b))
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return st
}

// waitAcked waits until the stream has delivered batch n.
func (st *streamer) waitAcked(t *testing.T, n int64, within time.Duration, what string) {
	t.Helper()
	started := time.Now()
	for deadline := started.Add(within); st.acked.Load() < n; time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-st.done:
			t.Fatalf("%s: the stream stopped: %v", what, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: batch %d not delivered within %v (at %d)", what, n, within, st.acked.Load())
		}
	}
	t.Logf("%s: batch %d delivered after %v", what, n, time.Since(started).Round(time.Millisecond))
}

// finish stops the stream and returns the last delivered batch.
func (st *streamer) finish(t *testing.T) int {
	t.Helper()
	close(st.stop)
	if err := <-st.done; err != nil {
		t.Fatalf("the stream stopped: %v", err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, r := range st.retried {
		t.Log(r)
	}
	return int(st.acked.Load())
}

// checkReplicated checks a topic's replication factor and
// min.insync.replicas.
func checkReplicated(t *testing.T, adm *kadm.Client, topic string, rf int, minISR string) {
	t.Helper()
	md, err := adm.Metadata(ctxT(t), topic)
	if err != nil {
		t.Fatalf("metadata of %s: %v", topic, err)
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil || len(td.Partitions) == 0 {
		t.Fatalf("metadata of %s: %v", topic, td.Err)
	}
	for _, p := range td.Partitions {
		if len(p.Replicas) != rf {
			t.Errorf("%s[%d] has replicas %v, want %d", topic, p.Partition, p.Replicas, rf)
		}
	}
	rcs, err := adm.DescribeTopicConfigs(ctxT(t), topic)
	if err != nil {
		t.Fatalf("configs of %s: %v", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		t.Fatalf("configs of %s: %v", topic, err)
	}
	for _, c := range rc.Configs {
		if c.Key == "min.insync.replicas" && c.MaybeValue() != minISR {
			t.Errorf("%s has min.insync.replicas=%s, want %s", topic, c.MaybeValue(), minISR)
		}
	}
}

func TestThreeBrokerKillDuringStream(t *testing.T) {
	// Not parallel: it stops cluster nodes; see the comment at the top of
	// the file.
	brokers := sinktest.RealBrokers(t, sinktest.EnvBrokers3)
	nodes := testenvNodes(t)
	name := sinktest.UniqueName(t)
	deleteTopicsAtEnd(t, brokers, name)
	ckTopic := name + ".checkpoints"
	topic := name + ".public.items"
	txnID := "kafkasink-" + name
	const events, keys = 20, 7
	config := func(c *kafkasink.Config) {
		c.CheckpointTopic = ckTopic
		c.TransactionTimeout = 15 * time.Second
		c.Topics = kafkasink.Topics{Prefix: name, Partitions: 3, ReplicationFactor: 3, Configs: map[string]string{"min.insync.replicas": "2"}}
	}
	s := newSink(t, brokers, name, config)
	cl := mustClient(t, brokers)
	adm := kadm.NewClient(cl)
	// The sink created its checkpoint topic replicated for the cluster.
	checkReplicated(t, adm, ckTopic, 3, "2")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st := startStreamer(ctx, s, events, keys)
	st.waitAcked(t, 5, 30*time.Second, "before any kill")
	checkReplicated(t, adm, topic, 3, "2")

	// A fixed node first: kill-broker 2, as an operator would.
	roles := func() string {
		var parts []string
		if c, ok := adm.FindTxnCoordinators(ctxT(t), txnID)[txnID]; ok && c.Err == nil {
			parts = append(parts, fmt.Sprintf("transaction coordinator of %s: node %d", txnID, c.NodeID))
		}
		if resp, err := freshMetadata(ctxT(t), cl, topic, ckTopic); err == nil {
			for _, td := range resp.Topics {
				for _, p := range td.Partitions {
					parts = append(parts, fmt.Sprintf("%s[%d] leader %d ISR %v", *td.Topic, p.Partition, p.Leader, p.ISR))
				}
			}
		}
		return strings.Join(parts, "; ")
	}
	t.Logf("before killing node 2: %s", roles())
	nodes.kill(2)
	at := st.acked.Load()
	st.waitAcked(t, at+3, 45*time.Second, "node 2 down")
	nodes.start(2)
	waitFullISR(t, cl, 60*time.Second, topic, ckTopic, "__transaction_state")
	st.waitAcked(t, st.acked.Load()+2, 30*time.Second, "node 2 back")

	// Then the transaction coordinator of the sink.
	c, ok := adm.FindTxnCoordinators(ctxT(t), txnID)[txnID]
	if !ok || c.Err != nil {
		t.Fatalf("finding the transaction coordinator of %s: %v", txnID, c.Err)
	}
	victim := int(c.NodeID)
	t.Logf("killing node %d, the transaction coordinator: %s", victim, roles())
	nodes.kill(victim)
	at = st.acked.Load()
	st.waitAcked(t, at+3, 45*time.Second, fmt.Sprintf("coordinator node %d down", victim))
	t.Logf("with node %d down: %s", victim, roles())
	nodes.start(victim)
	st.waitAcked(t, st.acked.Load()+2, 30*time.Second, fmt.Sprintf("node %d back", victim))

	n := st.finish(t)
	want := streamEvents(n, events, keys)
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), want)
	s.Close(ctx)
	if got := newSink(t, brokers, name, config).Checkpoint().Position; got != want[len(want)-1].Position {
		t.Fatalf("a new sink read back checkpoint %s, want %s", got, want[len(want)-1].Position)
	}
	t.Logf("%d batches, %d events delivered exactly once through two broker kills", n, len(want))
}
