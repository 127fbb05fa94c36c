package kafkasink

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink/internal/checkpointlog"
)

// This file is the checkpoint topic: whether its settings may stop the
// sink. Creating it, and which settings would delete the latest
// checkpoint, is internal/checkpointlog's; the destination and
// dead-letter topics are topicadmin.Cache's, with Config.Topics' creation
// settings.

// setupCheckpointTopic makes sure the checkpoint topic exists and, in
// ExactlyOnce mode, that its settings cannot delete the latest checkpoint;
// it returns the partition this sink's key lives in.
func setupCheckpointTopic(ctx context.Context, cl *kgo.Client, topic, sinkID string, mode Mode, log func(msg string, args ...any)) (int32, error) {
	n, problem, err := checkpointlog.EnsureTopic(ctx, cl, topic, log)
	if err != nil {
		return 0, err
	}
	if problem != "" {
		if mode == ExactlyOnce {
			return 0, fmt.Errorf("%w %q: %s", ErrUnsafeCheckpointTopic, topic, problem)
		}
		log("checkpoint topic settings can lose the checkpoint; a restart may then redeliver everything", "topic", topic, "problem", problem)
	}
	return int32(PartitionFor([]byte(sinkID), n)), nil
}
