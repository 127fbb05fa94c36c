package kafkasink

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/kafkasink/kafkasink/internal/topicadmin"
	"github.com/kafkasink/kafkasink/internal/topicclaims"
	"github.com/twmb/franz-go/pkg/kgo"
)

// plan is a batch made ready for Kafka: validated, filtered against the
// checkpoint, encoded, and split into parts that each end with one
// checkpoint.
type plan struct {
	events   int // events in the batch
	skipped  int // at or below the checkpoint
	rejected int // dead-lettered
	parts    []part
	cursor   json.RawMessage // the batch cursor; nil keeps the previous one
	enc      *encoderState   // the memory of the records, for the next plan once these are delivered
	planned  []Event         // the events planned, in order: a record the broker refuses is dead-lettered with its event
	records  int             // records in parts
}

// part is what one transaction (ExactlyOnce) or one checkpointed step
// (other modes) writes.
type part struct {
	records   []*kgo.Record
	positions []Position // the event position of each record, for errors
	events    int
	bytes     int
	first     Position
	last      Position
}

// written returns how many events the plan writes to their topics.
func (p *plan) written() int {
	n := 0
	for i := range p.parts {
		n += p.parts[i].events
	}
	return n - p.rejected
}

// checkBatch refuses a batch that is malformed as a whole, before anything
// is encoded.
func checkBatch(b *Batch) error {
	for i := range b.Events {
		e := &b.Events[i]
		switch {
		case e.Position.IsZero():
			return fmt.Errorf("%w: event %d (table %s.%s) has the zero Position, which sorts at or below every checkpoint and would be skipped as delivered; set Event.Position (the commit LSN and the index within the transaction)", ErrInvalidBatch, i, e.Schema, e.Table)
		case e.Table == "":
			return fmt.Errorf("%w: event %d (position %s) has no table; set Event.Table", ErrInvalidBatch, i, e.Position)
		case e.Schema == "":
			return fmt.Errorf("%w: event %d (position %s, table %q) has no schema; set Event.Schema (PostgreSQL's default is \"public\")", ErrInvalidBatch, i, e.Position, e.Table)
		case !e.Op.Valid():
			return fmt.Errorf("%w: event %d (position %s, table %s.%s) has invalid Op %d", ErrInvalidBatch, i, e.Position, e.Schema, e.Table, e.Op)
		case i > 0 && e.Position.Compare(b.Events[i-1].Position) <= 0:
			return fmt.Errorf("%w: event %d has position %s, not above event %d's %s: positions must strictly increase within a batch", ErrInvalidBatch, i, e.Position, i-1, b.Events[i-1].Position)
		}
	}
	if b.Cursor != nil && !json.Valid(b.Cursor) {
		return fmt.Errorf("%w: Batch.Cursor is not valid JSON", ErrInvalidBatch)
	}
	return nil
}

// encoding is the second phase of a plan (see resolve for the first): it
// encodes a batch's events into the parts of its plan from the
// configuration and what resolve found, and does no I/O: no network, no
// log, no hook, and it changes nothing of the Sink's (it has no Sink). Its
// one exception is send, when not nil, which is given each record of the
// first part as soon as it is made. What it finds to report it keeps: the
// rejected events (with a dead-letter topic, their dead-letter records
// are in the parts), the events the Encoder leaves out, the dead letters
// without their value.
type encoding struct {
	cfg        *Config
	p          *plan
	es         *encoderState // p.enc
	events     []Event       // p.planned
	routes     *routing
	frameTopic string
	send       func(*kgo.Record)
	// deadLetter is the dead-letter topic's limits, once known
	// (deadLetterKnown; see run for until then).
	deadLetter      topicadmin.Info
	deadLetterKnown bool

	next    int            // the next event to encode
	done    bool           // every event is encoded
	table   int            // the index in routes of the last event's table
	pending *pendingLetter // the event run stopped at, to dead-letter

	rejections []Rejection
	omitted    SkipInfo    // the events the Encoder leaves out
	lost       []lostValue // dead letters too large to carry their value
}

