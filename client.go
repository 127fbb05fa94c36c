package kafkasink

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink/internal/kgoslog"
	"github.com/kafkasink/kafkasink/internal/partitioner"
)

// This file is the configuration of the sink's Kafka clients: the
// producing client New makes, and the checkpoint reader.

// baseOptions are the options every client of the sink starts with;
// ClientOptions come after them and may override the ones not owned.
func (s *Sink) baseOptions() []kgo.Opt {
	return append([]kgo.Opt{
		kgo.SeedBrokers(s.cfg.Brokers...),
		kgo.WithLogger(kgoslog.Logger{L: s.log}),
		kgo.ClientID("kafkasink-" + s.cfg.SinkID),
		// kgo refreshes metadata at most every MetadataMinAge (5s by
		// default), and it waits for a refresh before retrying a
		// produce after CONCURRENT_TRANSACTIONS or a leader move: that
		// stalled back-to-back transactions by seconds on a real
		// cluster (50s against 6s for 40 small batches).
		kgo.MetadataMinAge(250 * time.Millisecond),
	}, s.cfg.securityOptions()...)
}

// connOptions are the options of the sink's clients that do not produce:
// the passthrough minus its producer options.
func (s *Sink) connOptions() []kgo.Opt {
	opts := s.baseOptions()
	for _, o := range s.cfg.ClientOptions {
		if _, producer := o.(kgo.ProducerOpt); !producer {
			opts = append(opts, o)
		}
	}
	return opts
}

// producerOptions are the options of the producing client; the ones the
// sink owns come after the passthrough, which validate has checked does
// not set them.
func (s *Sink) producerOptions() []kgo.Opt {
	opts := append(s.baseOptions(), s.cfg.ClientOptions...)
	opts = append(opts,
		kgo.RecordPartitioner(partitioner.New()),
		// A record batch may not exceed its topic's max.message.bytes:
		// limit kgo's batches per topic, from what topicadmin.Ensure read.
		kgo.ProducerBatchMaxBytesFn(s.batchMaxBytes),
	)
	switch s.cfg.Mode {
	case ExactlyOnce:
		opts = append(opts,
			kgo.TransactionalID(s.cfg.TransactionalID),
			kgo.TransactionTimeout(s.cfg.TransactionTimeout),
			kgo.RequiredAcks(kgo.AllISRAcks()),
		)
	case Idempotent:
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case Plain:
		acks := map[Acks]kgo.Acks{AcksAll: kgo.AllISRAcks(), AcksLeader: kgo.LeaderAck(), AcksNone: kgo.NoAck()}[s.cfg.Acks]
		opts = append(opts, kgo.DisableIdempotentWrite(), kgo.RequiredAcks(acks))
	}
	return opts
}

// batchMaxBytes is the largest record batch for topic: Config.MaxRecordBytes,
// lowered to the topic's max.message.bytes once the sink has read it.
func (s *Sink) batchMaxBytes(topic string) int32 {
	if info, ok := s.topics.Peek(topic); ok {
		return int32(s.cfg.recordLimit(info))
	}
	return int32(s.cfg.MaxRecordBytes)
}
