package kafkasink_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// The real 3-broker cluster: replication, leader election and the
// transaction coordinator moving while a sink streams. Not parallel: see
// the test kit (helpers_test.go) for why the tests that kill brokers run
// alone.

// streamer writes the deterministic stream batch by batch, retrying
// retryable errors, until stopped. After ErrFenced it restarts the sink,
// as a supervisor restarts a process, and writes the batch again: when the
// transaction coordinator dies, Kafka can answer the recovering sink's
// re-initialisation PRODUCER_FENCED with no newer instance about (the
// epoch it gave is not in the new coordinator's log; see txnend.Abort), and
// without Config.Guard the sink then stops, as its error says.
type streamer struct {
	acked    atomic.Int64
	stop     chan struct{}
	done     chan error
	mu       sync.Mutex
	retried  []string
	sink     *kafkasink.Sink // the current one; read after done
	restarts int
}

func startStreamer(ctx context.Context, s *kafkasink.Sink, restart func() (*kafkasink.Sink, error), events, keys int) *streamer {
	st := &streamer{stop: make(chan struct{}), done: make(chan error, 1), sink: s}
	go func() {
		for b := 1; ; b++ {
			select {
			case <-st.stop:
				st.done <- nil
				return
			default:
			}
			started := time.Now()
			retried, err := writeRetrying(ctx, s, kafkasink.Batch{Events: sinktest.Stream(b, events, keys)})
			if errors.Is(err, kafkasink.ErrFenced) {
				s.Close(ctx)
				if s, err = restart(); err == nil {
					st.mu.Lock()
					st.sink = s
					st.restarts++
					st.retried = append(st.retried, fmt.Sprintf("batch %d: fenced, sink restarted: %v", b, retried))
					st.mu.Unlock()
					b--
					continue
				}
			}
			st.mu.Lock()
			for _, e := range retried {
				st.retried = append(st.retried, fmt.Sprintf("batch %d: %v", b, e))
			}
			if len(retried) > 0 || time.Since(started) > 2*time.Second {
				st.retried = append(st.retried, fmt.Sprintf("batch %d: delivered after %d retries, %v", b, len(retried), time.Since(started).Round(time.Millisecond)))
			}
			st.mu.Unlock()
			if err != nil {
				st.done <- fmt.Errorf("batch %d: %w", b, err)
				return
			}
			st.acked.Store(int64(b))
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return st
}

// waitAcked waits until the stream has delivered batch n.
func (st *streamer) waitAcked(t *testing.T, n int64, within time.Duration, what string) {
	t.Helper()
	started := time.Now()
	for deadline := started.Add(within); st.acked.Load() < n; time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-st.done:
			t.Fatalf("%s: the stream stopped: %v", what, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: batch %d not delivered within %v (at %d)", what, n, within, st.acked.Load())
		}
	}
	t.Logf("%s: batch %d delivered after %v", what, n, time.Since(started).Round(time.Millisecond))
}

// finish stops the stream and returns the last delivered batch.
func (st *streamer) finish(t *testing.T) int {
	t.Helper()
	close(st.stop)
	if err := <-st.done; err != nil {
		t.Fatalf("the stream stopped: %v", err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, r := range st.retried {
		t.Log(r)
	}
	return int(st.acked.Load())
}

// checkReplicated checks a topic's replication factor and
// min.insync.replicas.
func checkReplicated(t *testing.T, adm *kadm.Client, topic string, rf int, minISR string) {
	t.Helper()
	md, err := adm.Metadata(ctxT(t), topic)
	if err != nil {
		t.Fatalf("metadata of %s: %v", topic, err)
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil || len(td.Partitions) == 0 {
		t.Fatalf("metadata of %s: %v", topic, td.Err)
	}
	for _, p := range td.Partitions {
		if len(p.Replicas) != rf {
			t.Errorf("%s[%d] has replicas %v, want %d", topic, p.Partition, p.Replicas, rf)
		}
	}
	rcs, err := adm.DescribeTopicConfigs(ctxT(t), topic)
	if err != nil {
		t.Fatalf("configs of %s: %v", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		t.Fatalf("configs of %s: %v", topic, err)
	}
	for _, c := range rc.Configs {
		if c.Key == "min.insync.replicas" && c.MaybeValue() != minISR {
			t.Errorf("%s has min.insync.replicas=%s, want %s", topic, c.MaybeValue(), minISR)
		}
	}
}

func TestThreeBrokerKillDuringStream(t *testing.T) {
	skipInShort(t, "kills and restarts real cluster nodes")
	// Not parallel: it stops cluster nodes; see helpers_test.go.
	brokers, name := onRealBrokers(t, sinktest.EnvBrokers3)
	nodes := testenvNodes(t)
	ckTopic := name + ".checkpoints"
	topic := name + ".public.items"
	txnID := "kafkasink-" + name
	const events, keys = 20, 7
	config := func(c *kafkasink.Config) {
		c.CheckpointTopic = ckTopic
		c.TransactionTimeout = 15 * time.Second
		c.Topics = kafkasink.Topics{Prefix: name, Partitions: 3, ReplicationFactor: 3, Configs: map[string]string{"min.insync.replicas": "2"}}
	}
	s := newSink(t, brokers, name, config)
	cl := sinktest.Client(t, brokers)
	adm := kadm.NewClient(cl)
	// The sink created its checkpoint topic replicated for the cluster.
	checkReplicated(t, adm, ckTopic, 3, "2")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st := startStreamer(ctx, s, func() (*kafkasink.Sink, error) { return restartSink(ctx, t, brokers, name, config) }, events, keys)
	st.waitAcked(t, 5, 30*time.Second, "before any kill")
	checkReplicated(t, adm, topic, 3, "2")

	// A fixed node first: kill-broker 2, as an operator would.
	roles := func() string {
		var parts []string
		if c, ok := adm.FindTxnCoordinators(ctxT(t), txnID)[txnID]; ok && c.Err == nil {
			parts = append(parts, fmt.Sprintf("transaction coordinator of %s: node %d", txnID, c.NodeID))
		}
		if resp, err := freshMetadata(ctxT(t), cl, topic, ckTopic); err == nil {
			for _, td := range resp.Topics {
				for _, p := range td.Partitions {
					parts = append(parts, fmt.Sprintf("%s[%d] leader %d ISR %v", *td.Topic, p.Partition, p.Leader, p.ISR))
				}
			}
		}
		return strings.Join(parts, "; ")
	}
	t.Logf("before killing node 2: %s", roles())
	nodes.kill(2)
	at := st.acked.Load()
	st.waitAcked(t, at+3, 45*time.Second, "node 2 down")
	nodes.start(2)
	waitFullISR(t, cl, 60*time.Second, topic, ckTopic, "__transaction_state")
	st.waitAcked(t, st.acked.Load()+2, 30*time.Second, "node 2 back")

	// Then the transaction coordinator of the sink.
	c, ok := adm.FindTxnCoordinators(ctxT(t), txnID)[txnID]
	if !ok || c.Err != nil {
		t.Fatalf("finding the transaction coordinator of %s: %v", txnID, c.Err)
	}
	victim := int(c.NodeID)
	t.Logf("killing node %d, the transaction coordinator: %s", victim, roles())
	nodes.kill(victim)
	at = st.acked.Load()
	st.waitAcked(t, at+3, 45*time.Second, fmt.Sprintf("coordinator node %d down", victim))
	t.Logf("with node %d down: %s", victim, roles())
	nodes.start(victim)
	st.waitAcked(t, st.acked.Load()+2, 30*time.Second, fmt.Sprintf("node %d back", victim))

	n := st.finish(t)
	want := streamEvents(n, events, keys)
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), want)
	st.mu.Lock()
	s = st.sink
	restarts := st.restarts
	st.mu.Unlock()
	s.Close(ctx)
	if got := newSink(t, brokers, name, config).Checkpoint().Position; got != want[len(want)-1].Position {
		t.Fatalf("a new sink read back checkpoint %s, want %s", got, want[len(want)-1].Position)
	}
	t.Logf("%d batches, %d events delivered exactly once through two broker kills; %d sink restarts after ErrFenced", n, len(want), restarts)
}
