// Package markers asks the brokers whether the markers of a producer's
// transactions were written: whether a committed transaction's records
// are past each partition's last stable offset, whether a transaction of
// the producer is still open on a partition (DescribeProducers), and,
// once a partition settled, whether the records are there for a
// read_committed reader. Watch keeps the partitions still to be seen
// committed; what a failure means, and what the sink does about it, is
// the caller's.
package markers

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink/internal/backoff"
	"github.com/kafkasink/kafkasink/internal/committed"
	"github.com/kafkasink/kafkasink/internal/ctxerr"
)

// Partition names one partition.
type Partition struct {
	Topic     string
	Partition int32
}

// Span is what one transaction of a producer wrote to one partition.
type Span struct {
	Partition
	ProducerID  int64
	First, Last int64 // offsets of the transaction's records in the partition
}

// Where returns sp itself, for the types that embed a Span (Spanned).
func (sp Span) Where() Span { return sp }

// Spanned is a Span with what its caller keeps with it, such as the
// events its records hold.
type Spanned interface{ Where() Span }

// Spans returns the spans of a producer's transaction that wrote records
// (each has its offset): one per partition, in the order of their first
// record, with the indexes in records of the span's first and last record
// by offset.
func Spans(records []*kgo.Record) (spans []Span, first, last []int) {
	at := make(map[Partition]int)
	for j, r := range records {
		k := Partition{Topic: r.Topic, Partition: r.Partition}
		i, ok := at[k]
		if !ok {
			at[k] = len(spans)
			spans = append(spans, Span{Partition: k, ProducerID: r.ProducerID, First: r.Offset, Last: r.Offset})
			first, last = append(first, j), append(last, j)
			continue
		}
		sp := &spans[i]
		if r.Offset < sp.First {
			sp.First, first[i] = r.Offset, j
		}
		if r.Offset > sp.Last {
			sp.Last, last[i] = r.Offset, j
		}
	}
	return spans, first, last
}

// Watch is what a producer knows of the markers of its transactions: the
// partitions of the last commit not yet seen committed, the suspects
// (partitions of earlier commits whose markers did not come within the
// wait), and the topics aborted transactions sent records to since their
// abort markers were last checked. Not safe for concurrent use.
type Watch[S Spanned] struct {
	pending   []S
	suspects  []S
	abortedIn []string
}

// Committed remembers the spans of a committed transaction.
func (w *Watch[S]) Committed(spans ...S) { w.pending = append(w.pending, spans...) }

// Aborted remembers the topics an aborted transaction sent records to.
func (w *Watch[S]) Aborted(topics []string) {
	for _, t := range topics {
		if !slices.Contains(w.abortedIn, t) {
			w.abortedIn = append(w.abortedIn, t)
		}
	}
}

// AbortedIn returns the topics whose abort markers are still to be
// checked (see Hanging).
func (w *Watch[S]) AbortedIn() []string { return w.abortedIn }

// AbortsChecked forgets the topics of AbortedIn: their abort markers were
// checked, or the check was given up.
func (w *Watch[S]) AbortsChecked() { w.abortedIn = nil }

// Suspects returns the spans whose markers were not seen within a wait.
func (w *Watch[S]) Suspects() []S { return w.suspects }

// Suspect keeps sp among the suspects, to be checked again.
func (w *Watch[S]) Suspect(sp S) { w.suspects = append(w.suspects, sp) }

