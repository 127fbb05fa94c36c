package kafkasink_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/debezium"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// schemaKeyOfT is the key SchemasEnable writes for dbzEvent's table, the
// payload left open.
const schemaKeyOfT = `{"schema":{"type":"struct","fields":[{"type":"int64","optional":false,"field":"id"}],"optional":false,"name":"dbz.public.t.Key"},"payload":`

// TestDebeziumSchemaRecords writes, with SchemasEnable, an insert, a
// delete and a key change, and reads the topic back read_committed: every
// key is the Key document ({"schema","payload"}), every value the
// Envelope document, a delete's tombstone keeps the key document with a
// null value (as JsonConverter writes a null value with schemas.enable),
// and the __debezium.newkey/oldkey headers stay schemaless, as Debezium
// writes them.
func TestDebeziumSchemaRecords(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	s := newSink(t, brokers, "dbzschemas", func(c *kafkasink.Config) {
		c.Encoder = debezium.Encoder{Name: "dbz", SchemasEnable: true}
		c.KeyFormat = kafkasink.KeyJSON
		c.Topics.Partitions = 1 // one order to read back
	})
	rel := &kafkasink.Relation{Columns: []kafkasink.ColumnInfo{{Name: "id", Type: &kafkasink.TypeInfo{Name: "int8", Modifier: -1, Kind: 'b'}, NotNull: true}}}
	event := func(op kafkasink.Op, lsn kafkasink.LSN, index uint64, id int64) kafkasink.Event {
		e := dbzEvent(op, lsn, index, id)
		e.Relation = rel
		return e
	}
	del2 := event(kafkasink.OpDelete, 400, 0, 2)
	del2.Source.KeyChange = kafkasink.Row{{Name: "id", Value: int64(3)}}
	ins3 := event(kafkasink.OpInsert, 400, 1, 3)
	ins3.Source.KeyChange = kafkasink.Row{{Name: "id", Value: int64(2)}}
	write(t, s, []kafkasink.Event{event(kafkasink.OpInsert, 100, 0, 1), event(kafkasink.OpDelete, 200, 0, 1), del2, ins3})

	recs := sinktest.ReadCommitted(t, brokers, "kafkasink.public.t")
	wants := keyChangeRecords
	if len(recs) != len(wants) {
		t.Fatalf("read %d records, want %d", len(recs), len(wants))
	}
	for i, w := range wants {
		r := recs[i]
		if want := schemaKeyOfT + w.key + "}"; string(r.Key) != want {
			t.Errorf("record %d: key %s, want %s", i, r.Key, want)
		}
		switch {
		case w.op == "" && r.Value != nil:
			t.Errorf("record %d: value %s, want a tombstone", i, r.Value)
		case w.op != "" && (!strings.HasPrefix(string(r.Value), `{"schema":{"type":"struct","fields":[{"type":"struct","fields":[{"type":"int64","optional":false,"field":"id"}],"optional":true,"name":"dbz.public.t.Value","field":"before"}`) ||
			!strings.Contains(string(r.Value), `"name":"dbz.public.t.Envelope","version":2},"payload":{"before":`) ||
			!strings.HasSuffix(string(r.Value), "}}") || !strings.Contains(string(r.Value), `"op":"`+w.op+`"`)):
			t.Errorf("record %d: value %s, want the Envelope document of op %s", i, r.Value, w.op)
		}
		for key, value := range map[string]string{debezium.HeaderNewKey: w.newKey, debezium.HeaderOldKey: w.oldKey} {
			if got, _ := header(r, key); got != value {
				t.Errorf("record %d: header %s = %q, want %q", i, key, got, value)
			}
		}
	}
}

