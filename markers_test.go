package kafkasink_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
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
	return positionsByPartition(t, sinktest.ReadCommitted(t, brokers, topic))
}

// positionsByPartition returns the event positions of records, by
// partition.
func positionsByPartition(t *testing.T, records []*kgo.Record) map[int32][]kafkasink.Position {
	t.Helper()
	got := make(map[int32][]kafkasink.Position)
	for _, r := range records {
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
	for _, p := range positionsByPartition(t, sinktest.ReadUncommitted(t, brokers, topic))[lostPart.Partition] {
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

// TestRandomLostCommitMarkers is a randomized checker of the commit
// marker check on kfake: seeded runs of Writes (some split into several
// transactions) where commits lose their markers on a data partition
// (internal/lostmarkers) and transactions are aborted (the broker refuses
// a checkpoint record; the sink retries inside the Write). Invariant: no
// acknowledged event goes missing without a word. Either a read_committed
// reader sees every acknowledged event exactly once at the end, or a
// Write stopped with ErrCheckpoint, and then the events missing are
// exactly the acknowledged events of the partitions, offsets and events
// it names. A last batch without faults ends each seed: the markers of a
// sink's last transaction are checked only when another one begins.
//
//	KAFKASINK_LOSTMARKERS_SEED     first seed (default: from the clock, logged)
//	KAFKASINK_LOSTMARKERS_SEEDS    seeds to run (default 8; 2 with -short)
//	KAFKASINK_LOSTMARKERS_BATCHES  batches per seed (default 30)
func TestRandomLostCommitMarkers(t *testing.T) {
	t.Parallel()
	first := knob(t, "KAFKASINK_LOSTMARKERS_SEED", uint64(time.Now().UnixNano()%1e9), parseSeed)
	defSeeds := 8
	if testing.Short() {
		defSeeds = 2 // -short keeps a few seeds; the full suite runs 8 (docs/integration-tests.md)
	}
	seeds, batches := knob(t, "KAFKASINK_LOSTMARKERS_SEEDS", defSeeds, positiveInt), knob(t, "KAFKASINK_LOSTMARKERS_BATCHES", 30, positiveInt)
	t.Logf("seeds %d..%d, %d batches each (replay one with KAFKASINK_LOSTMARKERS_SEED=<seed> KAFKASINK_LOSTMARKERS_SEEDS=1)", first, first+uint64(seeds)-1, batches)
	var mu sync.Mutex
	var total lostMarkerStats
	for i := range uint64(seeds) {
		seed := first + i
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			t.Parallel()
			st := runLostMarkers(t, seed, batches)
			mu.Lock()
			total.skips += st.skips
			total.aborts += st.aborts
			total.caught += st.caught
			total.clean += st.clean
			mu.Unlock()
		})
	}
	t.Cleanup(func() {
		t.Logf("all seeds: %d commits lost markers, %d transactions aborted, %d losses caught with ErrCheckpoint, %d seeds without loss", total.skips, total.aborts, total.caught, total.clean)
	})
}

type lostMarkerStats struct{ skips, aborts, caught, clean int }

// lostSpan is a partition, offsets and events an ErrCheckpoint names.
var lostSpan = regexp.MustCompile(`(\S+)\[(\d+)\] offsets (\d+)\.\.(\d+) \(events (\S+)\.\.(\S+)\)`)

func runLostMarkers(t *testing.T, seed uint64, batches int) lostMarkerStats {
	rng := rand.New(rand.NewPCG(seed, seed))
	c, brokers := sinktest.Cluster(t)
	topic := "kafkasink.public.items" // sinktest.Stream's table
	var armed atomic.Bool
	sk, err := lostmarkers.Install(c, func(_ string, parts []lostmarkers.Partition) (lostmarkers.Partition, bool) {
		var data []lostmarkers.Partition
		for _, p := range parts {
			if p.Topic == topic {
				data = append(data, p)
			}
		}
		if len(data) == 0 || !armed.CompareAndSwap(true, false) {
			return lostmarkers.Partition{}, false
		}
		return data[len(parts)%len(data)], true
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sk.Close()
	split := 0
	if rng.IntN(2) == 0 {
		split = 5 + rng.IntN(10) // Writes of several transactions
	}
	s := newSink(t, brokers, "lost-markers", tv1, func(c *kafkasink.Config) { c.MaxTransactionRecords = split })
	var st lostMarkerStats
	var acked []kafkasink.Event
	var stop error
	for b := 1; b <= batches && stop == nil; b++ {
		armed.Store(rng.IntN(4) == 0)
		var refuse *kfake.FaultHandle
		if rng.IntN(3) == 0 {
			refuse = c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: kafkasink.DefaultCheckpointTopic, Err: kerr.TransactionAbortable})
		}
		events := sinktest.Stream(b, 5+rng.IntN(30), 25)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		_, err := writeRetrying(ctx, s, kafkasink.Batch{Events: events})
		cancel()
		if refuse != nil {
			st.aborts += refuse.Hits()
			refuse.Remove()
		}
		switch {
		case errors.Is(err, kafkasink.ErrCheckpoint):
			stop = err
		case err != nil:
			t.Fatalf("seed %d batch %d: %v", seed, b, err)
		default:
			acked = append(acked, events...)
		}
	}
	armed.Store(false)
	if stop == nil {
		// Markers are checked before the next transaction begins:
		// one more batch, without faults, checks the last one's.
		events := sinktest.Stream(batches+1, 10, 25)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		_, err := writeRetrying(ctx, s, kafkasink.Batch{Events: events})
		cancel()
		switch {
		case errors.Is(err, kafkasink.ErrCheckpoint):
			stop = err
		case err != nil:
			t.Fatalf("seed %d last batch: %v", seed, err)
		default:
			acked = append(acked, events...)
		}
	}
	st.skips = len(sk.Skipped())
	for _, err := range sk.Errors() {
		t.Fatalf("seed %d: the emulation failed: %v", seed, err)
	}
	if stop == nil {
		st.clean = 1
		sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), acked)
		return st
	}
	st.caught = 1
	t.Logf("seed %d: %v", seed, stop)
	checkNamedLoss(t, stop, brokers, topic, acked)
	return st
}

