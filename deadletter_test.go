package kafkasink_test

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// smallTopicEvents returns five events of public.<table>: the second
// cannot be encoded, the fifth is too large for a topic with
// max.message.bytes=2048; the others are ordinary.
func smallTopicEvents(table string) []kafkasink.Event {
	events := sinktest.Inserts("public", table, 100, 1, 5)
	events[1] = withColumn(events[1], "blob", make(chan int))
	events[4] = withColumn(events[4], "name", strings.Repeat("x", 5000))
	return events
}

func TestDeadLetter(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	const (
		id    = "dead-letter"
		topic = "kafkasink.public.small"
		dlq   = "kafkasink.dead-letters"
	)
	createTopic(t, brokers, topic, 1, map[string]string{"max.message.bytes": "2048"})
	h := &hookLog{}
	s := newSink(t, brokers, id, func(c *kafkasink.Config) {
		c.DeadLetterTopic = dlq
		c.Hooks = []kafkasink.Hook{h}
	})
	events := smallTopicEvents("small")
	write(t, s, events)

	ok := []kafkasink.Event{events[0], events[2], events[3]}
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), ok)

	dead := sinktest.ReadCommitted(t, brokers, dlq)
	if len(dead) != 2 {
		t.Fatalf("%d dead-letter records, want 2", len(dead))
	}
	want := []struct {
		e      kafkasink.Event
		reason kafkasink.Reason
		inErr  string
	}{
		{events[1], kafkasink.ReasonUnencodable, `"blob"`},
		{events[4], kafkasink.ReasonTooLarge, "max.message.bytes 2048"},
	}
	byID := make(map[string]*kgo.Record)
	for _, r := range dead {
		byID[sinktest.Header(r, kafkasink.HeaderID)] = r
	}
	for _, w := range want {
		r := byID[w.e.ID()]
		if r == nil {
			t.Errorf("no dead letter for event %s", w.e.ID())
			continue
		}
		hdr := func(k string) string { return sinktest.Header(r, k) }
		if got := hdr(kafkasink.HeaderReason); got != string(w.reason) {
			t.Errorf("dead letter %s: reason %q, want %q", w.e.ID(), got, w.reason)
		}
		if got := hdr(kafkasink.HeaderError); !strings.Contains(got, w.inErr) {
			t.Errorf("dead letter %s: error %q, want it to contain %q", w.e.ID(), got, w.inErr)
		}
		if got := hdr(kafkasink.HeaderTopic); got != topic {
			t.Errorf("dead letter %s: topic header %q, want %q", w.e.ID(), got, topic)
		}
		if got := hdr(kafkasink.HeaderOp); got != "insert" {
			t.Errorf("dead letter %s: op %q, want insert", w.e.ID(), got)
		}
		if got := hdr(kafkasink.HeaderTable); got != "public.small" {
			t.Errorf("dead letter %s: table %q, want public.small", w.e.ID(), got)
		}
		if got := hdr(kafkasink.HeaderCommitLSN); got != "100" {
			t.Errorf("dead letter %s: commit lsn %q, want 100", w.e.ID(), got)
		}
		if got := hdr(kafkasink.HeaderLSN); got == "" {
			t.Errorf("dead letter %s: no %s header", w.e.ID(), kafkasink.HeaderLSN)
		}
	}
	// The oversized event fits the dead-letter topic whole.
	if r := byID[events[4].ID()]; r == nil || len(r.Value) < 5000 || !json.Valid(r.Value) || !strings.Contains(string(r.Value), strings.Repeat("x", 5000)) {
		t.Errorf("oversized dead letter %v, want the encoded event as its value", r)
	}
	// The unencodable event is carried as the event JSON under its key.
	if r := byID[events[1].ID()]; r == nil || !json.Valid(r.Value) || string(r.Key) != "2" || sinktest.Header(r, kafkasink.HeaderValue) != kafkasink.ValueEvent {
		t.Errorf("unencodable dead letter %v, want the event JSON as value and key 2", r)
	}

	// One transaction: five records and the checkpoint.
	batches, committed, _, rejected := h.snapshot()
	if len(committed) != 1 || committed[0].Records != 6 {
		t.Errorf("committed transactions %+v, want one of 6 records", committed)
	}
	if len(batches) != 1 || batches[0].Written != 3 || batches[0].Rejected != 2 || batches[0].Records != 5 {
		t.Errorf("BatchInfo %+v, want Written 3, Rejected 2, Records 5", batches)
	}
	if len(rejected) != 2 {
		t.Fatalf("%d OnEventRejected calls, want 2", len(rejected))
	}
	for i, w := range want {
		r := rejected[i]
		if !r.deadLettered || r.r.Reason != w.reason || r.r.Position != w.e.Position || r.r.Topic != topic {
			t.Errorf("OnEventRejected %d: %+v deadLettered=%v, want %s at %s for %s, dead-lettered", i, r.r, r.deadLettered, w.reason, w.e.Position, topic)
		}
	}
	if got := s.Checkpoint().Position; got != events[4].Position {
		t.Errorf("checkpoint %s, want %s (past the dead-lettered events)", got, events[4].Position)
	}
}

