package kafkasinktest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kafkasink/kafkasink"
)

// Errors to fail a Recorder's Write with (FailWrite), one of each class of
// the library's errors, so a source's retry loop meets what a real sink
// returns.
var (
	// ErrRetryable is retryable (kafkasink.IsRetryable): a transaction
	// the sink aborted. The caller must write the same batch again.
	ErrRetryable = fmt.Errorf("kafkasinktest: Write failed on purpose: %w", kafkasink.ErrTransactionAborted)
	// ErrFatal is fatal (kafkasink.IsFatal): the sink was fenced by a
	// newer instance. Every later Write returns it too.
	ErrFatal = fmt.Errorf("kafkasinktest: Write failed on purpose: %w", kafkasink.ErrFenced)
)

// Recorder stands in for a *kafkasink.Sink where no Kafka is wanted, for
// tests of a source or of pgcdc wiring: it has the sink's Write,
// Checkpoint and Close, so it satisfies pgcdc.Sink (pgcdc.Run writes to
// it) and any interface a service declares for its sink. It keeps the
// events of each successful Write in memory, and the sink's contract: a
// Write returns nil once the batch is recorded and the checkpoint has
// moved to its last event (with its cursor); events at or below the
// checkpoint are skipped, as redelivered ones are; an invalid batch
// (positions not strictly increasing, an invalid Op, no schema or table, a
// cursor that is not JSON) is refused with kafkasink.ErrInvalidBatch; after a retryable failure, a batch that
// skips past the failed batch's events is refused with ErrInvalidBatch, as
// the sink refuses it; after a fatal one, every Write returns that error;
// a concurrent Write returns kafkasink.ErrConcurrentWrite, and one after
// Close kafkasink.ErrClosed.
//
// Write is not safe for concurrent use (it says so, as the sink does);
// every other method is safe for concurrent use.
type Recorder struct {
	writing atomic.Bool

	mu       sync.Mutex
	ckpt     kafkasink.Checkpoint
	calls    int
	failures map[int]error
	fatal    error
	// owed is the first event a retryably failed Write left undelivered,
	// zero when nothing is owed.
	owed    kafkasink.Position
	events  []kafkasink.Event
	batches []kafkasink.Batch
	closed  bool
}

// NewRecorder returns a Recorder whose Checkpoint is start until the first
// Write: what a sink would have read back from Kafka at start-up (the zero
// Checkpoint for a sink that delivered nothing).
func NewRecorder(start kafkasink.Checkpoint) *Recorder {
	return &Recorder{ckpt: start, failures: make(map[int]error)}
}

// FailWrite makes the n-th call of Write (counting from 1, failed calls
// included) return err without recording anything. Use ErrRetryable or
// ErrFatal, or any error of the library's classes.
func (r *Recorder) FailWrite(n int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failures[n] = err
}

// Write records b as a sink delivers it; see Recorder.
func (r *Recorder) Write(ctx context.Context, b kafkasink.Batch) error {
	if !r.writing.CompareAndSwap(false, true) {
		return kafkasink.ErrConcurrentWrite
	}
	defer r.writing.Store(false)
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	switch {
	case r.closed:
		return kafkasink.ErrClosed
	case r.fatal != nil:
		return r.fatal
	}
	if err := validBatch(b); err != nil {
		return err
	}
	fresh := slices.IndexFunc(b.Events, func(e kafkasink.Event) bool { return e.Position.Compare(r.ckpt.Position) > 0 })
	if fresh < 0 {
		fresh = len(b.Events)
	}
	if !r.owed.IsZero() && (fresh == len(b.Events) || b.Events[fresh].Position.Compare(r.owed) > 0) {
		return fmt.Errorf("%w: the batch skips event %s, which a Write that failed left undelivered: write that batch again (kafkasinktest.Recorder)", kafkasink.ErrInvalidBatch, r.owed)
	}
	if err, ok := r.failures[r.calls]; ok {
		if kafkasink.IsFatal(err) {
			r.fatal = err
		} else if fresh < len(b.Events) && r.owed.IsZero() {
			r.owed = b.Events[fresh].Position
		}
		return err
	}
	r.owed = kafkasink.Position{}
	r.events = append(r.events, b.Events[fresh:]...)
	r.batches = append(r.batches, b)
	if fresh < len(b.Events) {
		r.ckpt.Position = b.Events[len(b.Events)-1].Position
	}
	if b.Cursor != nil {
		r.ckpt.Cursor = append([]byte(nil), b.Cursor...)
	}
	r.ckpt.Mode, r.ckpt.Time = kafkasink.ExactlyOnce, time.Now()
	return nil
}

// validBatch refuses what the sink refuses before writing anything.
func validBatch(b kafkasink.Batch) error {
	for i := range b.Events {
		e := &b.Events[i]
		switch {
		case !e.Op.Valid() || e.Schema == "" || e.Table == "" || e.Position.IsZero():
			return fmt.Errorf("%w: event %d (%s): an Op, a Schema, a Table and a Position are required (kafkasinktest.Recorder)", kafkasink.ErrInvalidBatch, i, e.Position)
		case i > 0 && e.Position.Compare(b.Events[i-1].Position) <= 0:
			return fmt.Errorf("%w: event %d at %s does not come after %s: positions must strictly increase (kafkasinktest.Recorder)", kafkasink.ErrInvalidBatch, i, e.Position, b.Events[i-1].Position)
		}
	}
	if b.Cursor != nil && !json.Valid(b.Cursor) {
		return fmt.Errorf("%w: Batch.Cursor is not valid JSON (kafkasinktest.Recorder)", kafkasink.ErrInvalidBatch)
	}
	return nil
}

// Checkpoint returns the position and cursor of the last successful Write,
// or the start checkpoint before one.
func (r *Recorder) Checkpoint() kafkasink.Checkpoint {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.ckpt
	c.Cursor = append([]byte(nil), c.Cursor...)
	if r.ckpt.Cursor == nil {
		c.Cursor = nil
	}
	return c
}

// Close makes later Writes return kafkasink.ErrClosed. It may be called
// more than once.
func (r *Recorder) Close(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return nil
}

// Events returns the events delivered so far, each once, in order.
func (r *Recorder) Events() []kafkasink.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// Batches returns the batches of the successful Writes, as they were
// given (redelivered events included).
func (r *Recorder) Batches() []kafkasink.Batch {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.batches)
}

// Writes returns how many times Write was called, failed calls included.
func (r *Recorder) Writes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}