// checkNamedLoss checks that the events of acked a read_committed reader
// of topic misses are exactly those lost, the ErrCheckpoint, names: no
// more (a loss it does not name) and no fewer, and that none is
// duplicated. It returns how many are missing.
func checkNamedLoss(t *testing.T, lost error, brokers []string, topic string, acked []kafkasink.Event) int {
	t.Helper()
	seen := make(map[kafkasink.Position]int)
	for _, r := range sinktest.ReadCommitted(t, brokers, topic) {
		d, err := kafkasinktest.DecodeHeaders(r)
		if err != nil {
			t.Fatal(err)
		}
		seen[d.Position]++
	}
	named := lostSpan.FindAllStringSubmatch(lost.Error(), -1)
	if len(named) == 0 {
		t.Fatalf("the ErrCheckpoint names no partition: %v", lost)
	}
	inNamed := func(p kafkasink.Position, part int32) bool {
		for _, m := range named {
			from, err1 := kafkasink.ParsePosition(m[5])
			to, err2 := kafkasink.ParsePosition(m[6])
			if err1 != nil || err2 != nil {
				t.Fatalf("positions %q..%q in the error: %v %v", m[5], m[6], err1, err2)
			}
			if m[1] == topic && m[2] == strconv.Itoa(int(part)) && p.Compare(from) >= 0 && p.Compare(to) <= 0 {
				return true
			}
		}
		return false
	}
	partOf := eventPartitions(t, brokers, topic)
	missing := 0
	for _, e := range acked {
		n := seen[e.Position]
		switch {
		case n > 1:
			t.Errorf("event %s seen %d times", e.Position, n)
		case n == 0 && !inNamed(e.Position, partOf[e.Position]):
			t.Errorf("acknowledged event %s (partition %d) is missing and the error does not name it", e.Position, partOf[e.Position])
		case n == 0:
			missing++
		case inNamed(e.Position, partOf[e.Position]):
			t.Errorf("event %s is named lost but is visible", e.Position)
		}
	}
	if missing == 0 {
		t.Errorf("ErrCheckpoint but no acknowledged event is missing: a false alarm")
	}
	return missing
}

