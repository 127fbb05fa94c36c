package kafkasink_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/debezium"
	"github.com/kafkasink/kafkasink/internal/sinktest"
	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// goldenLine is one record of a Debezium golden file, key and value kept
// as the bytes Debezium wrote.
type goldenLine struct {
	Topic string          `json:"topic"`
	Key   json.RawMessage `json:"key"`
	Value json.RawMessage `json:"value"`
}

func readGoldenLines(t *testing.T, file string) []goldenLine {
	t.Helper()
	data, err := os.ReadFile("testdata/debezium/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var out []goldenLine
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var g goldenLine
		if err := json.Unmarshal(line, &g); err != nil {
			t.Fatal(err)
		}
		out = append(out, g)
	}
	return out
}

// payload returns the payload of a schema-carrying document, or the
// document.
func payload(t *testing.T, raw json.RawMessage) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	if p, ok := m["payload"]; ok && len(m) == 2 {
		return payload(t, p)
	}
	return m
}

// txnIDParts splits Debezium's "<txId>:<LSN>" (a JSON string).
func txnIDParts(t *testing.T, raw json.RawMessage) (uint32, kafkasink.LSN) {
	t.Helper()
	var id string
	if err := json.Unmarshal(raw, &id); err != nil {
		t.Fatal(err)
	}
	x, l, _ := strings.Cut(id, ":")
	xid, err1 := strconv.ParseUint(x, 10, 32)
	lsn, err2 := strconv.ParseUint(l, 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("transaction id %q is not <txId>:<LSN>", id)
	}
	return uint32(xid), kafkasink.LSN(lsn)
}

func jsonInt(t *testing.T, raw json.RawMessage) int {
	t.Helper()
	n, err := strconv.Atoi(string(raw))
	if err != nil {
		t.Fatalf("%s is not an integer", raw)
	}
	return n
}

// TestDebeziumTransactionFrames builds, for every BEGIN and END Debezium
// wrote in configuration txmeta (both schemas.enable settings), the event
// it stands before or after, from the golden values (txId, LSN, commit
// time, the counts), and demands AppendFrame's key and value be
// Debezium's bytes.
func TestDebeziumTransactionFrames(t *testing.T) {
	t.Parallel()
	for _, schemas := range []bool{false, true} {
		enc := debezium.Encoder{Name: "dbz", ProvideTransactionMetadata: true, SchemasEnable: schemas}
		if got := enc.FrameTopic(); got != "dbz.transaction" {
			t.Errorf("FrameTopic = %q, want Debezium's default dbz.transaction", got)
		}
		frames := 0
		for i, g := range readGoldenLines(t, fmt.Sprintf("txmeta-schemas-%t.jsonl", schemas)) {
			if g.Topic != "dbz.transaction" {
				continue
			}
			frames++
			v := payload(t, g.Value)
			xid, lsn := txnIDParts(t, v["id"])
			e := kafkasink.Event{Op: kafkasink.OpInsert, Schema: "dbzconf", Table: "t", XID: xid,
				Commit: time.UnixMilli(int64(jsonInt(t, v["ts_ms"]))).Add(123 * time.Microsecond)}
			end := string(v["status"]) == `"END"`
			if end {
				var dcs []struct {
					DataCollection string `json:"data_collection"`
					EventCount     int    `json:"event_count"`
				}
				if err := json.Unmarshal(v["data_collections"], &dcs); err != nil {
					t.Fatal(err)
				}
				sum := &kafkasink.TxnSummary{CommitEnd: lsn, Events: jsonInt(t, v["event_count"]), Tables: []kafkasink.TableEvents{}}
				for _, dc := range dcs {
					schema, table, _ := strings.Cut(dc.DataCollection, ".")
					sum.Tables = append(sum.Tables, kafkasink.TableEvents{Schema: schema, Table: table, Events: dc.EventCount})
				}
				e.Txn.End = sum
				e.LSN = lsn - 8 // END's id names the commit's end, not the event's LSN
			} else {
				e.Txn.First = true
				e.LSN = lsn
			}
			if shape := enc.Shape(&e); shape.RecordBefore == end || shape.RecordAfter != end {
				t.Errorf("line %d: Shape = %+v, want a record %s the event", i+1, shape, map[bool]string{false: "before", true: "after"}[end])
			}
			out, keyLen := enc.AppendFrame([]byte("prefix"), &e, end)
			key, value := out[6:6+keyLen], out[6+keyLen:]
			if !bytes.Equal(key, g.Key) {
				t.Errorf("schemas=%t line %d: key\n got %s\nwant %s", schemas, i+1, key, g.Key)
			}
			if !bytes.Equal(value, g.Value) {
				t.Errorf("schemas=%t line %d: value\n got %s\nwant %s", schemas, i+1, value, g.Value)
			}
		}
		if frames != 60 {
			t.Errorf("schemas=%t: %d BEGIN and END records in the golden file, want 60", schemas, frames)
		}
	}
}

