package kafkasink

import (
	"context"

	"github.com/kafkasink/kafkasink/internal/topicadmin"
	"github.com/twmb/franz-go/pkg/kgo"
)

// planSending plans b and sends its first part while planning: it drops
// the events the checkpoint already covers (delivered), resolves the
// routes and topics of the rest (resolve, the phase that does I/O),
// encodes them into records split into parts (encoding.run, the phase
// that does none), and reports what encoding kept to report: the events
// that cannot be delivered (reportRejected), the events the Encoder
// leaves out and the dead letters without their value. A plan without
// parts has nothing to deliver: every event was delivered before.
//
// send, when not nil, is given each record of the first part as soon as it
// is encoded, so that the ExactlyOnce sink produces it while the rest is
// encoded; what send started is the caller's to finish, also when
// planSending fails (see txnSink.writeBatch). With a nil send it only
// plans. b must have passed checkBatch.
func (s *Sink) planSending(ctx context.Context, b *Batch, send func(*kgo.Record)) (*plan, error) {
	ck := s.Checkpoint()
	events, skipped := delivered(b.Events, ck.Position)
	if skipped.Events > 0 {
		s.log.Info("skipping events the checkpoint covers (redelivery after a restart)",
			"skipped", skipped.Events, "checkpoint", ck.Position.String())
		s.hooks.onSkipped(skipped)
	}
	rt, err := s.resolve(ctx, events)
	if err != nil {
		return nil, err
	}
	en := s.newEncoding(b, events, rt, send)
	err = s.encode(ctx, &en)
	for _, l := range en.lost {
		s.logLostValue(l)
	}
	if err != nil {
		return nil, err
	}
	if en.omitted.Events > 0 {
		s.log.Info("skipping events the Encoder leaves out", "skipped", en.omitted.Events, "first", en.omitted.First.String(), "last", en.omitted.Last.String())
		s.hooks.onSkipped(en.omitted)
	}
	if err := s.reportRejected(en.rejections, s.cfg.DeadLetterTopic != ""); err != nil {
		return nil, err
	}
	p := en.p
	if len(p.parts) == 0 && p.cursor != nil && p.skipped == 0 {
		// A batch of no events moving only the cursor, such as an
		// empty snapshot chunk: one part holding just the checkpoint.
		// (A redelivered cursor is stored already, with its events.)
		p.parts = []part{{first: ck.Position, last: ck.Position}}
	}
	return p, nil
}

// delivered returns the events above the checkpoint position ck, and
// what it skips: the ones at or below it, which were delivered before (a
// source redelivering after a restart).
func delivered(events []Event, ck Position) ([]Event, SkipInfo) {
	rest := events
	for len(rest) > 0 && rest[0].Position.Compare(ck) <= 0 {
		rest = rest[1:]
	}
	skipped := len(events) - len(rest)
	if skipped == 0 {
		return rest, SkipInfo{}
	}
	return rest, SkipInfo{First: events[0].Position, Last: events[skipped-1].Position, Events: skipped, Checkpoint: ck}
}

// encode runs en to its end, making sure of the dead-letter topic when en
// first needs it, at the batch's first dead letter: a batch without one
// never asks for it.
func (s *Sink) encode(ctx context.Context, en *encoding) error {
	for {
		needDeadLetterTopic, err := en.run()
		if err != nil || !needDeadLetterTopic {
			return err
		}
		info, err := s.topics.Get(ctx, s.cl, s.cfg.DeadLetterTopic)
		if err != nil {
			return err
		}
		en.deadLetter, en.deadLetterKnown = info, true
	}
}

// routing is what resolve found out for encoding: each event's
// RecordShape, and each table's route with its topic's limits. Its memory
// is the Sink's, reused by the next plan.
type routing struct {
	shapes []RecordShape // of each event; nil without a RecordShaper
	tables []routedTable
	index  map[[2]string]int // of tables, by schema and table
	// frame is the limits of the Framer's topic, when an event asks for
	// a record around it.
	frame topicadmin.Info
	// order is the tables in the order their first encoded event comes.
	order []int
}

// routedTable is the route of one table of a batch.
type routedTable struct {
	tableRoute
	schema, table string
	info          topicadmin.Info // the limits of topic, when it is made sure of
	used          int             // the index of its first encoded event; -1 when none
}

// reset empties rt for a plan of n events.
func (rt *routing) reset(n int, shaped bool) {
	switch {
	case !shaped:
		rt.shapes = nil
	case cap(rt.shapes) < n:
		rt.shapes = make([]RecordShape, 0, n)
	default:
		rt.shapes = rt.shapes[:0]
	}
	clear(rt.tables) // let go of the routes' memory
	rt.tables, rt.order = rt.tables[:0], rt.order[:0]
	if rt.index == nil {
		rt.index = make(map[[2]string]int)
	}
	clear(rt.index)
	rt.frame = topicadmin.Info{}
}