// eventPartitions returns the partition of each event's record in topic,
// committed or not.
func eventPartitions(t *testing.T, brokers []string, topic string) map[kafkasink.Position]int32 {
	t.Helper()
	out := make(map[kafkasink.Position]int32)
	for _, r := range sinktest.ReadUncommitted(t, brokers, topic) {
		d, err := kafkasinktest.DecodeHeaders(r)
		if err != nil {
			t.Fatal(err)
		}
		out[d.Position] = r.Partition
	}
	return out
}

// TestCommitMarkersBehindAnotherOpenTransaction: another producer's
// transaction, open on every partition since before the sink's commit,
// holds the partitions' last stable offsets back. The check must still
// see the sink's own markers written (DescribeProducers) instead of
// waiting them out and keeping the partitions as suspects.
func TestCommitMarkersBehindAnotherOpenTransaction(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	const table = "shared"
	topic := "kafkasink.public." + table
	logs := &markerLog{t: t}
	s := newSink(t, brokers, "markers-shared", func(c *kafkasink.Config) { c.Logger = slog.New(logs) })
	write(t, s, sinktest.Inserts("public", table, 100, 1, 20)) // creates the topic

	other := sinktest.Client(t, brokers, kgo.TransactionalID("another-producer"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := other.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for p := range int32(10) {
		if err := other.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Partition: p, Value: []byte("open")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	for b := 2; b <= 4; b++ {
		started := time.Now()
		write(t, s, sinktest.Inserts("public", table, kafkasink.LSN(100*b), 1, 20))
		t.Logf("batch %d: %v", b, time.Since(started).Round(time.Millisecond))
	}
	if suspects, _ := logs.counts(); suspects != 0 {
		t.Errorf("%d partitions kept as suspects behind another producer's open transaction, want 0", suspects)
	}
	if err := other.EndTransaction(context.Background(), kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
}

// TestLostAbortMarkersStopTheSink: a transaction aborted, by the sink
// after a produce failed or found aborted after a commit whose answer was
// lost, and the leader of a data partition still reports it open
// afterwards, as when Kafka 4.4 skips the abort markers of a partition
// without a leader (the fake cluster answers DescribeProducers so here).
// The next commit of the producer would commit the aborted records there,
// so before the part is sent again the sink stops with ErrUnexpected,
// naming the partition, the offset the hanging transaction starts at and
// the way out. Without the check the Write delivers, and the test fails.
func TestLostAbortMarkersStopTheSink(t *testing.T) {
	t.Parallel()
	for _, failing := range []struct {
		name  string
		fault func(topic string, aborted *atomic.Bool) kfake.Fault
	}{
		{"produce", func(topic string, aborted *atomic.Bool) kfake.Fault {
			return kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, When: func(kmsg.Request) bool {
				return !aborted.Swap(true)
			}}
		}},
		{"unclear commit", func(_ string, aborted *atomic.Bool) kfake.Fault {
			return kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, When: func(kreq kmsg.Request) bool {
				return kreq.(*kmsg.EndTxnRequest).Commit && !aborted.Swap(true)
			}}
		}},
	} {
		t.Run(failing.name, func(t *testing.T) {
			t.Parallel()
			c, brokers := sinktest.Cluster(t)
			name := sinktest.UniqueName(t)
			topic := name + ".public.a"
			s := newSink(t, brokers, name, func(cfg *kafkasink.Config) {
				cfg.CheckpointTopic = name + ".checkpoints"
				cfg.Topics.Prefix = name
				cfg.Topics.Partitions = 2
			})
			write(t, s, sinktest.Inserts("public", "a", 100, 1000, 3))
			pid := sinktest.ReadCommitted(t, brokers, topic)[0].ProducerID
			var aborted atomic.Bool
			c.ControlKey(kmsg.DescribeProducers.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				if !aborted.Load() {
					return nil, nil, false
				}
				return openOnPartition1(kreq.(*kmsg.DescribeProducersRequest), topic, pid, 7), nil, true
			})
			c.Fault(failing.fault(topic, &aborted))
			err := s.Write(ctxT(t), kafkasink.Batch{Events: sinktest.Inserts("public", "a", 200, 1, 20)})
			if !errors.Is(err, kafkasink.ErrUnexpected) || !strings.Contains(err.Error(), "without writing its abort markers to "+topic+"[1] from offset 7") ||
				!strings.Contains(err.Error(), "kafka-transactions.sh") {
				t.Fatalf("Write: %v, want ErrUnexpected naming %s[1] from offset 7 and the way out", err, topic)
			}
		})
	}
}

// TestUncheckedAbortMarkersHoldTheNextTransaction: after an abort, the
// leader of a data partition cannot answer for a while
// (LEADER_NOT_AVAILABLE, as while it restarts: the moment Kafka skips
// markers), then reports the aborted transaction still open there. No
// transaction may begin in between, as its commit would take the aborted
// records: the Write fails retryably while the check cannot be made, and
// the sink stops with ErrUnexpected once it can, with nothing committed
// since the abort. When the check gave up at once, the retry committed
// and the test fails.
func TestUncheckedAbortMarkersHoldTheNextTransaction(t *testing.T) {
	t.Parallel()
	c, brokers := sinktest.Cluster(t)
	name := sinktest.UniqueName(t)
	topic := name + ".public.a"
	s := newSink(t, brokers, name, func(cfg *kafkasink.Config) {
		cfg.CheckpointTopic = name + ".checkpoints"
		cfg.Topics.Prefix = name
		cfg.Topics.Partitions = 2
	})
	warm := sinktest.Inserts("public", "a", 100, 1000, 3)
	write(t, s, warm)
	pid := sinktest.ReadCommitted(t, brokers, topic)[0].ProducerID
	var aborted atomic.Bool
	var unanswered atomic.Int32
	unanswered.Store(12) // longer than one Write's attempts
	c.ControlKey(kmsg.DescribeProducers.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !aborted.Load() {
			return nil, nil, false
		}
		resp := openOnPartition1(kreq.(*kmsg.DescribeProducersRequest), topic, pid, 7)
		if unanswered.Add(-1) >= 0 {
			for i := range resp.Topics {
				for j := range resp.Topics[i].Partitions {
					if resp.Topics[i].Topic == topic && resp.Topics[i].Partitions[j].Partition == 1 {
						resp.Topics[i].Partitions[j].ErrorCode = kerr.LeaderNotAvailable.Code
						resp.Topics[i].Partitions[j].ActiveProducers = nil
					}
				}
			}
		}
		return resp, nil, true
	})
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, When: func(kmsg.Request) bool { return !aborted.Swap(true) }})
	batch := sinktest.Inserts("public", "a", 200, 1, 20)
	err := s.Write(ctxT(t), kafkasink.Batch{Events: batch})
	if !kafkasink.IsRetryable(err) || !strings.Contains(err.Error(), "cannot be checked yet") {
		t.Fatalf("first Write: %v, want a retryable error: the abort markers cannot be checked yet", err)
	}
	for i := 0; i < 10 && unanswered.Load() >= 0; i++ {
		err = s.Write(ctxT(t), kafkasink.Batch{Events: batch})
	}
	if !errors.Is(err, kafkasink.ErrUnexpected) || !strings.Contains(err.Error(), "without writing its abort markers to "+topic+"[1] from offset 7") {
		t.Fatalf("Write once the leader answers: %v, want ErrUnexpected naming %s[1] from offset 7", err, topic)
	}
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), warm)
}

