package kafkasink

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink/internal/backoff"
)

// This file is the sink's topic administration: creating the destination,
// dead-letter and checkpoint topics, waiting for their leaders, and reading
// their configuration, with the retries each of these needs.

// ensureTopic makes sure a destination or dead-letter topic exists,
// creating it when it is missing and mustExist is false, waits until every
// partition has a leader, and reads its max.message.bytes.
func ensureTopic(ctx context.Context, cl *kgo.Client, topic string, mustExist bool, partitions int32, rf int16, configs map[string]string) (topicInfo, error) {
	adm := kadm.NewClient(cl)
	md, err := topicMetadata(ctx, cl, topic)
	if err != nil {
		return topicInfo{}, err
	}
	if md == nil {
		if mustExist {
			return topicInfo{}, fmt.Errorf("%w: %q (Topics.MustExist is set: create it, or route the table elsewhere)", ErrTopicMissing, topic)
		}
		cfgs := make(map[string]*string, len(configs))
		for k, v := range configs {
			cfgs[k] = &v
		}
		if err := createTopic(ctx, adm, topic, partitions, rf, cfgs); err != nil {
			return topicInfo{}, fmt.Errorf("kafkasink: creating topic %q (partitions %d, replication factor %d): %w", topic, partitions, rf, err)
		}
	}
	n, cfgs, err := readyTopic(ctx, cl, adm, topic)
	if err != nil {
		return topicInfo{}, err
	}
	maxBytes, err := strconv.Atoi(cfgs["max.message.bytes"])
	if err != nil || maxBytes <= 0 {
		return topicInfo{}, fmt.Errorf("kafkasink: topic %q has no usable max.message.bytes (%q)", topic, cfgs["max.message.bytes"])
	}
	compact, _ := cleanupPolicies(cfgs)
	return topicInfo{partitions: n, maxMessageBytes: maxBytes, compacted: compact}, nil
}

// setupCheckpointTopic makes sure the checkpoint topic exists and, in
// ExactlyOnce mode, that its settings cannot delete the latest checkpoint;
// it returns the partition this sink's key lives in.
func setupCheckpointTopic(ctx context.Context, cl *kgo.Client, topic, sinkID string, mode Mode, log func(msg string, args ...any)) (int32, error) {
	adm := kadm.NewClient(cl)
	md, err := topicMetadata(ctx, cl, topic)
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
		if err := createTopic(ctx, adm, topic, 1, rf, configs); err != nil {
			return 0, fmt.Errorf("kafkasink: creating checkpoint topic %q (1 partition, replication factor %d, compacted): %w", topic, rf, err)
		}
		log("created checkpoint topic", "topic", topic, "replication_factor", rf)
	}
	n, cfgs, err := readyTopic(ctx, cl, adm, topic)
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
	compact, del := cleanupPolicies(cfgs)
	const fix = "; fix it with: kafka-configs.sh --alter --entity-type topics --entity-name <topic> --add-config cleanup.policy=compact (or choose another Config.CheckpointTopic)"
	switch {
	case !compact:
		return fmt.Sprintf("cleanup.policy=%s is not compacted, so retention deletes old segments and with them the latest checkpoint of an idle sink%s", cfgs["cleanup.policy"], fix)
	case del && (cfgs["retention.ms"] != "-1" || cfgs["retention.bytes"] != "-1"):
		return fmt.Sprintf("cleanup.policy=%s with retention.ms=%s deletes the latest checkpoint of a sink idle for longer%s", cfgs["cleanup.policy"], cfgs["retention.ms"], fix)
	}
	return ""
}

// cleanupPolicies reports which of Kafka's cleanup policies a topic's
// cleanup.policy setting ("compact", "delete" or both) names.
func cleanupPolicies(cfgs map[string]string) (compact, del bool) {
	for _, p := range strings.Split(cfgs["cleanup.policy"], ",") {
		switch strings.TrimSpace(p) {
		case "compact":
			compact = true
		case "delete":
			del = true
		}
	}
	return compact, del
}

