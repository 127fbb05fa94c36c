package kafkasink

import (
	"sync/atomic"
	"time"

	"github.com/kafkasink/kafkasink/internal/txndurations"
)

// Stats is what a Sink has done since New, as Sink.Stats reports it:
// counters that only grow, and the state of the moment. It is the sink's
// side of metrics; exporters (Prometheus, OpenTelemetry) read it, and the
// hooks give the same events one at a time.
type Stats struct {
	// Writes counts the Writes that returned nil having written
	// something; Events, Written, Records and Bytes add up their
	// BatchInfo.
	Writes  int64
	Events  int64 // events in those Writes, skipped ones included
	Written int64 // events written to their topics
	Records int64 // records produced, dead-letter records included, checkpoints excluded
	Bytes   int64 // bytes of keys, values and headers produced

	// Rejected counts rejected events, each time one is rejected (a
	// batch that fails on a rejection and is written again rejects it
	// again); DeadLettered those of them written to the dead-letter
	// topic.
	Rejected     int64
	DeadLettered int64
	// SkippedRedelivered counts events skipped because the checkpoint
	// already covered them (a source redelivering after a restart);
	// SkippedByEncoder those the Encoder left out on purpose (see
	// RecordShaper).
	SkippedRedelivered int64
	SkippedByEncoder   int64

	// Committed and Aborted count transactions (ExactlyOnce mode);
	// Retries the transactions tried again inside a Write after a
	// retryable failure.
	Committed int64
	Aborted   int64
	Retries   int64
	// TransactionDurations are the durations of committed transactions,
	// from begin to commit.
	TransactionDurations Histogram

	// Checkpoint is the sink's checkpoint: its Time is when the last
	// Write that moved it committed.
	Checkpoint Checkpoint
	// OpenTransaction is how long the transaction that may still be open
	// has been open; zero when none may be. One far past the
	// transaction timeout means a stuck Write.
	OpenTransaction time.Duration
}

// Histogram counts durations into buckets.
type Histogram struct {
	// Bounds are the buckets' upper bounds, ascending; Counts[i] counts
	// the durations d with Bounds[i-1] < d <= Bounds[i], and the last of
	// Counts, one longer than Bounds, those above every bound.
	Bounds []time.Duration
	Counts []int64
	Count  int64         // all durations counted
	Sum    time.Duration // their sum
}

// Stats returns what the sink has done since New. It is safe to call from
// any goroutine, also while a Write runs.
func (s *Sink) Stats() Stats {
	c := &s.counters
	st := Stats{
		Writes: c.writes.Load(), Events: c.events.Load(), Written: c.written.Load(),
		Records: c.records.Load(), Bytes: c.bytes.Load(),
		Rejected: c.rejected.Load(), DeadLettered: c.deadLettered.Load(),
		SkippedRedelivered: c.skippedRedelivered.Load(), SkippedByEncoder: c.skippedByEncoder.Load(),
		Committed: c.committed.Load(), Aborted: c.aborted.Load(), Retries: c.retries.Load(),
		Checkpoint: s.Checkpoint(), OpenTransaction: s.state.txnOpenFor(),
	}
	d := &st.TransactionDurations
	d.Bounds, d.Counts, d.Count, d.Sum = c.durations.Snapshot()
	return st
}

// counters are the sink's Stats as they grow. They are a hook of the sink
// (first among its hooks), so they count exactly what hooks are told; the
// retries the Write path counts directly. Every field is atomic: Stats
// reads them while a Write runs. The open transaction's age is the state's
// (sinkState.txnOpenFor).
type counters struct {
	writes, events, written, records, bytes atomic.Int64
	rejected, deadLettered                  atomic.Int64
	skippedRedelivered, skippedByEncoder    atomic.Int64
	committed, aborted, retries             atomic.Int64
	durations                               txndurations.Histogram
}

func (c *counters) OnBatchWritten(i BatchInfo) {
	c.writes.Add(1)
	c.events.Add(int64(i.Events))
	c.written.Add(int64(i.Written))
	c.records.Add(int64(i.Records))
	c.bytes.Add(int64(i.Bytes))
}

func (c *counters) OnTransactionCommitted(i TransactionInfo) {
	c.committed.Add(1)
	c.durations.Observe(i.Duration)
}

func (c *counters) OnTransactionAborted(TransactionInfo, error) { c.aborted.Add(1) }

func (c *counters) OnEventRejected(_ Rejection, deadLettered bool) {
	c.rejected.Add(1)
	if deadLettered {
		c.deadLettered.Add(1)
	}
}

func (c *counters) OnEventsSkipped(i SkipInfo) {
	if i.ByEncoder {
		c.skippedByEncoder.Add(int64(i.Events))
	} else {
		c.skippedRedelivered.Add(int64(i.Events))
	}
}
