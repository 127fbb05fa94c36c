package refusals

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink/internal/ctxerr"
	"github.com/kafkasink/kafkasink/internal/produced"
)

// Find finds which of records the broker refuses on their own
// (Queues.Probe, runs made by l): each round produces its runs with cl
// and flushes. It returns the refused records with the broker's error,
// the records it sent and the rounds. A failure with another code, or a
// flush that does not finish, is returned: it cannot be pinned to a
// record.
func Find(ctx context.Context, cl *kgo.Client, records []*kgo.Record, l Layout) (map[*kgo.Record]error, int, int, error) {
	return NewQueues(records, l).Probe(func(round [][]*kgo.Record) (map[*kgo.Record]error, error) {
		var res produced.Results
		for _, run := range round {
			for _, r := range run {
				res.Produce(ctx, cl, r)
			}
		}
		if err := cl.Flush(ctx); err != nil {
			return nil, fmt.Errorf("kafkasink: sending records again to find the ones the broker refuses: %w", ctxerr.WithCause(ctx, err))
		}
		res.Wait()
		failed := make(map[*kgo.Record]error)
		for _, f := range res.Failures() {
			if Code(f.Err) == nil {
				return nil, fmt.Errorf("kafkasink: sending records again to find the ones the broker refuses: %s[%d]: %w", f.Record.Topic, f.Record.Partition, f.Err)
			}
			failed[f.Record] = f.Err
		}
		return failed, nil
	})
}

// SendInRuns produces records with produce, which counts them in res:
// each partition's in order, in runs that fit its topic's limit (by l),
// one run per partition in flight. No batch the client makes then exceeds a limit
// lowered since it first produced to the partition (kgo keeps the batch
// size it learned then). It stops after a round in which a record failed;
// res holds the outcomes.
func SendInRuns(ctx context.Context, cl *kgo.Client, records []*kgo.Record, l Layout, produce func(*kgo.Record), res *produced.Results) error {
	q := NewQueues(records, l)
	for round := q.Round(); len(round) > 0; round = q.Round() {
		for _, run := range round {
			for _, r := range run {
				produce(r)
			}
		}
		if err := cl.Flush(ctx); err != nil {
			return fmt.Errorf("kafkasink: sending records in runs: %w", ctxerr.WithCause(ctx, err))
		}
		if _, err := res.Wait(); err != nil {
			return nil
		}
	}
	return nil
}