// TestSmallMaxMessageBytesManyRecords writes records that each fit the topic's
// max.message.bytes, though not all together: the broker applies the limit
// to a whole producer batch.
func TestSmallMaxMessageBytesManyRecords(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	const topic = "kafkasink.public.crowded"
	createTopic(t, brokers, topic, 1, map[string]string{"max.message.bytes": "2048"})
	s := newSink(t, brokers, "crowded")
	events := sinktest.Inserts("public", "crowded", 100, 1, 10)
	for i := range events {
		// Random text, so compression cannot shrink the batch under the
		// limit.
		events[i] = withColumn(events[i], "name", randomText(600))
	}
	write(t, s, events)
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), events)
}

func TestRejectedWithoutDeadLetter(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	const (
		id    = "no-dead-letter"
		topic = "kafkasink.public.small_nodlq"
	)
	createTopic(t, brokers, topic, 1, map[string]string{"max.message.bytes": "2048"})
	h := &hookLog{}
	s := newSink(t, brokers, id, func(c *kafkasink.Config) { c.Hooks = []kafkasink.Hook{h} })
	before := sinktest.Inserts("public", "small_nodlq", 50, 1, 1)
	write(t, s, before)

	events := sinktest.Inserts("public", "small_nodlq", 100, 2, 3)
	events[2] = withColumn(events[2], "name", strings.Repeat("x", 5000))
	err := tryWrite(t, s, kafkasink.Batch{Events: events})
	var re *kafkasink.RejectedError
	if !errors.As(err, &re) {
		t.Fatalf("Write: %v, want a *RejectedError", err)
	}
	if len(re.Rejections) != 1 || re.Rejections[0].Reason != kafkasink.ReasonTooLarge || re.Rejections[0].Position != events[2].Position || re.Rejections[0].Topic != topic {
		t.Errorf("rejections %+v, want one too_large of %s for %s", re.Rejections, events[2].Position, topic)
	}
	if !strings.Contains(err.Error(), "max.message.bytes") {
		t.Errorf("error %q does not name max.message.bytes", err)
	}
	if got := s.Checkpoint().Position; got != before[0].Position {
		t.Errorf("checkpoint %s, want unchanged %s", got, before[0].Position)
	}
	if n := len(sinkCheckpoints(t, brokers, id, 1)); n != 1 {
		t.Errorf("%d checkpoint records, want 1", n)
	}
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), before)
	_, _, aborted, rejected := h.snapshot()
	if len(rejected) != 1 || rejected[0].deadLettered || rejected[0].r.Reason != kafkasink.ReasonTooLarge {
		t.Errorf("OnEventRejected calls %+v, want one too_large, not dead-lettered", rejected)
	}
	// The two events before the rejected one were sent while the batch
	// was encoded, in a transaction the rejection aborted: whether or not
	// they left the client before the abort, no read_committed reader
	// sees them.
	if len(aborted) != 1 || aborted[0].info.Records != 2 || !errors.As(aborted[0].err, &re) {
		t.Errorf("OnTransactionAborted calls %+v, want one of the 2 records sent before the rejection, for the RejectedError", aborted)
	}
	if all := sinktest.ReadUncommitted(t, brokers, topic); len(all) > len(before)+2 {
		t.Errorf("read_uncommitted sees %d records, want at most the %d committed and the 2 aborted", len(all), len(before))
	}
	write(t, s, sinktest.Inserts("public", "small_nodlq", 100, 2, 2))
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), append(before, sinktest.Inserts("public", "small_nodlq", 100, 2, 2)...))
}

