package kafkasink_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/debezium"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// TestReceipts checks BatchInfo.Receipts against the receipts a
// read_committed consumer recomputes from the topics, on the fake
// cluster, where two Writes also leave aborted records in the log: the
// second has a transaction refused once and retried inside it, and the
// third fails once before it is written again. It also checks the Debug
// log of each receipt.
func TestReceipts(t *testing.T) {
	t.Parallel()
	c, brokers := sinktest.Cluster(t)
	var logs sinktest.SyncBuffer
	var refusedOnce func() int
	faults := func(t *testing.T, s *kafkasink.Sink, name string, write int, b kafkasink.Batch) {
		topic := name + ".public.orders"
		switch write {
		case 2:
			refusedOnce = c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: kerr.TransactionAbortable, Count: 1}).Hits
		case 3:
			// A failure no record is refused for (INVALID_RECORD would
			// be quarantined), until the Write's attempts run out.
			failing := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Partitions: []int32{1}, Err: kerr.UnknownServerError, Count: -1})
			err := tryWrite(t, s, b)
			failing.Remove()
			if !errors.Is(err, kerr.UnknownServerError) || !kafkasink.IsRetryable(err) {
				t.Fatalf("Write with a failing partition: %v, want a retryable UNKNOWN_SERVER_ERROR", err)
			}
			if all, committed := sinktest.ReadUncommitted(t, brokers, topic), sinktest.ReadCommitted(t, brokers, topic); len(all) <= len(committed) {
				t.Fatalf("%d records in %s, %d committed: the failed Write left none to abort, and the test no longer covers what it should", len(all), topic, len(committed))
			}
		}
	}
	batches := checkReceipts(t, brokers, "receipts", faults, func(c *kafkasink.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	if refusedOnce() != 1 {
		t.Fatalf("the second Write's produce was refused %d times, want once", refusedOnce())
	}

	type logged struct {
		Msg, Topic, CRC32C, First, Last string
		Records, ValueBytes             int
	}
	var got []logged
	for line := range strings.Lines(logs.String()) {
		var l struct {
			logged
			ValueBytes int    `json:"value_bytes"`
			CRC32C     string `json:"crc32c"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if l.Msg == "write receipt" {
			l.logged.ValueBytes, l.logged.CRC32C = l.ValueBytes, l.CRC32C
			got = append(got, l.logged)
		}
	}
	var want []logged
	for _, b := range batches {
		for _, r := range b.Receipts {
			want = append(want, logged{Msg: "write receipt", Topic: r.Topic, CRC32C: fmt.Sprintf("%08x", r.CRC32C),
				First: r.First.String(), Last: r.Last.String(), Records: r.Records, ValueBytes: r.Bytes})
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("write receipts logged:\n%+v\nwant:\n%+v", got, want)
	}
}

// TestReceiptsRealBroker is TestReceipts against the real broker, without
// the faults, in ExactlyOnce and in Idempotent mode.
func TestReceiptsRealBroker(t *testing.T) {
	t.Parallel()
	brokers, name := onRealBrokers(t, sinktest.EnvBrokers)
	for _, mode := range []kafkasink.Mode{kafkasink.ExactlyOnce, kafkasink.Idempotent} {
		t.Run(mode.String(), func(t *testing.T) {
			checkReceipts(t, brokers, name+"-"+mode.String(), nil, func(c *kafkasink.Config) { c.Mode = mode })
		})
	}
}

// checkReceipts runs the receipts scenario with a sink named name: three
// Writes, to two tables' topics and the dead-letter topic, with null,
// empty and rejected values. The second Write starts with events the
// first delivered and is split into several transactions. before, when
// not nil, is called before each Write (numbered from 1) with its batch.
// Each Write's receipts must be those recomputed from the topics by a
// read_committed reader, as Receipt's documentation says. It returns the
// BatchInfos.
func checkReceipts(t *testing.T, brokers []string, name string, before func(t *testing.T, s *kafkasink.Sink, name string, write int, b kafkasink.Batch), edit ...func(*kafkasink.Config)) []kafkasink.BatchInfo {
	t.Helper()
	h := &hookLog{}
	s := newSink(t, brokers, name, append([]func(*kafkasink.Config){func(c *kafkasink.Config) {
		c.Topics = kafkasink.Topics{Prefix: name, Partitions: 3}
		c.CheckpointTopic = name + ".checkpoints"
		c.DeadLetterTopic = name + ".dead-letters"
		c.Encoder = receiptEncoder{}
		c.Receipts = true
		c.MaxTransactionRecords = 4
		c.Hooks = []kafkasink.Hook{h}
	}}, edit...)...)

	a := receiptEvents(100, 8)
	b := append(a[5:], receiptEvents(200, 10)...)
	c := receiptEvents(300, 10)
	for i, events := range [][]kafkasink.Event{a, b, c} {
		if before != nil {
			before(t, s, name, i+1, kafkasink.Batch{Events: events})
		}
		write(t, s, events)
	}

	batches, _, _, _ := h.snapshot()
	if len(batches) != 3 {
		t.Fatalf("%d OnBatchWritten calls, want 3", len(batches))
	}
	if b := batches[1]; b.Skipped != 3 || b.Transactions < 3 {
		t.Fatalf("the second Write skipped %d events in %d transactions, want 3 in at least 3: the test no longer covers what it should", b.Skipped, b.Transactions)
	}
	topics := []string{name + ".public.orders", name + ".public.items", name + ".dead-letters"}
	records := sinktest.ReadCommitted(t, brokers, topics...)
	if !slices.ContainsFunc(records, func(r *kgo.Record) bool { return r.Value == nil }) ||
		!slices.ContainsFunc(records, func(r *kgo.Record) bool { return r.Value != nil && len(r.Value) == 0 }) {
		t.Fatal("no null or no empty value read: the test no longer covers what it should")
	}
	after := kafkasink.Position{}
	for i, written := range [][]kafkasink.Event{a, b, c} {
		upTo := written[len(written)-1].Position
		want := receiptsFromTopics(t, records, after, upTo)
		got := batches[i].Receipts
		if !slices.Equal(got, want) {
			t.Errorf("Write %d: receipts\n%+v\nwant, recomputed from the topics:\n%+v", i+1, got, want)
		}
		if len(want) != len(topics) {
			t.Errorf("Write %d wrote to %d topics, want %d: the test no longer covers what it should", i+1, len(want), len(topics))
		}
		n := 0
		for _, r := range got {
			n += r.Records
		}
		if n != batches[i].Records {
			t.Errorf("Write %d: the receipts count %d records, BatchInfo.Records %d", i+1, n, batches[i].Records)
		}
		after = upTo
	}
	return batches
}

// receiptsFromTopics recomputes the receipts of the Write that delivered
// the positions after..upTo from records, as Receipt's documentation
// tells a consumer to: per topic, the records whose kafkasink.id header
// is in the range, sorted by it, their values chained into CRC32C. The
// receipts are in the order of each topic's first record.
func receiptsFromTopics(t *testing.T, records []*kgo.Record, after, upTo kafkasink.Position) []kafkasink.Receipt {
	t.Helper()
	type positioned struct {
		pos kafkasink.Position
		r   *kgo.Record
	}
	var in []positioned
	for _, r := range records {
		p, err := kafkasink.ParsePosition(sinktest.Header(r, kafkasink.HeaderID))
		if err != nil {
			t.Fatalf("record of %s[%d] at offset %d: %v", r.Topic, r.Partition, r.Offset, err)
		}
		if p.Compare(after) > 0 && p.Compare(upTo) <= 0 {
			in = append(in, positioned{p, r})
		}
	}
	slices.SortStableFunc(in, func(a, b positioned) int { return a.pos.Compare(b.pos) })
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	var out []kafkasink.Receipt
	for _, x := range in {
		i := slices.IndexFunc(out, func(rc kafkasink.Receipt) bool { return rc.Topic == x.r.Topic })
		if i < 0 {
			out = append(out, kafkasink.Receipt{Topic: x.r.Topic, First: x.pos})
			i = len(out) - 1
		}
		rc := &out[i]
		rc.Records++
		rc.Bytes += len(x.r.Value)
		rc.CRC32C = crc32.Update(rc.CRC32C, castagnoli, x.r.Value)
		rc.Last = x.pos
	}
	return out
}

// receiptEvents returns n events at commit LSN lsn, alternating between
// tables orders and items: of every five, one has an empty value, one is
// rejected (dead-lettered) and one is a delete, a tombstone (see
// receiptEncoder).
func receiptEvents(lsn kafkasink.LSN, n int) []kafkasink.Event {
	events := sinktest.Inserts("public", "orders", lsn, int(lsn), n)
	for i := range events {
		e := &events[i]
		if i%2 == 1 {
			e.Table = "items"
		}
		switch i % 5 {
		case 1:
			e.After[1].Value = "empty"
		case 3:
			e.After[1].Value = "bad"
		case 4:
			e.Op, e.Before, e.After = kafkasink.OpDelete, e.After[:1], nil
		}
	}
	return events
}

// receiptEncoder writes JSONEncoder's value, an empty value for a row
// whose name is "empty", a tombstone for a delete, and refuses a row
// whose name is "bad", which rejects the event.
type receiptEncoder struct{}

func (receiptEncoder) Encode(dst []byte, e *kafkasink.Event) ([]byte, error) {
	name, _ := e.Image().Get("name")
	switch {
	case e.Op == kafkasink.OpDelete:
		return nil, nil
	case name.Value == "empty":
		return dst, nil
	case name.Value == "bad":
		return nil, &kafkasink.EncodeError{Schema: e.Schema, Table: e.Table, Column: "name", Err: errors.New("the test refuses it")}
	}
	return kafkasink.JSONEncoder{}.Encode(dst, e)
}

// TestReceiptsOffByDefault: without Config.Receipts, BatchInfo carries
// none and nothing is logged.
func TestReceiptsOffByDefault(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	var logs sinktest.SyncBuffer
	h := &hookLog{}
	s := newSink(t, brokers, "receipts-off", func(c *kafkasink.Config) {
		c.Hooks = []kafkasink.Hook{h}
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	write(t, s, sinktest.Inserts("public", "orders", 100, 1, 3))
	batches, _, _, _ := h.snapshot()
	if len(batches) != 1 || batches[0].Receipts != nil {
		t.Fatalf("BatchInfos %+v, want one without Receipts", batches)
	}
	if strings.Contains(logs.String(), "write receipt") {
		t.Errorf("a write receipt was logged:\n%s", logs.String())
	}
}

// TestReceiptsDebeziumRecords: the records an Encoder asks for around an
// event are in the receipts too. With DebeziumEncoder, a delete's
// tombstone is in its table topic's receipt, which a consumer recomputes
// by the kafkasink.id header as for any event; the BEGIN and END records
// carry no such header and are in the transaction topic's receipt, which
// a consumer recomputes in offset order on a topic of one partition.
func TestReceiptsDebeziumRecords(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	const txnTopic = "dbz.transaction"
	createTopic(t, brokers, txnTopic, 1, nil)
	h := &hookLog{}
	s := newSink(t, brokers, "receipts-dbz", func(c *kafkasink.Config) {
		c.Encoder = debezium.Encoder{Name: "dbz", ProvideTransactionMetadata: true}
		c.Topics.Partitions = 3
		c.Receipts = true
		c.Hooks = []kafkasink.Hook{h}
	})
	events := txnEvents()
	write(t, s, events)

	batches, _, _, _ := h.snapshot()
	if len(batches) != 1 {
		t.Fatalf("%d OnBatchWritten calls, want 1", len(batches))
	}
	want := receiptsFromTopics(t, sinktest.ReadCommitted(t, brokers, "kafkasink.public.t"), kafkasink.Position{}, events[len(events)-1].Position)
	if len(want) != 1 || want[0].Records != len(events)+1 {
		t.Fatalf("recomputed %+v, want one receipt of %d records, the tombstone included: the test no longer covers what it should", want, len(events)+1)
	}
	frames := kafkasink.Receipt{Topic: txnTopic, First: events[0].Position, Last: events[len(events)-1].Position}
	for _, r := range sinktest.ReadCommitted(t, brokers, txnTopic) {
		frames.Records++
		frames.Bytes += len(r.Value)
		frames.CRC32C = crc32.Update(frames.CRC32C, crc32.MakeTable(crc32.Castagnoli), r.Value)
	}
	if frames.Records != 2 {
		t.Fatalf("%d records in %s, want BEGIN and END", frames.Records, txnTopic)
	}
	// The transaction topic's receipt comes first: its BEGIN record is
	// the Write's first.
	want = []kafkasink.Receipt{frames, want[0]}
	if got := batches[0].Receipts; !slices.Equal(got, want) {
		t.Errorf("receipts\n%+v\nwant, recomputed from the topics:\n%+v", got, want)
	}
}

// TestReceiptsIdempotentDuplicates: in Idempotent mode the records a
// failed Write did deliver stay in the topic, and its redelivery writes
// them again; the redelivery's receipt counts its own records only, so
// recomputing it from the topic counts the duplicates too, and differs.
func TestReceiptsIdempotentDuplicates(t *testing.T) {
	t.Parallel()
	c, brokers := sinktest.Cluster(t)
	const topic = "kafkasink.public.orders"
	h := &hookLog{}
	s := newSink(t, brokers, "receipts-dup", func(cfg *kafkasink.Config) {
		cfg.Mode = kafkasink.Idempotent
		cfg.Topics.Partitions = 3
		cfg.Receipts = true
		cfg.Hooks = []kafkasink.Hook{h}
	})
	events := sinktest.Inserts("public", "orders", 100, 1, 12)
	failing := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Partitions: []int32{1}, Err: kerr.UnknownServerError, Count: -1})
	err := tryWrite(t, s, kafkasink.Batch{Events: events})
	failing.Remove()
	if !errors.Is(err, kerr.UnknownServerError) || !kafkasink.IsRetryable(err) {
		t.Fatalf("Write with a failing partition: %v, want a retryable UNKNOWN_SERVER_ERROR", err)
	}
	left := len(sinktest.ReadCommitted(t, brokers, topic))
	if left == 0 {
		t.Fatal("the failed Write left no record: the test no longer covers what it should")
	}
	write(t, s, events)

	batches, _, _, _ := h.snapshot()
	got := batches[len(batches)-1].Receipts
	recomputed := receiptsFromTopics(t, sinktest.ReadCommitted(t, brokers, topic), kafkasink.Position{}, events[len(events)-1].Position)
	if len(got) != 1 || got[0].Records != len(events) || len(recomputed) != 1 || recomputed[0].Records != len(events)+left {
		t.Fatalf("receipt %+v, recomputed %+v: want %d records in the receipt and %d recomputed", got, recomputed, len(events), len(events)+left)
	}
	if got[0].CRC32C == recomputed[0].CRC32C {
		t.Errorf("the receipt and its recomputation over the duplicates have the same CRC32C %08x", got[0].CRC32C)
	}
}
