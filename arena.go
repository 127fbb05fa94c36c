package kafkasink

import "github.com/twmb/franz-go/pkg/kgo"

// This file is the memory a batch is encoded into, kept from one Write to
// the next.

// arenaChunk is the size of the arena's chunks. A chunk is filled and
// then left for the next, never grown by copying (unless one event
// outgrows a whole chunk): a single arena grown by append copied the whole
// batch each time it doubled, which with the page faults of fresh memory
// was a quarter of a Write's CPU time on 10,000 events of 1 KB.
const arenaChunk = 1 << 20

// minEventRoom is the room in the arena every event gets on top of what
// its values are known to take (see encoderState.reserve).
const minEventRoom = 4 << 10

// encoderState holds the memory shared by all records of one plan, so
// that encoding costs no allocation per event: the records, their headers,
// and the arena of their keys, values and header values. A Write that
// succeeds hands it to the next Write (see Sink.encoderState), whose plan
// overwrites it: by then every record has its outcome and the client holds
// none of them.
type encoderState struct {
	records   []kgo.Record
	ptrs      []*kgo.Record // the parts' records (see plan.newPart)
	positions []Position    // the parts' positions
	headers   []kgo.RecordHeader
	arena     []byte         // the chunk being filled
	chunks    [][]byte       // every chunk, in the order they are filled
	chunk     int            // the index of arena in chunks; -1 before the first
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
// successful Write left, reset, or new. With a RecordShaper there is room
// for a tombstone per event (at events+i) and for its headers, and with
// a Framer for frames records around them.
func (s *Sink) encoderState(events int, shaper RecordShaper, framer Framer, frames int) *encoderState {
	es := s.spare
	s.spare = nil
	if es == nil {
		es = &encoderState{}
	}
	records, headers := events, (s.cfg.Headers.count()+len(s.cfg.annotationHeaders))*events
	if shaper != nil {
		// A tombstone shares its event's headers; room for five of the
		// shaper's own (the debezium package's extended headers).
		records, headers = 2*events, headers+5*events
	}
	if cap(es.records) < records {
		es.records = make([]kgo.Record, records)
	}
	es.records = es.records[:records]
	if cap(es.frames) < frames {
		es.frames = make([]kgo.Record, 0, frames)
	}
	es.frames = es.frames[:0]
	if cap(es.ptrs) < records+frames {
		es.ptrs = make([]*kgo.Record, 0, records+frames)
		es.positions = make([]Position, 0, records+frames)
	}
	if cap(es.headers) < headers {
		es.headers = make([]kgo.RecordHeader, 0, headers)
	}
	es.headers = es.headers[:0]
	es.arena, es.chunk, es.shared = nil, -1, sharedHeaderValues{}
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
	if es.chunk >= 0 {
		es.chunks[es.chunk] = es.arena[:0]
	}
	clear(es.chunks[es.chunk+1:])
	es.chunks = es.chunks[:es.chunk+1]
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
// makes sure the arena has that much room and minEventRoom more, moving
// on to the next chunk when it has not. An event that takes more than it
// reserved grows its chunk by copying: rare, and bounded by the chunk.
func (es *encoderState) reserve(known int) {
	need := known + minEventRoom
	if cap(es.arena)-len(es.arena) >= need {
		return
	}
	if es.chunk >= 0 {
		es.chunks[es.chunk] = es.arena[:0] // grown, if an event outgrew it
	}
	es.chunk++
	if es.chunk == len(es.chunks) {
		es.chunks = append(es.chunks, nil)
	}
	if cap(es.chunks[es.chunk]) < need {
		es.chunks[es.chunk] = make([]byte, 0, max(arenaChunk, need))
	}
	es.arena = es.chunks[es.chunk][:0]
}

// take returns the bytes appended to the arena since start, capped so a
// later append cannot overwrite them.
func (es *encoderState) take(start int) []byte {
	return es.arena[start:len(es.arena):len(es.arena)]
}