// randomText returns n bytes of random base32 text, which compression
// cannot shrink much.
func randomText(n int) string {
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(rand.Text())
	}
	return b.String()[:n]
}

// TestDeadLetterCarriesEvent dead-letters an event for every reason and
// checks that its record carries the event: its key, or the event id when
// there is none; the Encoder's value, or the event JSON when the Encoder
// failed or made a tombstone; only a value too large for the dead-letter
// topic itself is left out, marked and logged.
// deadLetterCase is one case of TestDeadLetterCarriesEvent: an event the
// sink must dead-letter, and the dead letter it must write.
type deadLetterCase struct {
	name      string
	table     string // its topic gets max.message.bytes 2048
	event     kafkasink.Event
	edit      func(*kafkasink.Config)
	smallDLQ  bool // the dead-letter topic gets max.message.bytes 2048 too
	reason    kafkasink.Reason
	inErr     string
	topic     bool   // the kafkasink.topic header names the table's topic
	key       string // "" means the event id
	kind      string
	inValue   []string // substrings of the value
	errorLogs bool
}

// checkRecord checks the dead letter r of event e, meant for topic: its
// headers, key and value.
func (tt deadLetterCase) checkRecord(t *testing.T, r *kgo.Record, e kafkasink.Event, topic string) {
	t.Helper()
	hdr := func(k string) string { return sinktest.Header(r, k) }
	wantTopic := ""
	if tt.topic {
		wantTopic = topic
	}
	for k, want := range map[string]string{
		kafkasink.HeaderID: e.ID(), kafkasink.HeaderOp: e.Op.String(), kafkasink.HeaderTable: "public." + tt.table,
		kafkasink.HeaderCommitLSN: "100", kafkasink.HeaderLSN: "99",
		kafkasink.HeaderReason: string(tt.reason), kafkasink.HeaderTopic: wantTopic, kafkasink.HeaderValue: tt.kind,
	} {
		if got := hdr(k); got != want {
			t.Errorf("header %s %q, want %q", k, got, want)
		}
	}
	if got := hdr(kafkasink.HeaderError); !strings.Contains(got, tt.inErr) {
		t.Errorf("error header %q does not contain %q", got, tt.inErr)
	}
	wantKey := tt.key
	if wantKey == "" {
		wantKey = e.ID()
	}
	if string(r.Key) != wantKey {
		t.Errorf("key %q, want %q", r.Key, wantKey)
	}
	switch tt.kind {
	case kafkasink.ValueEncoded:
		encoded, err := kafkasink.JSONEncoder{}.Encode(nil, &e)
		if err != nil {
			t.Fatal(err)
		}
		if string(r.Value) != string(encoded) {
			t.Errorf("value %.200s, want the encoded event %.200s", r.Value, encoded)
		}
	case kafkasink.ValueEvent:
		var decoded map[string]any
		if err := json.Unmarshal(r.Value, &decoded); err != nil || decoded["id"] != e.ID() {
			t.Errorf("value %s: %v, want the event JSON of %s", r.Value, err, e.ID())
		}
		for _, w := range tt.inValue {
			if !strings.Contains(string(r.Value), w) {
				t.Errorf("value %s does not contain %s", r.Value, w)
			}
		}
	case kafkasink.ValueOmitted:
		if r.Value != nil {
			t.Errorf("value of %d bytes, want none", len(r.Value))
		}
	}
}