// pendingLetter is a rejected event whose dead-letter record waits for
// the dead-letter topic's limits, with the records made around it.
type pendingLetter struct {
	e             *Event
	d             draft
	rej           *Rejection
	before, after *kgo.Record
}

// newEncoding returns the encoding of events, b's events above the
// checkpoint, into a new plan of b, in the memory the last delivered
// Write left (see encoderState).
func (s *Sink) newEncoding(b *Batch, events []Event, routes *routing, send func(*kgo.Record)) encoding {
	shaper, _ := s.cfg.Encoder.(RecordShaper)
	framer, _ := shaper.(Framer)
	enc := s.encoderState(len(events), shaper, framer)
	if k, ok := s.cfg.Encoder.(AllKeysEncoder); ok {
		if k.EncodesAllKeys() {
			enc.keys = k
		}
	} else {
		enc.keyEncoder, _ = s.cfg.Encoder.(KeyEncoder)
	}
	p := &plan{events: len(b.Events), skipped: len(b.Events) - len(events), cursor: b.Cursor, enc: enc, planned: events}
	return encoding{cfg: &s.cfg, p: p, es: enc, events: events, routes: routes, frameTopic: s.frameTopic, send: send}
}

// run encodes the events into the parts of en.p, from en.next on. It
// returns needDeadLetterTopic when it stopped at a rejected event to
// dead-letter before the dead-letter topic's limits are known: set them
// (deadLetter, deadLetterKnown) and run again to go on. Once every event
// is encoded, running again changes nothing.
func (en *encoding) run() (needDeadLetterTopic bool, err error) {
	cfg, es, p := en.cfg, en.es, en.p
	if l := en.pending; l != nil {
		if !en.deadLetterKnown {
			return true, nil
		}
		en.pending = nil
		r := en.deadLetterRecord(l.e, l.d, l.rej)
		en.add(l.e.Position, true, l.before, r, nil, l.after)
	}
	for en.next < len(en.events) {
		i := en.next
		en.next++
		e := &en.events[i]
		shape := en.routes.shape(i)
		known := minValueSize(cfg.Encoder, e)
		// The value at least, and as much again for the key and any
		// escaping (and the records around the event); no record is
		// larger than MaxRecordBytes, and an event known to exceed it is
		// rejected before it is encoded.
		es.reserve(min(2*known, cfg.MaxRecordBytes))
		before, after, err := en.frames(e, shape)
		if err != nil {
			return false, err
		}
		if shape.Skip {
			en.omitted.note(e.Position)
			if before == nil && after == nil {
				p.omit(e.Position)
			} else {
				en.add(e.Position, false, before, after)
			}
			continue
		}
		d, rej := en.encodeEvent(i, e, known, shape.NullKey)
		r := d.record
		var tomb *kgo.Record
		if rej == nil && shape.Tombstone {
			tomb = &es.records[len(en.events)+i]
			*tomb = kgo.Record{Topic: r.Topic, Key: r.Key, Headers: r.Headers}
		}
		if rej != nil {
			en.rejections = append(en.rejections, *rej)
			if cfg.DeadLetterTopic == "" {
				continue
			}
			if !en.deadLetterKnown {
				en.pending = &pendingLetter{e: e, d: d, rej: rej, before: before, after: after}
				return true, nil
			}
			r = en.deadLetterRecord(e, d, rej)
		}
		en.add(e.Position, true, before, r, tomb, after)
	}
	if !en.done {
		en.done = true
		p.skipped += en.omitted.Events
	}
	return false, nil
}

// deadLetterRecord turns the draft of the rejected event e into its
// dead-letter record, counting it in the plan.
func (en *encoding) deadLetterRecord(e *Event, d draft, rej *Rejection) *kgo.Record {
	r, lost := deadLetterRecord(en.cfg, en.es, e, d, rej, en.deadLetter)
	if lost != nil {
		en.lost = append(en.lost, *lost)
	}
	en.p.rejected++
	return r
}

