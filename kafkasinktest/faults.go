package kafkasinktest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The named faults. Each is built on kfake's Fault and ControlKey hooks
// and documented with what an exactly-once sink does about it; the kit's
// own tests (faults_test.go) check each of those claims against the sink.
//
// A fault takes effect on requests that arrive after it was asked for.
// Check Fault.Hits at the end of a test: a fault that never fired proves
// nothing.

// Fault is a fault a test asked for. It is safe for concurrent use.
type Fault struct {
	hits    func() int
	remove  func()
	removed atomic.Bool
}

// Hits returns how many requests the fault has answered (or held, or
// slowed) so far.
func (f *Fault) Hits() int { return f.hits() }

// Remove ends the fault. A fault that ends by itself need not be removed;
// removing one twice is harmless.
func (f *Fault) Remove() {
	if f.removed.CompareAndSwap(false, true) && f.remove != nil {
		f.remove()
	}
}

// counter is the hit count of faults the kit counts itself.
type counter struct{ n atomic.Int64 }

func (c *counter) add()      { c.n.Add(1) }
func (c *counter) load() int { return int(c.n.Load()) }

var (
	errAnswerLost  = errors.New("kafkasinktest: connection cut before the answer (LoseCommitAnswer)")
	errBrokerDown  = errors.New("kafkasinktest: broker stopped (RestartBroker)")
	openTxnCounter atomic.Int64
)

// LoseCommitAnswer makes the next commit on the cluster, of whichever
// producer sends it first, apply and its answer get lost:
// the broker commits the transaction, then cuts the connection without
// answering, as when a broker fails right after writing the commit
// markers. The client's retries of that commit are cut the same way, so it
// cannot learn the outcome from the broker; the fault ends at the next
// other EndTxn request (the client's abort, or the next transaction's
// commit).
//
// What the sink does: its commit request fails without an answer, so it
// cannot tell whether the transaction committed; it reads its checkpoint
// back, finds the batch committed, and Write returns nil ("commit outcome
// was unknown; the checkpoint read back shows it committed", logged at
// info), or a retryable error when the checkpoint cannot be read back in
// time. Either way the batch is in the topic once: writing it again writes
// nothing twice, and a read_committed consumer sees each event once.
//
// Hits counts the answers lost: the commit's and its retries'.
func (c *Cluster) LoseCommitAnswer() *Fault {
	var (
		hits      counter
		mu        sync.Mutex
		lost      *kmsg.EndTxnRequest // the commit applied, once it is
		replaying bool                // while the kit applies it
		done      bool
	)
	f := &Fault{hits: hits.load}
	f.remove = func() {
		mu.Lock()
		defer mu.Unlock()
		done = true
	}
	c.kc.ControlKey(kmsg.EndTxn.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.EndTxnRequest)
		mu.Lock()
		switch {
		case replaying:
			// The kit's own copy of the commit: the broker applies
			// it.
			mu.Unlock()
			return nil, nil, false
		case done || lost != nil && !sameEndTxn(lost, r):
			done = true
			mu.Unlock()
			c.kc.DropControl()
			return nil, nil, false
		case lost != nil:
			mu.Unlock()
			hits.add()
			c.kc.KeepControl()
			return nil, errAnswerLost, true
		case !r.Commit:
			mu.Unlock()
			return nil, nil, false // an abort before the commit to lose
		}
		lost, replaying = r, true
		mu.Unlock()
		// kfake applies a request only if it answers it, so the kit
		// sends the same commit on a connection of its own while this
		// one sleeps, then cuts this one.
		applied := make(chan error, 1)
		go func() { applied <- c.endTxn(r) }()
		var err error
		c.kc.SleepControl(func() { err = <-applied })
		mu.Lock()
		replaying = false
		mu.Unlock()
		if err != nil {
			c.t.Errorf("kafkasinktest: LoseCommitAnswer could not apply the commit: %v", err)
			c.kc.DropControl()
			return nil, nil, false
		}
		hits.add()
		c.kc.KeepControl()
		return nil, errAnswerLost, true
	})
	return f
}

