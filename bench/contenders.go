package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/IBM/sarama"
	ckafka "github.com/confluentinc/confluent-kafka-go/v2/kafka"
	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
)

// producer writes batch k of a workload and returns once the broker has
// acknowledged all of it.
type producer interface {
	writeBatch(ctx context.Context, k int) error
	close()
}

// contender is one way to do the job.
type contender struct {
	name  string
	what  string
	txn   bool // its records are transactional (read back read_committed either way)
	start func(ctx context.Context, w *workload) (producer, error)
}

// contenders in the order of the table; -only picks some by name.
var contenders = []contender{
	{"franz-idempotent", "raw franz-go, idempotent, pre-encoded (the ceiling)", false, startFranz(franzIdempotent)},
	{"franz-txn", "raw franz-go, one transaction per batch, pre-encoded (the exactly-once ceiling)", true, startFranz(franzTxn)},
	{"franz-stdjson", "raw franz-go, idempotent, encoding/json per event", false, startFranz(franzStdJSON)},
	{"kafkasink-eos", "kafkasink ExactlyOnce", true, startSink(kafkasink.ExactlyOnce)},
	{"kafkasink-idempotent", "kafkasink Idempotent", false, startSink(kafkasink.Idempotent)},
	{"kafkasink-plain", "kafkasink Plain", false, startSink(kafkasink.Plain)},
	{"kafka-go", "segmentio/kafka-go Writer, pre-encoded (no idempotence)", false, startKafkaGo},
	{"sarama-idempotent", "IBM/sarama AsyncProducer, idempotent, pre-encoded", false, startSarama(false)},
	{"sarama-txn", "IBM/sarama AsyncProducer, one transaction per batch, pre-encoded", true, startSarama(true)},
	{"confluent", "confluent-kafka-go (librdkafka), idempotent, pre-encoded", false, startConfluent},
}

// ---- raw franz-go ----

type franzKind int

const (
	franzIdempotent franzKind = iota
	franzTxn
	franzStdJSON
)

type franz struct {
	w    *workload
	cl   *kgo.Client
	kind franzKind
	buf  []kgo.Record
	out  []*kgo.Record
}

func startFranz(kind franzKind) func(context.Context, *workload) (producer, error) {
	return func(ctx context.Context, w *workload) (producer, error) {
		txnID := ""
		if kind == franzTxn {
			txnID = w.topic
		}
		cl, err := newFranzClient(w.brokers, w.compression, txnID)
		if err != nil {
			return nil, err
		}
		if err := cl.Ping(ctx); err != nil {
			cl.Close()
			return nil, err
		}
		return &franz{w: w, cl: cl, kind: kind, buf: make([]kgo.Record, len(w.records)), out: make([]*kgo.Record, 0, len(w.records)+1)}, nil
	}
}

func (f *franz) writeBatch(ctx context.Context, k int) error {
	f.out = f.out[:0]
	switch f.kind {
	case franzStdJSON:
		for j := range f.w.events {
			e := &f.w.events[j]
			renumber(e, k, j)
			r, err := stdlibRecord(f.w.topic, e, f.w.headers)
			if err != nil {
				return err
			}
			f.out = append(f.out, r)
		}
	default:
		// kgo owns a record until its promise: fresh copies of the
		// pre-encoded ones, sharing their bytes.
		for j, r := range f.w.records {
			f.buf[j] = kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value, Headers: r.Headers}
			f.out = append(f.out, &f.buf[j])
		}
	}
	if f.kind != franzTxn {
		return f.cl.ProduceSync(ctx, f.out...).FirstErr()
	}
	return produceInTransaction(ctx, f.cl, f.out, &kgo.Record{Topic: f.w.ckTopic, Key: []byte("raw"), Value: checkpointValue(k)})
}

// newFranzClient is a raw franz-go client with the options kafkasink gives
// its own, so that the difference to kafkasink is the sink's work;
// transactional when txnID is not empty.
func newFranzClient(brokers []string, compression, txnID string) (*kgo.Client, error) {
	codec, err := kafkasink.ParseCompression(compression)
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ProducerBatchCompression(codec),
		kgo.ProducerBatchMaxBytes(1000012), kgo.MetadataMinAge(250 * time.Millisecond), kgo.RequiredAcks(kgo.AllISRAcks())}
	if txnID != "" {
		opts = append(opts, kgo.TransactionalID(txnID), kgo.TransactionTimeout(time.Minute))
	}
	return kgo.NewClient(opts...)
}

