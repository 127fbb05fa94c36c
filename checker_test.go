package kafkasink_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
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
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// The randomized fault checker (issue 8): seeded schedules of broker
// faults on every request the sink sends, combined with restarts,
// abandoned instances that try to write again, cancelled Writes, and a
// source that redelivers from its last acknowledged position. Invariants:
// a read_committed reader sees every event exactly once, in order per key;
// the final checkpoint is the last position; every error is in exactly one
// class (or is the caller's own cancellation); nothing an older instance
// writes after a newer one started is visible, and the newest instance is
// never fenced.
//
//	KAFKASINK_CHECKER_SEED     first seed (default: from the clock, logged)
//	KAFKASINK_CHECKER_SEEDS    seeds to run (default 20; 3 with -short)
//	KAFKASINK_CHECKER_BATCHES  acknowledged batches per seed (default 100; 30 with -short)
//	KAFKASINK_CHECKER_LOG      set: the sinks log at debug level to stderr
//
// A failure prints the seed and the schedule that reproduces it.
func TestRandomFaultsExactlyOnce(t *testing.T) {
	t.Parallel()
	first := knob(t, "KAFKASINK_CHECKER_SEED", uint64(time.Now().UnixNano()%1e9), parseSeed)
	defSeeds, defBatches := 20, 100
	if testing.Short() {
		defSeeds, defBatches = 3, 30 // a few short seeds; the full suite runs 20 of 100 (docs/integration-tests.md)
	}
	seeds, batches := knob(t, "KAFKASINK_CHECKER_SEEDS", defSeeds, positiveInt), knob(t, "KAFKASINK_CHECKER_BATCHES", defBatches, positiveInt)
	t.Logf("seeds %d..%d, %d batches each (replay one with KAFKASINK_CHECKER_SEED=<seed> KAFKASINK_CHECKER_SEEDS=1)", first, first+uint64(seeds)-1, batches)
	var total checkerStats
	var mu sync.Mutex
	for i := range uint64(seeds) {
		seed := first + i
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			t.Parallel()
			st := runChecker(t, seed, batches)
			mu.Lock()
			total.add(st)
			mu.Unlock()
		})
	}
	t.Cleanup(func() { t.Logf("all seeds: %s", total) })
}

// isSet is the parse of a knob that is on when set to anything.
func isSet(string) (bool, error) { return true, nil }

// positiveInt parses a count knob.
func positiveInt(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, errors.New("want a positive number")
	}
	return n, nil
}

// checkerStats counts what one or more seeds did.
type checkerStats struct {
	events, writes, failedWrites, faults, holds, cuts, moves, restarts, abandoned, zombieWrites, cancels, midWriteZombies int
	classes                                                                                                               map[string]int
}

func (s *checkerStats) add(o checkerStats) {
	s.events += o.events
	s.writes += o.writes
	s.failedWrites += o.failedWrites
	s.faults += o.faults
	s.holds += o.holds
	s.cuts += o.cuts
	s.moves += o.moves
	s.restarts += o.restarts
	s.abandoned += o.abandoned
	s.zombieWrites += o.zombieWrites
	s.cancels += o.cancels
	s.midWriteZombies += o.midWriteZombies
	if s.classes == nil {
		s.classes = map[string]int{}
	}
	for k, v := range o.classes {
		s.classes[k] += v
	}
}

func (s checkerStats) String() string {
	return fmt.Sprintf("%d events, %d Writes (%d failed: %v), %d error faults, %d held requests, %d cut connections, %d leader/coordinator moves, %d restarts (%d abandoned without Close), %d zombie Writes, %d cancelled Writes, %d mid-Write zombies",
		s.events, s.writes, s.failedWrites, s.classes, s.faults, s.holds, s.cuts, s.moves, s.restarts, s.abandoned, s.zombieWrites, s.cancels, s.midWriteZombies)
}

