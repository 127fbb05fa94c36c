package kafkasink_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// sourceRecordEvent is an outbox-like event at pos carrying rec.
func sourceRecordEvent(pos kafkasink.Position, rec *kafkasink.SourceRecord) kafkasink.Event {
	return kafkasink.Event{Op: kafkasink.OpInsert, Schema: "kafkasink", Table: "outbox", Position: pos, Record: rec}
}

// TestSourceRecords writes row changes and source records of one source
// transaction in one Write: the records reach their own topics with their
// own keys, values and headers, in one Kafka transaction with the rows
// (both visible to a read_committed reader), and a refused record is
// dead-lettered with its key, value and headers.
func TestSourceRecords(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	const dlq = "kafkasink.dead-letters"
	h := &hookLog{}
	s := newSink(t, brokers, "source-records", func(c *kafkasink.Config) {
		c.DeadLetterTopic = dlq
		c.Hooks = []kafkasink.Hook{h}
	})
	rows := sinktest.Inserts("public", "orders", 100, 1, 2)
	rows[0].Position.Index, rows[1].Position.Index = 0, 3
	rows[1].Position.LSN = rows[0].Position.LSN
	lsn := rows[0].Position.LSN
	hdr := []kafkasink.Header{{Key: "trace", Value: []byte("t-1")}}
	events := []kafkasink.Event{
		rows[0],
		sourceRecordEvent(kafkasink.Position{LSN: lsn, Index: 1}, &kafkasink.SourceRecord{Topic: "orders.events", Key: []byte("o-1"), Value: []byte(`{"created":1}`), Headers: hdr}),
		sourceRecordEvent(kafkasink.Position{LSN: lsn, Index: 2}, &kafkasink.SourceRecord{Topic: "secret", Key: []byte("o-1"), Value: []byte("nope"), Headers: hdr,
			Refused: errors.New("topic secret is outside the allow-list")}),
		rows[1],
	}
	write(t, s, events)

	got := sinktest.ReadCommitted(t, brokers, "orders.events")
	if len(got) != 1 {
		t.Fatalf("%d records on orders.events, want 1", len(got))
	}
	r := got[0]
	if string(r.Key) != "o-1" || string(r.Value) != `{"created":1}` || sinktest.Header(r, "trace") != "t-1" {
		t.Errorf("record: key %q value %q trace %q, want o-1, {\"created\":1}, t-1", r.Key, r.Value, sinktest.Header(r, "trace"))
	}
	if id := sinktest.Header(r, kafkasink.HeaderID); id != events[1].ID() {
		t.Errorf("record's %s header %q, want %q", kafkasink.HeaderID, id, events[1].ID())
	}
	if n := len(sinktest.ReadCommitted(t, brokers, "kafkasink.public.orders")); n != 2 {
		t.Errorf("%d row records, want 2", n)
	}
	dead := sinktest.ReadCommitted(t, brokers, dlq)
	if len(dead) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dead))
	}
	d := dead[0]
	if string(d.Key) != "o-1" || string(d.Value) != "nope" || sinktest.Header(d, "trace") != "t-1" ||
		sinktest.Header(d, kafkasink.HeaderReason) != string(kafkasink.ReasonUnroutable) || sinktest.Header(d, kafkasink.HeaderTopic) != "secret" {
		t.Errorf("dead letter: key %q value %q headers %v", d.Key, d.Value, d.Headers)
	}
	if _, committed, _, _ := h.snapshot(); len(committed) != 1 {
		t.Errorf("%d Kafka transactions committed, want the one that holds rows, record and dead letter", len(committed))
	}
}

// TestSourceRecordUnroutableFailsWithoutDeadLetters: without a
// DeadLetterTopic, a refused record fails the Write as a rejected event
// naming the source's reason.
func TestSourceRecordUnroutableFailsWithoutDeadLetters(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	s := newSink(t, brokers, "source-records-refused")
	e := sourceRecordEvent(kafkasink.Position{LSN: 100, Index: 0}, &kafkasink.SourceRecord{Topic: "bad topic!", Value: []byte("v")})
	err := tryWrite(t, s, kafkasink.Batch{Events: []kafkasink.Event{e}})
	checkRejected(t, err, e, kafkasink.ReasonUnroutable, "bad topic!", "the source record's topic")
}

// TestSourceRecordForSinkTopicsRejected: a record may not write to the
// sink's checkpoint or dead-letter topic; it is dead-lettered instead.
func TestSourceRecordForSinkTopicsRejected(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	const dlq = "kafkasink.dead-letters"
	s := newSink(t, brokers, "source-records-own-topics", func(c *kafkasink.Config) { c.DeadLetterTopic = dlq })
	for i, topic := range []string{kafkasink.DefaultCheckpointTopic, dlq} {
		e := sourceRecordEvent(kafkasink.Position{LSN: 100, Index: uint64(i)}, &kafkasink.SourceRecord{Topic: topic, Key: []byte("k"), Value: []byte("v")})
		write(t, s, []kafkasink.Event{e})
	}
	dead := sinktest.ReadCommitted(t, brokers, dlq)
	if len(dead) != 2 {
		t.Fatalf("%d dead letters, want 2", len(dead))
	}
	for _, d := range dead {
		if !strings.Contains(sinktest.Header(d, kafkasink.HeaderError), "the sink's own") || string(d.Value) != "v" {
			t.Errorf("dead letter for %s: error %q, value %q", sinktest.Header(d, kafkasink.HeaderTopic), sinktest.Header(d, kafkasink.HeaderError), d.Value)
		}
	}
}

// TestSourceRecordHeadersWithAnnotationHeaders: a source record's own
// headers and the annotation headers both reach it, in that order after
// the standard ones, whether it is first in its Write (where the sink once
// sliced its headers below zero and panicked) or after a row with its own
// annotation headers (whose headers once leaked into the record's).
func TestSourceRecordHeadersWithAnnotationHeaders(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	s := newSink(t, brokers, "source-records-annotated", func(c *kafkasink.Config) {
		c.Annotations = map[string]string{"env": "prod"}
		c.AnnotationsIn = kafkasink.AnnotateHeaders
		c.Headers = kafkasink.HeadersMinimal
	})
	headers := []kafkasink.Header{{Key: "trace", Value: []byte("t-1")}, {Key: "span", Value: []byte("s-1")}}
	first := sourceRecordEvent(kafkasink.Position{LSN: 100}, &kafkasink.SourceRecord{Topic: "orders.events", Value: []byte("v"), Headers: headers})
	write(t, s, []kafkasink.Event{first})
	row := sinktest.Inserts("public", "orders", 200, 1, 1)[0]
	afterRow := sourceRecordEvent(kafkasink.Position{LSN: row.Position.LSN, Index: 1}, &kafkasink.SourceRecord{Topic: "orders.events", Value: []byte("v"), Headers: headers})
	write(t, s, []kafkasink.Event{row, afterRow})

	got := sinktest.ReadCommitted(t, brokers, "orders.events")
	if len(got) != 2 {
		t.Fatalf("%d records on orders.events, want 2", len(got))
	}
	for i, e := range []kafkasink.Event{first, afterRow} {
		var keys []string
		for _, h := range got[i].Headers {
			keys = append(keys, h.Key+"="+string(h.Value))
		}
		want := []string{kafkasink.HeaderID + "=" + e.ID(), kafkasink.HeaderOp + "=insert", "trace=t-1", "span=s-1", "env=prod"}
		if strings.Join(keys, " ") != strings.Join(want, " ") {
			t.Errorf("record %d's headers:\n got %v\nwant %v", i, keys, want)
		}
	}
}
