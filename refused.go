package kafkasink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink/internal/partitioner"
	"github.com/kafkasink/kafkasink/internal/produced"
	"github.com/kafkasink/kafkasink/internal/refusals"
)

// This file is what the sink does when the broker refuses a record that
// passed the sink's own checks (the size pre-check uses the topic limits
// read at first use): a topic's max.message.bytes lowered while the sink
// runs, compression that does not shrink as assumed, a record the broker
// validates and refuses (INVALID_RECORD, INVALID_TIMESTAMP, a
// POLICY_VIOLATION).
//
// The refused records are found by sending the failed records again, in
// runs, until each refused record failed on its own (internal/refusals
// says how); what each mode then does is its quarantine's.

// refusal is a part's failed produce in which every failed record is a
// record of the part (not the checkpoint) that failed with a refusal code:
// the refused records may be found and quarantined. Its text and class are
// those of the first failed record's *WriteError, which is what Write
// returns when the refusal cannot be resolved.
type refusal struct {
	err    error
	failed []produced.Failure
}

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// produceError is writeError for part pt whose records failed (res, after
// wait): a *refusal when every failure may be pinned to a record of pt.
func (s *Sink) produceError(ctx context.Context, pt *part, ck Checkpoint, res *produced.Results) error {
	failed, err := res.Wait()
	werr := s.writeError(ctx, pt, ck, failed, err)
	all := res.Failures()
	if !refusals.OnlyAmong(pt.records, all) {
		return werr
	}
	return &refusal{err: werr, failed: all}
}

// refusalOf returns the refusal err holds, when quarantining may resolve
// it: not when the failure also stopped the sink (fenced) or ran out of
// the transaction's time.
func refusalOf(err error) *refusal {
	var r *refusal
	if IsFatal(err) || errors.Is(err, ErrTransactionTimeout) || !errors.As(err, &r) {
		return nil
	}
	return r
}

// quarantine resolves a refusal of part i of p in ExactlyOnce mode: the
// transaction that failed was aborted, and the checkpoint is read back
// before anything else, as for any failed transaction. It refreshes the
// limits of the refusing topics, finds the refused records in a probe
// transaction that it aborts, so that nothing of it is visible, replaces
// the refused events' records by their dead-letter records, and returns a
// fresh transaction with the part's records sent in runs, for transact to
// finish. Without a dead-letter topic it returns the *RejectedError naming
// the events.
func (s *txnSink) quarantine(ctx context.Context, p *plan, i int, ref *refusal) (*openTxn, error) {
	pt := &p.parts[i]
	if err := s.sink.recoverIfUnverified(ctx); err != nil {
		return nil, fmt.Errorf("%w (recovering after: %v)", err, ref)
	}
	if err := s.sink.refreshLimits(ctx, ref.failed); err != nil {
		return nil, err
	}
	t, err := s.begin(ctx)
	if err != nil {
		return nil, s.sink.follow(verdict{err, actRecover}) // recovery settles the client's state
	}
	refused, sent, rounds, perr := refusals.Find(t.ctx, s.sink.cl, produced.Records(ref.failed), runLayout{s.sink})
	info := TransactionInfo{First: pt.first, Last: pt.last, Records: sent}
	for _, f := range ref.failed {
		t.written.Sent(f.Record) // the probe sent them outside t.produce
	}
	aerr := s.abort(ctx, t, info, errProbeAborted)
	t.cancel()
	if aerr != errProbeAborted {
		return nil, aerr // fenced, timed out: what abort decided stands
	}
	if perr != nil {
		return nil, perr
	}
	s.sink.log.Info("found the records the broker refuses in an aborted probe transaction", "first", pt.first.String(), "last", pt.last.String(),
		"failed", len(ref.failed), "refused", len(refused), "rounds", rounds)
	// The probe's abort made the checkpoint unverified: this reads it back.
	if err := s.sink.recoverIfUnverified(ctx); err != nil {
		return nil, err
	}
	if _, err := s.sink.quarantineRefused(ctx, p, i, refused); err != nil {
		return nil, err
	}
	if t, err = s.begin(ctx); err != nil {
		return nil, s.sink.follow(verdict{err, actRecover})
	}
	// A record that fails now is transact's to find: it checks every
	// result and aborts.
	if err := refusals.SendInRuns(t.ctx, s.sink.cl, pt.records, runLayout{s.sink}, func(r *kgo.Record) { t.produce(s.sink.cl, r) }, &t.results); err != nil {
		defer t.cancel()
		return nil, s.abort(ctx, t, TransactionInfo{First: pt.first, Last: pt.last, Records: t.records}, err)
	}
	return t, nil
}

// errProbeAborted is the cause of the abort of a probe transaction, which
// was never to commit.
var errProbeAborted = errors.New("kafkasink: probe transaction, aborted by design: it only finds the records the broker refuses")

// quarantine resolves a refusal of part i of p in the Idempotent and Plain
// modes, within their at-least-once contract: the records that pass the
// probe are delivered by it, and the refused events' dead-letter records
// are written after them, before the part's checkpoint. Without a
// dead-letter topic it returns the *RejectedError naming the events; the
// part's other records may be written already, and the redelivery writes
// them again, as these modes allow after a failure.
func (s *producerSink) quarantine(ctx context.Context, p *plan, i int, ref *refusal) error {
	if err := s.sink.refreshLimits(ctx, ref.failed); err != nil {
		return err
	}
	refused, _, rounds, err := refusals.Find(ctx, s.sink.cl, produced.Records(ref.failed), runLayout{s.sink})
	if err != nil {
		return err
	}
	pt := &p.parts[i]
	s.sink.log.Info("found the records the broker refuses by sending the failed ones again", "first", pt.first.String(), "last", pt.last.String(),
		"failed", len(ref.failed), "refused", len(refused), "rounds", rounds)
	dead, err := s.sink.quarantineRefused(ctx, p, i, refused)
	if err != nil {
		return err
	}
	var res produced.Results
	if err := refusals.SendInRuns(ctx, s.sink.cl, dead, runLayout{s.sink}, func(r *kgo.Record) { res.Produce(ctx, s.sink.cl, r) }, &res); err != nil {
		return err
	}
	if failed, err := res.Wait(); err != nil {
		return s.sink.writeError(ctx, pt, Checkpoint{}, failed, err)
	}
	return nil
}