// The fault codes the checker draws from, by what a sink should make of
// them.
var (
	checkerRetryable = []*kerr.Error{
		kerr.NotLeaderForPartition, kerr.LeaderNotAvailable, kerr.NotCoordinator, kerr.CoordinatorNotAvailable,
		kerr.CoordinatorLoadInProgress, kerr.RequestTimedOut, kerr.UnknownServerError, kerr.NotEnoughReplicas,
		kerr.NotEnoughReplicasAfterAppend, kerr.ConcurrentTransactions, kerr.OffsetNotAvailable, kerr.UnknownTopicOrPartition,
		kerr.NetworkException, kerr.KafkaStorageError,
	}
	checkerAbortable = []*kerr.Error{kerr.TransactionAbortable, kerr.InvalidRecord, kerr.CorruptMessage}
	// checkerWrittenThenRefused refuse a retried batch for good.
	checkerWrittenThenRefused = []*kerr.Error{kerr.UnknownServerError, kerr.TransactionAbortable, kerr.CorruptMessage}
	// checkerFatal leaves out the fencing answers (PRODUCER_FENCED,
	// INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE to a commit): drawn at
	// random they would fence the newest instance with no instance to
	// fence it; kafkasinktest.FenceLikeKafka answers them where Kafka
	// does. checkerProduceFatal adds INVALID_TXN_STATE to a produce,
	// which is no fencing: franz-go fails the producer id for good, and
	// the sink stops as unexpected.
	checkerFatal        = []*kerr.Error{kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed, kerr.PolicyViolation}
	checkerProduceFatal = append(checkerFatal[:len(checkerFatal):len(checkerFatal)], kerr.InvalidTxnState)
	checkerKeys         = []kmsg.Key{kmsg.Produce, kmsg.EndTxn, kmsg.InitProducerID, kmsg.FindCoordinator, kmsg.Metadata,
		kmsg.ListOffsets, kmsg.Fetch, kmsg.AddPartitionsToTxn, kmsg.DescribeConfigs, kmsg.CreateTopics, kmsg.ApiVersions}
)

// checker is the state of one seed's run.
type checker struct {
	t       *testing.T
	rng     *rand.Rand
	c       *kfake.Cluster
	brokers []string
	cfg     kafkasink.Config
	events  []kafkasink.Event
	topics  []string

	sink  *kafkasink.Sink
	links *links // the network of sink
	// newest is the network of the newest instance, which its Guard
	// compares with its own.
	newest  atomic.Pointer[links]
	zombies []*kafkasink.Sink
	// midWrite are the Writes of instances cut off the network while
	// they ran (midWriteZombie), which may still be running.
	midWrite []chan error
	// wroteSinceNew is set once the newest instance's Write succeeded.
	wroteSinceNew bool
	// zombieSinceNew is set once an older instance may have sent
	// requests since the newest one started: without a Guard, an older
	// instance's recovery makes Kafka abort the newest one's open
	// transaction (kafkasinktest.FenceLikeKafka), which the newest one
	// may not survive.
	zombieSinceNew bool
	faults         []*kfake.FaultHandle
	zombieN        int

	// calm, once set, makes the held-request and cut-connection
	// controls still waiting for their request let it through.
	calm atomic.Bool

	st       checkerStats
	started  time.Time
	schedule []string
}

func (k *checker) logf(format string, args ...any) {
	k.schedule = append(k.schedule, fmt.Sprintf("%6dms ", time.Since(k.started).Milliseconds())+fmt.Sprintf(format, args...))
}

