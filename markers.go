package kafkasink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kafkasink/kafkasink/internal/ctxerr"
	"github.com/kafkasink/kafkasink/internal/markers"
)

// Commit markers. A Kafka transaction is committed on a partition only
// when its coordinator has written the COMMIT marker there, which it does
// after it answered the commit. Kafka 4.4's coordinator was seen to
// complete a commit without writing the marker to a partition that had no
// leader for a moment (it logs that such partitions "are likely deleted
// already and hence can be skipped"): the partition keeps the records
// pending, a later commit of the same producer that writes to it commits
// them, and a later abort that writes to it takes them, although Write
// reported them delivered (TestRealBrokerLostCommitMarkers).
//
// So before a transaction begins, the sink checks that the one it
// committed before is committed on every partition it wrote: the
// partition's last stable offset, which a read_committed reader stops at,
// is past the transaction's records there. Until this producer ends
// another transaction nothing but the commit's own markers moves it past
// them. Another producer's transaction, open since before ours, holds it
// back too: when it does not move at once, the partition's leader is
// asked whether our transaction is still open there (DescribeProducers).
// The markers are normally written within milliseconds of the commit; a
// partition still pending after markerWait is carried as a suspect,
// checked again before each later transaction, and its records are read
// back once it settles: visible, they were committed late; gone, a later
// abort took them, and the sink stops with ErrCheckpoint.
//
// Waiting rather than stopping at once is deliberate: a suspect is either
// lost markers or markers a restarted leader has not taken yet (the
// coordinator retries them, and the next transaction cannot begin on that
// partition until it is done), and lost markers still end well when the
// next transaction on the partition commits. Stopping would leave the
// pending records to a new instance that knows nothing of them.
//
// The checkpoint partition is not checked here: other sinks' open
// transactions on it hold its last stable offset back, and reading the
// checkpoint back after an abort already notices a checkpoint the broker
// lost (see checkpointlog.LostError).
//
// Asking the brokers, and keeping the partitions still to be seen, is
// internal/markers'; deciding what an answer means is this file's.

// markerWait bounds how long a transaction's beginning waits for the
// commit markers of the one before.
const markerWait = time.Second

// visibleWait bounds the read back of the suspects that settled, all of
// them together: a read back that fails (a broker not answering fetches)
// leaves them suspect for the next check rather than hold up the
// transaction.
const visibleWait = 2 * time.Second

// txnSpan is what one committed transaction wrote to one partition.
type txnSpan struct {
	markers.Span
	from, to Position   // the events of the first and last of its records
	ck       Checkpoint // the checkpoint the transaction committed
	before   Checkpoint // the checkpoint before it
}

func (sp txnSpan) String() string {
	return fmt.Sprintf("%s[%d] offsets %d..%d (events %s..%s)", sp.Topic, sp.Partition.Partition, sp.First, sp.Last, sp.from, sp.to)
}

// markerWatch is what the sink knows of the markers of its transactions
// (markers.Watch). It lives as long as the sink: a new instance knows
// nothing of its predecessor's suspects.
type markerWatch struct{ markers.Watch[txnSpan] }

// committed remembers what pt's transaction, which moved the checkpoint
// from before to ck, wrote: every record has its offset.
func (w *markerWatch) committed(pt *part, ck, before Checkpoint) {
	w.Committed(txnSpans(pt, ck, before)...)
}

// txnSpans are the partitions pt's records were written to, with the
// offsets and events of the first and last record in each.
func txnSpans(pt *part, ck, before Checkpoint) []txnSpan {
	spans, first, last := markers.Spans(pt.records)
	out := make([]txnSpan, len(spans))
	for i, sp := range spans {
		out[i] = txnSpan{Span: sp, from: pt.positions[first[i]], to: pt.positions[last[i]], ck: ck, before: before}
	}
	return out
}

// verifyMarkers checks, before a transaction begins, the commit markers
// of the transactions committed before it (see the comment at the top of
// this file). It returns an ErrCheckpoint, and stops the sink, when a
// suspect's records are gone; every other failure leaves the partitions
// to the next check.
func (s *txnSink) verifyMarkers(ctx context.Context) error {
	if err := s.sink.state.stopped(); err != nil {
		return err // a loss found before: nothing begins again
	}
	w := &s.markers
	if len(w.AbortedIn()) > 0 {
		if err := s.verifyAbortMarkers(ctx); err != nil {
			return err
		}
	}
	late, suspected := w.Settle(ctx, s.sink.cl, markerWait)
	if len(suspected) > 0 {
		s.sink.log.Warn("commit markers not seen within the wait; the partitions stay suspect until they are", "wait", markerWait, "partitions", spanList(suspected))
	}
	if len(late) == 0 {
		return nil
	}
	var lost []txnSpan
	rctx, rcancel := context.WithTimeout(ctx, visibleWait)
	defer rcancel()
	for _, sp := range late {
		ok, err := markers.ReadBack(rctx, s.sink.connOptions(), sp.Span, IsRetryable)
		switch {
		case err != nil:
			s.sink.log.Warn("reading back a suspect partition failed; checking again before the next transaction", "partition", sp.String(), "error", err)
			w.Suspect(sp)
		case ok:
			s.sink.log.Warn("commit markers came late; the records are committed", "partition", sp.String(), "checkpoint", sp.ck.Position.String())
		default:
			lost = append(lost, sp)
		}
	}
	if len(lost) > 0 {
		return s.sink.follow(verdict{lostRecords(lost), actFatal})
	}
	return nil
}