// TestDebeziumTransactionBlock encodes, for every change Debezium wrote
// in configuration txmeta, an event placed as Debezium's transaction
// block says (its LSN, total_order, data_collection_order) and demands
// the block be Debezium's bytes; a snapshot row's block is null, as is
// every block without ProvideTransactionMetadata.
func TestDebeziumTransactionBlock(t *testing.T) {
	t.Parallel()
	enc := debezium.Encoder{Name: "dbz", ProvideTransactionMetadata: true}
	ops := map[string]kafkasink.Op{`"c"`: kafkasink.OpInsert, `"u"`: kafkasink.OpUpdate, `"d"`: kafkasink.OpDelete, `"r"`: kafkasink.OpRead}
	blocks, nulls := 0, 0
	for i, g := range readGoldenLines(t, "txmeta-schemas-false.jsonl") {
		if g.Topic == "dbz.transaction" || string(g.Value) == "null" {
			continue
		}
		v := payload(t, g.Value)
		e := kafkasink.Event{Op: ops[string(v["op"])], Schema: "dbzconf", Table: "t", Position: kafkasink.Position{LSN: 1}}
		e.After = kafkasink.Row{{Name: "id", Value: 1}}
		if e.Op == kafkasink.OpDelete {
			e.Before, e.After = e.After, nil
		}
		if string(v["transaction"]) == "null" {
			nulls++
			if e.Op != kafkasink.OpRead {
				t.Fatalf("line %d: a change without a transaction block", i+1)
			}
			e.Txn = kafkasink.TxnPlace{Order: 3, TableOrder: 2} // ignored on a snapshot row
		} else {
			blocks++
			b := payload(t, v["transaction"])
			e.XID, e.LSN = txnIDParts(t, b["id"])
			e.Txn = kafkasink.TxnPlace{Order: jsonInt(t, b["total_order"]), TableOrder: jsonInt(t, b["data_collection_order"])}
		}
		out, err := enc.Encode(nil, &e)
		if err != nil {
			t.Fatal(err)
		}
		if got := payload(t, out)["transaction"]; !bytes.Equal(got, v["transaction"]) {
			t.Errorf("line %d: transaction %s, want %s", i+1, got, v["transaction"])
		}
		if e.Op != kafkasink.OpRead {
			plain := enc
			plain.ProvideTransactionMetadata = false
			out, _ := plain.Encode(nil, &e)
			if got := payload(t, out)["transaction"]; string(got) != "null" {
				t.Errorf("line %d: without ProvideTransactionMetadata the block is %s, want null", i+1, got)
			}
		}
	}
	if blocks != 41 || nulls != 26 {
		t.Errorf("%d records with a block and %d snapshot rows, want 41 and 26", blocks, nulls)
	}
	// Debezium's transactions above touch one table each, where both
	// orders are the same: here they differ.
	e := dbzEvent(kafkasink.OpInsert, 0x500, 6, 1)
	e.XID, e.LSN = 9, 0x400
	e.Txn = kafkasink.TxnPlace{Order: 7, TableOrder: 3}
	out, err := enc.Encode(nil, &e)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(payload(t, out)["transaction"]), `{"id":"9:1024","total_order":7,"data_collection_order":3}`; got != want {
		t.Errorf("transaction %s, want %s", got, want)
	}
}

