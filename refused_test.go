package kafkasink_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// refuseMark is the column value of the events whose records the fake
// broker refuses in these tests.
const refuseMark = "refuse-me"

// refuseMarked makes c refuse, with code, every batch of topic that holds
// a record of one of the marked events, the way a broker refuses a batch
// for one record in it: the batch fails whole, and kgo fails the records
// buffered after it in its partition too. The records must not be
// compressed, for the mark to be seen. The topic must exist: Produce v13
// names topics by id, so the request is matched by the topic's id, and
// only topic's own batches count (a marked event's dead-letter record
// carries the mark too, and may share a request with topic's batches).
func refuseMarked(t *testing.T, c *kfake.Cluster, topic string, partitions int, marked []kafkasink.Event, code *kerr.Error) {
	t.Helper()
	info := c.TopicInfo(topic)
	if info == nil {
		t.Fatalf("refuseMarked: topic %s does not exist yet", topic)
	}
	var ps []int32
	for i := range marked {
		key, err := kafkasink.AppendKey(nil, &marked[i], nil, kafkasink.KeyText)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, int32(kafkasink.PartitionFor(key, partitions)))
	}
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Partitions: ps, Err: code, Count: -1,
		When: func(req kmsg.Request) bool {
			for _, rt := range req.(*kmsg.ProduceRequest).Topics {
				if rt.Topic != topic && rt.TopicID != info.TopicID {
					continue
				}
				for _, rp := range rt.Partitions {
					if slices.Contains(ps, rp.Partition) && bytes.Contains(rp.Records, []byte(refuseMark)) {
						return true
					}
				}
			}
			return false
		}})
}

// TestBrokerRefusesRecords: the fake broker refuses the batches holding
// the records of two events of a batch (same partition, so one refused
// batch fails the other's too) with each code the sink treats as a
// record's own, in each mode. With a dead-letter topic the two events are dead-lettered
// with the broker's code, and every other event is delivered once, in the
// same Write; without one the Write is rejected naming the two events,
// nothing of the batch is visible, and the batch without them is then
// delivered once. Before quarantining, each of these failed the Write with
// a fatal ErrUnexpected. Each case runs again with batches of at most 1 KB
// (Config.MaxRecordBytes), so that a partition's records go in several
// batches, in requests in flight together, and the dead-letter records
// share requests with the topic's batches.
func TestBrokerRefusesRecords(t *testing.T) {
	t.Parallel()
	codes := []struct {
		code   *kerr.Error
		reason kafkasink.Reason
	}{
		{kerr.InvalidRecord, kafkasink.ReasonRefused},
		{kerr.PolicyViolation, kafkasink.ReasonRefused},
		{kerr.InvalidTimestamp, kafkasink.ReasonRefused},
		{kerr.MessageTooLarge, kafkasink.ReasonTooLarge},
	}
	for _, mode := range []kafkasink.Mode{kafkasink.ExactlyOnce, kafkasink.Idempotent, kafkasink.Plain} {
		for _, tc := range codes {
			for _, dlq := range []bool{true, false} {
				for _, smallBatches := range []bool{false, true} {
					name := mode.String() + "/" + tc.code.Message
					if dlq {
						name += "/dead-letter"
					}
					if smallBatches {
						name += "/1KB-batches"
					}
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						testBrokerRefuses(t, mode, tc.code, tc.reason, dlq, smallBatches)
					})
				}
			}
		}
	}
}

