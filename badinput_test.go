package kafkasink_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

func TestWriteEmptyBatchIsNoop(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	const id = "empty-batch"
	h := &hookLog{}
	s := newSink(t, brokers, id, func(c *kafkasink.Config) { c.Hooks = []kafkasink.Hook{h} })
	events := sinktest.Inserts("public", "empty", 100, 1, 2)
	write(t, s, events)
	before := s.Checkpoint()

	for _, b := range []kafkasink.Batch{{}, {Events: []kafkasink.Event{}}} {
		if err := tryWrite(t, s, b); err != nil {
			t.Fatalf("Write(%+v): %v", b, err)
		}
	}
	if got := s.Checkpoint(); got.Position != before.Position || !got.Time.Equal(before.Time) || got.Cursor != nil {
		t.Errorf("checkpoint %+v after empty batches, want unchanged %+v", got, before)
	}
	if batches, _, _, _ := h.snapshot(); len(batches) != 1 {
		t.Errorf("%d OnBatchWritten calls, want 1 (empty batches write nothing)", len(batches))
	}
	if n := len(sinkCheckpoints(t, brokers, id, 1)); n != 1 {
		t.Errorf("%d checkpoint records, want 1", n)
	}
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, "kafkasink.public.empty"), events)
}

func TestWriteInvalidBatch(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	tests := []struct {
		name   string
		edit   func(b *kafkasink.Batch)
		inText []string
	}{
		{"event without table", func(b *kafkasink.Batch) { b.Events[1].Table = "" }, []string{"event 1", "0/C8:1", "no table"}},
		{"zero Op", func(b *kafkasink.Batch) { b.Events[1].Op = 0 }, []string{"event 1", "invalid Op 0"}},
		{"unknown Op", func(b *kafkasink.Batch) { b.Events[2].Op = 42 }, []string{"event 2", "invalid Op 42"}},
		{"equal positions", func(b *kafkasink.Batch) { b.Events[2].Position = b.Events[1].Position }, []string{"event 2", "event 1", "0/C8:1"}},
		{"decreasing positions", func(b *kafkasink.Batch) { b.Events[2].Position = kafkasink.Position{LSN: 0xC7, Index: 9} },
			[]string{"event 2", "0/C7:9", "event 1", "0/C8:1"}},
		{"decreasing index", func(b *kafkasink.Batch) { b.Events[2].Position.Index = 0 }, []string{"0/C8:0", "0/C8:1"}},
		{"cursor not JSON", func(b *kafkasink.Batch) { b.Cursor = json.RawMessage(`{"slot":`) }, []string{"Cursor", "JSON"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id := "invalid-" + strings.ReplaceAll(tt.name, " ", "-")
			table := strings.ReplaceAll(tt.name, " ", "_")
			topic := "kafkasink.public." + table
			s := newSink(t, brokers, id)
			good := sinktest.Inserts("public", table, 100, 1, 2)
			write(t, s, good)
			before := s.Checkpoint()

			bad := kafkasink.Batch{Events: sinktest.Inserts("public", table, 200, 3, 3)}
			tt.edit(&bad)
			err := tryWrite(t, s, bad)
			if !errors.Is(err, kafkasink.ErrInvalidBatch) || !kafkasink.IsFatal(err) {
				t.Fatalf("Write: %v, want a fatal ErrInvalidBatch", err)
			}
			for _, want := range tt.inText {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if got := s.Checkpoint(); got.Position != before.Position || got.Cursor != nil {
				t.Errorf("checkpoint %s %s, want unchanged %s", got.Position, got.Cursor, before.Position)
			}
			if n := len(sinkCheckpoints(t, brokers, id, 1)); n != 1 {
				t.Errorf("%d checkpoint records, want 1", n)
			}
			// Nothing of the invalid batch was written, not even its valid
			// first event.
			sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), good)
		})
	}
}

