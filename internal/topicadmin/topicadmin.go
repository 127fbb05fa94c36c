// Package topicadmin is the sink's topic administration: Kafka's rules
// for topic names, and asking a broker for a topic's metadata, creating
// it, waiting until its partitions have leaders and reading its
// configuration, with the retries each of these needs. Which topics to
// create, with what settings, and what a missing one means is the
// caller's.
package topicadmin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink/internal/backoff"
	"github.com/kafkasink/kafkasink/internal/ctxerr"
)

// maxNameLen is Kafka's limit on topic names.
const maxNameLen = 249

// ValidChars reports whether s is made of the characters Kafka allows in
// a topic name, [a-zA-Z0-9._-].
func ValidChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ValidateName applies Kafka's rules for topic names.
func ValidateName(name string) error {
	switch {
	case name == "":
		return errors.New("topic name is empty")
	case name == "." || name == "..":
		return fmt.Errorf("topic name %q is not allowed", name)
	case len(name) > maxNameLen:
		return fmt.Errorf("topic name %.40q... is %d bytes, over Kafka's limit of %d", name, len(name), maxNameLen)
	case !ValidChars(name):
		return fmt.Errorf("topic name %q has characters outside [a-zA-Z0-9._-]", name)
	}
	return nil
}

// CleanupPolicies reports which of Kafka's cleanup policies a topic's
// cleanup.policy setting ("compact", "delete" or both) names.
func CleanupPolicies(cfgs map[string]string) (compact, del bool) {
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

// Metadata asks a broker for a topic's metadata, bypassing the client's
// metadata cache (kadm's calls reuse answers up to 5s old, which would
// hide a topic just created or just deleted). It never asks the broker
// to auto-create the topic. A missing topic is (nil, nil).
func Metadata(ctx context.Context, cl *kgo.Client, topic string) (*kmsg.MetadataResponseTopic, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("kafkasink: reading metadata of topic %q: %w", topic, ctxerr.WithCause(ctx, err))
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

// Create creates topic. One that exists already, because another sink
// created it in the meantime, is no error.
func Create(ctx context.Context, adm *kadm.Client, topic string, partitions int32, rf int16, configs map[string]*string) error {
	resp, err := adm.CreateTopic(ctx, partitions, rf, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if errors.Is(err, kerr.TopicAlreadyExists) {
		return nil
	}
	return err
}

// Ready waits until every partition of a topic that exists has a leader,
// and reads the topic's configuration; it returns the partition count and
// the configuration.
func Ready(ctx context.Context, cl *kgo.Client, adm *kadm.Client, topic string) (int, map[string]string, error) {
	n, err := waitForLeaders(ctx, cl, topic)
	if err != nil {
		return 0, nil, err
	}
	cfgs, err := configs(ctx, adm, topic)
	if err != nil {
		return 0, nil, err
	}
	return n, cfgs, nil
}

// leaderWait bounds waitForLeaders.
const leaderWait = 15 * time.Second

var errLeaderTimeout = &ctxerr.Timeout{What: "waiting for the topic's partition leaders"}

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
		md, err := Metadata(ctx, cl, topic)
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
			return 0, fmt.Errorf("kafkasink: waiting for leaders of topic %q: %w", topic, ctxerr.WithCause(ctx, ctx.Err()))
		}
	}
}

// configs reads a topic's effective configuration. The topic exists
// (its callers have seen its leaders), but the broker answering may not
// know it yet: right after a create on a cluster, each broker learns of
// the topic on its own, and until then says UNKNOWN_TOPIC_OR_PARTITION.
// That answer is retried for a few seconds.
func configs(ctx context.Context, adm *kadm.Client, topic string) (map[string]string, error) {
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