// add appends rs, the records of the event at pos (its record, and those
// a RecordShaper asked for; nil ones are left out), to the last part of
// en.p, or to a new part when the last one is full: at
// Config.MaxTransactionRecords events, or MaxTransactionBytes bytes with
// rs. The records of one event are never split across parts. An event
// the Encoder leaves out adds only the records around it, and is not
// counted (counted false). The records of the first part are given to
// en.send, when not nil.
func (en *encoding) add(pos Position, counted bool, rs ...*kgo.Record) {
	p := en.p
	size := 0
	for _, r := range rs {
		if r != nil {
			size += recordSize(r)
		}
	}
	last := len(p.parts) - 1
	if last < 0 || p.parts[last].events >= en.cfg.MaxTransactionRecords || p.parts[last].bytes+size > en.cfg.MaxTransactionBytes {
		p.parts = append(p.parts, p.newPart(pos))
		last++
	}
	pt := &p.parts[last]
	for _, r := range rs {
		if r == nil {
			continue
		}
		pt.records = append(pt.records, r)
		pt.positions = append(pt.positions, pos)
		p.records++
		if last == 0 && en.send != nil {
			en.send(r)
		}
	}
	if counted {
		pt.events++
	}
	pt.bytes += size
	pt.last = pos
}

// newPart starts a part at pos. Its records and positions are windows of
// the plan's encoderState, after those of the parts before it: only the
// last part grows, so they never overlap, and growing never copies.
func (p *plan) newPart(pos Position) part {
	o := p.records
	if o > cap(p.enc.ptrs) {
		// A Framer asked for more records than were counted: the
		// windows are used up, and the part's slices are its own.
		return part{first: pos}
	}
	return part{first: pos, records: p.enc.ptrs[o:o], positions: p.enc.positions[o:o]}
}

// omit records that the Encoder leaves the event at pos out (a
// RecordShape's Skip) with no record around it: the checkpoint moves past
// it, in the last part or a part of its own when there is none.
func (p *plan) omit(pos Position) {
	if len(p.parts) == 0 {
		p.parts = append(p.parts, p.newPart(pos))
	}
	p.parts[len(p.parts)-1].last = pos
}

// note counts an event the Encoder leaves out in info.
func (info *SkipInfo) note(pos Position) {
	if info.Events == 0 {
		info.First, info.ByEncoder = pos, true
	}
	info.Last = pos
	info.Events++
}

// frames makes the records the Encoder's Framer writes around e, as
// shape asks: nil where it asks for none. Each is checked against its
// topic's size limit; one too large fails the Write with a fatal
// *ConfigError, since its transaction would be described wrongly without
// it, whatever becomes of the event.
func (en *encoding) frames(e *Event, shape RecordShape) (before, after *kgo.Record, err error) {
	es := en.es
	if es.framer == nil || !shape.RecordBefore && !shape.RecordAfter {
		return nil, nil, nil
	}
	topic := en.frameTopic
	frame := func(last bool) (*kgo.Record, error) {
		start := len(es.arena)
		out, keyLen := es.framer.AppendFrame(es.arena, e, last)
		es.arena = out
		if len(es.frames) == cap(es.frames) {
			// A new block rather than append's copy: the records
			// already made may be in the client's hands (sent early),
			// which writes their offsets while a copy would read them.
			es.frames = make([]kgo.Record, 0, max(2*cap(es.frames), 16))
		}
		es.frames = append(es.frames, kgo.Record{Topic: topic,
			Key:   es.arena[start : start+keyLen : start+keyLen],
			Value: es.take(start + keyLen)})
		r := &es.frames[len(es.frames)-1]
		if err := en.cfg.checkRecordSize(recordSize(r), true, topic, en.routes.frame); err != nil {
			where := "before"
			if last {
				where = "after"
			}
			return nil, &ConfigError{Problems: []string{fmt.Sprintf("the record the Encoder writes %s the event at %s (table %s.%s) on topic %s: %v; raise the topic's max.message.bytes (and Config.MaxRecordBytes)",
				where, e.Position, e.Schema, e.Table, topic, err)}}
		}
		return r, nil
	}
	if shape.RecordBefore {
		if before, err = frame(false); err != nil {
			return nil, nil, err
		}
	}
	if shape.RecordAfter {
		if after, err = frame(true); err != nil {
			return nil, nil, err
		}
	}
	return before, after, nil
}

