package kafkasink

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink/internal/topicadmin"
)

// This file is the checkpoint topic: how the sink creates it, and which
// settings would delete the latest checkpoint. The destination and
// dead-letter topics are topicadmin.Cache's, with Config.Topics' creation
// settings; talking to the brokers about topics is internal/topicadmin's.

// setupCheckpointTopic makes sure the checkpoint topic exists and, in
// ExactlyOnce mode, that its settings cannot delete the latest checkpoint;
// it returns the partition this sink's key lives in.
func setupCheckpointTopic(ctx context.Context, cl *kgo.Client, topic, sinkID string, mode Mode, log func(msg string, args ...any)) (int32, error) {
	adm := kadm.NewClient(cl)
	md, err := topicadmin.Metadata(ctx, cl, topic)
	if err != nil {
		return 0, err
	}
	if md == nil {
		brokers, err := adm.ListBrokers(ctx)
		if err != nil {
			return 0, fmt.Errorf("kafkasink: listing brokers to create checkpoint topic %q: %w", topic, err)
		}
		rf := int16(min(3, len(brokers)))
		configs := map[string]*string{
			"cleanup.policy":      new("compact"),
			"min.insync.replicas": new(strconv.Itoa(int(min(2, rf)))),
		}
		if err := topicadmin.Create(ctx, adm, topic, 1, rf, configs); err != nil {
			return 0, fmt.Errorf("kafkasink: creating checkpoint topic %q (1 partition, replication factor %d, compacted): %w", topic, rf, err)
		}
		log("created checkpoint topic", "topic", topic, "replication_factor", rf)
	}
	n, cfgs, err := topicadmin.Ready(ctx, cl, adm, topic)
	if err != nil {
		return 0, err
	}
	if problem := unsafeCheckpointSettings(cfgs); problem != "" {
		if mode == ExactlyOnce {
			return 0, fmt.Errorf("%w %q: %s", ErrUnsafeCheckpointTopic, topic, problem)
		}
		log("checkpoint topic settings can lose the checkpoint; a restart may then redeliver everything", "topic", topic, "problem", problem)
	}
	return int32(PartitionFor([]byte(sinkID), n)), nil
}

// unsafeCheckpointSettings says why a topic's settings could delete the
// latest checkpoint, or returns "".
func unsafeCheckpointSettings(cfgs map[string]string) string {
	compact, del := topicadmin.CleanupPolicies(cfgs)
	const fix = "; fix it with: kafka-configs.sh --alter --entity-type topics --entity-name <topic> --add-config cleanup.policy=compact (or choose another Config.CheckpointTopic)"
	switch {
	case !compact:
		return fmt.Sprintf("cleanup.policy=%s is not compacted, so retention deletes old segments and with them the latest checkpoint of an idle sink%s", cfgs["cleanup.policy"], fix)
	case del && (cfgs["retention.ms"] != "-1" || cfgs["retention.bytes"] != "-1"):
		return fmt.Sprintf("cleanup.policy=%s with retention.ms=%s deletes the latest checkpoint of a sink idle for longer%s", cfgs["cleanup.policy"], cfgs["retention.ms"], fix)
	}
	return ""
}