// Settle waits up to wait for the partitions of the last commit to be
// seen committed: a partition's last stable offset past the span's
// records, or, when another producer's open transaction holds it back,
// the leader saying the span's producer has no transaction open there
// (Ended). It returns the suspects that settled meanwhile, whose records
// are committed late or aborted (ReadBack tells which), and the
// partitions of the last commit that did not settle within the wait,
// which become suspects.
func (w *Watch[S]) Settle(ctx context.Context, cl *kgo.Client, wait time.Duration) (late, suspected []S) {
	if len(w.pending) == 0 && len(w.suspects) == 0 {
		return nil, nil
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	pause := backoff.New(time.Millisecond, 100*time.Millisecond)
	for round := 0; ; round++ {
		lso := LastStableOffsets(wctx, cl, slices.Concat(w.pending, w.suspects))
		var done []S
		_, w.pending = settled(w.pending, lso)
		done, w.suspects = settled(w.suspects, lso)
		late = append(late, done...)
		if len(w.pending) > 0 && round > 0 {
			// Another producer's open transaction may hold the
			// last stable offset back: ask whether ours is open.
			_, w.pending = settled(w.pending, Ended(wctx, cl, w.pending))
		}
		if len(w.pending) == 0 || !pause.Wait(wctx) {
			break
		}
	}
	suspected = w.pending
	w.suspects = append(w.suspects, w.pending...)
	w.pending = nil
	return late, suspected
}

// settled splits spans into those whose partition's last stable offset
// (in lso; a partition missing from it is unknown) is past their records
// and those still pending.
func settled[S Spanned](spans []S, lso map[Partition]int64) (done, open []S) {
	for _, s := range spans {
		sp := s.Where()
		if o, ok := lso[sp.Partition]; ok && o > sp.Last {
			done = append(done, s)
		} else {
			open = append(open, s)
		}
	}
	return done, open
}

// LastStableOffsets asks the leaders of the spans' partitions for their
// last stable offsets: one ListOffsets request (read_committed, latest),
// which the client splits per leader. Partitions that fail are left out.
func LastStableOffsets[S Spanned](ctx context.Context, cl *kgo.Client, spans []S) map[Partition]int64 {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	req.IsolationLevel = 1
	seen := make(map[Partition]bool, len(spans))
	topics := make(map[string]int)
	for _, s := range spans {
		sp := s.Where()
		if seen[sp.Partition] {
			continue
		}
		seen[sp.Partition] = true
		i, ok := topics[sp.Topic]
		if !ok {
			i = len(req.Topics)
			topics[sp.Topic] = i
			t := kmsg.NewListOffsetsRequestTopic()
			t.Topic = sp.Topic
			req.Topics = append(req.Topics, t)
		}
		p := kmsg.NewListOffsetsRequestTopicPartition()
		p.Partition = sp.Partition.Partition
		p.CurrentLeaderEpoch = -1
		p.Timestamp = -1 // latest: the last stable offset when read_committed
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, p)
	}
	lso := make(map[Partition]int64, len(seen))
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return lso
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode == 0 {
				lso[Partition{t.Topic, p.Partition}] = p.Offset
			}
		}
	}
	return lso
}

// Ended returns, as a map of last stable offsets, an offset past the span
// for each partition where the span's producer has no transaction open
// from the span's records on (Open): its markers were written, whatever
// another producer's open transaction does to the last stable offset.
// Partitions that fail are left out: a principal without the right to
// describe them (READ on the topic) falls back to the last stable
// offset.
func Ended[S Spanned](ctx context.Context, cl *kgo.Client, spans []S) map[Partition]int64 {
	open, _, _ := Open(ctx, cl, spans)
	ended := make(map[Partition]int64, len(spans))
	for _, s := range spans {
		sp := s.Where()
		if start, ok := open[sp.Partition]; ok && start < 0 {
			ended[sp.Partition] = sp.Last + 1
		}
	}
	return ended
}