// TestDebeziumSchemaRefusals: New refuses SchemasEnable with a text key,
// naming both settings and the fix; an event without a Relation is
// rejected (no schema can be declared for it), naming SchemasEnable.
func TestDebeziumSchemaRefusals(t *testing.T) {
	t.Parallel()
	_, err := kafkasink.New(context.Background(), kafkasink.Config{Brokers: []string{"localhost:1"}, SinkID: "x",
		Encoder: debezium.Encoder{SchemasEnable: true}})
	if err == nil || !strings.Contains(err.Error(), "KeyFormat is text") || !strings.Contains(err.Error(), "debezium.Encoder.SchemasEnable") || !strings.Contains(err.Error(), "-key-format json") {
		t.Errorf("New with KeyText: %v, want KeyFormat and SchemasEnable named with the fix", err)
	}

	_, brokers := sinktest.Cluster(t)
	s := newSink(t, brokers, "dbzschemanorel", func(c *kafkasink.Config) {
		c.Encoder = debezium.Encoder{SchemasEnable: true}
		c.KeyFormat = kafkasink.KeyJSON
	})
	err = s.Write(context.Background(), kafkasink.Batch{Events: []kafkasink.Event{dbzEvent(kafkasink.OpInsert, 100, 0, 1)}})
	var rejected *kafkasink.RejectedError
	if !errors.As(err, &rejected) || len(rejected.Rejections) != 1 || !strings.Contains(err.Error(), "SchemasEnable") || !strings.Contains(err.Error(), "Event.Relation") {
		t.Errorf("Write without a Relation: %v, want the event rejected naming SchemasEnable and Event.Relation", err)
	}
}

// TestDebeziumSchemaKeyChangeHeaders: with SchemasEnable, the
// __debezium.newkey/oldkey headers of a key change are the other record's
// key payload, in Debezium's value forms as the keys are (a date as days
// since the epoch), without the schema, as Debezium writes them.
func TestDebeziumSchemaKeyChangeHeaders(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	s := newSink(t, brokers, "dbzschemakeychange", func(c *kafkasink.Config) {
		c.Encoder = debezium.Encoder{Name: "dbz", SchemasEnable: true, DisableTombstones: true}
		c.KeyFormat = kafkasink.KeyJSON
		c.Topics.Partitions = 1
	})
	rel := &kafkasink.Relation{Columns: []kafkasink.ColumnInfo{{Name: "d", Type: &kafkasink.TypeInfo{Name: "date", Modifier: -1, Kind: 'b'}, NotNull: true}}}
	event := func(op kafkasink.Op, index uint64, row, other string) kafkasink.Event {
		e := kafkasink.Event{Op: op, Schema: "public", Table: "t", Key: []string{"d"}, Relation: rel,
			Position: kafkasink.Position{LSN: 100, Index: index}, LSN: 100, Source: kafkasink.Source{KeyChange: kafkasink.Row{{Name: "d", Value: other}}}}
		if op == kafkasink.OpDelete {
			e.Before = kafkasink.Row{{Name: "d", Value: row}}
		} else {
			e.After = kafkasink.Row{{Name: "d", Value: row}}
		}
		return e
	}
	write(t, s, []kafkasink.Event{event(kafkasink.OpDelete, 0, "2024-02-29", "2024-03-01"), event(kafkasink.OpInsert, 1, "2024-03-01", "2024-02-29")})
	recs := sinktest.ReadCommitted(t, brokers, "kafkasink.public.t")
	const keyOpen = `{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"name":"io.debezium.time.Date","version":1,"field":"d"}],"optional":false,"name":"dbz.public.t.Key"},"payload":`
	wants := []struct{ key, header, value string }{
		{keyOpen + `{"d":19782}}`, debezium.HeaderNewKey, `{"d":19783}`},
		{keyOpen + `{"d":19783}}`, debezium.HeaderOldKey, `{"d":19782}`},
	}
	if len(recs) != len(wants) {
		t.Fatalf("read %d records, want %d", len(recs), len(wants))
	}
	for i, w := range wants {
		if string(recs[i].Key) != w.key {
			t.Errorf("record %d: key %s, want %s", i, recs[i].Key, w.key)
		}
		if got, _ := header(recs[i], w.header); got != w.value {
			t.Errorf("record %d: header %s = %q, want %q", i, w.header, got, w.value)
		}
	}
}