// produceInTransaction writes records and then the checkpoint-sized
// record ck in one transaction, as the exactly-once sink writes a batch.
func produceInTransaction(ctx context.Context, cl *kgo.Client, records []*kgo.Record, ck *kgo.Record) error {
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	if err := cl.ProduceSync(ctx, append(records, ck)...).FirstErr(); err != nil {
		_ = cl.EndTransaction(ctx, kgo.TryAbort)
		return err
	}
	return cl.EndTransaction(ctx, kgo.TryCommit)
}

func (f *franz) close() { f.cl.Close() }

// ---- kafkasink ----

type sink struct {
	w *workload
	s *kafkasink.Sink
}

func startSink(mode kafkasink.Mode) func(context.Context, *workload) (producer, error) {
	return func(ctx context.Context, w *workload) (producer, error) {
		codec, err := kafkasink.ParseCompression(w.compression)
		if err != nil {
			return nil, err
		}
		s, err := kafkasink.New(ctx, kafkasink.Config{
			Brokers: w.brokers, SinkID: w.topic, Mode: mode, CheckpointTopic: w.ckTopic,
			Topics:        kafkasink.Topics{Routes: map[string]string{schemaName + "." + tableName: w.topic}, MustExist: true},
			Headers:       w.headers,
			ClientOptions: []kgo.Opt{kgo.ProducerBatchCompression(codec)},
		})
		if err != nil {
			return nil, err
		}
		return &sink{w: w, s: s}, nil
	}
}

func (s *sink) writeBatch(ctx context.Context, k int) error {
	for j := range s.w.events {
		renumber(&s.w.events[j], k, j)
	}
	return s.s.Write(ctx, kafkasink.Batch{Events: s.w.events})
}

func (s *sink) close() { _ = s.s.Close(context.Background()) }

// ---- segmentio/kafka-go ----

type kafkaGo struct {
	w    *kafkago.Writer
	msgs []kafkago.Message
}

func startKafkaGo(_ context.Context, w *workload) (producer, error) {
	var codec kafkago.Compression
	switch w.compression {
	case "none":
	case "snappy":
		codec = kafkago.Snappy
	case "lz4":
		codec = kafkago.Lz4
	case "zstd":
		codec = kafkago.Zstd
	case "gzip":
		codec = kafkago.Gzip
	default:
		return nil, fmt.Errorf("unknown -compression %q", w.compression)
	}
	kw := &kafkago.Writer{
		Addr: kafkago.TCP(w.brokers...), Topic: w.topic, Balancer: &kafkago.Murmur2Balancer{},
		RequiredAcks: kafkago.RequireAll, Compression: codec,
		// A batch per call: flush when the call's records are in, not a
		// second later (the default BatchTimeout).
		BatchSize: w.batch, BatchBytes: 1000012, BatchTimeout: 5 * time.Millisecond,
	}
	msgs := make([]kafkago.Message, len(w.records))
	for j, r := range w.records {
		hs := make([]kafkago.Header, len(r.Headers))
		for i, h := range r.Headers {
			hs[i] = kafkago.Header{Key: h.Key, Value: h.Value}
		}
		msgs[j] = kafkago.Message{Key: r.Key, Value: r.Value, Headers: hs}
	}
	return &kafkaGo{w: kw, msgs: msgs}, nil
}

func (p *kafkaGo) writeBatch(ctx context.Context, _ int) error {
	// WriteMessages sets each message's Topic, Partition and Offset: a
	// fresh copy of the batch per call.
	msgs := make([]kafkago.Message, len(p.msgs))
	copy(msgs, p.msgs)
	return p.w.WriteMessages(ctx, msgs...)
}

func (p *kafkaGo) close() { _ = p.w.Close() }

// ---- IBM/sarama ----

type saramaProducer struct {
	w   *workload
	p   sarama.AsyncProducer
	txn bool
}