func TestWriteSkipsRedeliveredEvents(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	const topic = "kafkasink.public.redelivered"
	h := &hookLog{}
	s := newSink(t, brokers, "redelivered", func(c *kafkasink.Config) { c.Hooks = []kafkasink.Hook{h} })
	a := sinktest.Inserts("public", "redelivered", 100, 1, 5)
	write(t, s, a)

	// Entirely below the checkpoint: nothing is written, and the hook,
	// which reports Writes that wrote anything, is not called.
	write(t, s, a)
	if batches, _, _, _ := h.snapshot(); len(batches) != 1 {
		t.Fatalf("%d OnBatchWritten calls after a fully redelivered batch, want 1", len(batches))
	}
	if got := s.Checkpoint().Position; got != a[4].Position {
		t.Fatalf("checkpoint %s, want %s", got, a[4].Position)
	}

	// Partly below: written from the checkpoint on.
	b := sinktest.Inserts("public", "redelivered", 200, 6, 3)
	write(t, s, append(append([]kafkasink.Event(nil), a[2:]...), b...))
	batches, _, _, _ := h.snapshot()
	if len(batches) != 2 {
		t.Fatalf("%d OnBatchWritten calls, want 2", len(batches))
	}
	if info := batches[1]; info.Events != 6 || info.Skipped != 3 || info.Written != 3 || info.Records != 3 || info.Checkpoint.Position != b[2].Position {
		t.Errorf("BatchInfo %+v, want Events 6, Skipped 3, Written 3, Records 3, checkpoint %s", info, b[2].Position)
	}
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), append(a, b...))
}

func TestWriteRejectsUnroutable(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	longTable := strings.Repeat("x", 250-len("kafkasink.public."))
	tests := []struct {
		name     string
		topics   kafkasink.Topics
		table    string
		okTopic  string // where the good neighbour would go
		badTable string
		inText   []string
	}{
		{"Route returns invalid name", kafkasink.Topics{Route: func(schema, table string) (string, error) {
			if table == "bad" {
				return "bad topic!", nil
			}
			return "routed." + table, nil
		}}, "route_invalid", "routed.route_invalid", "bad", []string{`"bad topic!"`, "public.bad"}},
		{"Route returns error", kafkasink.Topics{Route: func(schema, table string) (string, error) {
			if table == "bad" {
				return "", errors.New("no route for this table")
			}
			return "routed2." + table, nil
		}}, "route_error", "routed2.route_error", "bad", []string{"no route for this table", "Topics.Route"}},
		{"Template with space in table", kafkasink.Topics{Template: "cdc.{schema}.{table}"}, "template", "cdc.public.template", "bad table",
			[]string{`"cdc.public.bad table"`}},
		{"Prefix with too long table", kafkasink.Topics{}, "prefix", "kafkasink.public.prefix", longTable, []string{"250 bytes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newSink(t, brokers, "unroutable-"+tt.table, func(c *kafkasink.Config) { c.Topics = tt.topics })
			good := sinktest.Inserts("public", tt.table, 100, 1, 1)[0]
			bad := sinktest.Inserts("public", tt.badTable, 100, 2, 2)[1]
			err := tryWrite(t, s, kafkasink.Batch{Events: []kafkasink.Event{good, bad}})
			checkRejected(t, err, bad, kafkasink.ReasonUnroutable, "", append(tt.inText, string(kafkasink.ReasonUnroutable))...)
			if !s.Checkpoint().IsZero() {
				t.Errorf("checkpoint %s, want zero", s.Checkpoint().Position)
			}
			if recs := sinktest.ReadCommitted(t, brokers, tt.okTopic); len(recs) != 0 {
				t.Errorf("%d records in %s, want none: the batch was rejected", len(recs), tt.okTopic)
			}
		})
	}
}

func TestWriteRejectsUnencodable(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	tests := []struct {
		name   string
		column string
		value  any
		reason kafkasink.Reason
	}{
		{"struct", "blob", struct{}{}, kafkasink.ReasonUnencodable},
		{"chan", "blob", make(chan int), kafkasink.ReasonUnencodable},
		{"complex", "blob", complex(1, 2), kafkasink.ReasonUnencodable},
		{"nested in map", "blob", map[string]any{"a": []any{1, struct{}{}}}, kafkasink.ReasonUnencodable},
		// A key value of an unsupported type is present, so it is
		// unencodable, not a missing key.
		{"struct in key column", "id", struct{}{}, kafkasink.ReasonUnencodable},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			table := "gadgets" + string(rune('a'+i))
			topic := "kafkasink.public." + table
			s := newSink(t, brokers, "unencodable-"+table)
			events := sinktest.Inserts("public", table, 100, 1, 3)
			events[1] = withColumn(events[1], tt.column, tt.value)
			err := tryWrite(t, s, kafkasink.Batch{Events: events})
			r := checkRejected(t, err, events[1], tt.reason, topic, "public."+table, `"`+tt.column+`"`)
			var ee *kafkasink.EncodeError
			if !errors.As(r.Err, &ee) || ee.Column != tt.column || ee.Table != table || ee.Schema != "public" {
				t.Errorf("rejection error %v, want an *EncodeError naming public.%s column %s", r.Err, table, tt.column)
			}
			if !s.Checkpoint().IsZero() {
				t.Errorf("checkpoint %s, want zero", s.Checkpoint().Position)
			}
			if recs := sinktest.ReadCommitted(t, brokers, topic); len(recs) != 0 {
				t.Errorf("%d records in %s, want none", len(recs), topic)
			}
		})
	}
}