// sameEndTxn reports whether r ends the same transaction as the lost
// commit the same way: a retry of it.
func sameEndTxn(lost, r *kmsg.EndTxnRequest) bool {
	return r.TransactionalID == lost.TransactionalID && r.ProducerID == lost.ProducerID &&
		r.ProducerEpoch == lost.ProducerEpoch && r.Commit == lost.Commit
}

// endTxn sends a copy of r to the cluster on a client of its own.
func (c *Cluster) endTxn(r *kmsg.EndTxnRequest) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.ErrorCode)
}

// FailProduce makes the broker refuse the records of the next produce
// requests to one partition of topic, times requests (-1: until Remove),
// with TRANSACTION_ABORTABLE, as Kafka answers a transactional produce it
// cannot take (KIP-890); the client does not retry it. The records of the
// same requests for other partitions are stored.
//
// What the sink does: it never commits a transaction that lost a record.
// It aborts the transaction (what other partitions took stays invisible to
// read_committed consumers) and writes the batch again in a new one, a few
// times within the same Write, which then returns nil; when the partition
// keeps refusing, Write returns a retryable *kafkasink.WriteError naming
// the topic and the partition, and the checkpoint does not move. Writing
// the same batch again delivers it once.
func (c *Cluster) FailProduce(topic string, partition int32, times int) *Fault {
	h := c.kc.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Partitions: []int32{partition}, Err: kerr.TransactionAbortable, Count: times})
	return &Fault{hits: h.Hits, remove: h.Remove}
}

// RestartBroker stops the broker node, keeps it down for down, and starts
// it again on the same address; it returns once the broker is back, with
// its new node id. While it is down, it accepts no connection and every
// request reaching it on a connection opened before is answered by
// cutting that connection; its partitions and the coordinators it hosted
// move to the other brokers (kfake keeps the data: it models a broker
// whose log survives). It comes back under a new node id, because kfake
// would serve the connections opened before the restart as the old
// broker; those stay cut. Call it from the test's goroutine; it fails the
// test on a cluster of one broker (see Brokers).
//
// What the sink does: the client reconnects and finds the new leaders and
// coordinator; a request cut mid-transaction makes the Write fail
// retryably (the transaction is aborted, or resolved by reading the
// checkpoint back when the commit was in flight) or succeed after the
// client's own retries. Writing the same batch again delivers it once.
func (c *Cluster) RestartBroker(node int32, down time.Duration) int32 {
	c.t.Helper()
	c.mu.Lock()
	addr, ok := c.addrs[node]
	c.mu.Unlock()
	if !ok {
		c.t.Fatalf("kafkasinktest: RestartBroker(%d): no such broker; the cluster's nodes are %v", node, c.nodes())
	}
	_, portText, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portText)
	// From now on, the old broker's connections are cut, whatever
	// arrives on them.
	c.kc.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
		if c.kc.CurrentNode() != node {
			return nil, nil, false
		}
		c.kc.KeepControl()
		return nil, errBrokerDown, true
	})
	if err := c.kc.RemoveNode(node); err != nil {
		c.t.Fatalf("kafkasinktest: RestartBroker(%d): %v (a restart needs at least two brokers: NewCluster(t, Brokers(3)))", node, err)
	}
	time.Sleep(down)
	c.mu.Lock()
	restarted := c.nextNode
	c.nextNode++
	c.mu.Unlock()
	_, _, err := c.kc.AddNode(restarted, port)
	if err != nil {
		c.t.Fatalf("kafkasinktest: RestartBroker(%d): starting it again on %s: %v", node, addr, err)
	}
	c.mu.Lock()
	delete(c.addrs, node)
	c.addrs[restarted] = addr
	c.mu.Unlock()
	return restarted
}