func startSarama(txn bool) func(context.Context, *workload) (producer, error) {
	return func(_ context.Context, w *workload) (producer, error) {
		cfg := sarama.NewConfig()
		cfg.Version = sarama.V4_0_0_0
		cfg.Producer.RequiredAcks = sarama.WaitForAll
		cfg.Producer.Idempotent = true
		cfg.Producer.Return.Successes = true
		cfg.Producer.Partitioner = sarama.NewHashPartitioner
		cfg.Net.MaxOpenRequests = 1 // required with idempotence
		cfg.Producer.MaxMessageBytes = 1000012
		switch w.compression {
		case "none":
		case "snappy":
			cfg.Producer.Compression = sarama.CompressionSnappy
		case "lz4":
			cfg.Producer.Compression = sarama.CompressionLZ4
		case "zstd":
			cfg.Producer.Compression = sarama.CompressionZSTD
		case "gzip":
			cfg.Producer.Compression = sarama.CompressionGZIP
		default:
			return nil, fmt.Errorf("unknown -compression %q", w.compression)
		}
		if txn {
			cfg.Producer.Transaction.ID = w.topic
		}
		p, err := sarama.NewAsyncProducer(w.brokers, cfg)
		if err != nil {
			return nil, err
		}
		return &saramaProducer{w: w, p: p, txn: txn}, nil
	}
}

func (s *saramaProducer) writeBatch(_ context.Context, k int) error {
	if s.txn {
		if err := s.p.BeginTxn(); err != nil {
			return err
		}
	}
	msgs := make([]*sarama.ProducerMessage, 0, len(s.w.records)+1)
	for _, r := range s.w.records {
		hs := make([]sarama.RecordHeader, len(r.Headers))
		for i, h := range r.Headers {
			hs[i] = sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value}
		}
		msgs = append(msgs, &sarama.ProducerMessage{Topic: r.Topic, Key: sarama.ByteEncoder(r.Key), Value: sarama.ByteEncoder(r.Value), Headers: hs})
	}
	if s.txn {
		msgs = append(msgs, &sarama.ProducerMessage{Topic: s.w.ckTopic, Key: sarama.StringEncoder("raw"), Value: sarama.ByteEncoder(checkpointValue(k))})
	}
	// Input blocks until the producer takes a message, and the producer
	// blocks until its results are taken: feed and collect at once.
	go func() {
		for _, m := range msgs {
			s.p.Input() <- m
		}
	}()
	var first error
	for range msgs {
		select {
		case <-s.p.Successes():
		case perr := <-s.p.Errors():
			if first == nil {
				first = perr.Err
			}
		}
	}
	if !s.txn {
		return first
	}
	if first != nil {
		return errors.Join(first, s.p.AbortTxn())
	}
	return s.p.CommitTxn()
}

func (s *saramaProducer) close() { _ = s.p.Close() }

// ---- confluent-kafka-go ----

type confluent struct {
	w        *workload
	p        *ckafka.Producer
	reports  chan ckafka.Event
	hdrs     [][]ckafka.Header
	topicPtr *string
}

func startConfluent(_ context.Context, w *workload) (producer, error) {
	p, err := ckafka.NewProducer(&ckafka.ConfigMap{
		"bootstrap.servers": strings.Join(w.brokers, ","), "enable.idempotence": true, "acks": "all",
		"compression.type": w.compression, "partitioner": "murmur2_random", "message.max.bytes": 1000012,
	})
	if err != nil {
		return nil, err
	}
	c := &confluent{w: w, p: p, reports: make(chan ckafka.Event, len(w.records)), topicPtr: &w.topic}
	c.hdrs = make([][]ckafka.Header, len(w.records))
	for j, r := range w.records {
		for _, h := range r.Headers {
			c.hdrs[j] = append(c.hdrs[j], ckafka.Header{Key: h.Key, Value: h.Value})
		}
	}
	return c, nil
}

func (c *confluent) writeBatch(ctx context.Context, _ int) error {
	for j, r := range c.w.records {
		m := &ckafka.Message{TopicPartition: ckafka.TopicPartition{Topic: c.topicPtr, Partition: ckafka.PartitionAny},
			Key: r.Key, Value: r.Value, Headers: c.hdrs[j]}
		for {
			err := c.p.Produce(m, c.reports)
			var kerr ckafka.Error
			if errors.As(err, &kerr) && kerr.Code() == ckafka.ErrQueueFull {
				c.p.Flush(10)
				continue
			}
			if err != nil {
				return err
			}
			break
		}
	}
	var first error
	for range c.w.records {
		select {
		case ev := <-c.reports:
			if m, ok := ev.(*ckafka.Message); ok && m.TopicPartition.Error != nil && first == nil {
				first = m.TopicPartition.Error
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return first
}

func (c *confluent) close() { c.p.Close() }
