package kafkasink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kafkasink/kafkasink/internal/topicadmin"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The tests of the two phases of a plan (plan.go), without a cluster: the
// sink has a client that never reaches a broker, and the phases run with
// a context already cancelled, so any request to a broker fails the test
// with context.Canceled. The topics a plan writes to are known to the
// sink's topic cache beforehand, as after an earlier Write.

// openTopic is the limits of an ordinary topic in these tests.
var openTopic = topicadmin.Info{Partitions: 3, MaxMessageBytes: 1 << 20}

// planSink returns a sink of cfg that knows topics (and their limits)
// without asking a broker, and has no broker to ask.
func planSink(t *testing.T, cfg Config, topics map[string]topicadmin.Info) *Sink {
	t.Helper()
	cfg.Brokers, cfg.SinkID = []string{"127.0.0.1:1"}, "plan"
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	s := &Sink{cfg: cfg, log: cfg.Logger, routes: make(map[[2]string]tableRoute), cl: cl}
	s.state.verified(Checkpoint{})
	s.topics = topicadmin.NewCache(s.cfg.Topics.creation())
	for topic, info := range topics {
		s.topics.Remember(topic, info)
	}
	s.router = newRouter(&s.cfg)
	s.frameTopic = frameTopic(s.cfg.Encoder)
	return s
}

// noIO is a context that fails every request to a broker.
func noIO() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// planEncoding runs both phases of a plan of b on s, up to what
// planSending reports; send is ExactlyOnce mode's early send, or nil.
func planEncoding(s *Sink, b *Batch, send func(*kgo.Record)) (*encoding, error) {
	events, _ := delivered(b.Events, s.Checkpoint().Position)
	rt, err := s.resolve(noIO(), events)
	if err != nil {
		return nil, err
	}
	en := s.newEncoding(b, events, rt, send)
	return &en, s.encode(noIO(), &en)
}

// shapingEncoder is JSONEncoder with the shapes of a RecordShaper and
// Framer: it leaves truncates out, follows a delete with a tombstone, and
// writes a record on topic "txn" before an event starting a transaction
// (Txn.First) and after one ending it (Txn.End).
type shapingEncoder struct{ JSONEncoder }

func (shapingEncoder) Shape(e *Event) RecordShape {
	return RecordShape{Skip: e.Op == OpTruncate, Tombstone: e.Op == OpDelete, RecordBefore: e.Txn.First, RecordAfter: e.Txn.End != nil}
}

func (shapingEncoder) AppendHeaders(dst []Header, arena []byte, e *Event, otherKey []byte) ([]Header, []byte) {
	return dst, arena
}

func (shapingEncoder) FrameTopic() string { return "txn" }

func (shapingEncoder) AppendFrame(dst []byte, e *Event, after bool) ([]byte, int) {
	start := len(dst)
	dst = fmt.Appendf(dst, "%d", e.XID)
	keyLen := len(dst) - start
	if after {
		return append(dst, "END"...), keyLen
	}
	return append(dst, "BEGIN"...), keyLen
}

// preparingEncoder is shapingEncoder with a Preparer that records what it
// is given, and fails with err when set.
type preparingEncoder struct {
	shapingEncoder
	calls  *[][]EventRoute
	err    error
	events *[]Position
}

func (p preparingEncoder) Prepare(ctx context.Context, events []Event, routes []EventRoute) error {
	*p.calls = append(*p.calls, slices.Clone(routes))
	for i := range events {
		*p.events = append(*p.events, events[i].Position)
	}
	return p.err
}

// row is an event of schema.table at position lsn/index with key
// column id.
func row(op Op, table string, lsn LSN, index uint64, id int64) Event {
	schema, name, _ := strings.Cut(table, ".")
	e := Event{Op: op, Schema: schema, Table: name, Position: Position{LSN: lsn, Index: index}, LSN: lsn, XID: 7, Key: []string{"id"}}
	image := Row{{Name: "id", Value: id}, {Name: "note", Value: "n"}}
	if op == OpDelete {
		e.Before = image
	} else if op != OpTruncate {
		e.After = image
	}
	return e
}