// MoveCoordinator moves the transaction coordinator of transactionalID
// (Config.TransactionalID; by default "kafkasink-" + Config.SinkID) to
// another broker, as a coordinator failover does; group coordinators move
// too. It fails the test on a cluster of one broker.
//
// What the sink does: the old coordinator answers NOT_COORDINATOR, the
// client finds the new one and goes on; a Write in progress succeeds or
// fails retryably, and writing the same batch again delivers it once.
func (c *Cluster) MoveCoordinator(transactionalID string) {
	c.t.Helper()
	before := c.kc.CoordinatorFor(transactionalID)
	for range 64 {
		c.kc.RehashCoordinators()
		if c.kc.CoordinatorFor(transactionalID) != before {
			return
		}
	}
	c.t.Fatalf("kafkasinktest: MoveCoordinator(%q): the coordinator stays on node %d; a move needs at least two brokers: NewCluster(t, Brokers(3))", transactionalID, before)
}

// HoldTransaction opens a transaction of another producer on one
// partition of topic and keeps it open until Remove (or the end of the
// test; at most five minutes): it writes one record, keyed
// "kafkasinktest.open-transaction", that is aborted at the end. While it is
// open, read_committed consumers of the partition see nothing written
// after it (the last stable offset stays below it). The topic must exist.
//
// What the sink does: writing to a held data partition works as usual; the
// records become visible when the held transaction ends. On the checkpoint
// topic's partition, New and the recovery after an unclear commit read the
// checkpoint up to the high watermark, so they wait for the held
// transaction to end (within their ctx), rather than trust a checkpoint
// the open transaction hides.
//
// Hits is 1 once the transaction is open.
func (c *Cluster) HoldTransaction(topic string, partition int32) *Fault {
	c.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.brokers...),
		kgo.TransactionalID(fmt.Sprintf("kafkasinktest-open-transaction-%d", openTxnCounter.Add(1))),
		kgo.TransactionTimeout(5*time.Minute),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	)
	if err != nil {
		c.t.Fatalf("kafkasinktest: HoldTransaction: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		cl.Close()
		c.t.Fatalf("kafkasinktest: HoldTransaction: %v", err)
	}
	rec := &kgo.Record{Topic: topic, Partition: partition, Key: []byte("kafkasinktest.open-transaction")}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		cl.Close()
		c.t.Fatalf("kafkasinktest: HoldTransaction(%s, %d): writing the held record: %v (does the topic exist with that partition?)", topic, partition, err)
	}
	var once sync.Once
	end := func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
				c.t.Errorf("kafkasinktest: ending the held transaction on %s[%d]: %v", topic, partition, err)
			}
			cl.Close()
		})
	}
	c.t.Cleanup(end)
	return &Fault{hits: func() int { return 1 }, remove: end}
}

// SlowResponses makes the cluster answer every request at least d late,
// one request at a time, until Remove: a broker paused by a long garbage
// collection or a stalled disk.
//
// What the sink does: requests wait; a commit answered later than
// Config.CommitTimeout is a commit of unknown outcome (see
// LoseCommitAnswer), applied by the broker after the client gave up on it;
// the sink resolves it by reading its checkpoint back. Nothing is lost or
// duplicated.
func (c *Cluster) SlowResponses(d time.Duration) *Fault {
	return c.slow(-1, d)
}

// SlowCommits is SlowResponses for commits and aborts (EndTxn) only.
func (c *Cluster) SlowCommits(d time.Duration) *Fault {
	return c.slow(kmsg.EndTxn.Int16(), d)
}

// slow delays each request of key (-1: all) by d until removed. It
// sleeps on the cluster's goroutine, which holds every other request too,
// as a paused broker does (kfake's SleepControl would hold only one).
func (c *Cluster) slow(key int16, d time.Duration) *Fault {
	var (
		hits    counter
		removed atomic.Bool
	)
	c.kc.ControlKey(key, func(kmsg.Request) (kmsg.Response, error, bool) {
		if removed.Load() {
			c.kc.DropControl()
			return nil, nil, false
		}
		hits.add()
		time.Sleep(d)
		return nil, nil, false
	})
	return &Fault{hits: hits.load, remove: func() { removed.Store(true) }}
}