// Open asks the leaders of the spans' partitions which producers have a
// transaction open there (DescribeProducers, which the client splits per
// leader). For each partition that answered it gives the offset where the
// span's producer's open transaction starts, when it starts at or before
// the span's last record, and -1 when there is none; for each that did
// not, its error. err is the error of the request as a whole.
func Open[S Spanned](ctx context.Context, cl *kgo.Client, spans []S) (open map[Partition]int64, failed map[Partition]error, err error) {
	req := kmsg.NewPtrDescribeProducersRequest()
	topics := make(map[string]int)
	for _, s := range spans {
		sp := s.Where()
		i, ok := topics[sp.Topic]
		if !ok {
			i = len(req.Topics)
			topics[sp.Topic] = i
			t := kmsg.NewDescribeProducersRequestTopic()
			t.Topic = sp.Topic
			req.Topics = append(req.Topics, t)
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, sp.Partition.Partition)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, nil, err
	}
	answered := make(map[Partition][]kmsg.DescribeProducersResponseTopicPartitionActiveProducer, len(spans))
	failed = make(map[Partition]error)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			k := Partition{t.Topic, p.Partition}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				failed[k] = err
				continue
			}
			answered[k] = p.ActiveProducers
		}
	}
	open = make(map[Partition]int64, len(answered))
	for _, s := range spans {
		sp := s.Where()
		producers, ok := answered[sp.Partition]
		if !ok {
			if _, ok := failed[sp.Partition]; !ok {
				failed[sp.Partition] = errors.New("no answer")
			}
			continue
		}
		open[sp.Partition] = -1
		for _, ap := range producers {
			if ap.ProducerID == sp.ProducerID && ap.CurrentTxnStartOffset >= 0 && ap.CurrentTxnStartOffset <= sp.Last {
				open[sp.Partition] = ap.CurrentTxnStartOffset
			}
		}
	}
	return open, failed, nil
}

// Hanging asks the leaders of every partition of topics whether producer
// id has a transaction open there, after its transactions there were
// aborted: a span for each partition where one is (First is where it
// starts), and the partitions that did not answer, with their errors. A
// topic deleted since holds nothing open. err, when the question could
// not be asked, names what failed.
func Hanging(ctx context.Context, cl *kgo.Client, adm *kadm.Client, id int64, topics []string) (hanging []Span, failed map[Partition]error, err error) {
	details, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		return nil, nil, fmt.Errorf("listing topics %v: %w", topics, ctxerr.WithCause(ctx, err))
	}
	var spans []Span
	for _, t := range details.Sorted() {
		if errors.Is(t.Err, kerr.UnknownTopicOrPartition) {
			continue // deleted: nothing of it can be pending
		}
		if t.Err != nil {
			return nil, nil, fmt.Errorf("topic %s: %w", t.Topic, t.Err)
		}
		for _, p := range t.Partitions.Sorted() {
			spans = append(spans, Span{Partition: Partition{t.Topic, p.Partition}, ProducerID: id, Last: math.MaxInt64})
		}
	}
	open, failed, err := Open(ctx, cl, spans)
	if err != nil {
		return nil, nil, fmt.Errorf("describing the producers of %v: %w", topics, ctxerr.WithCause(ctx, err))
	}
	for _, sp := range spans {
		if start, ok := open[sp.Partition]; ok && start >= 0 {
			sp.First = start
			hanging = append(hanging, sp)
		}
	}
	return hanging, failed, nil
}

// ReadBack reads sp's partition read_committed from sp's first record,
// with a client of opts, and reports whether its records are there: the
// partition has settled (its last stable offset is past them), so they
// were either committed or aborted, all together. A fetch error that
// retryable refuses ends the read.
func ReadBack(ctx context.Context, opts []kgo.Opt, sp Span, retryable func(error) bool) (bool, error) {
	// The abort marker past them ends the read when they are gone.
	cl, err := committed.Reader(opts, sp.Topic, sp.Partition.Partition, sp.First)
	if err != nil {
		return false, err
	}
	defer cl.Close()
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return false, context.Cause(ctx)
		}
		for _, fe := range fetches.Errors() {
			if !retryable(fe.Err) {
				return false, fe.Err
			}
		}
		found, past := false, false
		fetches.EachRecord(func(r *kgo.Record) {
			switch {
			case r.Offset > sp.Last:
				past = true
			case r.ProducerID == sp.ProducerID && !r.Attrs.IsControl():
				found = true
			}
		})
		if found || past {
			return found, nil
		}
	}
}
