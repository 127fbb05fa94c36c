package kafkasink_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/faultproxy"
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
// (txnend.Producer.Abort); without that, the transaction version 1 cases fail.
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

// TestAbortedSequenceNotReusedRealBroker runs the same sequence on the
// real broker, through fault proxies: the first produce of a part is
// written and its answer dropped, and franz-go's retry of it is refused
// for good (its CRC corrupted, CORRUPT_MESSAGE, which franz-go does not
// retry). Kafka, as the fake cluster, acknowledges a batch carrying the
// sequence numbers of one it holds under the same epoch without writing
// it, aborted or not: without txnend.Producer.Abort the transaction version 1 case
// loses the part's records.
func TestAbortedSequenceNotReusedRealBroker(t *testing.T) {
	t.Parallel()
	for _, tv := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"tv1", []kgo.Opt{kgo.MaxVersions(sinktest.TransactionVersion1())}},
		{"tv2", nil},
	} {
		t.Run(tv.name, func(t *testing.T) {
			t.Parallel()
			brokers, name := onRealBrokers(t, sinktest.EnvBrokers)
			topic := name + ".public.a"
			var produces atomic.Int32 // once armed (1), the produces seen
			proxies := startProxies(t, brokers, func(r faultproxy.Request) faultproxy.Fault {
				if kmsg.Key(r.Key) != kmsg.Produce || produces.Load() == 0 {
					return faultproxy.Fault{}
				}
				switch produces.Add(1) {
				case 2:
					return faultproxy.Fault{Kind: faultproxy.DropResponse}
				case 3:
					return faultproxy.Fault{Kind: faultproxy.CorruptRecords}
				}
				return faultproxy.Fault{}
			})
			s := newSink(t, proxies.Addrs(), name, func(c *kafkasink.Config) {
				c.Brokers = proxies.Addrs()
				c.CheckpointTopic = name + ".checkpoints"
				c.Topics.Prefix = name
				c.Topics.Partitions = 1
				c.ClientOptions = tv.opts
			})
			warm := sinktest.Inserts("public", "a", 100, 1000, 3)
			write(t, s, warm)
			batch := sinktest.Inserts("public", "a", 200, 1, 9)
			produces.Store(1)
			if err := s.Write(context.Background(), kafkasink.Batch{Events: batch}); err != nil {
				t.Logf("the faulted Write: %v; writing the batch again", err)
				write(t, s, batch)
			}
			if counts := proxies.Counts(); counts[faultproxy.Count{API: "Produce", Kind: faultproxy.CorruptRecords}] != 1 {
				t.Fatalf("faults applied: %v, want a dropped answer and a corrupted retry", proxies.Applied())
			}
			sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), append(warm, batch...))
		})
	}
}

// TestAbortMovesTheEpochOnlyWhenNeeded: after a record failed, an abort
// under transaction version 1 re-initialises the producer id (txnend.Producer.Abort),
// while under version 2, whose commits and aborts end at a new epoch by
// themselves, it does not: every re-initialisation is a chance to be
// fenced for nothing when the transaction coordinator dies before its
// answer arrives (the broker then cannot tell the retry from a newer
// instance's claim), as TestThreeBrokerKillDuringStream once was.
func TestAbortMovesTheEpochOnlyWhenNeeded(t *testing.T) {
	t.Parallel()
	for _, tv := range []struct {
		name      string
		versions  []kgo.Opt
		reinitial bool
	}{
		{"tv1", []kgo.Opt{kgo.MaxVersions(sinktest.TransactionVersion1())}, true},
		{"tv2", nil, false},
	} {
		t.Run(tv.name, func(t *testing.T) {
			t.Parallel()
			c, brokers := sinktest.Cluster(t)
			name := sinktest.UniqueName(t)
			topic := name + ".public.a"
			s := newSink(t, brokers, name, func(cfg *kafkasink.Config) {
				cfg.CheckpointTopic = name + ".checkpoints"
				cfg.Topics.Prefix = name
				cfg.Topics.Partitions = 1
				cfg.ClientOptions = tv.versions
			})
			warm := sinktest.Inserts("public", "a", 100, 1000, 3)
			write(t, s, warm) // a commit: the sink learns whether it moves the epoch
			var inits atomic.Int32
			c.ControlKey(kmsg.InitProducerID.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				inits.Add(1)
				return nil, nil, false
			})
			refused := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: kerr.UnknownServerError})
			batch := sinktest.Inserts("public", "a", 200, 1, 9)
			write(t, s, batch)
			if refused.Hits() != 1 {
				t.Fatalf("the produce fault hit %d times, want 1: no record failed", refused.Hits())
			}
			if got := inits.Load() > 0; got != tv.reinitial {
				t.Errorf("%d InitProducerId requests after the abort, want re-initialisation %v", inits.Load(), tv.reinitial)
			}
			sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), append(warm, batch...))
		})
	}
}