// padded is e with a column of 60 bytes: its record takes about 400,
// and two of them fit in 1 KB.
func padded(e Event) Event {
	e.After = append(e.After, Column{Name: "pad", Value: strings.Repeat("p", 60)})
	return e
}

// describe is a record as the tests compare it: topic, key, and the value
// ("null" for a tombstone); a dead letter's reason.
func describe(r *kgo.Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s key=%s", r.Topic, r.Key)
	switch {
	case r.Value == nil:
		b.WriteString(" null")
	case r.Topic == "txn":
		fmt.Fprintf(&b, " %s", r.Value)
	}
	for _, h := range r.Headers {
		if h.Key == HeaderReason {
			fmt.Fprintf(&b, " reason=%s", h.Value)
		}
	}
	return b.String()
}

// at is the text of a position.
func at(lsn LSN, index uint64) string { return Position{LSN: lsn, Index: index}.String() }

// wantPart is a part as the tests compare it.
type wantPart struct {
	first, last string // positions
	events      int
	records     []string // describe of each record
}

func gotParts(p *plan) []wantPart {
	var out []wantPart
	for _, pt := range p.parts {
		w := wantPart{first: pt.first.String(), last: pt.last.String(), events: pt.events}
		for j, r := range pt.records {
			w.records = append(w.records, describe(r))
			if pt.positions[j].Compare(pt.first) < 0 || pt.positions[j].Compare(pt.last) > 0 {
				w.records = append(w.records, "(position outside the part)")
			}
		}
		out = append(out, w)
	}
	return out
}