// TestAbortMarkersStillBeingWrittenAreAwaited: an abort that does not
// move the producer to a new epoch is answered before its markers are
// written, so right after it a leader can still report the transaction
// open while its coordinator is writing them (PrepareAbort). The check
// waits for the coordinator instead of taking the open partition for lost
// markers: the Write goes on and commits. Without the wait the sink
// stopped with ErrUnexpected.
func TestAbortMarkersStillBeingWrittenAreAwaited(t *testing.T) {
	t.Parallel()
	c, brokers := sinktest.Cluster(t)
	name := sinktest.UniqueName(t)
	topic := name + ".public.a"
	s := newSink(t, brokers, name, func(cfg *kafkasink.Config) {
		cfg.CheckpointTopic = name + ".checkpoints"
		cfg.Topics.Prefix = name
		cfg.Topics.Partitions = 2
	})
	warm := sinktest.Inserts("public", "a", 100, 1000, 3)
	write(t, s, warm)
	pid := sinktest.ReadCommitted(t, brokers, topic)[0].ProducerID
	var aborted atomic.Bool
	var writing atomic.Int32 // the coordinator's answers still to say PrepareAbort
	writing.Store(3)
	c.ControlKey(kmsg.DescribeTransactions.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !aborted.Load() || writing.Add(-1) < 0 {
			return nil, nil, false
		}
		req := kreq.(*kmsg.DescribeTransactionsRequest)
		resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
		for _, id := range req.TransactionalIDs {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID, st.State, st.ProducerID = id, "PrepareAbort", pid
			resp.TransactionStates = append(resp.TransactionStates, st)
		}
		return resp, nil, true
	})
	c.ControlKey(kmsg.DescribeProducers.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !aborted.Load() || writing.Load() < 0 {
			return nil, nil, false // the markers are written once the coordinator is done
		}
		return openOnPartition1(kreq.(*kmsg.DescribeProducersRequest), topic, pid, 7), nil, true
	})
	c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, When: func(kmsg.Request) bool { return !aborted.Swap(true) }})
	batch := sinktest.Inserts("public", "a", 200, 1, 20)
	write(t, s, batch)
	if writing.Load() >= 0 {
		t.Fatalf("the coordinator was asked %d times, want it asked until it was done", 3-writing.Load())
	}
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), append(warm, batch...))
}