func runChecker(t *testing.T, seed uint64, batches int) checkerStats {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	nodes := 1 + rng.IntN(3)
	c, brokers := sinktest.Cluster(t, kfake.NumBrokers(nodes))
	k := &checker{t: t, rng: rng, c: c, brokers: brokers, st: checkerStats{classes: map[string]int{}}, started: time.Now()}
	timeout := []time.Duration{3 * time.Second, 5 * time.Second, 10 * time.Second}[rng.IntN(3)]
	k.cfg = kafkasink.Config{Brokers: brokers, SinkID: "checker", TransactionTimeout: timeout}
	tv := 2
	if rng.IntN(2) == 0 {
		tv = 1
		k.cfg.ClientOptions = []kgo.Opt{kgo.MaxVersions(sinktest.TransactionVersion1())}
	}
	if knob(t, "KAFKASINK_CHECKER_LOG", false, isSet) {
		k.cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	k.cfg.Topics.Partitions = int32(1 + rng.IntN(4))
	if rng.IntN(3) == 0 {
		k.cfg.MaxTransactionRecords = 20 + rng.IntN(200) // several transactions per Write
	}
	guarded := rng.IntN(2) == 0
	if guarded {
		// A lease's guard: only the newest instance may go on.
		k.cfg.Guard = func() error { return errors.New("checker: not the newest instance") }
	}
	k.logf("seed %d: %d broker(s), %d partitions per topic, MaxTransactionRecords %d, transaction version %d, TransactionTimeout %v, Guard %t",
		seed, nodes, k.cfg.Topics.Partitions, k.cfg.MaxTransactionRecords, tv, timeout, guarded)
	t.Cleanup(func() {
		if t.Failed() {
			from := max(0, len(k.schedule)-300)
			t.Logf("seed %d failed; replay with KAFKASINK_CHECKER_SEED=%d KAFKASINK_CHECKER_SEEDS=1 KAFKASINK_CHECKER_BATCHES=%d; schedule (last %d of %d steps):\n%s",
				seed, seed, batches, len(k.schedule)-from, len(k.schedule), strings.Join(k.schedule[from:], "\n"))
		}
		for _, done := range k.midWrite {
			<-done
		}
		for _, z := range k.zombies {
			z.Close(context.Background())
		}
		if k.sink != nil {
			k.sink.Close(context.Background())
		}
	})
	k.makeEvents(batches)
	k.restart("start")

	acked := 0 // the source's acknowledged prefix of k.events
	for done := 0; done < batches && acked < len(k.events); {
		k.maybeDisturb()
		from := acked
		if k.rng.IntN(10) == 0 {
			from = max(0, acked-k.rng.IntN(300)) // re-send acknowledged events
		}
		end := min(len(k.events), acked+k.batchSize())
		ok := k.write(k.events[from:end])
		if ok {
			acked = max(acked, end)
			done++
		}
	}
	// Calm: no more faults; deliver the rest.
	k.calm.Store(true)
	k.clearFaults()
	for acked < len(k.events) {
		end := min(len(k.events), acked+k.batchSize())
		if k.write(k.events[acked:end]) {
			acked = end
		}
		if k.t.Failed() {
			return k.st
		}
	}
	k.st.events = len(k.events)
	k.settleMidWrites()

	records := sinktest.ReadCommitted(t, brokers, append(k.topics, "kafkasink.public.zombie")...)
	sinktest.CheckExactlyOnce(t, records, k.events)
	if got, want := k.sink.Checkpoint().Position, k.events[len(k.events)-1].Position; got != want {
		t.Errorf("final checkpoint %s, want the last position %s", got, want)
	}
	return k.st
}

// makeEvents builds the source: transactions of 1-20 changes to 50 keys
// of three tables, enough for the batches asked for.
func (k *checker) makeEvents(batches int) {
	for i := range 3 {
		k.topics = append(k.topics, "kafkasink.public.t"+strconv.Itoa(i))
	}
	for txn := 1; len(k.events) < batches*60; txn++ {
		n := 1 + k.rng.IntN(20)
		for i := range n {
			id := int64(1 + k.rng.IntN(50))
			e := kafkasink.Event{
				Op: kafkasink.OpUpdate, Schema: "public", Table: "t" + strconv.Itoa(k.rng.IntN(3)),
				Position: kafkasink.Position{LSN: kafkasink.LSN(1000 + 64*txn), Index: uint64(i)},
				LSN:      kafkasink.LSN(1000 + 64*txn - n + i), XID: uint32(txn), Commit: time.Unix(1767225600+int64(txn), 0).UTC(),
				Key:   []string{"id"},
				After: kafkasink.Row{{Name: "id", Value: id}, {Name: "seq", Value: int64(len(k.events))}},
			}
			if k.rng.IntN(7) == 0 {
				e.Op, e.Before, e.After = kafkasink.OpDelete, kafkasink.Row{{Name: "id", Value: id}}, nil
			}
			k.events = append(k.events, e)
		}
	}
}

// batchSize draws a batch size of 1-500 events, mostly small.
func (k *checker) batchSize() int {
	switch r := k.rng.IntN(100); {
	case r < 70:
		return 1 + k.rng.IntN(50)
	case r < 95:
		return 50 + k.rng.IntN(250)
	default:
		return 300 + k.rng.IntN(201)
	}
}

// maybeDisturb draws what happens before the next Write: faults, held
// requests, cut connections, leader moves, restarts, a zombie's Write.
func (k *checker) maybeDisturb() {
	r := k.rng.IntN(100)
	switch {
	case r < 25:
		k.addFault()
	case r < 31:
		key := checkerKeys[k.rng.IntN(len(checkerKeys))]
		d := time.Duration(200+k.rng.IntN(1800)) * time.Millisecond
		if k.rng.IntN(6) == 0 {
			// Long enough for the transaction to outlive its
			// timeout: the broker aborts it.
			key = []kmsg.Key{kmsg.Produce, kmsg.EndTxn, kmsg.AddPartitionsToTxn}[k.rng.IntN(3)]
			d = k.cfg.TransactionTimeout + time.Duration(200+k.rng.IntN(1300))*time.Millisecond
		}
		k.logf("stall the broker on the next %s for %v", key.Name(), d)
		k.st.holds++
		holdNext(k.c, key, d, &k.calm)
	case r < 35:
		key := checkerKeys[k.rng.IntN(len(checkerKeys))]
		k.logf("cut the connection of the next %s", key.Name())
		k.st.cuts++
		k.c.ControlKey(key.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
			if k.calm.Load() {
				k.c.DropControl()
				return nil, nil, false
			}
			return nil, errors.New("checker: connection cut"), true
		})
	case r < 38:
		k.logf("move partition leaders and coordinators")
		k.st.moves++
		k.c.ShufflePartitionLeaders()
		k.c.RehashCoordinators()
	case r < 41:
		k.restart("restart after Close")
	case r < 43:
		k.logf("abandon the instance without Close")
		k.st.abandoned++
		k.zombies = append(k.zombies, k.sink)
		k.sink = nil
		k.restart("restart after a crash")
	case r < 45 && len(k.zombies) > 0 && k.wroteSinceNew:
		// After the newest instance wrote: the cluster's fencing
		// (kafkasinktest.FenceLikeKafka) knows its epoch then, and
		// refuses the old one's produce as Kafka does.
		k.zombieWrite()
	}
}