// txnEvents are the five events of one source transaction of table
// public.t (XID 9, commit LSN 0x500), placed in it as pgcdc places them:
// inserts of ids 1..4 and a delete of id 1, the last carrying the whole
// transaction.
func txnEvents() []kafkasink.Event {
	var events []kafkasink.Event
	for i := range 5 {
		op, id := kafkasink.OpInsert, int64(i+1)
		if i == 4 {
			op, id = kafkasink.OpDelete, 1
		}
		e := dbzEvent(op, 0x500, uint64(i), id)
		e.XID, e.LSN = 9, kafkasink.LSN(0x400+i*0x10)
		e.Txn = kafkasink.TxnPlace{Order: i + 1, TableOrder: i + 1, First: i == 0}
		events = append(events, e)
	}
	events[4].Txn.End = &kafkasink.TxnSummary{CommitEnd: 0x530, Events: 5, Tables: []kafkasink.TableEvents{{Schema: "public", Table: "t", Events: 5}}}
	return events
}

// The BEGIN and END of txnEvents' transaction.
const (
	txnBegin = `{"status":"BEGIN","id":"9:1024","event_count":null,"data_collections":null,"ts_ms":1000}`
	txnEnd   = `{"status":"END","id":"9:1328","event_count":5,"data_collections":[{"data_collection":"public.t","event_count":5}],"ts_ms":1000}`
)

