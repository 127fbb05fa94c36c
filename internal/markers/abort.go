package markers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink/internal/backoff"
	"github.com/kafkasink/kafkasink/internal/ctxerr"
)

// CheckAborts checks that the transactions producer id (of transactional
// id txnID) aborted since the last check left nothing open on the
// partitions of topics. It returns the spans where one is still open once
// the coordinator completed the abort, whose abort markers were lost, or
// why the check could not be made: what the caller makes of either is its
// own.
//
// An abort that did not move the producer to a new epoch is answered
// before its markers are written: the coordinator writes them next, and
// only once it says it is done (AbortDone: no longer PrepareAbort) does a
// partition still open (StillOpen) show markers lost. Asking the
// coordinator first and the partitions after is what keeps markers
// written in between from looking lost.
//
// A partition that did not answer is the error at once when retryable
// says it may answer later, or ctx ended; those the broker refuses for
// good are joined into the error once every other partition is checked.
func CheckAborts(ctx context.Context, cl *kgo.Client, adm *kadm.Client, txnID string, id int64, topics []string, retryable func(error) bool) (lost []Span, err error) {
	hanging, failed, err := Hanging(ctx, cl, adm, id, topics)
	if err != nil {
		return nil, err
	}
	if len(hanging) > 0 {
		if err := AbortDone(ctx, adm, txnID); err != nil {
			return nil, err
		}
		if lost, err = StillOpen(ctx, cl, hanging, topics); err != nil || len(lost) > 0 {
			return lost, err
		}
	}
	var refused []error
	for k, ferr := range failed {
		ferr = fmt.Errorf("%s[%d]: %w", k.Topic, k.Partition, ferr)
		if !retryable(ferr) && ctx.Err() == nil {
			refused = append(refused, ferr)
			continue
		}
		return nil, ferr
	}
	return nil, errors.Join(refused...)
}

// HangingError is the error of partitions an aborted transaction of a
// producer left open: CheckAborts' lost spans.
type HangingError []Span

func (h HangingError) Error() string {
	var b strings.Builder
	for i, sp := range h {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s[%d] from offset %d", sp.Topic, sp.Partition.Partition, sp.First)
	}
	return fmt.Sprintf("the broker ended an aborted transaction of producer id %d without writing its abort markers to %s "+
		"(Kafka 4.4 was seen to skip the markers of a partition that had no leader for a moment): its records there are still pending, "+
		"and the next commit of this producer that writes to these partitions would commit them, duplicating events. Nothing is lost: "+
		"abort the hanging transaction on each partition (kafka-transactions.sh --bootstrap-server <broker> abort --topic <topic> --partition <partition> --start-offset <offset>), "+
		"then start the sink again", h[0].ProducerID, b.String())
}

// AbortDone waits until the coordinator of transactional id says it has
// completed the last abort (DescribeTransactions: no longer in a Prepare
// state), after which it writes no more markers for it. It returns why it
// could not ask, or that the coordinator was still at work when ctx
// ended.
func AbortDone(ctx context.Context, adm *kadm.Client, id string) error {
	wait := backoff.New(time.Millisecond, 100*time.Millisecond)
	for {
		described, err := adm.DescribeTransactions(ctx, id)
		if err == nil {
			var d kadm.DescribedTransaction
			if d, err = described.On(id, nil); err == nil {
				err = d.Err
			}
			if err == nil && !strings.HasPrefix(d.State, "Prepare") {
				return nil
			}
		}
		if err != nil {
			return fmt.Errorf("asking the coordinator of transactional id %q whether the abort is complete: %w", id, ctxerr.WithCause(ctx, err))
		}
		if !wait.Wait(ctx) {
			return fmt.Errorf("the coordinator of transactional id %q is still writing the abort markers: %w", id, context.Cause(ctx))
		}
	}
}

// StillOpen asks the leaders of the hanging spans' partitions (Hanging's,
// of the aborted transactions' topics) again whether the producer has a
// transaction open there, and returns the spans where it has. An error
// names the question or the partitions that did not answer.
func StillOpen(ctx context.Context, cl *kgo.Client, hanging []Span, topics []string) ([]Span, error) {
	open, failed, err := Open(ctx, cl, hanging)
	if err != nil {
		return nil, fmt.Errorf("describing the producers of %v again: %w", topics, ctxerr.WithCause(ctx, err))
	}
	var errs []error
	for k, ferr := range failed {
		errs = append(errs, fmt.Errorf("%s[%d]: %w", k.Topic, k.Partition, ferr))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var still []Span
	for _, sp := range hanging {
		if start, ok := open[sp.Partition]; ok && start >= 0 {
			still = append(still, sp)
		}
	}
	return still, nil
}