// openOnPartition1 answers req as a leader would whose partition 1 of
// topic has a transaction of producer pid open from offset start.
func openOnPartition1(req *kmsg.DescribeProducersRequest, topic string, pid, start int64) *kmsg.DescribeProducersResponse {
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		for _, p := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = p
			if rt.Topic == topic && p == 1 {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.CurrentTxnStartOffset = pid, start
				sp.ActiveProducers = append(sp.ActiveProducers, ap)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// TestCloseChecksTheLastCommitMarkers: the last Write before Close
// commits and the broker loses its markers on a data partition
// (internal/lostmarkers). No later transaction begins to check them, so
// Close does: it waits for them as the next Write would, and, as nothing
// will watch them once the sink is closed, logs the partition for the
// operator. Without the check Close logs nothing.
func TestCloseChecksTheLastCommitMarkers(t *testing.T) {
	t.Parallel()
	c, brokers := sinktest.Cluster(t)
	const table = "closemarkers"
	topic := "kafkasink.public." + table
	var armed atomic.Bool
	skipDataMarkers(t, c, topic, &armed)
	var logs syncBuffer
	s := newSink(t, brokers, "close-markers", tv1, func(cfg *kafkasink.Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	write(t, s, sinktest.Inserts("public", table, 100, 1, 20))
	armed.Store(true)
	write(t, s, sinktest.Inserts("public", table, 200, 100, 20))
	if err := s.Close(ctxT(t)); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := logs.String(); !strings.Contains(got, "closing without having seen the commit markers of these partitions") || !strings.Contains(got, topic+"[") {
		t.Fatalf("Close logged %q, want the partition whose commit markers never came", got)
	}
}

// syncBuffer is a bytes.Buffer safe for the sink's concurrent logging.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestCloseReturnsALossItFinds: a commit loses its markers on a data
// partition; the next Write sends records and is then refused by its
// Encoder, so its transaction is aborted, which ends the pending records
// too (the emulation's fake cluster ends them with the producer's next
// outcome), and no transaction begins after it. Close's check finds the
// committed records gone and returns ErrCheckpoint, as the next Write
// would have.
func TestCloseReturnsALossItFinds(t *testing.T) {
	t.Parallel()
	c, brokers := sinktest.Cluster(t)
	const table = "closeloss"
	topic := "kafkasink.public." + table
	var armed atomic.Bool
	skipDataMarkers(t, c, topic, &armed)
	enc := &failingEncoder{fails: 1}
	s := newSink(t, brokers, "close-loss", tv1, func(cfg *kafkasink.Config) { cfg.Encoder = enc })
	write(t, s, sinktest.Inserts("public", table, 100, 1, 20))
	armed.Store(true)
	write(t, s, sinktest.Inserts("public", table, 200, 1, 20))
	refused := sinktest.Inserts("public", table, 300, 1, 20)
	enc.at = refused[len(refused)-1].Position
	if _, rejected := kafkasink.IsRejected(tryWrite(t, s, kafkasink.Batch{Events: refused})); !rejected {
		t.Fatal("the Write whose Encoder refuses an event was not rejected")
	}
	if err := s.Close(ctxT(t)); !errors.Is(err, kafkasink.ErrCheckpoint) {
		t.Fatalf("Close: %v, want ErrCheckpoint for the committed records the abort took", err)
	}
}