func (k *checker) addFault() {
	var f kfake.Fault
	f.Keys = []kmsg.Key{checkerKeys[k.rng.IntN(len(checkerKeys))]}
	switch r := k.rng.IntN(100); {
	case r < 80:
		f.Err = checkerRetryable[k.rng.IntN(len(checkerRetryable))]
	case r < 95:
		f.Err = checkerAbortable[k.rng.IntN(len(checkerAbortable))]
	case f.Keys[0] == kmsg.Produce:
		f.Err = checkerProduceFatal[k.rng.IntN(len(checkerProduceFatal))]
	default:
		f.Err = checkerFatal[k.rng.IntN(len(checkerFatal))]
	}
	switch f.Keys[0] {
	case kmsg.EndTxn, kmsg.InitProducerID:
		f.TopLevel = true
	case kmsg.Produce:
		if k.rng.IntN(2) == 0 {
			f.Partitions = []int32{int32(k.rng.IntN(int(k.cfg.Topics.Partitions)))}
		}
		if k.rng.IntN(3) == 0 {
			k.addWrittenThenRefused(f)
			return
		}
	}
	f.Count = 1 + k.rng.IntN(3)
	if k.rng.IntN(8) == 0 {
		f.Count = -1 // until the checker clears faults
	}
	k.logf("fault %s answers %s (partitions %v) %d time(s)", f.Keys[0].Name(), f.Err.Message, f.Partitions, f.Count)
	k.st.faults++
	k.faults = append(k.faults, k.c.Fault(f))
}

// addWrittenThenRefused installs issue 30's first finding on produce as
// f selects it: a batch written whose answer is lost (REQUEST_TIMED_OUT,
// answered after the append), then the client's retry of it refused for
// good. Under transaction version 1 a sink that sent the next
// transaction's batch under the same epoch and sequence numbers had it
// acknowledged without being written (TestAbortedSequenceNotReused).
func (k *checker) addWrittenThenRefused(f kfake.Fault) {
	lost, refused := f, f
	lost.Err, lost.Count = kerr.RequestTimedOut, 1
	refused.Err, refused.Count = checkerWrittenThenRefused[k.rng.IntN(len(checkerWrittenThenRefused))], 1
	k.logf("fault Produce (partitions %v): written, answer lost, then the retry refused with %s", f.Partitions, refused.Err.Message)
	k.st.faults += 2
	k.faults = append(k.faults, k.c.Fault(lost, refused))
}