func TestWriteRejectsMissingKey(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	tests := []struct {
		name string
		edit func(*kafkasink.Config, []kafkasink.Event) // breaks the key of event 2
		col  string
	}{
		{"KeyColumns column not in row", func(c *kafkasink.Config, es []kafkasink.Event) {
			c.KeyColumns = map[string][]string{"public.keys_config": {"tenant_id", "id"}}
			es[0] = withColumn(es[0], "tenant_id", int64(7))
			es[1] = withColumn(es[1], "tenant_id", int64(7))
		}, "tenant_id"},
		{"event key column not in row", func(c *kafkasink.Config, es []kafkasink.Event) {
			es[2].Key = []string{"uuid"}
		}, "uuid"},
		{"unchanged TOAST key column", func(c *kafkasink.Config, es []kafkasink.Event) {
			es[2].After = append(kafkasink.Row(nil), es[2].After...)
			es[2].After[0].Unchanged, es[2].After[0].Value = true, nil
		}, "id"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			table := []string{"keys_config", "keys_event", "keys_toast"}[i]
			topic := "kafkasink.public." + table
			events := sinktest.Inserts("public", table, 100, 1, 3)
			cfgEdit := func(c *kafkasink.Config) { tt.edit(c, events) }
			s := newSink(t, brokers, "nokey-"+table, cfgEdit)
			err := tryWrite(t, s, kafkasink.Batch{Events: events})
			r := checkRejected(t, err, events[2], kafkasink.ReasonNoKey, topic, `"`+tt.col+`"`, "public."+table)
			var ee *kafkasink.EncodeError
			if !errors.As(r.Err, &ee) || ee.Column != tt.col {
				t.Errorf("rejection error %v, want an *EncodeError naming column %s", r.Err, tt.col)
			}
			if recs := sinktest.ReadCommitted(t, brokers, topic); len(recs) != 0 {
				t.Errorf("%d records in %s, want none", len(recs), topic)
			}
		})
	}
}

func TestWriteNonFiniteFloatsAndInvalidUTF8(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	e := sinktest.Inserts("public", "odd_values", 100, 1, 1)[0]
	e.After = kafkasink.Row{
		{Name: "id", Value: int64(1)},
		{Name: "nan", Value: math.NaN()},
		{Name: "pinf", Value: math.Inf(1)},
		{Name: "ninf", Value: math.Inf(-1)},
		{Name: "nan32", Value: float32(math.NaN())},
		{Name: "s", Value: "ok\xffbad\xc3"},
	}
	wantAfter := map[string]any{
		"id": 1.0, "nan": "NaN", "pinf": "Infinity", "ninf": "-Infinity", "nan32": "NaN", "s": "ok\uFFFDbad\uFFFD",
	}
	for _, format := range []kafkasink.KeyFormat{kafkasink.KeyText, kafkasink.KeyJSON} {
		t.Run(format.String(), func(t *testing.T) {
			t.Parallel()
			table := "odd_values_" + format.String()
			e := e
			e.Table = table
			s := newSink(t, brokers, "odd-"+format.String(), func(c *kafkasink.Config) {
				c.KeyFormat = format
				c.KeyColumns = map[string][]string{"public." + table: {"pinf", "s"}}
			})
			write(t, s, []kafkasink.Event{e})
			recs := sinktest.ReadCommitted(t, brokers, "kafkasink.public."+table)
			if len(recs) != 1 {
				t.Fatalf("%d records, want 1", len(recs))
			}
			v := recs[0].Value
			if !json.Valid(v) {
				t.Fatalf("value is not valid JSON: %q", v)
			}
			var got struct {
				After map[string]any `json:"after"`
			}
			if err := json.Unmarshal(v, &got); err != nil {
				t.Fatal(err)
			}
			for k, want := range wantAfter {
				if got.After[k] != want {
					t.Errorf("after.%s = %#v, want %#v", k, got.After[k], want)
				}
			}
			if format == kafkasink.KeyText {
				// Text keys keep the bytes, so distinct rows keep distinct keys.
				if want := "Infinity|ok\xffbad\xc3"; string(recs[0].Key) != want {
					t.Errorf("key %q, want %q", recs[0].Key, want)
				}
				return
			}
			var key map[string]any
			if err := json.Unmarshal(recs[0].Key, &key); err != nil {
				t.Fatalf("JSON key %q: %v", recs[0].Key, err)
			}
			if len(key) != 2 || key["pinf"] != "Infinity" || key["s"] != "ok\uFFFDbad\uFFFD" {
				t.Errorf("JSON key %q decodes to %#v, want pinf Infinity and s with U+FFFD", recs[0].Key, key)
			}
		})
	}
}

