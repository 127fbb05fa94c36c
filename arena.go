package kafkasink

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink/internal/arena"
)

// This file is the memory a batch is encoded into, kept from one Write to
// the next.

// minEventRoom is the room in the arena every event gets on top of what
// its values are known to take (see encoderState.reserve).
const minEventRoom = 4 << 10

// encoderState holds the memory shared by all records of one plan, so
// that encoding costs no allocation per event: the records, their headers,
// and the arena of their keys, values and header values. A Write that
// succeeds hands it to the next Write (see Sink.reuse for why that is
// safe), whose plan overwrites it (Sink.encoderState).
type encoderState struct {
	records   []kgo.Record
	ptrs      []*kgo.Record // the parts' records (see plan.newPart)
	positions []Position    // the parts' positions
	headers   []kgo.RecordHeader
	arena     []byte         // the chunk being filled
	chunks    arena.Chunks   // every chunk
	shaper    RecordShaper   // the Encoder's, when it has one
	framer    Framer         // the Encoder's, when it has one
	frames    []kgo.Record   // the records around events
	keys      AllKeysEncoder // the Encoder's, when it writes every key
	// keyEncoder is the Encoder's KeyEncoder, when it writes the keys of
	// row changes with key columns.
	keyEncoder KeyEncoder
	shaped     []Header // its headers of one event, reused
	shared     sharedHeaderValues
}

// encoderState returns the memory for a plan of events: what the last
// successful Write left, reset, or new. The sizes are what the sink
// knows a batch needs: a record and the configured headers per event,
// and with a RecordShaper a second record per event for its tombstone
// (at events+i; RecordShape allows one). What an Encoder adds beyond
// that, its own headers and a Framer's records around events, is
// appended as it comes (records already made keep their memory), and a
// reused state keeps the room the last batch took: sizing it up front
// would mean guessing one Encoder's habits.
func (s *Sink) encoderState(events int, shaper RecordShaper, framer Framer) *encoderState {
	es := s.spare
	s.spare = nil
	if es == nil {
		es = &encoderState{}
	}
	records, headers := events, (s.cfg.Headers.count()+len(s.cfg.annotationHeaders))*events
	if shaper != nil {
		records = 2 * events // a tombstone shares its event's headers
	}
	if cap(es.records) < records {
		es.records = make([]kgo.Record, records)
	}
	es.records = es.records[:records]
	es.frames = es.frames[:0]
	if cap(es.ptrs) < records {
		es.ptrs = make([]*kgo.Record, 0, records)
		es.positions = make([]Position, 0, records)
	}
	if cap(es.headers) < headers {
		es.headers = make([]kgo.RecordHeader, 0, headers)
	}
	es.headers = es.headers[:0]
	es.arena, es.shared = nil, sharedHeaderValues{}
	es.chunks.Reset()
	es.shaper, es.framer, es.keys, es.keyEncoder = shaper, framer, nil, nil
	return es
}

// reuse keeps the memory of p's records for the next Write. Only a Write
// that returned nil may call it: every record of p then has its outcome,
// and the client holds none. What p did not use is let go, so that one
// large batch does not pin its memory for the life of the sink.
func (s *Sink) reuse(p *plan) {
	es := p.enc
	if es == nil {
		return
	}
	es.chunks.Trim(es.arena)
	if cap(es.records) > 2*len(es.records) {
		es.records, es.ptrs, es.positions = nil, nil, nil
	}
	if cap(es.headers) > 2*len(es.headers) {
		es.headers = nil
	}
	es.arena, es.shaper, es.framer, es.keys, es.keyEncoder = nil, nil, nil, nil, nil
	s.spare = es
}

// reserve is called before an event is encoded, with what its key,
// value and headers are known to take at least (see minValueSize): it
// makes sure the arena has that much room and minEventRoom more. An
// event that takes more than it reserved grows its chunk by copying:
// rare, and bounded by the chunk.
func (es *encoderState) reserve(known int) {
	es.arena = es.chunks.Room(es.arena, known+minEventRoom)
}

// eventID appends e's event id to the arena and returns it, for a record
// key or the kafkasink.id header.
func (es *encoderState) eventID(e *Event) []byte {
	start := len(es.arena)
	es.arena = e.Position.AppendText(es.arena)
	return es.take(start)
}

// take returns the bytes appended to the arena since start, capped so a
// later append cannot overwrite them.
func (es *encoderState) take(start int) []byte {
	return es.arena[start:len(es.arena):len(es.arena)]
}