func testBrokerRefuses(t *testing.T, mode kafkasink.Mode, code *kerr.Error, reason kafkasink.Reason, dlq, smallBatches bool) {
	c, brokers := sinktest.Cluster(t)
	const (
		topic      = "kafkasink.public.orders"
		dlqTopic   = "orders.dlq"
		partitions = 4
	)
	hooks := &hookLog{}
	s := newSink(t, brokers, "refused", func(cfg *kafkasink.Config) {
		cfg.Mode = mode
		cfg.Topics.Partitions = partitions
		cfg.Hooks = []kafkasink.Hook{hooks}
		cfg.ClientOptions = []kgo.Opt{kgo.ProducerBatchCompression(kgo.NoCompression())}
		if dlq {
			cfg.DeadLetterTopic = dlqTopic
		}
		if smallBatches {
			cfg.MaxRecordBytes = 1024 // the least it takes
		}
	})
	a := sinktest.Inserts("public", "orders", 100, 1, 3)
	write(t, s, a)

	b := sinktest.Inserts("public", "orders", 200, 4, 60)
	// Two events of one key's partition: ids 20 and 56 (found by the
	// key's partition, so that one refused batch holds both or fails
	// the other's).
	key := func(e *kafkasink.Event) int {
		k, _ := kafkasink.AppendKey(nil, e, nil, kafkasink.KeyText)
		return kafkasink.PartitionFor(k, partitions)
	}
	var marked []int
	for i := 10; i < len(b) && len(marked) < 2; i++ {
		if key(&b[i]) == key(&b[10]) && (len(marked) == 0 || i > marked[0]+5) {
			marked = append(marked, i)
		}
	}
	var refused, rest []kafkasink.Event
	for i := range b {
		if slices.Contains(marked, i) {
			b[i] = withColumn(b[i], "name", refuseMark)
			refused = append(refused, b[i])
			continue
		}
		rest = append(rest, b[i])
	}
	refuseMarked(t, c, topic, partitions, refused, code)

	err := tryWrite(t, s, kafkasink.Batch{Events: b})
	if dlq {
		if err != nil {
			t.Fatalf("Write: %v, want the refused events dead-lettered and the rest delivered", err)
		}
		if got := s.Checkpoint().Position; got != b[len(b)-1].Position {
			t.Fatalf("checkpoint %s, want %s", got, b[len(b)-1].Position)
		}
		sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), append(append([]kafkasink.Event(nil), a...), rest...))
		dead := sinktest.ReadCommitted(t, brokers, dlqTopic)
		sinktest.CheckExactlyOnce(t, dead, refused)
		for _, r := range dead {
			if got := sinktest.Header(r, kafkasink.HeaderReason); got != string(reason) {
				t.Errorf("dead letter reason %q, want %q", got, reason)
			}
			if got := sinktest.Header(r, kafkasink.HeaderError); !strings.Contains(got, code.Message) || !strings.Contains(got, "refused the record for "+topic) {
				t.Errorf("dead letter error %q does not name the broker's code %s and the topic", got, code.Message)
			}
			if got := sinktest.Header(r, kafkasink.HeaderTopic); got != topic {
				t.Errorf("dead letter topic header %q, want %q", got, topic)
			}
			if !bytes.Contains(r.Value, []byte(refuseMark)) {
				t.Errorf("dead letter value %q does not carry the event", r.Value)
			}
		}
		if info := hooks.lastBatch(); info.Rejected != len(refused) || info.Written != len(rest) {
			t.Errorf("BatchInfo %+v, want %d rejected and %d written", info, len(refused), len(rest))
		}
		_, _, _, rejected := hooks.snapshot()
		if len(rejected) != len(refused) || !rejected[0].deadLettered {
			t.Errorf("OnEventRejected saw %+v, want the %d refused events dead-lettered", rejected, len(refused))
		}
		return
	}

	var re *kafkasink.RejectedError
	if !errors.As(err, &re) || kafkasink.IsFatal(err) || kafkasink.IsRetryable(err) {
		t.Fatalf("Write: %v, want a *RejectedError, neither fatal nor retryable", err)
	}
	if len(re.Rejections) != len(refused) {
		t.Fatalf("%d rejections, want %d: %v", len(re.Rejections), len(refused), err)
	}
	for i, r := range re.Rejections {
		if r.Position != refused[i].Position || r.Reason != reason || r.Topic != topic || !errors.Is(r.Err, code) {
			t.Errorf("rejection %+v, want event %s refused with %s (%s) for %s", r, refused[i].Position, code.Message, reason, topic)
		}
	}
	if !strings.Contains(err.Error(), code.Message) {
		t.Errorf("error %q does not name the broker's code %s", err, code.Message)
	}
	if got := s.Checkpoint().Position; got != a[len(a)-1].Position {
		t.Fatalf("checkpoint moved to %s after a rejected Write", got)
	}
	if mode == kafkasink.ExactlyOnce {
		sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), a)
	}
	// The caller drops the refused events and writes the rest.
	write(t, s, rest)
	if mode == kafkasink.ExactlyOnce {
		sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), append(append([]kafkasink.Event(nil), a...), rest...))
	}
}