func (k *checker) clearFaults() {
	for _, h := range k.faults {
		h.Remove()
	}
	k.faults = nil
}

// holdNext stalls the broker on the next request of key for d, then
// lets the request through, as a broker paused by a long GC or a stalled
// disk does: a commit held past the commit timeout is applied after the
// client gave up on it. Once calm is set it holds nothing. (kfake's
// SleepControl, which holds one request alone, races inside kfake when
// several sleep at once.)
func holdNext(c *kfake.Cluster, key kmsg.Key, d time.Duration, calm *atomic.Bool) {
	c.ControlKey(key.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.DropControl()
		if !calm.Load() {
			time.Sleep(d)
		}
		return nil, nil, false
	})
}

// restart starts a new instance with the sink id, as a restarted process
// does: New is retried while faults make it fail, and faults are cleared
// after a few failures.
func (k *checker) restart(why string) {
	if k.sink != nil {
		k.sink.Close(context.Background())
	}
	k.logf("%s: New", why)
	k.st.restarts++
	for attempt := 1; ; attempt++ {
		// A persistent fault can hold New until its deadline; the
		// checker clears faults after the second failure.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cfg, l := k.cfg, &links{}
		cfg.ClientOptions = append(slices.Clone(cfg.ClientOptions), kgo.Dialer(l.dial))
		k.newest.Store(l)
		if refuse := cfg.Guard; refuse != nil {
			cfg.Guard = func() error {
				if k.newest.Load() != l {
					return refuse()
				}
				return nil
			}
		}
		s, err := kafkasink.New(ctx, cfg)
		cancel()
		if err == nil {
			k.sink, k.links, k.wroteSinceNew, k.zombieSinceNew = s, l, false, false
			k.logf("  New: checkpoint %s", s.Checkpoint().Position)
			return
		}
		k.classify("New", err, errors.Is(err, context.DeadlineExceeded))
		k.logf("  New failed: %v", err)
		if attempt == 2 {
			k.clearFaults()
		}
		if attempt == 6 {
			k.t.Fatalf("New keeps failing without faults: %v", err)
		}
	}
}

// classify checks that err is in exactly one class, or in none when the
// caller's context ended (callerEnded: it cancelled a Write, or New ran
// into its deadline, which a persistent fault can cause); it returns the
// class. A Write never runs into its own deadline: its attempts and
// recoveries are bounded.
func (k *checker) classify(what string, err error, callerEnded bool) string {
	class := errorClass(err)
	k.st.classes[class]++
	switch {
	case class == "none" && !callerEnded:
		k.t.Errorf("%s: %v: in no class, and the caller did not cancel", what, err)
	case class == "none" && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
		k.t.Errorf("%s: %v: in no class but not the caller's context ending", what, err)
	case class != "none" && class != "retryable" && class != "fatal" && class != "rejected":
		k.t.Errorf("%s: %v: in several classes %s", what, err, class)
	}
	return class
}

// write writes events as one batch through the current instance and
// reports whether it succeeded. After a fatal error it restarts.
func (k *checker) write(events []kafkasink.Event) bool {
	if !k.calm.Load() && k.rng.IntN(30) == 0 {
		k.midWriteZombie(events)
		return false
	}
	// Far above what a Write takes on its own: its attempts (at most 5)
	// and the recoveries between them are each bounded by about the
	// transaction timeout. A Write that runs into this deadline is
	// reported.
	ctx, cancel := context.WithTimeout(context.Background(), 15*k.cfg.TransactionTimeout+30*time.Second)
	defer cancel()
	cancelled := false
	if k.rng.IntN(25) == 0 {
		d := time.Duration(k.rng.IntN(40)) * time.Millisecond
		k.logf("cancel the next Write after %v", d)
		k.st.cancels++
		cctx, ccancel := context.WithCancel(ctx)
		defer ccancel()
		time.AfterFunc(d, ccancel)
		ctx, cancelled = cctx, true
	}
	k.st.writes++
	err := k.sink.Write(ctx, kafkasink.Batch{Events: events})
	if err == nil {
		if got, last := k.sink.Checkpoint().Position, events[len(events)-1].Position; got.Compare(last) < 0 {
			k.t.Fatalf("Write of %s..%s returned nil but the checkpoint is %s", events[0].Position, last, got)
		}
		k.logf("Write %s..%s (%d events): ok", events[0].Position, events[len(events)-1].Position, len(events))
		k.wroteSinceNew = true
		return true
	}
	k.st.failedWrites++
	class := k.classify("Write", err, cancelled)
	k.logf("Write %s..%s (%d events): %s: %v", events[0].Position, events[len(events)-1].Position, len(events), class, err)
	if errors.Is(err, kafkasink.ErrFenced) && !k.mayStop(err) {
		k.t.Fatalf("the newest instance was fenced: %v", err)
	}
	if class == "fatal" {
		k.clearFaults()
		k.restart("restart after a fatal error")
	} else if k.rng.IntN(3) == 0 {
		k.clearFaults() // faults of Count -1 must end some time
	}
	return false
}