// TestDebeziumTransactionRecordsOnce writes one source transaction in two
// Writes (three events, split by MaxTransactionRecords into two Kafka
// transactions, then two), the first with a produce to the transaction
// topic refused once (the sink retries within the Write), the second
// refused on the table's topic until the test lifts the fault (Write
// fails retryably; the caller writes the batch again), then writes the
// whole transaction again (a redelivery): read back read_committed, the
// transaction topic holds exactly one BEGIN and one END, keyed by their
// ids, and the table's topic each event once, with its tombstone.
func TestDebeziumTransactionRecordsOnce(t *testing.T) {
	t.Parallel()
	c := kafkasinktest.NewCluster(t, kafkasinktest.Partitions(1))
	brokers := c.Brokers()
	s := newSink(t, brokers, "dbztxn", func(cfg *kafkasink.Config) {
		cfg.Encoder = debezium.Encoder{Name: "dbz", ProvideTransactionMetadata: true, RunID: "run-1"}
		cfg.KeyFormat = kafkasink.KeyJSON
		cfg.MaxTransactionRecords = 2
		cfg.Topics.Partitions = 1
	})
	events := txnEvents()

	refused := c.FailProduce("dbz.transaction", 0, 1)
	write(t, s, events[:3])
	if refused.Hits() == 0 {
		t.Fatal("the produce to dbz.transaction was never refused")
	}
	stuck := c.FailProduce("kafkasink.public.t", 0, -1)
	if err := s.Write(ctxT(t), kafkasink.Batch{Events: events[3:]}); err == nil || !kafkasink.IsRetryable(err) {
		t.Fatalf("Write while the table's partition refuses: %v, want a retryable error", err)
	}
	stuck.Remove()
	write(t, s, events[3:])
	write(t, s, events) // redelivered: the checkpoint covers it

	var frames []string
	for _, r := range sinktest.ReadCommitted(t, brokers, "dbz.transaction") {
		frames = append(frames, string(r.Key)+" "+string(r.Value))
		if len(r.Headers) != 0 {
			t.Errorf("a transaction record has headers %v, want none (Debezium writes none)", r.Headers)
		}
	}
	want := []string{`{"id":"9:1024"} ` + txnBegin, `{"id":"9:1328"} ` + txnEnd}
	if strings.Join(frames, "\n") != strings.Join(want, "\n") {
		t.Errorf("transaction topic:\n%s\nwant:\n%s", strings.Join(frames, "\n"), strings.Join(want, "\n"))
	}
	var got []string
	for _, r := range sinktest.ReadCommitted(t, brokers, "kafkasink.public.t") {
		got = append(got, string(r.Key)+" "+txnBlock(t, r))
	}
	wantEvents := []string{
		`{"id":1} {"id":"9:1024","total_order":1,"data_collection_order":1}`,
		`{"id":2} {"id":"9:1040","total_order":2,"data_collection_order":2}`,
		`{"id":3} {"id":"9:1056","total_order":3,"data_collection_order":3}`,
		`{"id":4} {"id":"9:1072","total_order":4,"data_collection_order":4}`,
		`{"id":1} {"id":"9:1088","total_order":5,"data_collection_order":5}`,
		`{"id":1} tombstone`,
	}
	if strings.Join(got, "\n") != strings.Join(wantEvents, "\n") {
		t.Errorf("table topic:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantEvents, "\n"))
	}
}

// txnBlock is the transaction block of a record's value, "tombstone" for
// a null value.
func txnBlock(t *testing.T, r *kgo.Record) string {
	t.Helper()
	if r.Value == nil {
		return "tombstone"
	}
	return string(payload(t, r.Value)["transaction"])
}

// TestDebeziumTransactionDeadLetter: an event rejected and dead-lettered
// keeps its place in its transaction: the BEGIN before it and the END
// after it are written (and count it), its dead-letter record between
// them. A skipped TRUNCATE that is a transaction's only event gets its
// BEGIN and END, with event_count 0, as Debezium writes them.
func TestDebeziumTransactionDeadLetter(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	s := newSink(t, brokers, "dbztxndl", func(cfg *kafkasink.Config) {
		cfg.Encoder = debezium.Encoder{Name: "dbz", ProvideTransactionMetadata: true}
		cfg.KeyFormat = kafkasink.KeyJSON
		cfg.Topics.Partitions = 1
		cfg.DeadLetterTopic = "dlq"
	})
	bad := dbzEvent(kafkasink.OpInsert, 0x500, 0, 1)
	bad.XID, bad.LSN = 9, 0x400
	bad.After = kafkasink.Row{{Name: "id", Value: struct{}{}}} // unencodable
	bad.Txn = kafkasink.TxnPlace{Order: 1, TableOrder: 1, First: true,
		End: &kafkasink.TxnSummary{CommitEnd: 0x530, Events: 1, Tables: []kafkasink.TableEvents{{Schema: "public", Table: "t", Events: 1}}}}
	trunc := dbzEvent(kafkasink.OpTruncate, 0x600, 0, 0)
	trunc.XID, trunc.LSN = 10, 0x580
	trunc.Txn = kafkasink.TxnPlace{First: true, End: &kafkasink.TxnSummary{CommitEnd: 0x610, Tables: []kafkasink.TableEvents{}}}
	write(t, s, []kafkasink.Event{bad, trunc})

	var frames []string
	for _, r := range sinktest.ReadCommitted(t, brokers, "dbz.transaction") {
		frames = append(frames, string(r.Value))
	}
	want := []string{
		`{"status":"BEGIN","id":"9:1024","event_count":null,"data_collections":null,"ts_ms":1000}`,
		`{"status":"END","id":"9:1328","event_count":1,"data_collections":[{"data_collection":"public.t","event_count":1}],"ts_ms":1000}`,
		`{"status":"BEGIN","id":"10:1408","event_count":null,"data_collections":null,"ts_ms":1000}`,
		`{"status":"END","id":"10:1552","event_count":0,"data_collections":[],"ts_ms":1000}`,
	}
	if strings.Join(frames, "\n") != strings.Join(want, "\n") {
		t.Errorf("transaction topic:\n%s\nwant:\n%s", strings.Join(frames, "\n"), strings.Join(want, "\n"))
	}
	if dl := sinktest.ReadCommitted(t, brokers, "dlq"); len(dl) != 1 || sinktest.Header(dl[0], kafkasink.HeaderID) != bad.ID() {
		t.Errorf("dead-letter topic holds %d records, want the rejected event's", len(dl))
	}
	if recs := sinktest.ReadCommitted(t, brokers, "kafkasink.public.t"); len(recs) != 0 {
		t.Errorf("table topic holds %d records, want none (one event dead-lettered, one skipped)", len(recs))
	}
	if got := s.Checkpoint().Position; got != trunc.Position {
		t.Errorf("checkpoint %s, want %s", got, trunc.Position)
	}
}

// A table routed to the transaction topic is refused, as one routed to
// the checkpoint topic; so is a transaction topic that is the checkpoint
// topic, or not a valid topic name.
func TestDebeziumTransactionTopicClaimed(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	s := newSink(t, brokers, "dbztxnclaim", func(cfg *kafkasink.Config) {
		cfg.Encoder = debezium.Encoder{Name: "dbz", ProvideTransactionMetadata: true, TransactionTopic: "kafkasink.public.t"}
		cfg.KeyFormat = kafkasink.KeyJSON
	})
	err := s.Write(ctxT(t), kafkasink.Batch{Events: txnEvents()[:1]})
	var ce *kafkasink.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "transaction topic") {
		t.Errorf("Write of a table routed to the transaction topic: %v, want a *ConfigError naming the transaction topic", err)
	}
	for _, topic := range []string{"kafkasink.checkpoints", "bad topic"} {
		_, err := startSink(t, brokers, "dbztxnbad", func(cfg *kafkasink.Config) {
			cfg.Encoder = debezium.Encoder{ProvideTransactionMetadata: true, TransactionTopic: topic}
			cfg.KeyFormat = kafkasink.KeyJSON
		})
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "TransactionTopic") {
			t.Errorf("New with TransactionTopic %q: %v, want a *ConfigError naming TransactionTopic", topic, err)
		}
	}
}

