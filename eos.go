package kafkasink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink/internal/backoff"
	"github.com/kafkasink/kafkasink/internal/brokererr"
	"github.com/kafkasink/kafkasink/internal/ctxerr"
	"github.com/kafkasink/kafkasink/internal/produced"
	"github.com/kafkasink/kafkasink/internal/txnend"
)

// txnSink is the ExactlyOnce sink: each part of a batch and its checkpoint
// are one Kafka transaction.
type txnSink struct {
	sink *Sink // what the modes share: client, configuration, state, hooks
	// claimed is when the sink last claimed its transactional id afresh
	// (claimAfresh); zero before.
	claimed time.Time
	// commitEndedAtBroker is set when the broker answered a commit of
	// the client's INVALID_TXN_STATE: recovery's answers are then that
	// commit's (brokererr.TxnEndedAtBroker). Only a new client clears it.
	commitEndedAtBroker bool
	markers             markerWatch // the commit markers still to be seen (markers.go)
	// producer is how the client's transactions end: the partitions
	// it loaded, and whether a commit moves its epoch (internal/txnend).
	producer txnend.Producer
}

var _ mode = (*txnSink)(nil)

// maxAttempts bounds the transactions one part may try inside one Write
// before the error goes back to the caller.
const maxAttempts = 5

// writeBatch plans b and commits its parts in order, each in its own
// transaction: exactly once, for read_committed consumers.
//
// It owns the early transaction (see earlyTxn), and with it the invariant
// that a Write never leaves a transaction open. The transaction begins
// with the first record planSending sends; the first attempt to commit the
// first part takes it over (commitPart), and from then on transact commits
// or aborts it. What nothing took over, because planning failed (a
// rejected event without a dead-letter topic, a missing topic), the one
// deferred discard below aborts, whatever happened in between.
func (s *txnSink) writeBatch(ctx context.Context, b *Batch) (p *plan, n int, err error) {
	early := &earlyTxn{s: s}
	defer func() {
		cause := err
		if cause == nil {
			cause = errFirstPartUndelivered
		}
		early.discard(ctx, cause)
	}()
	if p, err = s.sink.planSending(ctx, b, func(r *kgo.Record) { early.send(ctx, r) }); err != nil {
		return nil, 0, err
	}
	n, err = s.deliver(ctx, p, early)
	return p, n, err
}

// errFirstPartUndelivered is the cause writeBatch gives the abort of an
// early transaction that nothing took over when there is no error to give:
// after a successful plan, deliver always takes it over.
var errFirstPartUndelivered = errors.New("kafkasink: the batch's first part was not delivered")

// earlyTxn is the transaction of a batch's first part, begun while the
// batch is still being planned: each of the part's records is produced as
// soon as it is encoded, so that encoding the rest of the batch overlaps
// with sending instead of preceding it. writeBatch owns it (see there).
type earlyTxn struct {
	s      *txnSink
	txn    *openTxn // nil before the first record and once taken
	failed bool     // beginning failed: transact begins the ordinary way
}

// send produces r in the transaction, which the first record begins.
func (e *earlyTxn) send(ctx context.Context, r *kgo.Record) {
	if e.txn == nil {
		if e.failed {
			return
		}
		t, err := e.s.begin(ctx)
		if err != nil {
			// transact begins again, and reports and handles the error.
			e.failed = true
			return
		}
		e.txn = t
	}
	e.txn.produce(e.s.sink.cl, r)
}

// take hands the transaction, if any, to the caller; later calls return nil.
func (e *earlyTxn) take() *openTxn {
	if e == nil {
		return nil
	}
	t := e.txn
	e.txn = nil
	return t
}

// discard aborts the transaction, for cause, unless it was taken.
func (e *earlyTxn) discard(ctx context.Context, cause error) {
	if t := e.take(); t != nil {
		defer t.cancel()
		e.s.abort(ctx, t, TransactionInfo{Records: t.records}, cause)
	}
}

