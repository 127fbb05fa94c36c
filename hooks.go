package kafkasink

import (
	"fmt"
	"time"
)

// Hook observes the sink. A hook is any value implementing one or more of
// the HookXxx interfaces; the sink calls each method it implements. Hooks
// run on the goroutine that called Write, inside it: they must be fast, must
// not call the sink, and must be safe for concurrent use when one hook value
// is shared by several sinks. Metrics and tracing are built on them.
type Hook any

// BatchInfo describes one successful Write.
type BatchInfo struct {
	Events       int           // events in the batch
	Skipped      int           // events at or below the checkpoint (already delivered), and those the Encoder left out (SkipInfo.ByEncoder)
	Written      int           // events written to their topics
	Rejected     int           // events rejected (dead-lettered; a batch with rejections and no dead-letter topic fails)
	Records      int           // records produced, dead-letter records included, checkpoints excluded
	Bytes        int           // bytes of keys, values and headers produced
	Transactions int           // transactions (ExactlyOnce) or checkpointed parts (other modes)
	Duration     time.Duration // from Write's start to its return
	Checkpoint   Checkpoint    // the checkpoint after the Write
	// Receipts are the write receipts, one per topic written, in the
	// order of each topic's first record (see Receipt); nil unless
	// Config.Receipts is set.
	Receipts []Receipt
}

// TransactionInfo describes one transaction of ExactlyOnce mode.
type TransactionInfo struct {
	First, Last Position      // positions of the first and last event in it
	Records     int           // records produced, checkpoint included
	Bytes       int           // bytes of keys, values and headers
	Duration    time.Duration // from begin to commit or abort
}

// SkipInfo describes events of a Write skipped because the checkpoint
// already covers them (a source redelivering after a restart), or, with
// ByEncoder, because the Encoder leaves them out (a RecordShaper's Skip).
type SkipInfo struct {
	First, Last Position // positions of the first and last skipped event
	Events      int      // how many were skipped
	Checkpoint  Position // the checkpoint that covers them; zero with ByEncoder
	// ByEncoder says the events were left out by the Encoder: not
	// delivered on purpose, and covered by the checkpoint from this Write
	// on.
	ByEncoder bool
}

// HookEventsSkipped is called when a Write skips events the checkpoint
// covers (they were delivered before), before it writes the rest, and
// when the Encoder leaves events out (SkipInfo.ByEncoder), once per Write.
type HookEventsSkipped interface {
	OnEventsSkipped(SkipInfo)
}

// HookBatchWritten is called after each successful Write that wrote
// anything.
type HookBatchWritten interface {
	OnBatchWritten(BatchInfo)
}

// HookTransactionCommitted is called after each committed transaction.
type HookTransactionCommitted interface {
	OnTransactionCommitted(TransactionInfo)
}

// HookTransactionAborted is called after each aborted transaction, with
// the error that caused the abort.
type HookTransactionAborted interface {
	OnTransactionAborted(TransactionInfo, error)
}

// HookEventRejected is called for every rejected event, whether it was
// dead-lettered or failed its batch.
type HookEventRejected interface {
	OnEventRejected(r Rejection, deadLettered bool)
}

// hooks holds the configured hooks by kind, so calls need no type
// assertions on the write path.
type hooks struct {
	batch     []HookBatchWritten
	committed []HookTransactionCommitted
	aborted   []HookTransactionAborted
	rejected  []HookEventRejected
	skipped   []HookEventsSkipped
}

func newHooks(hs []Hook) hooks {
	var h hooks
	for _, x := range hs {
		if v, ok := x.(HookBatchWritten); ok {
			h.batch = append(h.batch, v)
		}
		if v, ok := x.(HookTransactionCommitted); ok {
			h.committed = append(h.committed, v)
		}
		if v, ok := x.(HookTransactionAborted); ok {
			h.aborted = append(h.aborted, v)
		}
		if v, ok := x.(HookEventRejected); ok {
			h.rejected = append(h.rejected, v)
		}
		if v, ok := x.(HookEventsSkipped); ok {
			h.skipped = append(h.skipped, v)
		}
	}
	return h
}

// unknownHooks returns the hooks that implement none of the interfaces:
// almost certainly a mistake the caller wants to hear about.
func unknownHooks(hs []Hook) []string {
	var p []string
	for i, x := range hs {
		switch x.(type) {
		case HookBatchWritten, HookTransactionCommitted, HookTransactionAborted, HookEventRejected, HookEventsSkipped:
		default:
			p = append(p, fmt.Sprintf("Hooks[%d] (%T) implements no Hook interface (HookBatchWritten, HookTransactionCommitted, HookTransactionAborted, HookEventRejected, HookEventsSkipped)", i, x))
		}
	}
	return p
}

func (h *hooks) onBatch(i BatchInfo) {
	for _, x := range h.batch {
		x.OnBatchWritten(i)
	}
}

func (h *hooks) onCommitted(i TransactionInfo) {
	for _, x := range h.committed {
		x.OnTransactionCommitted(i)
	}
}

func (h *hooks) onAborted(i TransactionInfo, err error) {
	for _, x := range h.aborted {
		x.OnTransactionAborted(i, err)
	}
}

func (h *hooks) onRejected(r Rejection, deadLettered bool) {
	for _, x := range h.rejected {
		x.OnEventRejected(r, deadLettered)
	}
}

func (h *hooks) onSkipped(i SkipInfo) {
	for _, x := range h.skipped {
		x.OnEventsSkipped(i)
	}
}