// A part holding only the BEGIN and END of a skipped TRUNCATE (no event
// record) whose commit answer is lost, and whose first reading back of
// the checkpoint fails too, is found committed by the recovery of the
// retry and not written again: the transaction topic holds one BEGIN
// and one END. (A part counts as committed by its records, not by its
// events, which it has none of.)
func TestDebeziumTransactionSkippedOnlyCommitLost(t *testing.T) {
	t.Parallel()
	c := kafkasinktest.NewCluster(t, kafkasinktest.Partitions(1))
	brokers := c.Brokers()
	s := newSink(t, brokers, "dbztxnlost", func(cfg *kafkasink.Config) {
		cfg.Encoder = debezium.Encoder{Name: "dbz", ProvideTransactionMetadata: true}
		cfg.KeyFormat = kafkasink.KeyJSON
		cfg.Topics.Partitions = 1
	})
	trunc := dbzEvent(kafkasink.OpTruncate, 0x600, 0, 0)
	trunc.XID, trunc.LSN = 10, 0x580
	trunc.Txn = kafkasink.TxnPlace{First: true, End: &kafkasink.TxnSummary{CommitEnd: 0x610, Tables: []kafkasink.TableEvents{}}}
	lost := c.LoseCommitAnswer()
	// The checkpoint's high watermark cannot be read, once: the
	// recovery after the lost answer fails, the retry's succeeds.
	unread := c.Kfake().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListOffsets}, Err: kerr.UnknownServerError, Count: 1})
	if _, err := writeRetrying(ctxT(t), s, kafkasink.Batch{Events: []kafkasink.Event{trunc}}); err != nil {
		t.Fatal(err)
	}
	if lost.Hits() == 0 || unread.Hits() == 0 {
		t.Fatalf("lost commit answers %d, refused checkpoint reads %d: want both", lost.Hits(), unread.Hits())
	}
	if got := len(sinktest.ReadCommitted(t, brokers, "dbz.transaction")); got != 2 {
		t.Errorf("transaction topic holds %d records, want its BEGIN and END once", got)
	}
}

