package kafkasink_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// TestAbortedSequenceNotReused is issue 30's first checker finding, found:
// a batch the broker wrote but whose answer was lost (REQUEST_TIMED_OUT,
// which the fake cluster answers after appending, as Kafka can), then a
// retry of it refused for good (UNKNOWN_SERVER_ERROR, or
// TRANSACTION_ABORTABLE as in the finding). kgo fails the batch and
// rewinds the partition's sequence numbers; the sink aborts and runs the
// part again. Under transaction version 1 the abort keeps the epoch, so
// the new transaction's batch carried the aborted batch's sequence
// numbers, the broker acknowledged it as a duplicate of the batch it held
// without writing it, and its records, reported committed, were
// invisible to read_committed readers: 9 events missing, none duplicated,
// as in the finding. The sink now moves to a new epoch at every abort
// (endAbort); without that, the transaction version 1 cases fail.
func TestAbortedSequenceNotReused(t *testing.T) {
	t.Parallel()
	for _, tv := range []struct {
		name     string
		versions func() []kgo.Opt
	}{
		{"tv1", func() []kgo.Opt { return []kgo.Opt{kgo.MaxVersions(sinktest.TransactionVersion1())} }},
		{"tv2", func() []kgo.Opt { return nil }},
	} {
		for _, refusal := range []*kerr.Error{kerr.UnknownServerError, kerr.TransactionAbortable} {
			t.Run(tv.name+"/"+refusal.Message, func(t *testing.T) {
				t.Parallel()
				c, brokers := sinktest.Cluster(t, kfake.NumBrokers(2))
				name := sinktest.UniqueName(t)
				topic := name + ".public.a"
				s := newSink(t, brokers, name, func(cfg *kafkasink.Config) {
					cfg.CheckpointTopic = name + ".checkpoints"
					cfg.Topics.Prefix = name
					cfg.Topics.Partitions = 1
					cfg.ClientOptions = tv.versions()
				})
				warm := sinktest.Inserts("public", "a", 100, 1000, 3)
				write(t, s, warm)
				lost := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: kerr.RequestTimedOut},
					kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: refusal})
				batch := sinktest.Inserts("public", "a", 200, 1, 9)
				write(t, s, batch) // the part's second transaction commits
				if hits := lost.Hits(); hits != 2 {
					t.Fatalf("%d of the 2 faults hit: the sequence did not run", hits)
				}
				sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), append(warm, batch...))
			})
		}
	}
}
