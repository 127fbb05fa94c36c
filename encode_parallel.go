package kafkasink

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// minParallelEvents is the smallest batch whose encoding is split across
// two goroutines: below it, starting one costs more than it saves.
const minParallelEvents = 512

// encodesInParallel says whether the events of a plan are encoded by two
// goroutines, each a contiguous half: only when nothing is sent while
// planning (the Idempotent and Plain modes), for the built-in encoders,
// which keep no state between events but a cache safe for concurrent use,
// without a Framer (whose records describe the events in order), and
// with routes that a map holds (a Topics.Route function is called in
// order instead).
func (s *Sink) encodesInParallel(events []Event, send func(*kgo.Record)) bool {
	if send != nil || len(events) < minParallelEvents || s.cfg.Topics.Route != nil || frameTopic(s.cfg.Encoder) != "" {
		return false
	}
	switch s.cfg.Encoder.(type) {
	case JSONEncoder, *JSONEncoder, UpsertEncoder, *UpsertEncoder, DebeziumEncoder, *DebeziumEncoder:
		return true
	}
	return false
}

// encodeInParallel encodes the first half of events into es and the
// second into es's sibling on another goroutine, then gives each outcome
// to place in the order of the events. The error of the first event that
// failed wins, as when encoding in order: the first half's, else the
// second's.
func (s *Sink) encodeInParallel(ctx context.Context, es *encoderState, events []Event, place func(int, eventOutcome) error) error {
	// Every table's route is in s.routes before the goroutines read it.
	for i := range events {
		if i == 0 || events[i].Table != events[i-1].Table || events[i].Schema != events[i-1].Schema {
			s.routeOf(&events[i])
		}
	}
	if cap(es.outcomes) < len(events) {
		es.outcomes = make([]eventOutcome, len(events))
	}
	outcomes := es.outcomes[:len(events)]
	half := len(events) / 2
	second := es.secondHalf(s, len(events)-half)
	var (
		wg        sync.WaitGroup
		secondErr error
	)
	wg.Go(func() {
		for i := half; i < len(events); i++ {
			o, err := s.encodeOne(ctx, second, events, i)
			if err != nil {
				secondErr = err
				return
			}
			outcomes[i] = o
		}
	})
	for i := range half {
		o, err := s.encodeOne(ctx, es, events, i)
		if err != nil {
			wg.Wait()
			return err
		}
		outcomes[i] = o
	}
	wg.Wait()
	if secondErr != nil {
		return secondErr
	}
	for i := range events {
		if err := place(i, outcomes[i]); err != nil {
			return err
		}
	}
	clear(outcomes)
	return nil
}

// secondHalf returns the memory for the second half of a plan of es,
// events of them: its own arena and headers, kept with es from one Write
// to the next, and es's records, of which it fills its own.
func (es *encoderState) secondHalf(s *Sink, events int) *encoderState {
	sib := es.sibling
	if sib == nil {
		sib = &encoderState{}
		es.sibling = sib
	}
	headers := s.cfg.Headers.count() * events
	if es.shaper != nil {
		headers += 5 * events
	}
	if cap(sib.headers) < headers {
		sib.headers = make([]kgo.RecordHeader, 0, headers)
	}
	sib.headers = sib.headers[:0]
	sib.records = es.records
	sib.arena, sib.chunk, sib.shared = nil, -1, sharedHeaderValues{}
	sib.shaper, sib.keys, sib.keyEncoder = es.shaper, es.keys, es.keyEncoder
	return sib
}