func TestPlanEncoding(t *testing.T) {
	t.Parallel()
	const a, b = "kafkasink.public.a", "kafkasink.public.b"
	small := topicadmin.Info{Partitions: 1, MaxMessageBytes: 300}
	compacted := topicadmin.Info{Partitions: 1, MaxMessageBytes: 1 << 20, Compacted: true}
	noKey := row(OpUpdate, "public.a", 10, 2, 2)
	noKey.After = Row{{Name: "note", Value: "no id"}}
	big := row(OpUpdate, "public.b", 10, 1, 2)
	big.After = append(big.After, Column{Name: "pad", Value: strings.Repeat("x", 400)})
	keyless := row(OpInsert, "public.b", 10, 1, 2)
	keyless.Key, keyless.Keyless = nil, true
	first, end := row(OpInsert, "public.a", 10, 0, 1), row(OpDelete, "public.a", 10, 2, 3)
	first.Txn.First, end.Txn.End = true, &TxnSummary{Events: 2}

	tests := []struct {
		name       string
		cfg        Config
		topics     map[string]topicadmin.Info
		events     []Event
		parts      []wantPart
		rejections []string // position reason
		skipped    int
		omitted    SkipInfo
		rejected   int // dead-lettered
		lost       int
	}{{
		name:   "several tables, one part",
		topics: map[string]topicadmin.Info{a: openTopic, b: openTopic},
		events: []Event{row(OpInsert, "public.a", 10, 0, 1), row(OpInsert, "public.b", 10, 1, 1), row(OpUpdate, "public.a", 10, 2, 2)},
		parts: []wantPart{{at(10, 0), at(10, 2), 3, []string{
			a + " key=1", b + " key=1", a + " key=2"}}},
	}, {
		name:   "records split into parts at MaxTransactionRecords",
		cfg:    Config{MaxTransactionRecords: 2},
		topics: map[string]topicadmin.Info{a: openTopic},
		events: []Event{row(OpInsert, "public.a", 10, 0, 1), row(OpInsert, "public.a", 10, 1, 2), row(OpInsert, "public.a", 11, 0, 3), row(OpInsert, "public.a", 12, 0, 4), row(OpInsert, "public.a", 12, 1, 5)},
		parts: []wantPart{
			{at(10, 0), at(10, 1), 2, []string{a + " key=1", a + " key=2"}},
			{at(11, 0), at(12, 0), 2, []string{a + " key=3", a + " key=4"}},
			{at(12, 1), at(12, 1), 1, []string{a + " key=5"}},
		},
	}, {
		name:   "records split into parts at MaxTransactionBytes",
		cfg:    Config{MaxTransactionBytes: 1024, MaxRecordBytes: 1024},
		topics: map[string]topicadmin.Info{a: openTopic},
		events: []Event{padded(row(OpInsert, "public.a", 10, 0, 1)), padded(row(OpInsert, "public.a", 10, 1, 2)), padded(row(OpInsert, "public.a", 10, 2, 3))},
		parts: []wantPart{
			{at(10, 0), at(10, 1), 2, []string{a + " key=1", a + " key=2"}},
			{at(10, 2), at(10, 2), 1, []string{a + " key=3"}},
		},
	}, {
		name:       "a rejected event without a dead-letter topic is left out and listed",
		topics:     map[string]topicadmin.Info{a: openTopic, b: small},
		events:     []Event{row(OpInsert, "public.a", 10, 0, 1), big, noKey},
		parts:      []wantPart{{at(10, 0), at(10, 0), 1, []string{a + " key=1"}}},
		rejections: []string{at(10, 1) + " too_large", at(10, 2) + " no_key"},
	}, {
		name:       "rejected events go to the dead-letter topic in their place",
		cfg:        Config{DeadLetterTopic: "dlq"},
		topics:     map[string]topicadmin.Info{a: openTopic, b: small, "dlq": openTopic},
		events:     []Event{row(OpInsert, "public.a", 10, 0, 1), big, row(OpInsert, "public.a", 10, 2, 3)},
		parts:      []wantPart{{at(10, 0), at(10, 2), 3, []string{a + " key=1", "dlq key=2 reason=too_large", a + " key=3"}}},
		rejections: []string{at(10, 1) + " too_large"},
		rejected:   1,
	}, {
		name:       "a dead letter too large even for the dead-letter topic loses its value",
		cfg:        Config{DeadLetterTopic: "dlq"},
		topics:     map[string]topicadmin.Info{b: small, "dlq": small},
		events:     []Event{big},
		parts:      []wantPart{{at(10, 1), at(10, 1), 1, []string{"dlq key=" + at(10, 1) + " null reason=too_large"}}},
		rejections: []string{at(10, 1) + " too_large"},
		rejected:   1,
		lost:       1,
	}, {
		name:       "a keyless event on a compacted topic is rejected",
		topics:     map[string]topicadmin.Info{b: compacted},
		events:     []Event{keyless},
		rejections: []string{at(10, 1) + " no_key"},
	}, {
		name:       "an unroutable table's events are rejected",
		topics:     map[string]topicadmin.Info{a: openTopic},
		events:     []Event{row(OpInsert, "public.a", 10, 0, 1), row(OpInsert, "public.bad name", 10, 1, 1)},
		parts:      []wantPart{{at(10, 0), at(10, 0), 1, []string{a + " key=1"}}},
		rejections: []string{at(10, 1) + " unroutable"},
	}, {
		name:   "tombstones, records around a transaction, events the Encoder leaves out",
		cfg:    Config{Encoder: shapingEncoder{}},
		topics: map[string]topicadmin.Info{a: openTopic, "txn": openTopic},
		events: []Event{first, row(OpTruncate, "public.a", 10, 1, 0), end, row(OpTruncate, "public.a", 11, 0, 0)},
		parts: []wantPart{{at(10, 0), at(11, 0), 2, []string{
			"txn key=7 BEGIN", a + " key=1", a + " key=3", a + " key=3 null", "txn key=7 END"}}},
		skipped: 2,
		omitted: SkipInfo{First: Position{LSN: 10, Index: 1}, Last: Position{LSN: 11}, Events: 2, ByEncoder: true},
	}, {
		name:    "a batch the Encoder leaves out entirely moves the checkpoint",
		cfg:     Config{Encoder: shapingEncoder{}},
		events:  []Event{row(OpTruncate, "public.a", 10, 0, 0), row(OpTruncate, "public.b", 10, 1, 0)},
		parts:   []wantPart{{at(10, 0), at(10, 1), 0, nil}},
		skipped: 2,
		omitted: SkipInfo{First: Position{LSN: 10}, Last: Position{LSN: 10, Index: 1}, Events: 2, ByEncoder: true},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := planSink(t, tc.cfg, tc.topics)
			var sent []*kgo.Record
			en, err := planEncoding(s, &Batch{Events: tc.events}, func(r *kgo.Record) { sent = append(sent, r) })
			if err != nil {
				t.Fatal(err)
			}
			p := en.p
			if got := gotParts(p); !equalParts(got, tc.parts) {
				t.Errorf("parts:\n got %+v\nwant %+v", got, tc.parts)
			}
			var rejections []string
			for _, r := range en.rejections {
				rejections = append(rejections, r.Position.String()+" "+string(r.Reason))
			}
			if !slices.Equal(rejections, tc.rejections) {
				t.Errorf("rejections: got %q, want %q", rejections, tc.rejections)
			}
			if p.skipped != tc.skipped || en.omitted != tc.omitted || p.rejected != tc.rejected || len(en.lost) != tc.lost {
				t.Errorf("skipped %d, omitted %+v, dead-lettered %d, lost values %d; want %d, %+v, %d, %d",
					p.skipped, en.omitted, p.rejected, len(en.lost), tc.skipped, tc.omitted, tc.rejected, tc.lost)
			}
			var first []*kgo.Record
			if len(p.parts) > 0 {
				first = p.parts[0].records
			}
			if !slices.Equal(sent, first) {
				t.Errorf("sent %d records early, want the first part's %d", len(sent), len(first))
			}
			if n := planRecords(p); p.records != n {
				t.Errorf("plan counts %d records, its parts hold %d", p.records, n)
			}
		})
	}
}

