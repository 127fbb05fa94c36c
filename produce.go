package kafkasink

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceResults collects the outcome of every record of a part. Flush
// alone reports nothing about failed records, so each promise is checked.
type produceResults struct {
	wg     sync.WaitGroup
	mu     sync.Mutex
	failed *kgo.Record
	err    error
}

// produce sends r, counting it in the results. A record can be produced
// again after a failed attempt, and kgo keeps the first attempt's context in
// r.Context unless it is replaced: set it to this attempt's.
func (pr *produceResults) produce(ctx context.Context, cl *kgo.Client, r *kgo.Record) {
	pr.wg.Add(1)
	r.Context = ctx
	cl.Produce(ctx, r, pr.promise)
}

func (pr *produceResults) promise(r *kgo.Record, err error) {
	if err != nil {
		pr.mu.Lock()
		if pr.err == nil {
			pr.failed, pr.err = r, err
		}
		pr.mu.Unlock()
	}
	pr.wg.Done()
}

// wait blocks until every record has its outcome and returns the first
// failure.
func (pr *produceResults) wait() (*kgo.Record, error) {
	pr.wg.Wait()
	return pr.failed, pr.err
}

// writeError names the failed record: topic, partition and the position of
// its event (the checkpoint's position for the checkpoint record). A topic
// that no longer exists is reported as ErrTopicMissing, which is fatal: the
// sink does not recreate a topic someone deleted under it.
func (s *base) writeError(ctx context.Context, pt *part, ck Checkpoint, r *kgo.Record, err error) error {
	pos := ck.Position
	for j, x := range pt.records {
		if x == r {
			pos = pt.positions[j]
			break
		}
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.UnknownTopicID) {
		s.topics.forget(r.Topic)
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		md, lerr := topicMetadata(mctx, s.cl, r.Topic)
		cancel()
		if lerr == nil && md == nil {
			err = fmt.Errorf("%w: %q was deleted while the sink ran (%v); recreate it and restart the sink", ErrTopicMissing, r.Topic, err)
		}
	}
	if ctxErr := context.Cause(ctx); ctxErr != nil && errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w (%w)", ctxErr, err)
	}
	return &WriteError{Topic: r.Topic, Partition: r.Partition, Position: pos, Err: err}
}
