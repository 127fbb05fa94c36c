package kafkasink

import (
	"context"
	"fmt"

	"github.com/kafkasink/kafkasink/internal/ctxerr"
	"github.com/kafkasink/kafkasink/internal/produced"
)

// producerSink is the Idempotent and Plain sink: records first, then the
// checkpoint once they are all acknowledged. The two modes differ only in
// the client options (see Sink.producerOptions).
type producerSink struct {
	sink *Sink // what the modes share (see txnSink)
}

var _ mode = (*producerSink)(nil)

// writeBatch plans b and writes its parts in order. Nothing is sent before
// the plan is whole: a rejected event fails the batch before any of it is
// written.
func (s *producerSink) writeBatch(ctx context.Context, b *Batch) (*plan, int, error) {
	p, err := s.sink.planSending(ctx, b, nil)
	if err != nil {
		return nil, 0, err
	}
	n, err := s.deliver(ctx, p)
	return p, n, err
}

// deliver writes each part of p, then its checkpoint. A crash between the
// two redelivers the part: the duplicates are bounded by the events since
// the last checkpoint.
func (s *producerSink) deliver(ctx context.Context, p *plan) (int, error) {
	for i := range p.parts {
		pt := &p.parts[i]
		ck := s.sink.nextCheckpoint(p, i)
		var results produced.Results
		for _, r := range pt.records {
			results.Produce(ctx, s.sink.cl, r)
		}
		if err := s.sink.cl.Flush(ctx); err != nil {
			if derr := s.sink.deletedTopic(ctx, pt); derr != nil {
				return i, derr
			}
			return i, fmt.Errorf("kafkasink: flushing events %s..%s: %w", pt.first, pt.last, err)
		}
		if _, err := results.Wait(); err != nil {
			err = s.sink.produceError(ctx, pt, ck, &results)
			ref := refusalOf(err)
			if ref == nil {
				return i, err
			}
			if err := s.quarantine(ctx, p, i, ref); err != nil {
				return i, err
			}
		}
		ckRec, err := s.sink.store.record(ck)
		if err != nil {
			return i, err
		}
		s.sink.state.sent(ck)
		if err := s.sink.cl.ProduceSync(ctx, ckRec).FirstErr(); err != nil {
			return i, s.sink.writeError(ctx, pt, ck, ckRec, err)
		}
		at := ckRec.Offset
		if s.sink.cfg.Acks == AcksNone {
			at = noOffset
		}
		s.sink.state.committed(ck, at)
	}
	return len(p.parts), nil
}

// finish has nothing to check: only transactions have markers.
func (s *producerSink) finish(context.Context) error { return nil }

// settleClient fails the records a failed Write left buffered in the
// client (its context ended before they were flushed). Left there, they
// would be sent ahead of the redelivery's records, and the client fails a
// batch by its first record's context: the redelivery would fail with the
// old Write's deadline. kgo fails them at safe points, after the requests
// in flight are answered, so that sequence numbers stay consistent:
// records of the failed Write that did reach the broker stay in the topic,
// and the redelivery writes them again, the duplicates these modes allow
// after a failure.
func (s *producerSink) settleClient(ctx context.Context) error {
	if err := s.sink.cl.AbortBufferedRecords(ctx); err != nil {
		return fmt.Errorf("kafkasink: recovering: failing the records a failed Write left buffered: %w", ctxerr.WithCause(ctx, err))
	}
	return nil
}