func TestWriteAfterClose(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	s := newSink(t, brokers, "closed")
	events := sinktest.Inserts("public", "closed", 100, 1, 2)
	write(t, s, events)
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	more := sinktest.Inserts("public", "closed", 200, 3, 2)
	err := tryWrite(t, s, kafkasink.Batch{Events: more})
	if !errors.Is(err, kafkasink.ErrClosed) || !kafkasink.IsFatal(err) {
		t.Fatalf("Write after Close: %v, want fatal ErrClosed", err)
	}
	if err := tryWrite(t, s, kafkasink.Batch{}); !errors.Is(err, kafkasink.ErrClosed) {
		t.Errorf("empty Write after Close: %v, want ErrClosed", err)
	}
	if got := s.Checkpoint().Position; got != events[1].Position {
		t.Errorf("Checkpoint after Close %s, want %s", got, events[1].Position)
	}
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, "kafkasink.public.closed"), events)
}

func TestConcurrentWriteRefused(t *testing.T) {
	t.Parallel()
	c, brokers := sinktest.Cluster(t)
	s := newSink(t, brokers, "concurrent")
	a := sinktest.Inserts("public", "concurrent", 100, 1, 3)
	b := sinktest.Inserts("public", "concurrent", 200, 4, 3)

	// Hold the first produce request in the broker until released.
	release := make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(release) })
	done := writeHeldAt(t, c, s, kmsg.Produce, a, release)
	if err := tryWrite(t, s, kafkasink.Batch{Events: b}); !errors.Is(err, kafkasink.ErrConcurrentWrite) {
		t.Errorf("second Write while the first runs: %v, want ErrConcurrentWrite", err)
	}
	once.Do(func() { close(release) })
	if err := <-done; err != nil {
		t.Fatalf("first Write: %v", err)
	}
	// The refused Write left nothing behind; writing it now works.
	write(t, s, b)
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, "kafkasink.public.concurrent"), append(a, b...))
}

func TestWriteCursorOnly(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	const id = "cursor-only"
	s := newSink(t, brokers, id)
	c1 := json.RawMessage(`{"table":"public.big","last_key":[41]}`)
	if err := tryWrite(t, s, kafkasink.Batch{Cursor: c1}); err != nil {
		t.Fatalf("cursor-only Write: %v", err)
	}
	check := func(s *kafkasink.Sink, pos kafkasink.Position, cursor json.RawMessage, when string) {
		t.Helper()
		if got := s.Checkpoint(); got.Position != pos || string(got.Cursor) != string(cursor) {
			t.Errorf("%s: checkpoint %s cursor %s, want %s cursor %s", when, got.Position, got.Cursor, pos, cursor)
		}
	}
	check(s, kafkasink.Position{}, c1, "after a cursor-only Write")
	s.Close(context.Background())
	s = newSink(t, brokers, id)
	check(s, kafkasink.Position{}, c1, "after a restart")

	// Events without a cursor keep it; a later cursor-only batch moves it
	// and keeps the position.
	events := sinktest.Inserts("public", "cursor_only", 100, 1, 2)
	write(t, s, events)
	check(s, events[1].Position, c1, "after events without a cursor")
	c2 := json.RawMessage(`{"table":"public.big","last_key":[99]}`)
	if err := tryWrite(t, s, kafkasink.Batch{Cursor: c2}); err != nil {
		t.Fatalf("cursor-only Write: %v", err)
	}
	check(s, events[1].Position, c2, "after a second cursor-only Write")
	s.Close(context.Background())
	s = newSink(t, brokers, id)
	check(s, events[1].Position, c2, "after a second restart")
	if n := len(sinkCheckpoints(t, brokers, id, 3)); n != 3 {
		t.Errorf("%d checkpoint records, want 3", n)
	}
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, "kafkasink.public.cursor_only"), events)
}
