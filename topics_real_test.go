package kafkasink_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// Topics on the real broker, whose own behaviour the fake cluster does not
// model: auto-creation of a missing topic, a topic deleted under a running
// sink, max.message.bytes.

func TestMustExistMissingTopicIsFatalWithAutoCreateOn(t *testing.T) {
	t.Parallel()
	brokers, name := onRealBrokers(t, sinktest.EnvBrokers)
	absent := name + ".public.absent"

	// The broker does auto-create topics: a metadata request that allows
	// it creates one. Without that, the check at the end could not fail.
	control := name + ".public.control"
	cl := sinktest.Client(t, brokers)
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(control)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = true
	if _, err := req.RequestWith(ctxT(t), cl); err != nil {
		t.Fatalf("metadata request for %s: %v", control, err)
	}
	for deadline := time.Now().Add(10 * time.Second); !topicExists(t, brokers, control); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the broker did not auto-create %s: auto.create.topics.enable seems off, so this test would prove nothing", control)
		}
	}

	s, err := startSink(t, brokers, name, func(c *kafkasink.Config) {
		c.CheckpointTopic = name + ".checkpoints"
		c.Topics.Prefix = name
		c.Topics.MustExist = true
	})
	if err == nil {
		err = tryWrite(t, s, kafkasink.Batch{Events: sinktest.Inserts("public", "absent", 100, 1, 3)})
	} else {
		t.Logf("New failed: %v", err)
	}
	if !errors.Is(err, kafkasink.ErrTopicMissing) || !kafkasink.IsFatal(err) || kafkasink.IsRetryable(err) {
		t.Fatalf("New or the first Write: %v, want a fatal ErrTopicMissing", err)
	}
	if !strings.Contains(err.Error(), absent) {
		t.Errorf("error %q does not name topic %s", err, absent)
	}
	if s != nil {
		// Trying again changes nothing.
		if err := tryWrite(t, s, kafkasink.Batch{Events: sinktest.Inserts("public", "absent", 100, 1, 3)}); !errors.Is(err, kafkasink.ErrTopicMissing) {
			t.Errorf("second Write: %v, want ErrTopicMissing again", err)
		}
		if got := s.Checkpoint(); !got.IsZero() {
			t.Errorf("checkpoint %s after failed Writes, want none", got.Position)
		}
	}
	// Auto-creation would be immediate; give a late one a moment anyway.
	time.Sleep(time.Second)
	if topicExists(t, brokers, absent) {
		t.Fatalf("topic %s exists after the failed Write: the sink let the broker auto-create it", absent)
	}
}

func TestTopicDeletedMidRunIsFatal(t *testing.T) {
	t.Parallel()
	brokers, name := onRealBrokers(t, sinktest.EnvBrokers)
	topic := name + ".public.doomed"
	const txnTimeout = 10 * time.Second
	s := newSink(t, brokers, name, func(c *kafkasink.Config) {
		c.CheckpointTopic = name + ".checkpoints"
		c.Topics.Prefix = name
		c.Topics.Partitions = 3
		c.TransactionTimeout = txnTimeout
	})
	first := sinktest.Inserts("public", "doomed", 100, 1, 20)
	write(t, s, first)

	resp, err := admin(t, brokers).DeleteTopics(ctxT(t), topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("deleting %s: %v", topic, err)
	}
	for deadline := time.Now().Add(20 * time.Second); topicExists(t, brokers, topic); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s still exists 20s after it was deleted", topic)
		}
	}

	started := time.Now()
	err = tryWrite(t, s, kafkasink.Batch{Events: sinktest.Inserts("public", "doomed", 200, 21, 20)})
	took := time.Since(started)
	t.Logf("Write after the deletion returned after %v: %v", took.Round(time.Millisecond), err)
	if !errors.Is(err, kafkasink.ErrTopicMissing) || !kafkasink.IsFatal(err) || kafkasink.IsRetryable(err) {
		t.Fatalf("Write after the topic was deleted: %v, want a fatal ErrTopicMissing", err)
	}
	var we *kafkasink.WriteError
	if !errors.As(err, &we) || we.Topic != topic {
		t.Errorf("error %v, want a *WriteError for %s", err, topic)
	}
	// The transaction deadline (9/10 of the timeout) plus the sink's
	// metadata check (at most 10s) bound it.
	if bound := txnTimeout + 10*time.Second; took > bound {
		t.Errorf("the Write took %v to report the deleted topic, more than %v", took, bound)
	}
	if got := s.Checkpoint().Position; got != first[len(first)-1].Position {
		t.Errorf("checkpoint %s, want unchanged %s", got, first[len(first)-1].Position)
	}
	if topicExists(t, brokers, topic) {
		t.Errorf("%s was recreated after the failed Write (the broker auto-creates topics)", topic)
	}
}

