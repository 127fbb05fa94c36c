package kafkasink

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink/internal/topicadmin"
)

// produceResults collects the outcome of every record of a part. Flush
// alone reports nothing about failed records, so each promise is checked.
type produceResults struct {
	wg     sync.WaitGroup
	mu     sync.Mutex
	failed *kgo.Record
	err    error
	// all is every failed record with its error, in the order the
	// promises ran: a record the broker refuses fails the rest of its
	// partition's buffer with it, and finding it needs them all (see
	// refused.go).
	all []failedRecord
	// outstanding counts the records sent whose promise has not run.
	outstanding atomic.Int64
	// done is pr.promise, made once: a method value passed to Produce
	// is an allocation per record.
	done func(*kgo.Record, error)
}

// produce sends r, counting it in the results. A record can be produced
// again after a failed attempt, and kgo keeps the first attempt's context in
// r.Context unless it is replaced: set it to this attempt's.
func (pr *produceResults) produce(ctx context.Context, cl *kgo.Client, r *kgo.Record) {
	if pr.done == nil {
		pr.done = pr.promise
	}
	pr.wg.Add(1)
	pr.outstanding.Add(1)
	r.Context = ctx
	cl.Produce(ctx, r, pr.done)
}

func (pr *produceResults) promise(r *kgo.Record, err error) {
	if err != nil {
		pr.mu.Lock()
		if pr.err == nil {
			pr.failed, pr.err = r, err
		}
		pr.all = append(pr.all, failedRecord{r, err})
		pr.mu.Unlock()
	}
	pr.outstanding.Add(-1)
	pr.wg.Done()
}

// delivered reports whether every record sent so far was acknowledged:
// none failed and none is still waiting for its outcome.
func (pr *produceResults) delivered() bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.outstanding.Load() == 0 && pr.err == nil
}

// wait blocks until every record has its outcome and returns the first
// failure.
func (pr *produceResults) wait() (*kgo.Record, error) {
	pr.wg.Wait()
	return pr.failed, pr.err
}

// failedRecord is a record that failed, with the client's or the broker's
// error.
type failedRecord struct {
	r   *kgo.Record
	err error
}

// failures returns every failed record; call it after wait.
func (pr *produceResults) failures() []failedRecord {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.all
}

// writeError names the failed record: topic, partition and the position of
// its event (the checkpoint's position for the checkpoint record).
func (s *Sink) writeError(ctx context.Context, pt *part, ck Checkpoint, r *kgo.Record, err error) error {
	pos := ck.Position
	for j, x := range pt.records {
		if x == r {
			pos = pt.positions[j]
			break
		}
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.UnknownTopicID) {
		if derr := s.deletedTopic(ctx, pt); derr != nil {
			return derr
		}
	}
	if ctxErr := context.Cause(ctx); ctxErr != nil && errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w (%w)", ctxErr, err)
	}
	return &WriteError{Topic: r.Topic, Partition: r.Partition, Position: pos, Err: err}
}

// deletedTopic returns an ErrTopicMissing error when a topic of the part no
// longer exists. The client keeps retrying a deleted topic for a while, so a
// write that failed or timed out asks the broker directly. Fatal: the sink
// does not recreate a topic someone deleted under it.
func (s *Sink) deletedTopic(ctx context.Context, pt *part) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	checked := make(map[string]bool)
	for j, r := range pt.records {
		if checked[r.Topic] {
			continue
		}
		checked[r.Topic] = true
		if md, err := topicadmin.Metadata(ctx, s.cl, r.Topic); err == nil && md == nil {
			gone := fmt.Errorf("%w: %q was deleted while the sink ran; recreate it (or route its tables elsewhere) and restart the sink", ErrTopicMissing, r.Topic)
			s.topics.MarkDeleted(r.Topic, gone)
			return &WriteError{Topic: r.Topic, Partition: -1, Position: pt.positions[j], Err: gone}
		}
	}
	return nil
}