// deliver commits the parts of p in order, each in its own transaction; the
// first part's may have begun during planning.
func (s *txnSink) deliver(ctx context.Context, p *plan, early *earlyTxn) (int, error) {
	n := 0
	for i := range p.parts {
		pt := &p.parts[i]
		if len(pt.records) > 0 && pt.last.Compare(s.sink.Checkpoint().Position) <= 0 {
			// A recovery inside this Write found the part committed.
			continue
		}
		first := early
		if i != 0 {
			first = nil // only the first part's transaction begins early
		}
		if err := s.commitPart(ctx, p, i, first); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// commitPart runs part i in a transaction, retrying retryable failures
// (leader moves, coordinator churn, lost responses) a few times. The first
// attempt finishes the early transaction when there is one.
func (s *txnSink) commitPart(ctx context.Context, p *plan, i int, early *earlyTxn) error {
	pt := &p.parts[i]
	wait := backoff.New(100*time.Millisecond, 2*time.Second)
	var quarantined *openTxn // the part again, once quarantine replaced what the broker refused
	for attempt := 1; ; attempt++ {
		t := early.take()
		if quarantined != nil {
			t, quarantined = quarantined, nil
		}
		err := s.transact(ctx, pt, s.sink.nextCheckpoint(p, i), t)
		if err == nil {
			return nil
		}
		if ref := refusalOf(err); ref != nil && attempt < maxAttempts {
			if quarantined, err = s.quarantine(ctx, p, i, ref); err == nil {
				continue
			}
		}
		if err := s.sink.state.stopped(); err != nil {
			return err
		}
		// A transaction that outlived its timeout would likely do so
		// again: the caller decides (smaller batches, a longer timeout).
		if !IsRetryable(err) || errors.Is(err, ErrTransactionTimeout) || attempt == maxAttempts || ctx.Err() != nil {
			return err
		}
		s.sink.log.Warn("transaction failed; retrying", "attempt", attempt, "first", pt.first.String(), "last", pt.last.String(), "error", err)
		s.sink.counters.retries.Add(1)
		if !wait.Wait(ctx) {
			return err
		}
		if rerr := s.sink.recoverIfUnverified(ctx); rerr != nil {
			return fmt.Errorf("%w (recovering after: %v)", rerr, err)
		}
		if len(pt.records) > 0 && pt.last.Compare(s.sink.Checkpoint().Position) <= 0 {
			return nil // the failed attempt had committed after all
		}
	}
}

// transact runs one transaction: produce every record, then the
// checkpoint; check each result; commit within a deadline below the
// transaction timeout. It never commits a transaction that lost a record.
// t, when not nil, is the part's transaction with its records produced.
func (s *txnSink) transact(ctx context.Context, pt *part, ck Checkpoint, t *openTxn) error {
	if t == nil {
		var err error
		if t, err = s.begin(ctx); err != nil {
			return s.sink.follow(verdict{err, actRecover}) // recovery settles the client's state
		}
		for _, r := range pt.records {
			t.produce(s.sink.cl, r)
		}
	}
	defer t.cancel()
	info := TransactionInfo{First: pt.first, Last: pt.last, Records: len(pt.records) + 1, Bytes: pt.bytes}

	ckRec, err := s.sink.store.record(ck)
	if err != nil {
		return s.abort(ctx, t, info, err)
	}
	s.sink.state.sent(ck)
	t.produce(s.sink.cl, ckRec)
	if err := s.sink.cl.Flush(t.ctx); err != nil {
		cause := fmt.Errorf("kafkasink: flushing transaction %s..%s: %w", pt.first, pt.last, context.Cause(t.ctx))
		if derr := s.sink.deletedTopic(ctx, pt); derr != nil {
			cause = derr
		}
		return s.abort(ctx, t, info, cause)
	}
	if _, perr := t.results.Wait(); perr != nil {
		return s.abort(ctx, t, info, s.sink.produceError(t.ctx, pt, ck, &t.results))
	}

	if err := s.sink.guard(); err != nil {
		return err // left open: the successor's fencing, or the broker's timeout, aborts it
	}
	cctx, ccancel := context.WithTimeoutCause(t.ctx, s.sink.cfg.CommitTimeout, errCommitTimeout)
	defer ccancel()
	if err := s.producer.AwaitLoaded(cctx, s.sink.cl, &t.written); err != nil {
		return s.abort(ctx, t, info, err)
	}
	if err := s.sink.cl.EndTransaction(cctx, kgo.TryCommit); err != nil {
		return s.resolveCommit(ctx, t, pt, info, ck, ctxerr.WithCause(cctx, err))
	}
	info.Duration = time.Since(t.started)
	s.producer.Committed(ctx, s.sink.cl, t.began)
	s.markers.committed(pt, ck, s.sink.Checkpoint())
	s.sink.state.committed(ck, ckRec.Offset)
	s.sink.state.txnEnded()
	s.sink.state.settled()
	s.sink.hooks.onCommitted(info)
	return nil
}

// openTxn is a transaction begun and being filled.
type openTxn struct {
	started time.Time       // never changes: sinkState.txnOpenFor reads it from any goroutine
	ctx     context.Context // ends a tenth before the transaction timeout
	cancel  context.CancelFunc
	results produced.Results
	records int
	// written is where it sent records: the topics an abort's check
	// visits (markers.go), and the partitions AwaitLoaded waits for.
	written txnend.Written
	began   txnend.Epoch // the client's producer epoch when it began
}

// begin begins a transaction, once the commit markers of the one before
// are seen (verifyMarkers). The transaction's context ends at the sink's
// own deadline (Config.ownTxnDeadline says why).
func (s *txnSink) begin(ctx context.Context) (*openTxn, error) {
	if err := s.sink.guard(); err != nil {
		return nil, err
	}
	if err := s.verifyMarkers(ctx); err != nil {
		return nil, err
	}
	if err := s.sink.cl.BeginTransaction(); err != nil {
		return nil, fmt.Errorf("kafkasink: beginning a transaction: %w", err)
	}
	t := &openTxn{started: time.Now(), began: txnend.Began(ctx, s.sink.cl)}
	t.ctx, t.cancel = context.WithDeadlineCause(ctx, t.started.Add(s.sink.cfg.ownTxnDeadline()), ErrTransactionTimeout)
	s.sink.state.txnBegun(t)
	return t, nil
}

// produce sends r in the transaction.
func (t *openTxn) produce(cl *kgo.Client, r *kgo.Record) {
	t.results.Produce(t.ctx, cl, r)
	t.records++
	t.written.Sent(r)
}

// abort ends a transaction that must not commit. It runs even when ctx is
// cancelled: a Write is committed or aborted, never left half done. When
// the abort itself fails, recovery ends the transaction before anything
// else is planned, and no new transaction begins until it has (records
// still buffered must never join one). When Config.Guard refuses, the
// sink stops as fenced and leaves the transaction open, sending nothing
// more: the successor's fencing, or the broker's timeout, aborts it.
//
// Unless the sink stopped, the checkpoint becomes unverified (its verdict
// is recovering), so that recovery reads it back before the next
// transaction: an abort is where a broker that lost
// the commit markers of this producer's last committed transaction makes
// that loss final (the abort markers take the committed records with
// them), and the read back is what notices it (see checkpointlog.LostError).
func (s *txnSink) abort(ctx context.Context, t *openTxn, info TransactionInfo, cause error) error {
	actx, cancel := context.WithTimeoutCause(context.WithoutCancel(ctx), s.sink.cfg.CommitTimeout, errAbortTimeout)
	defer cancel()
	aerr := s.sink.cl.AbortBufferedRecords(actx)
	if aerr == nil {
		if gerr := s.sink.guard(); gerr != nil {
			info.Duration = time.Since(t.started)
			s.sink.hooks.onAborted(info, gerr)
			return fmt.Errorf("%w; the transaction was failing already: %w", gerr, cause)
		}
		aerr = s.producer.Abort(actx, s.sink.cl, !t.results.Delivered())
	}
	if aerr != nil {
		s.sink.log.Warn("aborting the transaction failed; the next attempt recovers first", "error", ctxerr.WithCause(actx, aerr), "cause", cause)
	} else {
		s.sink.state.txnEnded()
		// Every record has its outcome once the abort succeeded;
		// after a failed one, records may stay buffered until
		// recovery aborts them, so nothing waits for them then.
		t.results.Wait()
	}
	// Checked before the next transaction begins, after recovery
	// ended this one if the abort failed.
	s.markers.Aborted(t.written.Topics())
	info.Duration = time.Since(t.started)
	if info.Duration >= s.sink.cfg.ownTxnDeadline() {
		s.sink.state.txnOutlived(info.Duration)
	}
	cause = s.sink.follow(judgeTxnFailure(&s.sink.cfg, cause, info.Duration).recovering())
	s.sink.hooks.onAborted(info, cause)
	return cause
}

// resolveCommit settles a commit that returned an error: its outcome is
// unknown (a lost response, a timeout) or it failed. Recovery ends whatever
// is still open without giving up the producer identity and reads the
// checkpoint back: if it holds this transaction's checkpoint, the commit
// happened. Either way the markers are checked before the next
// transaction begins, as after any commit or abort (markers.go).
func (s *txnSink) resolveCommit(ctx context.Context, t *openTxn, pt *part, info TransactionInfo, ck Checkpoint, commitErr error) error {
	before := s.sink.Checkpoint()
	info.Duration = time.Since(t.started)
	if errors.Is(commitErr, kerr.InvalidTxnState) {
		s.commitEndedAtBroker = true
		commitErr = brokererr.TxnEndedAtBroker(commitErr)
	}
	v := judgeTxnFailure(&s.sink.cfg, fmt.Errorf("kafkasink: committing transaction %s..%s: %w", info.First, info.Last, commitErr), info.Duration).recovering()
	commitErr = s.sink.follow(v)
	if v.action == actFatal {
		return commitErr
	}
	// Resolve even when the caller's ctx is done; recovery is bounded.
	if err := s.sink.recoverIfUnverified(context.WithoutCancel(ctx)); err != nil {
		// The next Write recovers again and learns the outcome then.
		return fmt.Errorf("%w; reading the checkpoint back to learn the outcome failed too: %w", commitErr, err)
	}
	if s.sink.Checkpoint().same(ck) {
		s.sink.log.Info("commit outcome was unknown; the checkpoint read back shows it committed", "checkpoint", ck.Position.String())
		s.markers.committed(pt, ck, before)
		s.sink.hooks.onCommitted(info)
		return nil
	}
	s.markers.Aborted(t.written.Topics())
	commitErr = fmt.Errorf("%w: %w", ErrTransactionAborted, commitErr)
	s.sink.hooks.onAborted(info, commitErr)
	return commitErr
}

// settleClient ends whatever transaction the client may still have open,
// keeping the producer identity, so that an older instance never fences a
// newer one: records still buffered are failed, an open transaction is
// aborted, and a producer id kgo flagged after an unclear outcome is
// re-initialised at its CURRENT id and epoch (KIP-360), which aborts
// anything of ours still open at the broker. A fencing answer is
// settleFencing's (judgeFencing says what it may mean): after a newer
// instance's claim this instance is the zombie, and stops; with
// Config.Guard set it claims the transactional id afresh instead when the
// guard consents (claimAfresh), the one exception to keeping the identity.
// The broker aborts the newer instance's open transaction before it
// answers PRODUCER_FENCED (Kafka 4.4 was seen to): Config.Guard, asked
// first, keeps an instance that knows it lost its turn from sending it.
func (s *txnSink) settleClient(ctx context.Context) error {
	if err := s.sink.guard(); err != nil {
		return err
	}
	if err := s.sink.cl.AbortBufferedRecords(ctx); err != nil {
		return fmt.Errorf("kafkasink: recovering: failing the records still buffered: %w", ctxerr.WithCause(ctx, err))
	}
	// What the open transaction sent is not known here: as if it failed.
	if err := s.producer.Abort(ctx, s.sink.cl, true); err != nil {
		return s.settleFencing(ctx, fmt.Errorf("kafkasink: recovering: aborting the open transaction: %w", ctxerr.WithCause(ctx, err)))
	}
	if _, _, err := s.sink.cl.ProducerID(ctx); err != nil {
		return s.settleFencing(ctx, fmt.Errorf("kafkasink: recovering: re-initialising the producer id of transactional id %q at its current epoch: %w", s.sink.cfg.TransactionalID, ctxerr.WithCause(ctx, err)))
	}
	s.sink.state.txnEnded()
	return nil
}

// settleFencing acts on settleClient's failure to end the transaction or
// re-initialise the producer id: fenced, the sink stops, or with a guard
// claims the id afresh.
func (s *txnSink) settleFencing(ctx context.Context, err error) error {
	if s.commitEndedAtBroker {
		err = brokererr.TxnEndedAtBroker(err)
	}
	v := judgeFencing(&s.sink.cfg, err, s.sink.state.fencingAge())
	err = s.sink.follow(v)
	if v.action == actClaimAfresh {
		err = s.claimAfresh(ctx, err)
	}
	return err
}

// claimAfresh claims the transactional id with a new client, as New does:
// the broker gives it a new epoch, fences every other holder of the id and
// aborts whatever is open under it. It is how a sink goes on when kgo
// cannot recover the producer id after the broker fenced it without a
// newer instance (see judgeFencing). Claiming afresh would fence a newer
// instance as surely as an old one, so it is done only when Config.Guard,
// asked right before the claim, consents: the guard of a lease proves that
// no other instance can hold the id. The old client is closed; its records
// were failed by settleClient. Recovery reads the checkpoint back after it.
//
// Fenced again soon after a claim, the sink stops: the guard consented
// although another instance uses the id, and claiming again would make
// the two fence each other in a loop.
func (s *txnSink) claimAfresh(ctx context.Context, cause error) error {
	if since := time.Since(s.claimed); !s.claimed.IsZero() && since < s.sink.cfg.TransactionTimeout {
		return s.sink.follow(verdict{fmt.Errorf("%w: fenced again %v after claiming transactional id %q afresh, though Config.Guard consented: another instance uses it; make sure the guard lets one instance at a time go on: %v",
			ErrFenced, since.Round(time.Millisecond), s.sink.cfg.TransactionalID, cause), actFatal})
	}
	if err := s.sink.guard(); err != nil {
		return fmt.Errorf("%w; before that: %w", err, cause)
	}
	cl, err := kgo.NewClient(s.sink.producerOptions()...)
	if err != nil {
		return s.sink.follow(verdict{fmt.Errorf("%w: making a client to claim transactional id %q afresh: %w", ErrUnexpected, s.sink.cfg.TransactionalID, err), actFatal})
	}
	if _, _, err := cl.ProducerID(ctx); err != nil {
		cl.Close()
		// The next recovery fails the same way and tries again.
		return fmt.Errorf("kafkasink: claiming transactional id %q afresh after the broker fenced this instance: %w (before that: %v)",
			s.sink.cfg.TransactionalID, ctxerr.WithCause(ctx, s.sink.classifyInitErr(err)), cause)
	}
	old := s.sink.cl
	s.sink.useClient(cl)
	old.Close()
	s.claimed = time.Now()
	s.commitEndedAtBroker = false
	s.producer.NewClient()
	s.sink.state.txnEnded()
	s.sink.state.settled()
	s.sink.log.Warn("the broker fenced this instance and its client could not recover; Config.Guard consented, so the sink claimed its transactional id afresh", "transactional_id", s.sink.cfg.TransactionalID, "cause", cause)
	return nil
}
