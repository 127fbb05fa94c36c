package pgcdc

import (
	"context"
	"log/slog"
	"time"

	"github.com/kafkasink/kafkasink"
)

// This file is every sink.Write Run makes: the snapshot's chunks and a
// recorded gap through runner.writeCursor, the stream's batches through
// the session's writer goroutine, all through checkpointer.write, which
// retries with writeRetrying.

// checkpointer owns Run's cursor, the Batch.Cursor of every Write Run
// makes. It is read from the sink's checkpoint at start-up (load), and the
// source check records the source's identity, the slot's position and
// gaps in it before an attempt writes anything (recordSource); after that
// it changes only in write, once a Write carried it to the checkpoint: a
// cursor that did not reach the checkpoint must not steer the next
// attempt. The runner's goroutine uses it, but while a session streams:
// then the session's writer alone does, until the session ends.
type checkpointer struct {
	cfg  *Config
	log  *slog.Logger
	sink Sink
	cur  cursor
	// filter removes from every Write what the include and exclude
	// lists leave out, whichever path (stream, snapshot, backfill) read it.
	filter *captureFilter
}

// load reads the cursor of the sink's checkpoint.
func (c *checkpointer) load() error {
	cur, err := parseRunCursor(c.sink.Checkpoint().Cursor)
	if err != nil {
		return err
	}
	c.cur = cur
	return nil
}

// recordSource records the source's identity, the position its slot
// begins at (a slot Run created begins there; an existing one confirmed
// it, which the cursor may have recorded beyond already) and an accepted
// or planned gap, nil when none. Nothing is written: the next Write
// carries it.
func (c *checkpointer) recordSource(id sourceIdentity, begins lsnText, created bool, gap *gapRecord) {
	c.cur.Source = &id
	if created {
		c.cur.Confirmed = begins
	} else {
		c.cur.Confirmed = max(c.cur.Confirmed, begins)
	}
	if gap != nil {
		c.cur.addGap(*gap)
	}
}

// write writes events with the cursor next, retrying retryable errors
// until sctx ends (a Write in progress runs on with ctx), and makes next
// the cursor once it is written.
func (c *checkpointer) write(ctx, sctx context.Context, next cursor, events []kafkasink.Event) error {
	raw, err := next.marshal()
	if err != nil {
		return err
	}
	if events, err = c.filter.events(events); err != nil {
		return err
	}
	if err := writeRetrying(ctx, sctx, c.cfg, c.log, c.sink, kafkasink.Batch{Events: events, Cursor: raw}); err != nil {
		return err
	}
	c.cur = next
	return nil
}

// writeCursor writes events with the cursor next, retrying retryable
// errors until ctx ends.
func (r *runner) writeCursor(ctx context.Context, next cursor, events []kafkasink.Event) error {
	return r.ck.write(ctx, ctx, next, events)
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
		recorded := kafkasink.LSN(s.ck.cur.Confirmed)
		events := b.events
		if n := len(events); n > 0 && events[n-1].Position.Compare(s.sink.Checkpoint().Position) <= 0 {
			// Redelivered after a restart: the sink would skip them,
			// and its checkpoint would not take the cursor.
			events = nil
		}
		switch {
		case len(events) > 0, b.backfills != nil:
		case b.confirm <= recorded:
			s.publish(b.confirm)
			continue
		case time.Since(s.checkpointed) < s.cfg.tick():
			continue
		}
		next := s.ck.cur
		next.Confirmed = lsnText(max(recorded, b.confirm))
		if b.commitEnd != 0 {
			next.LastCommitEnd = lsnText(b.commitEnd)
		}
		if b.backfills != nil {
			next.Backfills, next.LastSignal = b.backfills.list, b.backfills.lastSignal
			if b.backfills.tables != nil {
				next.Tables = b.backfills.tables
			}
		}
		if err := s.ck.write(ctx, sctx, next, events); err != nil {
			s.werr <- err
			return
		}
		if b.chunk {
			s.bf.written()
		}
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
