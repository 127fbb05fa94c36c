package kafkasink_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/debezium"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// skipRecorder is a HookEventsSkipped that keeps what it is told.
type skipRecorder struct {
	mu    sync.Mutex
	infos []kafkasink.SkipInfo
}

func (r *skipRecorder) OnEventsSkipped(i kafkasink.SkipInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.infos = append(r.infos, i)
}

// dbzEvent is an event of table public.t keyed by id.
func dbzEvent(op kafkasink.Op, lsn kafkasink.LSN, index uint64, id int64) kafkasink.Event {
	e := kafkasink.Event{Op: op, Schema: "public", Table: "t", Key: []string{"id"},
		Position: kafkasink.Position{LSN: lsn, Index: index}, LSN: lsn, XID: 7, Commit: time.Unix(1, 0)}
	row := kafkasink.Row{{Name: "id", Value: id}}
	switch op {
	case kafkasink.OpDelete:
		e.Before = row
	case kafkasink.OpInsert:
		e.After = row
	}
	return e
}

func header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// TestDebeziumRecords writes, with Encoder's defaults, an insert,
// a delete, a TRUNCATE and a key change, one event per transaction
// (MaxTransactionRecords 1), and reads the topic back read_committed: each
// delete is followed by its tombstone (same key and headers, null value),
// the TRUNCATE is left out but reported to the hook and covered by the
// checkpoint, the key change carries __debezium.newkey/oldkey, and every
// keyChangeRecords are the records, in order, of an insert of id 1, its
// delete, and a key change from id 2 to 3 (a delete and an insert): each
// delete followed by its tombstone, the key change's records carrying the
// other key in Debezium's headers. Keys are the payloads; op "" is a
// tombstone.
var keyChangeRecords = []struct {
	key, op        string
	newKey, oldKey string
}{
	{key: `{"id":1}`, op: "c"},
	{key: `{"id":1}`, op: "d"},
	{key: `{"id":1}`},
	{key: `{"id":2}`, op: "d", newKey: `{"id":3}`},
	{key: `{"id":2}`, newKey: `{"id":3}`},
	{key: `{"id":3}`, op: "c", oldKey: `{"id":2}`},
}

// record the extended headers.
func TestDebeziumRecords(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	skips := &skipRecorder{}
	s := newSink(t, brokers, "dbzrecords", func(c *kafkasink.Config) {
		c.Encoder = debezium.Encoder{Name: "dbz", RunID: "run-1"}
		c.KeyFormat = kafkasink.KeyJSON
		c.MaxTransactionRecords = 1
		c.Topics.Partitions = 1 // one order to read back
		c.Hooks = []kafkasink.Hook{skips}
	})
	del2 := dbzEvent(kafkasink.OpDelete, 400, 0, 2)
	del2.Source.KeyChange = kafkasink.Row{{Name: "id", Value: int64(3)}}
	ins3 := dbzEvent(kafkasink.OpInsert, 400, 1, 3)
	ins3.Source.KeyChange = kafkasink.Row{{Name: "id", Value: int64(2)}}
	events := []kafkasink.Event{
		dbzEvent(kafkasink.OpInsert, 100, 0, 1),
		dbzEvent(kafkasink.OpDelete, 200, 0, 1),
		dbzEvent(kafkasink.OpTruncate, 300, 0, 0),
		del2, ins3,
	}
	write(t, s, events)
	if got := s.Checkpoint().Position; got != ins3.Position {
		t.Errorf("checkpoint %s, want %s", got, ins3.Position)
	}
	// A batch the encoder leaves out entirely still moves the checkpoint.
	write(t, s, []kafkasink.Event{dbzEvent(kafkasink.OpTruncate, 500, 0, 0)})
	if got, want := s.Checkpoint().Position, (kafkasink.Position{LSN: 500}); got != want {
		t.Errorf("checkpoint after a skipped-only batch %s, want %s", got, want)
	}
	skips.mu.Lock()
	if len(skips.infos) != 2 || !skips.infos[0].ByEncoder || skips.infos[0].Events != 1 || skips.infos[0].First != events[2].Position || skips.infos[1].First.LSN != 500 {
		t.Errorf("skip hook calls %+v, want one per Write for the TRUNCATEs at 300 and 500, ByEncoder", skips.infos)
	}
	skips.mu.Unlock()

	recs := sinktest.ReadCommitted(t, brokers, "kafkasink.public.t")
	wants := keyChangeRecords
	if len(recs) != len(wants) {
		t.Fatalf("read %d records, want %d", len(recs), len(wants))
	}
	for i, w := range wants {
		r := recs[i]
		if string(r.Key) != w.key {
			t.Errorf("record %d: key %s, want %s", i, r.Key, w.key)
		}
		if w.op == "" && r.Value != nil {
			t.Errorf("record %d: value %s, want a tombstone", i, r.Value)
		}
		if w.op != "" && !strings.Contains(string(r.Value), `"op":"`+w.op+`"`) {
			t.Errorf("record %d: value %s, want op %s", i, r.Value, w.op)
		}
		for key, value := range map[string]string{debezium.HeaderNewKey: w.newKey, debezium.HeaderOldKey: w.oldKey} {
			if got, _ := header(r, key); got != value {
				t.Errorf("record %d: header %s = %q, want %q", i, key, got, value)
			}
		}
		for key, value := range map[string]string{
			"__debezium.context.connectorLogicalName": "dbz", "__debezium.context.taskId": "0",
			"__debezium.context.connectorName": "postgresql", "__debezium.context.runId": "run-1",
		} {
			if got, ok := header(r, key); !ok || got != value {
				t.Errorf("record %d: header %s = %q, want %q", i, key, got, value)
			}
		}
		if _, ok := header(r, kafkasink.HeaderID); !ok {
			t.Errorf("record %d has no %s header", i, kafkasink.HeaderID)
		}
	}
}

