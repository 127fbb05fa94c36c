package checkpointlog

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink/internal/topicadmin"
)

// EnsureTopic makes sure the checkpoint topic exists, creating it when it
// is missing with one partition, compacted, replicated three times (or on
// every broker of a smaller cluster) with min.insync.replicas 2 (or the
// replication factor), and logging that it did; it waits until the
// topic's partitions have leaders. It returns how many partitions the
// topic has, and why its settings could delete the latest checkpoint
// ("" when they cannot), which the caller decides on.
func EnsureTopic(ctx context.Context, cl *kgo.Client, topic string, log func(msg string, args ...any)) (partitions int, unsafe string, err error) {
	adm := kadm.NewClient(cl)
	md, err := topicadmin.Metadata(ctx, cl, topic)
	if err != nil {
		return 0, "", err
	}
	if md == nil {
		brokers, err := adm.ListBrokers(ctx)
		if err != nil {
			return 0, "", fmt.Errorf("kafkasink: listing brokers to create checkpoint topic %q: %w", topic, err)
		}
		rf := int16(min(3, len(brokers)))
		configs := map[string]*string{
			"cleanup.policy":      new("compact"),
			"min.insync.replicas": new(strconv.Itoa(int(min(2, rf)))),
		}
		if err := topicadmin.Create(ctx, adm, topic, 1, rf, configs); err != nil {
			return 0, "", fmt.Errorf("kafkasink: creating checkpoint topic %q (1 partition, replication factor %d, compacted): %w", topic, rf, err)
		}
		log("created checkpoint topic", "topic", topic, "replication_factor", rf)
	}
	n, cfgs, err := topicadmin.Ready(ctx, cl, adm, topic)
	if err != nil {
		return 0, "", err
	}
	return n, unsafeSettings(cfgs), nil
}

// unsafeSettings says why a topic's settings could delete the latest
// checkpoint, or returns "".
func unsafeSettings(cfgs map[string]string) string {
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