// reportRejected reports rejected events to the hooks and the log,
// dead-lettered or not; when not, they fail the batch: it returns a
// *RejectedError listing all of them.
func (s *Sink) reportRejected(rejections []Rejection, deadLettered bool) error {
	for _, r := range rejections {
		s.hooks.onRejected(r, deadLettered)
		s.log.Warn("event rejected", "position", r.Position.String(), "table", r.Schema+"."+r.Table,
			"reason", string(r.Reason), "error", r.Err, "dead_lettered", deadLettered)
	}
	if len(rejections) > 0 && !deadLettered {
		return &RejectedError{Rejections: rejections}
	}
	return nil
}

// nextCheckpoint is the checkpoint written with part i of p: the part's
// last position, and the batch cursor only with the last part, because
// until then the source must still resume from the previous cursor.
func (s *Sink) nextCheckpoint(p *plan, i int) Checkpoint {
	ck := s.Checkpoint()
	next := Checkpoint{Position: p.parts[i].last, Cursor: ck.Cursor, Mode: s.cfg.Mode, Time: time.Now()}
	if i == len(p.parts)-1 && p.cursor != nil {
		next.Cursor = p.cursor
	}
	return next
}

// draft is what encoding made of one event: its record, or, for a
// rejected event, as much of the record as could be made, which the
// dead-letter record reuses.
type draft struct {
	record    *kgo.Record // Topic, Headers, and Key and Value when made
	keyMade   bool
	valueMade bool  // Value is the Encoder's (nil: a tombstone)
	valueErr  error // the Encoder's error; nil when it was not called
}

// encodeEvent builds the record of e, or says why e is rejected. The
// first reason found is the rejection's: unroutable, then no_key or
// unencodable (key, then value), then too_large. A keyless event (a null
// key) bound for a compacted topic is no_key too: the broker would refuse
// it with INVALID_RECORD and fail its whole transaction. A record that cannot fit
// its topic by the lengths of its values alone is rejected before the
// value is encoded (knownValueSize is minValueSize of e); so is a rejected one, whose value
// only the dead-letter topic may need. Two tables routed to one topic are
// a fatal error, not a rejection: dead-lettering one of them would change
// sides with every restart, as whichever table comes first claims the
// topic (resolve returns that error before anything is encoded).
func (en *encoding) encodeEvent(i int, e *Event, knownValueSize int, shapedNullKey bool) (draft, *Rejection) {
	es := en.es
	t := en.routes.of(e, &en.table)
	d := draft{record: &es.records[i]}
	if e.Record != nil {
		return en.encodeSourceRecord(e, t, d)
	}
	rt, info := t.tableRoute, t.info
	*d.record = kgo.Record{Topic: rt.topic, Headers: es.standardHeaders(en.cfg.Headers, e)}
	if es.shaper != nil {
		d.record.Headers = en.shapedHeaders(d.record.Headers, e, rt.keyColumns)
	}
	d.record.Headers = extendHeaders(es, d.record.Headers, en.cfg.annotationHeaders)
	var rej *Rejection
	reject := func(reason Reason, err error) {
		if rej == nil { // the first reason is the rejection's
			rej = &Rejection{Position: e.Position, Schema: e.Schema, Table: e.Table, Topic: rt.topic, Reason: reason, Err: err}
		}
	}
	if rt.err != nil {
		reject(ReasonUnroutable, rt.err)
	}

	start := len(es.arena)
	var keyOut []byte
	var err error
	switch {
	case es.keys != nil:
		keyOut, err = es.keys.EncodeKey(es.arena, e, rt.keyColumns)
	case es.keyEncoder != nil:
		keyOut, err = appendEncodedKey(es.arena, es.keyEncoder, e, rt.keyColumns, en.cfg.KeyFormat)
	default:
		keyOut, err = AppendKey(es.arena, e, rt.keyColumns, en.cfg.KeyFormat)
	}
	switch {
	case errors.Is(err, errMissingKeyColumn):
		reject(ReasonNoKey, err)
	case err != nil:
		reject(ReasonUnencodable, err)
	case nullKey(e, rt.keyColumns) && info.Compacted:
		reject(ReasonNoKey, nullKeyOnCompactedTopic(e, rt.topic))
	case shapedNullKey && info.Compacted:
		reject(ReasonNoKey, shapedNullKeyOnCompactedTopic(en.cfg.Encoder, e, rt.topic))
	default:
		es.arena = keyOut
		if !nullKey(e, rt.keyColumns) && !shapedNullKey {
			d.record.Key = es.take(start)
		}
		d.keyMade = true
	}

	if rej != nil {
		return d, rej // deadLetterRecord makes the value, if it can fit
	}
	if err := en.cfg.checkRecordSize(recordSize(d.record)+knownValueSize, false, rt.topic, info); err != nil {
		reject(ReasonTooLarge, err)
		return d, rej
	}
	if d.valueErr = encodeValue(es, d.record, en.cfg.Encoder, e); d.valueErr != nil {
		reject(ReasonUnencodable, d.valueErr)
		return d, rej
	}
	d.valueMade = true
	if err := en.cfg.checkRecordSize(recordSize(d.record), true, rt.topic, info); err != nil {
		reject(ReasonTooLarge, err)
	}
	return d, rej
}

