package kafkasink_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/debezium"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// TestDebeziumRowsNotMatchingRelationDeadLettered writes, with
// Encoder and a dead-letter topic, events whose rows do not match
// their Relation: an insert with a column the Relation does not list and
// an update whose after image lacks one of its columns go to the
// dead-letter topic with their values, naming the column; a delete whose
// before image is the old key alone goes to its topic with the other
// columns null, as Debezium writes it; the consistent insert around them
// too. Read back read_committed, nothing is lost.
func TestDebeziumRowsNotMatchingRelationDeadLettered(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	const (
		topic = "kafkasink.public.t"
		dlq   = "kafkasink.dead-letters"
	)
	s := newSink(t, brokers, "dbzrelation", func(c *kafkasink.Config) {
		c.Encoder = debezium.Encoder{}
		c.KeyFormat = kafkasink.KeyJSON
		c.DeadLetterTopic = dlq
		c.Topics.Partitions = 1
	})
	typ := func(name string) *kafkasink.TypeInfo { return &kafkasink.TypeInfo{Name: name, Modifier: -1, Kind: 'b'} }
	rel := &kafkasink.Relation{Columns: []kafkasink.ColumnInfo{{Name: "id", Type: typ("int8"), NotNull: true}, {Name: "name", Type: typ("text")}}}
	event := func(op kafkasink.Op, lsn kafkasink.LSN, before, after kafkasink.Row) kafkasink.Event {
		e := dbzEvent(op, lsn, 0, 0)
		e.Relation, e.Before, e.After = rel, before, after
		return e
	}
	good := event(kafkasink.OpInsert, 100, nil, kafkasink.Row{{Name: "id", Value: int64(1)}, {Name: "name", Value: "one"}})
	extra := event(kafkasink.OpInsert, 200, nil, kafkasink.Row{{Name: "id", Value: int64(2)}, {Name: "name", Value: "two"}, {Name: "added", Value: "kept"}})
	short := event(kafkasink.OpUpdate, 300, nil, kafkasink.Row{{Name: "id", Value: int64(1)}})
	del := event(kafkasink.OpDelete, 400, kafkasink.Row{{Name: "id", Value: int64(1)}}, nil)
	write(t, s, []kafkasink.Event{good, extra, short, del})

	var got []string
	for _, r := range sinktest.ReadCommitted(t, brokers, topic) {
		var v struct{ Before, After json.RawMessage }
		if r.Value != nil {
			if err := json.Unmarshal(r.Value, &v); err != nil {
				t.Fatal(err)
			}
		}
		got = append(got, sinktest.Header(r, kafkasink.HeaderID)+" "+string(r.Key)+" "+string(v.Before)+" "+string(v.After))
	}
	want := []string{
		`0/64:0 {"id":1} null {"id":1,"name":"one"}`,
		`0/190:0 {"id":1} {"id":1,"name":null} null`,
		`0/190:0 {"id":1}  `, // the tombstone
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s holds\n%s\nwant\n%s", topic, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	dead := sinktest.ReadCommitted(t, brokers, dlq)
	if len(dead) != 2 {
		t.Fatalf("%d dead letters, want 2 (the insert with a column the Relation lacks, the update lacking one)", len(dead))
	}
	for i, c := range []struct {
		e      kafkasink.Event
		column string
		value  string // the event as the dead letter holds it
	}{
		{extra, "added", `"after":{"id":2,"name":"two","added":"kept"}`},
		{short, "name", `"after":{"id":1}`},
	} {
		d := dead[i]
		if id := sinktest.Header(d, kafkasink.HeaderID); id != c.e.ID() {
			t.Errorf("dead letter %d is %s, want %s", i, id, c.e.ID())
			continue
		}
		if reason := sinktest.Header(d, kafkasink.HeaderReason); reason != string(kafkasink.ReasonUnencodable) {
			t.Errorf("dead letter %s: reason %q", c.e.ID(), reason)
		}
		if msg := sinktest.Header(d, kafkasink.HeaderError); !strings.Contains(msg, `column "`+c.column+`"`) || !strings.Contains(msg, "Event.Relation") {
			t.Errorf("dead letter %s: error %q, want column %q and Event.Relation named", c.e.ID(), msg, c.column)
		}
		if !strings.Contains(string(d.Value), c.value) {
			t.Errorf("dead letter %s: value %s, want it to hold %s", c.e.ID(), d.Value, c.value)
		}
	}
}