// TestDebeziumTombstoneInItsDeleteTransaction holds the commit of a
// Write of one delete: before it, a read_committed reader sees neither
// the delete nor its tombstone while both are in the log, so they are in
// one transaction, which a crash aborts or commits as a whole.
func TestDebeziumTombstoneInItsDeleteTransaction(t *testing.T) {
	t.Parallel()
	c, brokers := sinktest.Cluster(t)
	s := newSink(t, brokers, "dbztomb", func(c *kafkasink.Config) {
		c.Encoder = debezium.Encoder{}
		c.MaxTransactionRecords = 1
	})
	const topic = "kafkasink.public.t"
	write(t, s, []kafkasink.Event{dbzEvent(kafkasink.OpInsert, 100, 0, 1)})
	release := make(chan struct{})
	errc := writeHeldAt(t, c, s, kmsg.EndTxn, []kafkasink.Event{dbzEvent(kafkasink.OpDelete, 200, 0, 1)}, release)
	if got := len(sinktest.ReadCommitted(t, brokers, topic)); got != 1 {
		t.Errorf("before the commit: %d records read_committed, want 1 (the insert)", got)
	}
	if got := len(sinktest.ReadUncommitted(t, brokers, topic)); got != 3 {
		t.Errorf("before the commit: %d records in the log, want 3 (the insert, the delete and its tombstone)", got)
	}
	close(release)
	if err := <-errc; err != nil {
		t.Fatalf("Write: %v", err)
	}
	recs := sinktest.ReadCommitted(t, brokers, topic)
	if len(recs) != 3 || recs[2].Value != nil || string(recs[2].Key) != string(recs[1].Key) {
		t.Fatalf("after the commit: %d records, want the insert, the delete and its tombstone", len(recs))
	}
}

// TestDebeziumOptionsValidated: an invalid skipped.operations is refused
// by New, naming the field, the value and what is allowed.
func TestDebeziumOptionsValidated(t *testing.T) {
	t.Parallel()
	_, err := kafkasink.New(context.Background(), kafkasink.Config{Brokers: []string{"localhost:1"}, SinkID: "x",
		Encoder: debezium.Encoder{SkippedOperations: "c,x"}})
	if err == nil || !strings.Contains(err.Error(), `DebeziumEncoder.SkippedOperations (skipped.operations) "c,x"`) || !strings.Contains(err.Error(), `"none"`) {
		t.Fatalf("New: %v, want the invalid SkippedOperations named", err)
	}
	for _, ok := range []string{"", "none", "t", "c,u,d,t", " u , d "} {
		_, err := kafkasink.New(context.Background(), kafkasink.Config{Brokers: []string{"localhost:1"}, SinkID: "x",
			Encoder: debezium.Encoder{SkippedOperations: ok}})
		if err != nil && strings.Contains(err.Error(), "SkippedOperations") {
			t.Errorf("SkippedOperations %q refused: %v", ok, err)
		}
	}
}

// TestDebeziumTombstoneOfRejectedDelete: a delete too large for its topic
// is dead-lettered as one record, without a tombstone (which would drop
// the key's last record in a compacted topic although the delete was not
// delivered); the deletes around it keep theirs, and the size check
// counts the Debezium headers.
func TestDebeziumTombstoneOfRejectedDelete(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	const (
		topic = "kafkasink.public.t"
		dlq   = "kafkasink.dead-letters"
	)
	createTopic(t, brokers, topic, 1, map[string]string{"max.message.bytes": "2048"})
	s := newSink(t, brokers, "dbzreject", func(c *kafkasink.Config) {
		c.Encoder = debezium.Encoder{}
		c.DeadLetterTopic = dlq
	})
	big := dbzEvent(kafkasink.OpDelete, 200, 0, 2)
	big.Before = append(big.Before, kafkasink.Column{Name: "note", Value: strings.Repeat("x", 3000)})
	write(t, s, []kafkasink.Event{dbzEvent(kafkasink.OpDelete, 100, 0, 1), big, dbzEvent(kafkasink.OpDelete, 300, 0, 3)})
	if got := s.Checkpoint().Position.LSN; got != 300 {
		t.Errorf("checkpoint at %s, want 0/12C", got)
	}
	recs := sinktest.ReadCommitted(t, brokers, topic)
	var got []string
	for _, r := range recs {
		kind := "delete"
		if r.Value == nil {
			kind = "tombstone"
		}
		got = append(got, sinktest.Header(r, kafkasink.HeaderID)+" "+kind)
	}
	want := []string{"0/64:0 delete", "0/64:0 tombstone", "0/12C:0 delete", "0/12C:0 tombstone"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("records %v, want %v", got, want)
	}
	if dead := sinktest.ReadCommitted(t, brokers, dlq); len(dead) != 1 || sinktest.Header(dead[0], kafkasink.HeaderID) != big.ID() {
		t.Errorf("%d dead letters, want 1 for %s", len(dead), big.ID())
	}
}