func planRecords(p *plan) int {
	n := 0
	for _, pt := range p.parts {
		n += len(pt.records)
	}
	return n
}

func equalParts(got, want []wantPart) bool {
	return slices.EqualFunc(got, want, func(g, w wantPart) bool {
		return g.first == w.first && g.last == w.last && g.events == w.events && slices.Equal(g.records, w.records)
	})
}

// TestPlanEncodingWaitsForDeadLetterTopic: the second phase does not make
// sure of the dead-letter topic itself; it stops at the first dead letter
// until it knows the topic's limits, and goes on from there.
func TestPlanEncodingWaitsForDeadLetterTopic(t *testing.T) {
	t.Parallel()
	s := planSink(t, Config{DeadLetterTopic: "dlq"}, map[string]topicadmin.Info{"kafkasink.public.a": openTopic})
	noKey := row(OpUpdate, "public.a", 10, 1, 2)
	noKey.After = Row{{Name: "note", Value: "no id"}}
	events := []Event{row(OpInsert, "public.a", 10, 0, 1), noKey, row(OpInsert, "public.a", 10, 2, 3)}
	rt, err := s.resolve(noIO(), events)
	if err != nil {
		t.Fatal(err)
	}
	en := s.newEncoding(&Batch{Events: events}, events, rt, nil)
	need, err := en.run()
	if err != nil || !need {
		t.Fatalf("run: need %v, %v; want it to stop for the dead-letter topic", need, err)
	}
	if got := gotParts(en.p); len(got) != 1 || len(got[0].records) != 1 {
		t.Fatalf("stopped with parts %+v, want the first event's record alone", got)
	}
	if err := s.encode(noIO(), &en); !errors.Is(err, context.Canceled) {
		t.Fatalf("encode with the dead-letter topic unknown: %v, want it to ask the broker (context.Canceled)", err)
	}
	en.deadLetter, en.deadLetterKnown = openTopic, true
	if need, err := en.run(); err != nil || need {
		t.Fatalf("run again: need %v, %v", need, err)
	}
	want := []wantPart{{at(10, 0), at(10, 2), 3, []string{"kafkasink.public.a key=1", "dlq key=" + at(10, 1) + " reason=no_key", "kafkasink.public.a key=3"}}}
	if got := gotParts(en.p); !equalParts(got, want) {
		t.Errorf("parts:\n got %+v\nwant %+v", got, want)
	}
	if need, err := en.run(); err != nil || need || !equalParts(gotParts(en.p), want) || en.p.rejected != 1 || len(en.rejections) != 1 {
		t.Errorf("running a finished encoding again: need %v, %v, parts %+v, %d dead-lettered", need, err, gotParts(en.p), en.p.rejected)
	}
}

