package kafkasinkavro_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinkavro"
	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// reportTB is a testing.TB whose Errorf is noted, not reported: to see an
// assertion fail.
type reportTB struct {
	testing.TB
	errors []string
}

func (r *reportTB) Helper() {}
func (r *reportTB) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// TestAssertExactlyOnceOnAvro streams inserts, an update, a delete and a
// truncate through pgcdc into a real Avro topic and reads it back with the
// test kit through the Decoder (see assertExactlyOnceOn). A delete's
// column outside the replica identity is null in Avro.
func TestAssertExactlyOnceOnAvro(t *testing.T) {
	e := newAvroEnv(t)
	assertExactlyOnceOn(t, e, kafkasinkavro.NewDecoder(e.registry).Transcode, "map[id:3 note:<nil>]")
}

// assertExactlyOnceOn streams inserts, an update, a delete and a truncate
// through e's pipeline into a real topic and reads it back with the test
// kit through transcode: kafkasinktest.AssertExactlyOnce finds every
// event the sink delivered exactly once, with its op, and each record's
// row and key in JSON, the delete's row as deleted says. A copy of one
// record produced again into the topic (the same key, value and headers,
// as a producer retry without idempotence would) then makes
// AssertExactlyOnce fail, naming the duplicated position.
func assertExactlyOnceOn(t *testing.T, e *avroEnv, transcode kafkasinktest.Transcode, deleted string) {
	table := e.table("once", "id int PRIMARY KEY, note text")
	_, done, _ := e.run(table)
	e.exec("INSERT INTO " + table + " VALUES (1, 'one'), (2, 'two'), (3, 'three')")
	e.exec("UPDATE " + table + " SET note = 'TWO' WHERE id = 2")
	e.exec("DELETE FROM " + table + " WHERE id = 3")
	e.exec("TRUNCATE " + table)
	topic := e.name + ".public." + table
	raw := e.readRecords(topic, 6, done)

	got := kafkasinktest.ReadCommittedWith(t, e.brokers, transcode, topic)
	want := e.sink.delivered()
	if len(want) != 6 {
		t.Fatalf("the sink delivered %d events, want 6", len(want))
	}
	if !kafkasinktest.AssertExactlyOnce(t, got, want) {
		t.FailNow()
	}
	var rows []string
	for _, r := range got {
		rows = append(rows, fmt.Sprintf("%s %s %v", r.Op, r.Key, r.Value))
	}
	wantRows := []string{
		`insert {"id":1} map[id:1 note:one]`, `insert {"id":2} map[id:2 note:two]`, `insert {"id":3} map[id:3 note:three]`,
		`update {"id":2} map[id:2 note:TWO]`, `delete {"id":3} ` + deleted,
		"truncate " + kafkasinktest.Header(raw[5], kafkasink.HeaderID) + " map[]", // keyed by its id, as without this encoder
	}
	if strings.Join(rows, "\n") != strings.Join(wantRows, "\n") {
		t.Errorf("records (op, key, row):\n%s\nwant\n%s", strings.Join(rows, "\n"), strings.Join(wantRows, "\n"))
	}

	// A duplicate of the update, written outside any transaction.
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	dup := raw[3]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: dup.Partition, Key: dup.Key, Value: dup.Value, Headers: dup.Headers}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	report := &reportTB{TB: t}
	if kafkasinktest.AssertExactlyOnce(report, kafkasinktest.ReadCommittedWith(t, e.brokers, transcode, topic), want) {
		t.Fatal("AssertExactlyOnce passed with a record in the topic twice")
	}
	updatePos := got[3].Position.String()
	if msg := strings.Join(report.errors, "\n"); !strings.Contains(msg, "1 duplicated") || !strings.Contains(msg, updatePos+": 2 records") {
		t.Errorf("AssertExactlyOnce reported %q; want the update %s named as duplicated", msg, updatePos)
	}
}
