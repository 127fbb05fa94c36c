package kafkasink

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

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
// longer exists (topicadmin.Cache.Deleted). Fatal: the sink does not
// recreate a topic someone deleted under it.
func (s *Sink) deletedTopic(ctx context.Context, pt *part) error {
	if j, gone := s.topics.Deleted(ctx, s.cl, pt.records); gone != nil {
		return &WriteError{Topic: pt.records[j].Topic, Partition: -1, Position: pt.positions[j], Err: gone}
	}
	return nil
}
