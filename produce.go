package kafkasink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink/internal/topicadmin"
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
