package pgcdc

import (
	"context"
	"log/slog"
	"time"

	"github.com/kafkasink/kafkasink"
)

// This file is every sink.Write Run makes: the snapshot's chunks and a
// recorded gap through runner.writeCursor, the stream's batches through
// the session's writer goroutine, both retrying with writeRetrying.

// writeCursor writes events with the cursor next, retrying retryable
// errors, and makes next Run's cursor once it is written: a cursor that
// did not reach the checkpoint must not steer the next attempt.
func (r *runner) writeCursor(ctx context.Context, next cursor, events []kafkasink.Event) error {
	raw, err := next.marshal()
	if err != nil {
		return err
	}
	if err := writeRetrying(ctx, ctx, r.cfg, r.log, r.sink, kafkasink.Batch{Events: events, Cursor: raw}); err != nil {
		return err
	}
	r.cursor = next
	return nil
}

// writer writes the batches it is handed, in order. sctx ends the session:
// the writer then stops retrying, but a Write in progress runs on with
// ctx, so only cancelling ctx interrupts it.
//
// Every Write carries the cursor with the highest LSN the loop may then
// confirm, so the checkpoint always covers what the slot was told: a slot
// found beyond it at start-up was moved by someone else. A batch with no
// events to deliver (a keepalive's or heartbeat's position, or events the
// checkpoint already covers) is written as a cursor-only checkpoint at
// most once per Config.tick; meanwhile its position is not confirmed.
func (s *session) writer(ctx, sctx context.Context) {
	for b := range s.batches {
		recorded := kafkasink.LSN(s.cursor.Confirmed)
		events := b.events
		if n := len(events); n > 0 && events[n-1].Position.Compare(s.sink.Checkpoint().Position) <= 0 {
			// Redelivered after a restart: the sink would skip them,
			// and its checkpoint would not take the cursor.
			events = nil
		}
		switch {
		case len(events) > 0:
		case b.confirm <= recorded:
			s.publish(b.confirm)
			continue
		case time.Since(s.checkpointed) < s.cfg.tick():
			continue
		}
		next := *s.cursor
		next.Confirmed = lsnText(max(recorded, b.confirm))
		if b.commitEnd != 0 {
			next.LastCommitEnd = lsnText(b.commitEnd)
		}
		raw, err := next.marshal()
		if err == nil {
			err = writeRetrying(ctx, sctx, s.cfg, s.log, s.sink, kafkasink.Batch{Events: events, Cursor: raw})
		}
		if err != nil {
			s.werr <- err
			return
		}
		*s.cursor = next
		s.checkpointed = time.Now()
		s.publish(b.confirm)
	}
}

// publish makes lsn confirmable, when it is beyond what already is.
func (s *session) publish(lsn kafkasink.LSN) {
	if lsn > kafkasink.LSN(s.written.Load()) {
		s.written.Store(uint64(lsn))
		select {
		case s.wrote <- struct{}{}:
		default:
		}
	}
}

// sinkError is an error of sink.Write that retrying does not cure. Run
// returns it: the sink decided it is not retryable.
type sinkError struct{ err error }

func (e *sinkError) Error() string { return e.err.Error() }
func (e *sinkError) Unwrap() error { return e.err }

// writeRetrying writes b, retrying retryable errors with backoff until it
// succeeds, the error is not retryable, or sctx ends. A retry sends the
// same batch: the sink skips what its checkpoint already covers.
func writeRetrying(ctx, sctx context.Context, cfg *Config, log *slog.Logger, sink Sink, b kafkasink.Batch) error {
	wait := cfg.backoff()
	for {
		err := sink.Write(ctx, b)
		if err == nil {
			cfg.Monitor.delivered(b.Events)
			return nil
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if !kafkasink.IsRetryable(err) {
			return &sinkError{err}
		}
		log.Warn("write failed; retrying the same batch", "error", err, "events", len(b.Events), "backoff", wait.Delay())
		if !wait.Wait(sctx) {
			return err
		}
	}
}