// TestPlanEncodingFrameTooLarge: a record around an event too large for
// its topic fails the plan with a fatal *ConfigError.
func TestPlanEncodingFrameTooLarge(t *testing.T) {
	t.Parallel()
	s := planSink(t, Config{Encoder: shapingEncoder{}}, map[string]topicadmin.Info{"kafkasink.public.a": openTopic, "txn": {Partitions: 1, MaxMessageBytes: 10}})
	e := row(OpInsert, "public.a", 10, 0, 1)
	e.Txn.First = true
	_, err := planEncoding(s, &Batch{Events: []Event{e}}, nil)
	var ce *ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "the record the Encoder writes before the event at "+at(10, 0)+" ") {
		t.Fatalf("got %v, want a *ConfigError naming the record before the event", err)
	}
}

// TestPlanCheckpoints: each part's checkpoint is its last position; only
// the last part's carries the batch cursor.
func TestPlanCheckpoints(t *testing.T) {
	t.Parallel()
	s := planSink(t, Config{MaxTransactionRecords: 2}, map[string]topicadmin.Info{"kafkasink.public.a": openTopic})
	s.state.verified(Checkpoint{Position: Position{LSN: 9}, Cursor: []byte(`"old"`)})
	events := []Event{row(OpInsert, "public.a", 9, 0, 0), row(OpInsert, "public.a", 10, 0, 1), row(OpInsert, "public.a", 10, 1, 2), row(OpInsert, "public.a", 11, 0, 3)}
	en, err := planEncoding(s, &Batch{Events: events, Cursor: []byte(`"new"`)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := range en.p.parts {
		ck := s.nextCheckpoint(en.p, i)
		got = append(got, ck.Position.String()+" "+string(ck.Cursor))
	}
	if want := []string{at(10, 1) + ` "old"`, at(11, 0) + ` "new"`}; !slices.Equal(got, want) {
		t.Errorf("checkpoints %q, want %q", got, want)
	}
	if en.p.skipped != 1 || en.p.events != 4 {
		t.Errorf("skipped %d of %d events, want 1 of 4", en.p.skipped, en.p.events)
	}
}

func TestPlanDelivered(t *testing.T) {
	t.Parallel()
	events := []Event{{Position: Position{LSN: 5}}, {Position: Position{LSN: 5, Index: 1}}, {Position: Position{LSN: 6}}}
	ck := func(lsn LSN, index uint64) Position { return Position{LSN: lsn, Index: index} }
	tests := []struct {
		name string
		ck   Position
		rest int
		skip SkipInfo
	}{
		{"none delivered", ck(4, 0), 3, SkipInfo{}},
		{"the zero checkpoint", Position{}, 3, SkipInfo{}},
		{"some delivered", ck(5, 1), 1, SkipInfo{First: ck(5, 0), Last: ck(5, 1), Events: 2, Checkpoint: ck(5, 1)}},
		{"between positions", ck(5, 7), 1, SkipInfo{First: ck(5, 0), Last: ck(5, 1), Events: 2, Checkpoint: ck(5, 7)}},
		{"all delivered", ck(9, 0), 0, SkipInfo{First: ck(5, 0), Last: ck(6, 0), Events: 3, Checkpoint: ck(9, 0)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rest, skip := delivered(events, tc.ck)
			if len(rest) != tc.rest || skip != tc.skip {
				t.Errorf("got %d left, %+v; want %d, %+v", len(rest), skip, tc.rest, tc.skip)
			}
			if len(rest) > 0 && &rest[0] != &events[len(events)-len(rest)] {
				t.Error("rest is not the tail of events")
			}
		})
	}
}

// TestPlanResolve: the first phase routes each table once, the tables
// of events the Encoder leaves out only for a Preparer, gives the
// Preparer every event's route before it makes sure of any topic, and
// makes sure of the topics the records go to, the Framer's only when an
// event asks for a record around it.
func TestPlanResolve(t *testing.T) {
	t.Parallel()
	const a, b = "kafkasink.public.a", "kafkasink.public.b"
	events := []Event{row(OpInsert, "public.a", 10, 0, 1), row(OpTruncate, "public.c", 10, 1, 0), row(OpInsert, "public.b", 10, 2, 1), row(OpUpdate, "public.a", 10, 3, 1)}

	t.Run("routes once per table", func(t *testing.T) {
		t.Parallel()
		calls := 0
		route := func(schema, table string) (string, error) {
			calls++
			return "kafkasink." + schema + "." + table, nil
		}
		s := planSink(t, Config{Topics: Topics{Route: route}}, map[string]topicadmin.Info{a: openTopic, b: openTopic, "kafkasink.public.c": openTopic})
		for range 2 {
			if _, err := s.resolve(noIO(), events); err != nil {
				t.Fatal(err)
			}
		}
		if calls != 6 {
			t.Errorf("Topics.Route called %d times for 2 plans of 3 tables, want 6", calls)
		}
	})

	t.Run("a table the Encoder leaves out is not routed", func(t *testing.T) {
		t.Parallel()
		s := planSink(t, Config{Encoder: shapingEncoder{}}, map[string]topicadmin.Info{a: openTopic, b: openTopic})
		rt, err := s.resolve(noIO(), events)
		if err != nil {
			t.Fatal(err)
		}
		var tables []string
		for _, k := range rt.order {
			tables = append(tables, rt.tables[k].topic)
		}
		if want := []string{a, b}; !slices.Equal(tables, want) || len(rt.tables) != 2 {
			t.Errorf("routed %d tables, in order %q; want %q", len(rt.tables), tables, want)
		}
		if rt.frame != (topicadmin.Info{}) {
			t.Error("made sure of the Framer's topic, which no event asks for")
		}
		if _, ok := s.routes[[2]string{"public", "c"}]; ok {
			t.Error("routed public.c")
		}
	})

	t.Run("a Preparer sees every route, before any topic", func(t *testing.T) {
		t.Parallel()
		var calls [][]EventRoute
		var seen []Position
		enc := preparingEncoder{calls: &calls, events: &seen}
		s := planSink(t, Config{Encoder: enc, KeyColumns: map[string][]string{"public.b": {"id", "note"}}}, nil)
		_, err := s.resolve(noIO(), events)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("resolve: %v, want it to ask the broker for a topic (context.Canceled)", err)
		}
		want := []EventRoute{{Topic: a, KeyColumns: []string{"id"}}, {Topic: "kafkasink.public.c"}, {Topic: b, KeyColumns: []string{"id", "note"}}, {Topic: a, KeyColumns: []string{"id"}}}
		if len(calls) != 1 || !slices.EqualFunc(calls[0], want, func(x, y EventRoute) bool {
			return x.Topic == y.Topic && slices.Equal(x.KeyColumns, y.KeyColumns)
		}) || len(seen) != len(events) {
			t.Errorf("Prepare got %+v for %d events, want once %+v for %d", calls, len(seen), want, len(events))
		}

		calls = nil
		enc.err = errors.New("registry down")
		s = planSink(t, Config{Encoder: enc}, nil)
		if _, err := s.resolve(noIO(), events); err != enc.err {
			t.Fatalf("resolve: %v, want the Preparer's error, before any topic", err)
		}
	})

	t.Run("two tables on one topic", func(t *testing.T) {
		t.Parallel()
		s := planSink(t, Config{Topics: Topics{Template: "t.{schema}_{table}"}}, map[string]topicadmin.Info{"t.a_b_c": openTopic})
		collide := []Event{row(OpInsert, "a_b.c", 10, 0, 1), row(OpInsert, "a.b_c", 10, 1, 1)}
		_, err := s.resolve(noIO(), collide)
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "both route to topic") {
			t.Fatalf("resolve: %v, want a *ConfigError naming both tables", err)
		}
	})

	t.Run("the Framer's topic when an event asks", func(t *testing.T) {
		t.Parallel()
		framed := slices.Clone(events)
		framed[2].Txn.First = true
		s := planSink(t, Config{Encoder: shapingEncoder{}}, map[string]topicadmin.Info{a: openTopic, b: openTopic, "txn": {Partitions: 1, MaxMessageBytes: 77}})
		rt, err := s.resolve(noIO(), framed)
		if err != nil {
			t.Fatal(err)
		}
		if rt.frame.MaxMessageBytes != 77 {
			t.Errorf("frame topic limits %+v, want the txn topic's", rt.frame)
		}
	})
}