// END lists the tables of a transaction in Debezium's order, that of a
// Java HashMap. The expected value is what Debezium 3.6.1 wrote for one
// transaction of 7 tables (scripts/debezium-capture.sh txmeta, run with a
// workload-changes.sql of that one transaction: inserts and updates of
// no_pk, ident_full, multi_pk, truncated, toasty, no_pk again,
// ident_default and zz_end, in this order).
func TestDebeziumTransactionEndTableOrder(t *testing.T) {
	t.Parallel()
	enc := debezium.Encoder{Name: "dbz", ProvideTransactionMetadata: true}
	e := kafkasink.Event{XID: 12815, Commit: time.UnixMilli(1796098061035)}
	sum := &kafkasink.TxnSummary{CommitEnd: 43375440, Events: 8}
	for _, table := range []string{"no_pk", "ident_full", "multi_pk", "truncated", "toasty", "ident_default", "zz_end"} {
		events := 1
		if table == "no_pk" {
			events = 2
		}
		sum.Tables = append(sum.Tables, kafkasink.TableEvents{Schema: "dbzconf", Table: table, Events: events})
	}
	e.Txn.End = sum
	out, keyLen := enc.AppendFrame(nil, &e, true)
	want := `{"status":"END","id":"12815:43375440","event_count":8,"data_collections":[{"data_collection":"dbzconf.zz_end","event_count":1},{"data_collection":"dbzconf.truncated","event_count":1},{"data_collection":"dbzconf.no_pk","event_count":2},{"data_collection":"dbzconf.multi_pk","event_count":1},{"data_collection":"dbzconf.toasty","event_count":1},{"data_collection":"dbzconf.ident_full","event_count":1},{"data_collection":"dbzconf.ident_default","event_count":1}],"ts_ms":1796098061035}`
	if got := string(out[keyLen:]); got != want {
		t.Errorf("END\n got %s\nwant %s", got, want)
	}
}

// TestManyTransactionFramesInOneWrite: one Write of 3,000 source
// transactions makes 6,000 BEGIN and END records, more than the frames'
// first block holds, while the records made before are already in the
// client's hands (exactly-once mode sends them as they are made, and the
// client writes into a record when it buffers it). Under -race, growing
// the block by copying it was a data race with those writes; every frame
// arrives once either way.
func TestManyTransactionFramesInOneWrite(t *testing.T) {
	t.Parallel()
	c := kafkasinktest.NewCluster(t, kafkasinktest.Partitions(1))
	brokers := c.Brokers()
	s := newSink(t, brokers, "dbzframes", func(cfg *kafkasink.Config) {
		cfg.Encoder = debezium.Encoder{Name: "dbz", ProvideTransactionMetadata: true}
		cfg.KeyFormat = kafkasink.KeyJSON
		cfg.Topics.Partitions = 1
	})
	const txns = 3000
	var events []kafkasink.Event
	for i := range txns {
		lsn := kafkasink.LSN(0x1000 + i*0x100)
		e := dbzEvent(kafkasink.OpInsert, lsn, 0, int64(i+1))
		e.XID = uint32(100 + i)
		e.Txn = kafkasink.TxnPlace{Order: 1, TableOrder: 1, First: true,
			End: &kafkasink.TxnSummary{CommitEnd: lsn + 0x30, Events: 1, Tables: []kafkasink.TableEvents{{Schema: "public", Table: "t", Events: 1}}}}
		events = append(events, e)
	}
	write(t, s, events)
	frames := sinktest.ReadCommitted(t, brokers, "dbz.transaction")
	if len(frames) != 2*txns {
		t.Fatalf("%d BEGIN and END records, want %d", len(frames), 2*txns)
	}
	for i, r := range frames {
		status := string(payload(t, r.Value)["status"])
		if want := map[bool]string{true: `"BEGIN"`, false: `"END"`}[i%2 == 0]; status != want {
			t.Fatalf("record %d of the transaction topic is %s, want %s", i, status, want)
		}
	}
}