// finish checks the markers of the transactions the last Writes ended, as
// the next Write would have (see mode.finish). Partitions whose commit
// markers were not seen are logged, for the operator: nothing watches them
// once the sink is closed. Most often the brokers did not answer the check
// (a Close during an outage); a broker that lost the markers looks the
// same.
func (s *txnSink) finish(ctx context.Context) error {
	err := s.verifyMarkers(ctx)
	if errors.Is(err, errAbortUnchecked) {
		// Nothing begins after Close: the pending records can no
		// longer be committed by this instance.
		s.sink.log.Warn("closing before the abort markers of the last aborted transaction could be checked", "error", err)
		s.markers.AbortsChecked()
		err = s.verifyMarkers(ctx)
	}
	if err != nil {
		return err
	}
	if suspects := s.markers.Suspects(); len(suspects) > 0 {
		s.sink.log.Warn("closing without having seen the commit markers of these partitions (late, not checked as the brokers did not answer, or lost): if the broker lost them, a later abort of this transactional id would take their records, which the checkpoint covers; check them with a read_committed reader",
			"partitions", spanList(suspects))
	}
	return nil
}

// lostRecords is the error of records that a committed transaction wrote
// and that a later abort took.
func lostRecords(lost []txnSpan) error {
	verified := lost[0].before
	for _, sp := range lost[1:] {
		if sp.before.Position.Compare(verified.Position) < 0 {
			verified = sp.before
		}
	}
	return fmt.Errorf("%w: records of committed transactions, which the checkpoint covers (so Write never writes them again), are gone for read_committed readers: %s: "+
		"the broker answered their transaction's commit without writing its commit markers to these partitions (Kafka 4.4 did so while a partition had no leader), and a later abort of this producer took them; "+
		"the checkpoint topic is past them, so New would resume after them. The last verified checkpoint is %s: the source must deliver the events after it again "+
		"(restart it from there with a new sink id; if it cannot go back that far, as a replication slot confirmed past it cannot, snapshot the affected tables again); "+
		"check the brokers' logs for skipped transaction markers",
		ErrCheckpoint, spanList(lost), verified.Position)
}

func spanList(spans []txnSpan) string {
	var b strings.Builder
	for i, sp := range spans {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s, committed with checkpoint %s", sp, sp.ck.Position)
	}
	return b.String()
}

// verifyAbortMarkers checks, before a transaction begins, that the
// transactions aborted since the last check left nothing of this producer
// open on the partitions of the topics they wrote to. No transaction of
// this producer is open before the next begins; so a partition whose
// leader reports one open (DescribeProducers) once the coordinator
// completed the abort (markers.CheckAborts) lost its abort markers, as
// Kafka 4.4 loses commit markers (see the top of this file). Its records
// there are pending, and the next commit of this producer that writes to
// the partition would commit them: events duplicated. The sink stops
// instead.
//
// A partition that cannot be checked yet (no leader: the very case in
// which Kafka skips markers; brokers not answering) keeps the check
// pending, and no transaction begins until it can be made: the error is
// retryable. Only a check the broker refuses for good (the principal may
// not describe the topic) is logged and given up.
func (s *txnSink) verifyAbortMarkers(ctx context.Context) error {
	w := &s.markers
	wctx, cancel := context.WithTimeout(ctx, markerWait)
	defer cancel()
	id, _, err := s.sink.cl.ProducerID(wctx)
	if err != nil {
		return fmt.Errorf("kafkasink: checking the abort markers of the last aborted transaction: the producer id: %w", ctxerr.WithCause(wctx, err))
	}
	lost, err := markers.CheckAborts(wctx, s.sink.cl, s.sink.adm.Load(), s.sink.cfg.TransactionalID, id, w.AbortedIn(), IsRetryable)
	switch {
	case len(lost) > 0:
		return s.sink.follow(verdict{fmt.Errorf("%w: %w", ErrUnexpected, markers.HangingError(lost)), actFatal})
	case err != nil:
		return s.uncheckedAbort(wctx, err)
	}
	w.AbortsChecked()
	return nil
}

// errAbortUnchecked is the retryable error of a transaction that does not
// begin because the abort markers of the last aborted one cannot be
// checked yet (verifyAbortMarkers).
var errAbortUnchecked = errors.New("kafkasink: the abort markers of the last aborted transaction cannot be checked yet, and a transaction that wrote where its records may still be pending would commit them")

// uncheckedAbort decides on an abort marker check that could not be
// made: one that may succeed later keeps the check pending and returns
// errAbortUnchecked; one the broker refuses for good is logged and given
// up.
func (s *txnSink) uncheckedAbort(wctx context.Context, err error) error {
	if IsRetryable(err) || wctx.Err() != nil {
		return fmt.Errorf("%w: %w", errAbortUnchecked, err)
	}
	s.sink.log.Warn("could not check the abort markers of the last aborted transaction", "topics", s.markers.AbortedIn(), "error", err)
	s.markers.AbortsChecked()
	return nil
}
