package kafkasink_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/lostmarkers"
	"github.com/kafkasink/kafkasink/internal/sinktest"
	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// skipDataMarkers installs the lost-markers emulation on c: while armed,
// the next commit that wrote to topic loses its markers on the first of
// its partitions there, and the emulation disarms.
func skipDataMarkers(t *testing.T, c *kfake.Cluster, topic string, armed *atomic.Bool) *lostmarkers.Skipper {
	t.Helper()
	sk, err := lostmarkers.Install(c, func(_ string, parts []lostmarkers.Partition) (lostmarkers.Partition, bool) {
		for _, p := range parts {
			if p.Topic == topic && armed.CompareAndSwap(true, false) {
				return p, true
			}
		}
		return lostmarkers.Partition{}, false
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, err := range sk.Errors() {
			t.Errorf("the emulation failed: %v", err)
		}
		sk.Close()
	})
	return sk
}

// tv1 makes the sink's client use transaction version 1, which the
// emulation needs.
func tv1(cfg *kafkasink.Config) { cfg.ClientOptions = lostmarkers.ClientOptions() }

// committedPositions returns the positions of the events a read_committed
// reader sees in topic, by partition.
func committedPositions(t *testing.T, brokers []string, topic string) map[int32][]kafkasink.Position {
	t.Helper()
	got := make(map[int32][]kafkasink.Position)
	for _, r := range sinktest.ReadCommitted(t, brokers, topic) {
		d, err := kafkasinktest.DecodeHeaders(r)
		if err != nil {
			t.Fatal(err)
		}
		got[r.Partition] = append(got[r.Partition], d.Position)
	}
	return got
}

// TestLostCommitMarkersAbortedLater: a commit loses its markers on one
// data partition, Write reports it delivered, and the next transaction,
// which writes to that partition, is aborted (the broker refuses its
// checkpoint record),
// taking the committed records with it. The next Write must stop with
// ErrCheckpoint naming the partition, the offsets and the events lost
// and the last verified checkpoint; without the check it succeeds and the
// events are gone without a word.
func TestLostCommitMarkersAbortedLater(t *testing.T) {
	t.Parallel()
	c, brokers := sinktest.Cluster(t)
	const table = "lostmarkers"
	topic := "kafkasink.public." + table
	var armed atomic.Bool
	sk := skipDataMarkers(t, c, topic, &armed)
	s := newSink(t, brokers, "lost-markers-aborted", tv1)

	write(t, s, sinktest.Inserts("public", table, 100, 1, 20))
	verified := s.Checkpoint().Position
	armed.Store(true)
	delivered := sinktest.Inserts("public", table, 200, 1, 20)
	write(t, s, delivered)
	skips := sk.Skipped()
	if len(skips) != 1 {
		t.Fatalf("the emulation skipped the markers of %d commits, want 1", len(skips))
	}
	lostPart := skips[0].Partition
	var lostEvents []kafkasink.Position
	for _, p := range committedPositionsUncommitted(t, brokers, topic)[lostPart.Partition] {
		if p.LSN == 200 {
			lostEvents = append(lostEvents, p)
		}
	}
	if len(lostEvents) == 0 {
		t.Fatalf("no event of the skipped commit on %s", lostPart)
	}

	// The same keys, so the aborted transaction writes to the same
	// partitions; the broker refuses its checkpoint record, so the sink
	// aborts it once its records are in the partitions, and tries again.
	refuse := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: kafkasink.DefaultCheckpointTopic, Err: kerr.TransactionAbortable})
	err := tryWrite(t, s, kafkasink.Batch{Events: sinktest.Inserts("public", table, 300, 1, 20)})
	if refuse.Hits() != 1 {
		t.Fatalf("the broker refused %d checkpoint records, want 1", refuse.Hits())
	}
	if !errors.Is(err, kafkasink.ErrCheckpoint) || !kafkasink.IsFatal(err) {
		t.Fatalf("Write whose first transaction was aborted: %v, want a fatal ErrCheckpoint from its second", err)
	}
	for _, want := range []string{
		fmt.Sprintf("%s[%d] offsets ", lostPart.Topic, lostPart.Partition),
		fmt.Sprintf("(events %s..%s)", lostEvents[0], lostEvents[len(lostEvents)-1]),
		"last verified checkpoint is " + verified.String(),
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	t.Logf("Write: %v", err)

	// The loss is real: the events named are gone for read_committed
	// readers, and only they.
	for _, p := range committedPositions(t, brokers, topic)[lostPart.Partition] {
		if p.LSN == 200 {
			t.Errorf("event %s of the skipped commit is visible on %s: nothing was lost", p, lostPart)
		}
	}
	if err := tryWrite(t, s, kafkasink.Batch{Events: sinktest.Inserts("public", table, 400, 1, 1)}); !errors.Is(err, kafkasink.ErrCheckpoint) {
		t.Errorf("a later Write: %v, want the same ErrCheckpoint", err)
	}
}

// committedPositionsUncommitted is committedPositions for a reader that
// sees every data record, committed or not.
func committedPositionsUncommitted(t *testing.T, brokers []string, topic string) map[int32][]kafkasink.Position {
	t.Helper()
	got := make(map[int32][]kafkasink.Position)
	for _, r := range sinktest.ReadUncommitted(t, brokers, topic) {
		d, err := kafkasinktest.DecodeHeaders(r)
		if err != nil {
			t.Fatal(err)
		}
		got[r.Partition] = append(got[r.Partition], d.Position)
	}
	return got
}

// TestLostCommitMarkersCommittedLater: a commit loses its markers on one
// data partition, and the next transaction, which writes there too,
// commits: the pending records are committed with it. The sink must go
// on (the check must not stop it on a partition that ends well), and a
// read_committed reader sees every event once.
func TestLostCommitMarkersCommittedLater(t *testing.T) {
	t.Parallel()
	c, brokers := sinktest.Cluster(t)
	const table = "latemarkers"
	topic := "kafkasink.public." + table
	var armed atomic.Bool
	sk := skipDataMarkers(t, c, topic, &armed)
	s := newSink(t, brokers, "lost-markers-committed", tv1)

	var all []kafkasink.Event
	for b := 1; b <= 4; b++ {
		armed.Store(b == 2)
		events := sinktest.Inserts("public", table, kafkasink.LSN(100*b), 20*b, 20)
		write(t, s, events)
		all = append(all, events...)
	}
	if n := len(sk.Skipped()); n != 1 {
		t.Fatalf("the emulation skipped the markers of %d commits, want 1", n)
	}
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), all)
}