func TestOversizedEventRejectedNeighboursDelivered(t *testing.T) {
	t.Parallel()
	brokers, name := onRealBrokers(t, sinktest.EnvBrokers)
	topic := name + ".public.big"
	dlq := name + ".dead-letters"
	ckTopic := name + ".checkpoints"
	// The dead-letter topic is as small, so the big value does not fit
	// there either and is dropped from the dead letter.
	createTopic(t, brokers, topic, 1, map[string]string{"max.message.bytes": "4096"})
	createTopic(t, brokers, dlq, 1, map[string]string{"max.message.bytes": "4096"})
	events := sinktest.Inserts("public", "big", 100, 1, 5)
	events[2] = withColumn(events[2], "name", strings.Repeat("x", 10<<10))
	neighbours := []kafkasink.Event{events[0], events[1], events[3], events[4]}
	config := func(c *kafkasink.Config) {
		c.CheckpointTopic = ckTopic
		c.Topics.Prefix = name
	}

	t.Run("without dead-letter topic", func(t *testing.T) {
		id := name + "-plain"
		s := newSink(t, brokers, id, config)
		err := tryWrite(t, s, kafkasink.Batch{Events: events})
		r := checkRejected(t, err, events[2], kafkasink.ReasonTooLarge, topic, "max.message.bytes 4096")
		t.Logf("rejection: %s", r.String())
		if got := s.Checkpoint(); !got.IsZero() {
			t.Errorf("checkpoint moved to %s", got.Position)
		}
		if got := sinktest.ReadCommitted(t, brokers, topic); len(got) != 0 {
			t.Fatalf("read_committed sees %d records in %s: the rejected batch was (partly) committed", len(got), topic)
		}
		// Exactly-once sends a batch's first records while it encodes
		// the rest, so the records before the rejected event were
		// produced, in a transaction that was aborted; nothing else.
		sent := map[string]bool{events[0].Position.String(): true, events[1].Position.String(): true}
		for _, r := range sinktest.ReadUncommitted(t, brokers, topic) {
			if id := sinktest.Header(r, kafkasink.HeaderID); !sent[id] {
				t.Errorf("read_uncommitted sees event %s of the rejected batch; only those before the rejected one may have been produced", id)
			}
		}
		for _, r := range sinktest.ReadUncommitted(t, brokers, ckTopic) {
			if string(r.Key) == id {
				t.Fatalf("read_uncommitted sees a checkpoint of %s at offset %d: the rejected batch's transaction got as far as its checkpoint", id, r.Offset)
			}
		}
	})

	t.Run("with dead-letter topic", func(t *testing.T) {
		h := &hookLog{}
		s := newSink(t, brokers, name+"-dlq", config, func(c *kafkasink.Config) {
			c.DeadLetterTopic = dlq
			c.Hooks = []kafkasink.Hook{h}
		})
		write(t, s, events)
		delivered := sinktest.ReadCommitted(t, brokers, topic)
		sinktest.CheckExactlyOnce(t, delivered, neighbours)
		dead := sinktest.ReadCommitted(t, brokers, dlq)
		if len(dead) != 1 {
			t.Fatalf("%d dead-letter records, want 1", len(dead))
		}
		d := dead[0]
		hdr := func(k string) string { return sinktest.Header(d, k) }
		if got := hdr(kafkasink.HeaderID); got != events[2].ID() {
			t.Errorf("dead letter of event %s, want %s", got, events[2].ID())
		}
		if got := hdr(kafkasink.HeaderReason); got != string(kafkasink.ReasonTooLarge) {
			t.Errorf("dead letter reason %q, want %q", got, kafkasink.ReasonTooLarge)
		}
		if got := hdr(kafkasink.HeaderTopic); got != topic {
			t.Errorf("dead letter topic header %q, want %q", got, topic)
		}
		if d.Value != nil {
			t.Errorf("dead letter value has %d bytes, want null: it does not fit the dead-letter topic", len(d.Value))
		}
		// One transaction: one producer id and epoch for all of it, one
		// commit for five events and the checkpoint.
		for _, r := range delivered {
			if r.ProducerID != d.ProducerID || r.ProducerEpoch != d.ProducerEpoch {
				t.Errorf("record %s by producer %d/%d, the dead letter by %d/%d: not one transaction",
					sinktest.Header(r, kafkasink.HeaderID), r.ProducerID, r.ProducerEpoch, d.ProducerID, d.ProducerEpoch)
			}
		}
		_, committed, aborted, _ := h.snapshot()
		if len(committed) != 1 || committed[0].Records != len(events)+1 || len(aborted) != 0 {
			t.Errorf("transactions: %+v committed, %d aborted; want one of %d records", committed, len(aborted), len(events)+1)
		}
		if got := sinktest.ReadUncommitted(t, brokers, topic, dlq); len(got) != len(events) {
			t.Errorf("read_uncommitted sees %d records in %s and %s, want %d: something was produced and aborted", len(got), topic, dlq, len(events))
		}
	})
}