// refreshLimits reads again the configuration of the topics of the failed
// records, so that the size pre-check of what follows, and the runs
// refusals.SendInRuns makes, use the limits the broker applies now.
func (s *Sink) refreshLimits(ctx context.Context, failed []produced.Failure) error {
	return s.topics.Refresh(ctx, s.cl, produced.Records(failed), func(topic string, now, was int) {
		s.log.Warn("topic's max.message.bytes was lowered while the sink ran; the client keeps making batches up to the old limit for the partitions it produced to, so each transaction that meets a too large batch is sent again in runs: restart the sink to make batches by the new limit",
			"topic", topic, "max_message_bytes", now, "was", was)
	})
}

// runLayout is how the sink's topics make runs (refusals.Layout): the
// partition the sink's partitioner sends a record to, and the topic's
// record limit, as the broker counts a batch (recordOverhead per record,
// which is more than it adds).
type runLayout struct{ s *Sink }

func (l runLayout) Partition(r *kgo.Record) int32 {
	if info, known := l.s.topics.Peek(r.Topic); known && info.Partitions > 0 {
		return int32(partitioner.Record(r, info.Partitions))
	}
	return r.Partition
}

func (l runLayout) Limit(topic string) int { return int(l.s.batchMaxBytes(topic)) }

func (l runLayout) Size(r *kgo.Record) int { return recordSize(r) + recordOverhead }

// quarantineRefused replaces, in part i of p, the records of each event
// the broker refused (refused) by the event's dead-letter record, and
// returns the dead-letter records. Without a dead-letter topic, or when a
// refused record is a dead-letter record itself, it returns a
// *RejectedError naming every refused event of the part, and changes
// nothing. A refused record the Encoder writes around events (Framer)
// belongs to no event: it fails the Write as it did before.
func (s *Sink) quarantineRefused(ctx context.Context, p *plan, i int, refused map[*kgo.Record]error) ([]*kgo.Record, error) {
	pt := &p.parts[i]
	var (
		rejections []Rejection
		main       = make(map[Position]*kgo.Record) // the event's own record
	)
	deadLettered := s.cfg.DeadLetterTopic != ""
	for j, r := range pt.records {
		pos := pt.positions[j]
		err, ok := refused[r]
		if s.frameTopic != "" && r.Topic == s.frameTopic {
			if ok {
				return nil, &WriteError{Topic: r.Topic, Partition: r.Partition, Position: pos, Err: fmt.Errorf("the broker refused the record the Encoder writes around the event, which belongs to no event and cannot be dead-lettered: %w", err)}
			}
			continue
		}
		if _, seen := main[pos]; !seen {
			main[pos] = r
		}
		if !ok || slices.ContainsFunc(rejections, func(x Rejection) bool { return x.Position == pos }) {
			continue // not refused, or the event's tombstone after its refused record
		}
		e := p.event(pos)
		rej := Rejection{Position: pos, Schema: e.Schema, Table: e.Table, Topic: r.Topic, Reason: refusalReason(err)}
		info, _ := s.topics.Peek(r.Topic)
		rej.Err = refusals.Explain(r, err, recordSize(r), s.cfg.recordLimit(info))
		if r.Topic == s.cfg.DeadLetterTopic {
			deadLettered = false
			rej.Topic = s.routeOf(e).topic
			rej.Err = fmt.Errorf("the event's dead-letter record too: %w", rej.Err)
		}
		rejections = append(rejections, rej)
	}
	if err := s.reportRejected(rejections, deadLettered); err != nil {
		return nil, err
	}
	dead := make(map[Position]*kgo.Record, len(rejections))
	for k := range rejections {
		rej := &rejections[k]
		r := main[rej.Position]
		d := draft{record: &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Headers: slices.Clip(r.Headers)}, keyMade: true, valueMade: true}
		dl, err := s.deadLetter(ctx, p.enc, p.event(rej.Position), d, rej)
		if err != nil {
			return nil, err
		}
		dead[rej.Position] = dl
	}
	records := make([]*kgo.Record, 0, len(pt.records))
	positions := make([]Position, 0, len(pt.records))
	out := make([]*kgo.Record, 0, len(dead))
	pt.bytes = 0
	for j, r := range pt.records {
		pos := pt.positions[j]
		if dl, ok := dead[pos]; ok && (s.frameTopic == "" || r.Topic != s.frameTopic) {
			if r != main[pos] {
				continue // the event's tombstone goes with it
			}
			r = dl
			out = append(out, dl)
		}
		records = append(records, r)
		positions = append(positions, pos)
		pt.bytes += recordSize(r)
	}
	pt.records, pt.positions = records, positions
	p.rejected += len(rejections)
	return out, nil
}

// event returns the planned event at pos.
func (p *plan) event(pos Position) *Event {
	j := sort.Search(len(p.planned), func(j int) bool { return p.planned[j].Position.Compare(pos) >= 0 })
	return &p.planned[j]
}

// refusalReason is the Reason of a record refused with err: too_large for
// a size the broker refuses, refused otherwise.
func refusalReason(err error) Reason {
	if refusals.TooLarge(err) {
		return ReasonTooLarge
	}
	return ReasonRefused
}