// topicMetadata asks a broker for a topic's metadata, bypassing the
// client's metadata cache (kadm's calls reuse answers up to 5s old, which
// would hide a topic just created or just deleted). It never asks the broker
// to auto-create the topic. A missing topic is (nil, nil).
func topicMetadata(ctx context.Context, cl *kgo.Client, topic string) (*kmsg.MetadataResponseTopic, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("kafkasink: reading metadata of topic %q: %w", topic, withCause(ctx, err))
	}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		switch err := kerr.ErrorForCode(t.ErrorCode); {
		case errors.Is(err, kerr.UnknownTopicOrPartition):
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("kafkasink: topic %q: %w", topic, err)
		}
		return t, nil
	}
	return nil, nil
}

// createTopic creates topic. One that exists already, because another
// sink created it in the meantime, is no error.
func createTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int32, rf int16, configs map[string]*string) error {
	resp, err := adm.CreateTopic(ctx, partitions, rf, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if errors.Is(err, kerr.TopicAlreadyExists) {
		return nil
	}
	return err
}

// readyTopic waits until every partition of a topic that exists has a
// leader, and reads the topic's configuration; it returns the partition
// count and the configuration.
func readyTopic(ctx context.Context, cl *kgo.Client, adm *kadm.Client, topic string) (int, map[string]string, error) {
	n, err := waitForLeaders(ctx, cl, topic)
	if err != nil {
		return 0, nil, err
	}
	cfgs, err := topicConfigs(ctx, adm, topic)
	if err != nil {
		return 0, nil, err
	}
	return n, cfgs, nil
}

// leaderWait bounds waitForLeaders.
const leaderWait = 15 * time.Second

var errLeaderTimeout = &timeoutError{"waiting for the topic's partition leaders"}

// waitForLeaders polls metadata until every partition of topic has a
// leader, so the first produce does not race the topic's propagation.
func waitForLeaders(ctx context.Context, cl *kgo.Client, topic string) (int, error) {
	// A topic that exists gets its leaders within seconds; one that
	// stays without them (not created after all, a cluster that lost
	// its brokers) is a retryable failure, not a hang.
	ctx, cancel := context.WithTimeoutCause(ctx, leaderWait, errLeaderTimeout)
	defer cancel()
	wait := backoff.New(20*time.Millisecond, time.Second)
	for {
		md, err := topicMetadata(ctx, cl, topic)
		if err == nil && md != nil && len(md.Partitions) > 0 {
			ready := true
			for _, p := range md.Partitions {
				ready = ready && p.Leader >= 0 && p.ErrorCode == 0
			}
			if ready {
				return len(md.Partitions), nil
			}
		}
		if !wait.Wait(ctx) {
			return 0, fmt.Errorf("kafkasink: waiting for leaders of topic %q: %w", topic, withCause(ctx, ctx.Err()))
		}
	}
}

// topicConfigs reads a topic's effective configuration. The topic exists
// (its callers have seen its leaders), but the broker answering may not
// know it yet: right after a create on a cluster, each broker learns of
// the topic on its own, and until then says UNKNOWN_TOPIC_OR_PARTITION.
// That answer is retried for a few seconds.
func topicConfigs(ctx context.Context, adm *kadm.Client, topic string) (map[string]string, error) {
	var rc kadm.ResourceConfig
	wait, deadline := backoff.New(20*time.Millisecond, 500*time.Millisecond), time.Now().Add(5*time.Second)
	for {
		rcs, err := adm.DescribeTopicConfigs(ctx, topic)
		if err == nil {
			rc, err = rcs.On(topic, nil)
			if err == nil {
				err = rc.Err
			}
		}
		if err == nil {
			break
		}
		if !errors.Is(err, kerr.UnknownTopicOrPartition) || time.Now().After(deadline) {
			return nil, fmt.Errorf("kafkasink: describing configs of topic %q: %w", topic, err)
		}
		if !wait.Wait(ctx) {
			return nil, fmt.Errorf("kafkasink: describing configs of topic %q: %w (%w)", topic, err, context.Cause(ctx))
		}
	}
	out := make(map[string]string, len(rc.Configs))
	for _, c := range rc.Configs {
		out[c.Key] = c.MaybeValue()
	}
	return out, nil
}
