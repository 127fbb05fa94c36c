package kafkasink_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/faultproxy"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// TestZombieRecoveryRealCluster is defect 2 of issue 8 against the real
// 3-broker cluster, where the broker, not a fake, says who is fenced. An
// older instance's commit is applied but its answer lost; before its
// recovery's producer id re-initialisation reaches the broker, a newer
// instance with the same sink id starts. The broker must refuse the older
// one (KIP-588), whose Write then returns ErrFenced, and the newer one
// must go on writing.
func TestZombieRecoveryRealCluster(t *testing.T) {
	t.Parallel()
	brokers, name := onRealBrokers(t, sinktest.EnvBrokers3)

	// The older instance talks through proxies: once armed, its commit
	// answer is dropped after the broker applied it, and its producer
	// id re-initialisation is held back until the newer one started.
	var armed atomic.Bool
	newerStarted := make(chan struct{})
	proxies := startProxies(t, brokers, func(r faultproxy.Request) faultproxy.Fault {
		if !armed.Load() {
			return faultproxy.Fault{}
		}
		switch kmsg.Key(r.Key) {
		case kmsg.EndTxn:
			return faultproxy.Fault{Kind: faultproxy.DropResponse}
		case kmsg.InitProducerID:
			<-newerStarted
		}
		return faultproxy.Fault{}
	})
	config := func(brokers []string) func(*kafkasink.Config) {
		return func(c *kafkasink.Config) {
			c.Brokers = brokers
			c.CheckpointTopic = name + ".checkpoints"
			c.Topics = kafkasink.Topics{Prefix: name, Partitions: 3, ReplicationFactor: 3}
			c.TransactionTimeout = 10 * time.Second
		}
	}
	topic := name + ".public.orders"
	a := sinktest.Inserts("public", "orders", 100, 1, 5)
	zb := sinktest.Inserts("public", "orders", 200, 6, 5)
	b := sinktest.Inserts("public", "orders", 300, 11, 5)
	d := sinktest.Inserts("public", "orders", 400, 16, 5)

	older := newSink(t, proxies.Addrs(), name, config(proxies.Addrs()))
	write(t, older, a)
	armed.Store(true)
	olderErr := make(chan error, 1)
	go func() { olderErr <- older.Write(context.Background(), kafkasink.Batch{Events: zb}) }()
	for deadline := time.Now().Add(30 * time.Second); proxies.Counts()[faultproxy.Count{API: "EndTxn", Kind: faultproxy.DropResponse}] == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the older instance's commit never reached the broker (faults: %v)", proxies.Applied())
		}
	}

	// The newer instance starts directly: it claims the transactional
	// id, and reads the older one's applied commit back.
	newer := newSink(t, brokers, name, config(brokers))
	if got := newer.Checkpoint().Position; got != zb[len(zb)-1].Position {
		t.Fatalf("the newer instance's checkpoint %s, want the older one's applied commit %s", got, zb[len(zb)-1].Position)
	}
	close(newerStarted)
	write(t, newer, b)

	if err := <-olderErr; !errors.Is(err, kafkasink.ErrFenced) || !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("the older instance's Write: %v, want ErrFenced from the broker's PRODUCER_FENCED answer to its recovery", err)
	}
	armed.Store(false)
	if err := older.Write(ctxT(t), kafkasink.Batch{Events: sinktest.Inserts("public", "orders", 350, 900, 2)}); !errors.Is(err, kafkasink.ErrFenced) {
		t.Fatalf("the older instance's next Write: %v, want ErrFenced", err)
	}
	write(t, newer, d)
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), append(append(append(a, zb...), b...), d...))
}
