package pgcdc

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/debezium"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// TestDebeziumRefusesIntervalOfOtherStyle decodes, with a Decoder of its
// own (not Run, which pins the server's output settings), changes the
// server printed under IntervalStyle iso_8601, as a program's own
// replication connection with that setting receives them
// (pg_logical_slot_get_binary_changes decodes in the calling session,
// under its settings). DebeziumEncoder cannot write "P1Y2M3DT4H5M6.789S"
// as Debezium's microseconds: the event must be rejected, the batch not
// written, or with a dead-letter topic dead-lettered holding the text the
// database prints, never written to its topic in another form. The row
// whose interval is NULL is delivered as the database holds it.
func TestDebeziumRefusesIntervalOfOtherStyle(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	table := e.name + "_iv"
	e.exec("CREATE TABLE " + table + " (id int PRIMARY KEY, iv interval)")
	e.exec("CREATE PUBLICATION " + e.name + " FOR TABLE " + table)
	e.exec("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", e.name)
	e.exec("INSERT INTO " + table + " VALUES (1, NULL), (2, '1 year 2 mons 3 days 04:05:06.789')")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, e.conn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SET IntervalStyle = iso_8601"); err != nil {
		t.Fatal(err)
	}
	var held string // what the database holds, as this session prints it
	if err := conn.QueryRow(ctx, "SELECT iv::text FROM "+table+" WHERE id = 2").Scan(&held); err != nil {
		t.Fatal(err)
	}
	if held != "P1Y2M3DT4H5M6.789S" {
		t.Fatalf("the database prints the interval as %q under IntervalStyle iso_8601", held)
	}
	var events []kafkasink.Event
	dec, err := NewDecoder(DecoderConfig{ProtocolVersion: 1, OnEvent: func(ev kafkasink.Event) error {
		events = append(events, ev)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	rows, err := conn.Query(ctx, "SELECT lsn::text, data FROM pg_logical_slot_get_binary_changes($1, NULL, NULL, 'proto_version', '1', 'publication_names', $2)", e.name, e.name)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var (
			lsnText string
			data    []byte
		)
		if err := rows.Scan(&lsnText, &data); err != nil {
			t.Fatal(err)
		}
		lsn, err := pglogrepl.ParseLSN(lsnText)
		if err != nil {
			t.Fatal(err)
		}
		if err := dec.Decode(kafkasink.LSN(lsn), data); err != nil {
			t.Fatal(err)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 || events[1].After[1].Value != held {
		t.Fatalf("decoded %d events (%v), want the two inserts, the second's interval %q", len(events), events, held)
	}
	topic := "t.public." + table

	rejecting, err := kafkasink.New(ctx, kafkasink.Config{Brokers: e.brokers, SinkID: e.name + "_rejecting",
		Topics: kafkasink.Topics{Prefix: "t", Partitions: 1}, KeyFormat: kafkasink.KeyJSON, Encoder: debezium.Encoder{}})
	if err != nil {
		t.Fatal(err)
	}
	defer rejecting.Close(context.Background())
	err = rejecting.Write(ctx, kafkasink.Batch{Events: events})
	rejections, rejected := kafkasink.IsRejected(err)
	var ee *kafkasink.EncodeError
	switch {
	case !rejected:
		t.Fatalf("Write: %v, want the batch rejected", err)
	case len(rejections) != 1 || rejections[0].Position != events[1].Position || rejections[0].Reason != kafkasink.ReasonUnencodable:
		t.Fatalf("rejections %v, want the second insert's alone, unencodable", rejections)
	case !errors.As(rejections[0].Err, &ee) || ee.Table != table || ee.Column != "iv" || !strings.Contains(ee.Error(), "IntervalStyle=postgres"):
		t.Fatalf("rejected for %v, want an *EncodeError naming %s column iv and IntervalStyle=postgres", rejections[0].Err, table)
	}
	if recs := sinktest.ReadCommitted(t, e.brokers, topic); len(recs) != 0 {
		t.Fatalf("%d records in %s after a rejected batch, want none", len(recs), topic)
	}

	const dlq = "dead-letters"
	diverting, err := kafkasink.New(ctx, kafkasink.Config{Brokers: e.brokers, SinkID: e.name + "_diverting",
		Topics: kafkasink.Topics{Prefix: "t", Partitions: 1}, KeyFormat: kafkasink.KeyJSON, Encoder: debezium.Encoder{},
		DeadLetterTopic: dlq})
	if err != nil {
		t.Fatal(err)
	}
	defer diverting.Close(context.Background())
	if err := diverting.Write(ctx, kafkasink.Batch{Events: events}); err != nil {
		t.Fatalf("Write with a dead-letter topic: %v", err)
	}
	recs := sinktest.ReadCommitted(t, e.brokers, topic)
	if len(recs) != 1 || !strings.HasPrefix(string(recs[0].Value), `{"before":null,"after":{"id":1,"iv":null},`) {
		t.Fatalf("%s holds %d records, want the insert of id 1 with iv null, as the database holds it", topic, len(recs))
	}
	dead := sinktest.ReadCommitted(t, e.brokers, dlq)
	if len(dead) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dead))
	}
	d := dead[0]
	if got := sinktest.Header(d, kafkasink.HeaderReason); got != string(kafkasink.ReasonUnencodable) {
		t.Errorf("dead letter reason %q, want %q", got, kafkasink.ReasonUnencodable)
	}
	if got := sinktest.Header(d, kafkasink.HeaderError); !strings.Contains(got, `column "iv"`) || !strings.Contains(got, `"P#Y#M#DT#H#M#.###S"`) || strings.Contains(got, held) {
		t.Errorf("dead letter error %q: want column iv and the text's form named, without its digits", got)
	}
	var ev struct{ After map[string]any }
	if err := json.Unmarshal(d.Value, &ev); err != nil || ev.After["iv"] != held || sinktest.Header(d, kafkasink.HeaderValue) != kafkasink.ValueEvent {
		t.Errorf("dead letter value %s (%s), want the event with iv %q, as the database holds it", d.Value, sinktest.Header(d, kafkasink.HeaderValue), held)
	}
}