// mayStop reports whether the newest instance may have been stopped as
// fenced by err, although no newer instance exists. With a Guard, never:
// older instances send nothing, and the broker's timeout abort is
// survived by claiming the id afresh. Without one, after a transaction
// that outlived its timeout (the broker's abort looks like fencing), and
// after an older instance's recovery, which makes Kafka abort the newest
// one's open transaction in a way the client may not recover from.
func (k *checker) mayStop(err error) bool {
	if k.cfg.Guard != nil {
		return false
	}
	return errors.Is(err, kafkasink.ErrTransactionTimeout) || k.zombieSinceNew
}

// zombieWrite has an abandoned instance write new events: it must fail,
// and the events must never be visible.
func (k *checker) zombieWrite() {
	z := k.zombies[k.rng.IntN(len(k.zombies))]
	k.zombieN++
	e := sinktest.Inserts("public", "zombie", kafkasink.LSN(1<<40+k.zombieN), k.zombieN, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	k.st.zombieWrites++
	k.zombieSinceNew = true
	err := z.Write(ctx, kafkasink.Batch{Events: e})
	k.logf("zombie Write %s: %v", e[0].Position, err)
	switch {
	case err == nil:
		k.t.Fatalf("an abandoned instance's Write succeeded after a newer instance started")
	case errors.Is(err, kafkasink.ErrConcurrentWrite):
		// A mid-Write zombie whose Write is still running.
	default:
		// Cut off the network, or under a fault that refuses every
		// new connection (a persistent ApiVersions fault), a zombie's
		// client retries until its caller's deadline.
		k.classify("zombie Write", err, true)
	}
}

// midWriteZombie is a process that loses its network in the middle of a
// Write and is replaced at once: 0-40 ms after the Write began, every
// connection of the instance is cut and new dials are refused, the
// Write's context is cancelled, and a new instance starts, while the old
// Write may still be running. Its events are not acknowledged: the source
// writes them again through the new instance.
func (k *checker) midWriteZombie(events []kafkasink.Event) {
	d := time.Duration(k.rng.IntN(41)) * time.Millisecond
	k.logf("mid-Write zombie: Write %s..%s (%d events), cut off the network after %v, cancelled, replaced",
		events[0].Position, events[len(events)-1].Position, len(events), d)
	k.st.midWriteZombies++
	s, l := k.sink, k.links
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		defer cancel()
		done <- s.Write(ctx, kafkasink.Batch{Events: events})
	}()
	time.Sleep(d)
	l.cutAll()
	cancel()
	k.midWrite = append(k.midWrite, done)
	k.zombies = append(k.zombies, s)
	k.sink = nil
	k.restart("restart after a mid-Write crash")
	// Requests the zombie wrote before the cut may reach the broker
	// after the new instance started.
	k.zombieSinceNew = true
}

// settleMidWrites waits for the Writes of the mid-Write zombies and checks
// that each error is in one class, or the cancellation the zombie's
// caller made.
func (k *checker) settleMidWrites() {
	for i, done := range k.midWrite {
		err := <-done
		done <- err // for the cleanup
		if err != nil {
			k.classify(fmt.Sprintf("mid-Write zombie %d's Write", i), err, true)
		}
		k.logf("mid-Write zombie %d's Write: %v", i, err)
	}
}