// of returns the route of e's table; nil when it has none. *last is the
// index of the table the caller found last, which it tries first (events
// come in runs of one table); of sets it to the table found.
func (rt *routing) of(e *Event, last *int) *routedTable {
	k := routeKey(e)
	if *last < len(rt.tables) {
		if t := &rt.tables[*last]; t.schema == k[0] && t.table == k[1] {
			return t
		}
	}
	i, ok := rt.index[k]
	if !ok {
		return nil
	}
	*last = i
	return &rt.tables[i]
}

// add adds the route of a table, with its topic's limits, and returns its
// index.
func (rt *routing) add(schema, table string, route tableRoute, info topicadmin.Info) int {
	i := len(rt.tables)
	rt.index[[2]string{schema, table}] = i
	rt.tables = append(rt.tables, routedTable{tableRoute: route, schema: schema, table: table, info: info, used: -1})
	return i
}

// shape returns the RecordShape of events[i].
func (rt *routing) shape(i int) RecordShape {
	if rt.shapes == nil {
		return RecordShape{}
	}
	return rt.shapes[i]
}

// resolve is the first phase of a plan, the one that does I/O. It shapes
// the events (RecordShaper) and routes their tables (claiming their
// topics), each once: the tables of the events the Encoder writes, and
// with a Preparer, which is given the route of every event, those of the
// events it leaves out too. Then it runs the Preparer, and makes sure of
// the topics (creating them when allowed, learning their limits) in the
// order the events reach them: the topic of each table of an event the
// Encoder writes, and the Framer's when an event asks for a record around
// it. It returns the first error: a Preparer's, a table routed to
// another's topic (fatal), a topic missing or not created.
func (s *Sink) resolve(ctx context.Context, events []Event) (*routing, error) {
	shaper, _ := s.cfg.Encoder.(RecordShaper)
	framer, _ := shaper.(Framer)
	pr, prepares := s.cfg.Encoder.(Preparer)
	rt := &s.routing
	rt.reset(len(events), shaper != nil)
	frameAt := -1 // the first event asking for a record around it
	last := 0     // the table of the last event
	for i := range events {
		e := &events[i]
		var shape RecordShape
		if shaper != nil {
			if e.Record == nil {
				shape = shaper.Shape(e)
			}
			rt.shapes = append(rt.shapes, shape)
		}
		if framer != nil && frameAt < 0 && (shape.RecordBefore || shape.RecordAfter) {
			frameAt = i
		}
		if shape.Skip && !prepares {
			continue // no record and no Preparer: never routed
		}
		t := rt.of(e, &last)
		if t == nil {
			k := routeKey(e)
			last = rt.add(k[0], k[1], s.routeOf(e), topicadmin.Info{})
			t = &rt.tables[last]
		}
		if !shape.Skip && t.used < 0 {
			t.used = i
			rt.order = append(rt.order, last)
		}
	}
	if prepares {
		if err := s.prepare(ctx, pr, events, rt); err != nil {
			return nil, err
		}
	}
	if err := s.ensureTopics(ctx, rt, frameAt); err != nil {
		return nil, err
	}
	return rt, nil
}

// ensureTopics makes sure of the topics of rt's tables, and of the
// Framer's when frameAt (the first event asking for a record around it) is
// not -1, in the order the events reach them. A table routed to another's
// topic is a fatal error there; an unroutable table has no topic (its
// events are rejected).
func (s *Sink) ensureTopics(ctx context.Context, rt *routing, frameAt int) error {
	var err error
	for _, k := range rt.order {
		t := &rt.tables[k]
		if frameAt >= 0 && frameAt <= t.used {
			if rt.frame, err = s.topics.Get(ctx, s.cl, s.frameTopic); err != nil {
				return err
			}
			frameAt = -1
		}
		if t.collision != nil {
			return t.collision
		}
		if t.err == nil {
			if t.info, err = s.topics.Get(ctx, s.cl, t.topic); err != nil {
				return err
			}
		}
	}
	if frameAt >= 0 {
		rt.frame, err = s.topics.Get(ctx, s.cl, s.frameTopic)
	}
	return err
}

// lostValue is a dead-lettered event whose record carries no value: it
// is too large even for the dead-letter topic (see deadLetterRecord).
type lostValue struct {
	position      Position
	schema, table string
	reason        Reason
	limit         int // the dead-letter topic's
}

// logLostValue logs l at Error: the row's values are in no Kafka record.
func (s *Sink) logLostValue(l lostValue) {
	s.log.Error("dead-lettered event is too large even for the dead-letter topic: its record carries only the key and headers, and the row's values are in no Kafka record; raise the dead-letter topic's max.message.bytes and Config.MaxRecordBytes, or recover the row from the database",
		"position", l.position.String(), "table", TableName(l.schema, l.table), "reason", string(l.reason),
		"dead_letter_topic", s.cfg.DeadLetterTopic, "limit", l.limit)
}