// encodeValue sets r.Value to enc's value of e.
func encodeValue(es *encoderState, r *kgo.Record, enc Encoder, e *Event) error {
	start := len(es.arena)
	out, err := enc.Encode(es.arena, e)
	if err != nil {
		es.arena = es.arena[:start]
		return err
	}
	r.Value = nil // a tombstone
	if out != nil {
		es.arena = out
		r.Value = es.take(start)
	}
	return nil
}

// tableRoute is where one table's events go and how they are keyed.
type tableRoute struct {
	topic      string
	err        error // the table cannot be routed: its events are rejected
	collision  error // the topic is another table's or the sink's: fatal
	keyColumns []string
}

// routeOf returns the route of e's table, computed once per table unless
// a Topics.Route function decides (it may answer differently over time):
// then once per plan (see resolve).
func (s *Sink) routeOf(e *Event) tableRoute {
	if e.Record != nil {
		return s.sourceRecordRoute(e.Record)
	}
	k := [2]string{e.Schema, e.Table}
	if rt, ok := s.routes[k]; ok {
		return rt
	}
	var (
		rt   tableRoute
		kind topicclaims.Kind
	)
	rt.topic, kind, rt.err = s.router.Route(e.Schema, e.Table)
	if rt.err == nil {
		if problem := s.router.Claim(rt.topic, e.Schema, e.Table, kind); problem != "" {
			rt.collision = &ConfigError{Problems: []string{problem}}
		}
	}
	rt.keyColumns = s.router.KeyColumns(e.Schema, e.Table)
	if s.cfg.Topics.Route == nil {
		s.routes[k] = rt
	}
	return rt
}

// shapedHeaders returns the record headers hs (the standard ones, the
// last appended to es.headers) followed by the headers es.shaper adds for
// e, so that the record's size checks count them. For a key change it
// renders the other event's key (by keyColumns, as the record's own) for
// them; a key it cannot render is left out, as the event's own key
// decides the event's fate.
func (en *encoding) shapedHeaders(hs []kgo.RecordHeader, e *Event, keyColumns []string) []kgo.RecordHeader {
	es := en.es
	var otherKey []byte
	if e.Source.KeyChange != nil {
		other := Event{Op: OpInsert, Schema: e.Schema, Table: e.Table, Position: e.Position, Key: e.Key, Relation: e.Relation, After: e.Source.KeyChange}
		start := len(es.arena)
		var out []byte
		var err error
		if es.keys != nil {
			out, err = es.keys.AppendKeyPayload(es.arena, &other, keyColumns)
		} else {
			out, err = AppendKey(es.arena, &other, keyColumns, en.cfg.KeyFormat)
		}
		if err == nil {
			es.arena = out
			otherKey = es.take(start)
		}
	}
	es.shaped, es.arena = es.shaper.AppendHeaders(es.shaped[:0], es.arena, e, otherKey)
	return extendHeaders(es, hs, es.shaped)
}