func TestDeadLetterCarriesEvent(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	insert := func(table string, edit func(*kafkasink.Event)) kafkasink.Event {
		e := sinktest.Inserts("public", table, 100, 1, 1)[0]
		if edit != nil {
			edit(&e)
		}
		return e
	}
	tests := []deadLetterCase{
		{
			name: "unroutable", table: "has space",
			reason: kafkasink.ReasonUnroutable, inErr: "outside [a-zA-Z0-9._-]",
			key: "1", kind: kafkasink.ValueEncoded,
		},
		{
			name: "no key", table: "nokey", topic: true,
			edit:   func(c *kafkasink.Config) { c.KeyColumns = map[string][]string{"public.nokey": {"missing"}} },
			reason: kafkasink.ReasonNoKey, inErr: `"missing"`,
			kind: kafkasink.ValueEncoded,
		},
		{
			name: "unencodable value", table: "badvalue", topic: true,
			event:  withColumn(insert("badvalue", nil), "blob", make(chan int)),
			reason: kafkasink.ReasonUnencodable, inErr: `"blob"`,
			key: "1", kind: kafkasink.ValueEvent, inValue: []string{`"blob":"0x`, `"name":"row-1"`},
		},
		{
			name: "unencodable key", table: "badkey", topic: true,
			event:  withColumn(insert("badkey", nil), "blob", func() {}),
			edit:   func(c *kafkasink.Config) { c.KeyColumns = map[string][]string{"public.badkey": {"blob"}} },
			reason: kafkasink.ReasonUnencodable, inErr: `"blob"`,
			kind: kafkasink.ValueEvent, inValue: []string{`"blob":"0x`, `"name":"row-1"`},
		},
		{
			name: "no key, upsert tombstone", table: "tombstone", topic: true,
			event: insert("tombstone", func(e *kafkasink.Event) {
				e.Op, e.Before, e.After = kafkasink.OpDelete, e.After, nil
			}),
			edit: func(c *kafkasink.Config) {
				c.Encoder = kafkasink.UpsertEncoder{}
				c.KeyColumns = map[string][]string{"public.tombstone": {"missing"}}
			},
			reason: kafkasink.ReasonNoKey, inErr: `"missing"`,
			kind: kafkasink.ValueEvent, inValue: []string{`"op":"delete"`, `"before":{"id":1,"name":"row-1"}`},
		},
		{
			name: "too large, checked before encoding", table: "large", topic: true,
			event:  withColumn(insert("large", nil), "name", strings.Repeat("x", 5000)),
			reason: kafkasink.ReasonTooLarge, inErr: "at least",
			key: "1", kind: kafkasink.ValueEncoded,
		},
		{
			name: "too large once encoded", table: "escaped", topic: true,
			event:  withColumn(insert("escaped", nil), "name", strings.Repeat(`"`, 1500)),
			reason: kafkasink.ReasonTooLarge, inErr: "max.message.bytes 2048",
			key: "1", kind: kafkasink.ValueEncoded,
		},
		{
			name: "too large for the dead-letter topic too", table: "huge", topic: true, smallDLQ: true,
			event:  withColumn(insert("huge", nil), "name", strings.Repeat("x", 5000)),
			reason: kafkasink.ReasonTooLarge, inErr: "at least",
			key: "1", kind: kafkasink.ValueOmitted, errorLogs: true,
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id := fmt.Sprintf("dlq-carries-%d", i)
			topic, dlq := id+".public."+tt.table, id+".dead"
			e := tt.event
			if e.Table == "" {
				e = insert(tt.table, nil)
			}
			if tt.topic {
				createTopic(t, brokers, topic, 1, map[string]string{"max.message.bytes": "2048"})
			}
			if tt.smallDLQ {
				createTopic(t, brokers, dlq, 1, map[string]string{"max.message.bytes": "2048"})
			}
			var logs sinktest.SyncBuffer
			s := newSink(t, brokers, id, func(c *kafkasink.Config) {
				c.Topics.Prefix = id
				c.DeadLetterTopic = dlq
				c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
				if tt.edit != nil {
					tt.edit(c)
				}
			})
			write(t, s, []kafkasink.Event{e})
			dead := sinktest.ReadCommitted(t, brokers, dlq)
			if len(dead) != 1 {
				t.Fatalf("%d dead-letter records, want 1", len(dead))
			}
			tt.checkRecord(t, dead[0], e, topic)
			if logged := strings.Contains(logs.String(), "level=ERROR"); logged != tt.errorLogs {
				t.Errorf("error logged: %v, want %v; log:\n%s", logged, tt.errorLogs, logs.String())
			}
			if tt.topic {
				if recs := sinktest.ReadCommitted(t, brokers, topic); len(recs) != 0 {
					t.Errorf("%d records in %s, want none", len(recs), topic)
				}
			}
		})
	}
}
