package kafkasink_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// The first finding of issue 30's independent checker: with transaction
// version 1 the producer keeps its epoch across transactions, and one
// Write's two aborted attempts, each with records written to both data
// partitions, were followed by a committed third whose records on one
// partition a read_committed reader did not see. Here the same sequence,
// abort, abort, commit of the same records under one epoch, runs on the
// fake cluster (two brokers, one partition per topic, as in the finding)
// and on the real broker: a read_committed reader must see each event
// once, and the aborted attempts' records must be in the log.
func TestAbortAbortCommitUnderOneEpoch(t *testing.T) {
	t.Parallel()
	t.Run("fake", func(t *testing.T) {
		t.Parallel()
		_, brokers := sinktest.Cluster(t, kfake.NumBrokers(2))
		abortAbortCommit(t, brokers, sinktest.UniqueName(t))
	})
	t.Run("real", func(t *testing.T) {
		t.Parallel()
		brokers, name := onRealBrokers(t, sinktest.EnvBrokers)
		abortAbortCommit(t, brokers, name)
	})
}

func abortAbortCommit(t *testing.T, brokers []string, name string) {
	enc := &failingEncoder{fails: 2}
	s := newSink(t, brokers, name, func(c *kafkasink.Config) {
		c.CheckpointTopic = name + ".checkpoints"
		c.Topics.Prefix = name
		c.Topics.Partitions = 1
		c.Encoder = enc
		c.ClientOptions = []kgo.Opt{kgo.MaxVersions(sinktest.TransactionVersion1())}
	})
	warm := sinktest.Inserts("public", "a", 100, 1000, 3)
	write(t, s, warm)
	batch := append(sinktest.Inserts("public", "a", 200, 1, 9), sinktest.Inserts("public", "b", 200, 100, 10)...)
	for i := range batch {
		batch[i].Position.Index = uint64(i)
	}
	enc.at = batch[len(batch)-1].Position
	for attempt := 1; attempt <= 2; attempt++ {
		err := s.Write(ctxT(t), kafkasink.Batch{Events: batch})
		if _, rejected := kafkasink.IsRejected(err); !rejected || !strings.Contains(err.Error(), errEncoderRefused.Error()) {
			t.Fatalf("attempt %d: %v, want the encoder's refusal", attempt, err)
		}
	}
	if err := s.Write(context.Background(), kafkasink.Batch{Events: batch}); err != nil {
		t.Fatalf("attempt 3: %v", err)
	}
	topics := []string{name + ".public.a", name + ".public.b"}
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topics...), append(warm, batch...))
	if got, committed := len(sinktest.ReadUncommitted(t, brokers, topics...)), len(warm)+len(batch); got <= committed {
		t.Fatalf("%d records in the log, want the aborted attempts' records beside the %d committed", got, committed)
	}
}

var errEncoderRefused = errors.New("test encoder: refused")

// failingEncoder is JSONEncoder refusing the event at position at the
// first fails times it sees it, after a pause in which the batch's earlier
// records reach the broker; the transaction is then aborted.
type failingEncoder struct {
	kafkasink.JSONEncoder
	at    kafkasink.Position
	fails int
}

func (f *failingEncoder) Encode(dst []byte, e *kafkasink.Event) ([]byte, error) {
	if e.Position == f.at && f.fails > 0 {
		f.fails--
		time.Sleep(300 * time.Millisecond)
		return nil, errEncoderRefused
	}
	return f.JSONEncoder.Encode(dst, e)
}
