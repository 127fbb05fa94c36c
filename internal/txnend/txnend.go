// Package txnend is what ending a transaction of a franz-go client needs
// beyond EndTransaction: where the transaction wrote; waiting, before a
// commit, until the client's producer has loaded every partition it wrote
// to; and aborting at a new producer epoch when a record of the
// transaction may have rewound its partition's sequence numbers.
package txnend

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink/internal/backoff"
)

// Producer is what the sink knows of its client's producer: how its
// transactions end, and the topics whose partitions it was seen to have
// loaded. Its zero value is that of a new client. Not safe for
// concurrent use.
type Producer struct {
	// commitMovesEpoch is whether the client's last commit ended at a new
	// producer epoch, as under transaction version 2 (KIP-890), where
	// every EndTxn answer carries the next epoch and kgo restarts its
	// sequence numbers; under version 1 a transaction ends at the epoch
	// it ran under. kgo never goes back to version 1 once it used 2, so
	// an abort then moves the epoch too (Abort). Unknown, false, until
	// a commit was seen.
	commitMovesEpoch bool
	// loaded is the topics whose partitions the client's producer was
	// seen to have loaded (AwaitLoaded); nil for a new client.
	loaded map[string]bool
}

// Epoch is the client's producer id and epoch when a transaction began.
type Epoch struct {
	producerID int64
	epoch      int16 // -1 if the client could not tell
}

// Began returns the client's producer id and epoch, for Committed, as a
// transaction begins.
func Began(ctx context.Context, cl *kgo.Client) Epoch {
	e := Epoch{epoch: -1}
	if id, epoch, err := cl.ProducerID(ctx); err == nil {
		e.producerID, e.epoch = id, epoch
	}
	return e
}

// Committed notes whether the commit of the transaction begun at began
// ended at a new producer epoch (see commitMovesEpoch). A transaction
// that commits ran under one epoch from its begin to its commit: kgo
// re-initialises a producer id mid-transaction only after a failure,
// which fails the commit too. So a new id or epoch right after a commit
// is the commit's own.
func (p *Producer) Committed(ctx context.Context, cl *kgo.Client, began Epoch) {
	if began.epoch < 0 {
		return
	}
	if id, epoch, err := cl.ProducerID(ctx); err == nil {
		p.commitMovesEpoch = id != began.producerID || epoch != began.epoch
	}
}

// NewClient forgets what the sink knew of the client it replaced.
func (p *Producer) NewClient() { *p = Producer{} }

// Written is where a transaction sent records: the first record sent to
// each topic, in the order the topics came.
type Written struct{ firsts []*kgo.Record }

// Sent notes r, just sent in the transaction, when it is the first
// record of its topic. Records come in runs of one topic: the last one is
// checked first.
func (w *Written) Sent(r *kgo.Record) {
	if n := len(w.firsts); n > 0 && w.firsts[n-1].Topic == r.Topic ||
		slices.ContainsFunc(w.firsts, func(f *kgo.Record) bool { return f.Topic == r.Topic }) {
		return
	}
	w.firsts = append(w.firsts, r)
}

// Topics are the topics a record was sent to.
func (w *Written) Topics() []string {
	topics := make([]string, len(w.firsts))
	for i, r := range w.firsts {
		topics[i] = r.Topic
	}
	return topics
}

// AwaitLoaded waits, before a transaction commits, until the client's
// producer has loaded the partitions of every topic the transaction wrote
// to, as far as it was not seen loaded before: EndTransaction finds the partitions a transaction added,
// and restarts their sequence numbers when the commit ends at a new
// epoch, only among the partitions the producer has loaded.
//
// franz-go hands the first records produced to a topic new to the client
// to their partitions (and so to the broker) before it publishes the
// topic's partitions (storePartitionsUpdate in topics_and_partitions.go),
// so a record can be acknowledged, and Flush return, while its partition
// is still unknown to EndTransaction. Under load that was seen to happen
// in a Write whose only new topic was the checkpoint topic: franz-go then
// found no partition added, turned the commit into an abort and returned
// nil, so the checkpoint Write reported delivered was aborted; and the
// next transaction's first batch to the partition kept the old sequence
// number under the new epoch, which the broker refuses for good
// (OUT_OF_ORDER_SEQUENCE_NUMBER), stopping the sink. The wait is short:
// the record's acknowledgement means the publication is under way.
//
// The partition of the topic's first record stands for the topic: a
// topic's partitions are published together. It counts as loaded once
// the client knows its leader.
func (p *Producer) AwaitLoaded(ctx context.Context, cl *kgo.Client, w *Written) error {
	for _, r := range w.firsts {
		if p.loaded[r.Topic] {
			continue
		}
		wait := backoff.New(time.Millisecond, 50*time.Millisecond)
		for {
			if leader, _, _ := cl.PartitionLeader(r.Topic, r.Partition); leader >= 0 {
				break
			}
			if !wait.Wait(ctx) {
				return fmt.Errorf("kafkasink: %s[%d], written in this transaction, is not among the partitions the client has loaded, and franz-go's commit would leave it out; the transaction is aborted instead: %w",
					r.Topic, r.Partition, context.Cause(ctx))
			}
		}
		if p.loaded == nil {
			p.loaded = make(map[string]bool)
		}
		p.loaded[r.Topic] = true
	}
	return nil
}

// Abort aborts the open transaction, at a new producer epoch when
// rewound says that a record of it failed (or may have: its outcome was
// not known yet) and the abort would not move the epoch by itself.
//
// kgo rewinds a partition's sequence numbers when a batch fails, even one
// it had written (an answer lost, then a retry refused), and under
// transaction version 1 an abort keeps the epoch: the next transaction's
// first batch to that partition would carry the aborted batch's sequence
// numbers, and the broker, taking it for a retry of the batch it holds,
// would acknowledge it without writing it. Its records would be reported
// committed and no read_committed reader would ever see them (issue 30's
// first checker finding; TestAbortedSequenceNotReused). Under version 2
// the abort's answer carries a new epoch and kgo restarts the sequences.
//
// kgo moves to a new epoch when it retries an abort whose outcome it could
// not confirm: it re-initialises the producer id at its current id and
// epoch (KIP-360), which aborts the transaction at the broker, resets the
// sequence numbers, and which the broker refuses, PRODUCER_FENCED, once a
// newer instance has claimed the transactional id. So the abort is first
// asked for on a context already done, which leaves its outcome
// unconfirmed without sending it, and then retried. When the first call
// succeeds nothing was added to the transaction, so nothing was written.
//
// The new epoch is asked for only when needed: the broker cannot tell the
// retry of a re-initialisation whose answer was lost from a newer
// instance's claim once the transaction coordinator moved to another
// broker (the epoch it gave is not in its log), so each one is a chance to
// be fenced for nothing when a coordinator dies.
func (p *Producer) Abort(ctx context.Context, cl *kgo.Client, rewound bool) error {
	if rewound && !p.commitMovesEpoch {
		done, cancel := context.WithCancel(ctx)
		cancel()
		if err := cl.EndTransaction(done, kgo.TryAbort); err == nil {
			return nil
		}
	}
	return cl.EndTransaction(ctx, kgo.TryAbort)
}
