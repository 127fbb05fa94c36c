package kafkasink_test

import (
	"context"
	"errors"
	"sync"
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
	z := startZombie(t, brokers, name)

	// The newer instance starts directly: it claims the transactional
	// id, and reads the older one's applied commit back.
	newer := newSink(t, brokers, name, zombieConfig(name, brokers))
	if got := newer.Checkpoint().Position; got != z.committed[len(z.committed)-1].Position {
		t.Fatalf("the newer instance's checkpoint %s, want the older one's applied commit %s", got, z.committed[len(z.committed)-1].Position)
	}
	// The older one's re-initialisation reaches the broker between the
	// newer one's transactions (TestZombieRecoveryDuringNewerTransaction
	// is the case of one open).
	close(z.release)
	z.checkFenced(t, <-z.err)
	b := sinktest.Inserts("public", "orders", 300, 11, 5)
	write(t, newer, b)
	d := sinktest.Inserts("public", "orders", 400, 16, 5)
	write(t, newer, d)
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, name+".public.orders"), append(append(z.committed, b...), d...))
}

// TestZombieRecoveryDuringNewerTransaction is TestZombieRecoveryRealCluster
// with the older instance's re-initialisation reaching the broker while the
// newer instance's transaction is open, ready to commit. Kafka 4.4 aborts
// that transaction and bumps the epoch before it answers the older
// instance PRODUCER_FENCED; the newer one's commit is then refused
// INVALID_TXN_STATE, and its client cannot recover its producer id. With
// Config.Guard the newer instance claims the transactional id afresh and
// its Write succeeds; without, it stops with ErrFenced and a next instance
// goes on. Either way a read_committed reader sees each event once.
// TestOlderRecoveryDisturbsNewerRealBroker is the case under transaction
// version 1, where the newer instance's next produce is refused instead.
func TestZombieRecoveryDuringNewerTransaction(t *testing.T) {
	t.Parallel()
	for _, guarded := range []bool{true, false} {
		t.Run(map[bool]string{true: "guarded", false: "unguarded"}[guarded], func(t *testing.T) {
			t.Parallel()
			brokers, name := onRealBrokers(t, sinktest.EnvBrokers3)
			z := startZombie(t, brokers, name)

			// The newer instance's first commit waits until the older
			// one's re-initialisation was answered.
			var once sync.Once
			var armed atomic.Bool
			var olderErr error              // set before answered is closed
			answered := make(chan struct{}) // the older instance's Write returned
			proxies := startProxies(t, brokers, func(r faultproxy.Request) faultproxy.Fault {
				if armed.Load() && kmsg.Key(r.Key) == kmsg.EndTxn {
					once.Do(func() {
						close(z.release)
						olderErr = <-z.err
						close(answered)
					})
				}
				return faultproxy.Fault{}
			})
			config := zombieConfig(name, proxies.Addrs())
			newer := newSink(t, proxies.Addrs(), name, func(c *kafkasink.Config) {
				config(c)
				if guarded {
					c.Guard = func() error { return nil } // the newer instance is the one to go on
				}
			})
			armed.Store(true)
			b := sinktest.Inserts("public", "orders", 300, 11, 5)
			err := newer.Write(ctxT(t), kafkasink.Batch{Events: b})
			select {
			case <-answered:
			default:
				t.Fatalf("the newer instance's Write returned (%v) before its commit reached the broker", err)
			}
			z.checkFenced(t, olderErr)
			if guarded {
				if err != nil {
					t.Fatalf("the guarded newer instance's Write: %v, want nil after claiming the transactional id afresh", err)
				}
				if st := newer.Stats(); st.Retries != 1 {
					t.Fatalf("the guarded newer instance retried %d transactions, want 1: the one the older instance's recovery aborted", st.Retries)
				}
			} else {
				if !errors.Is(err, kafkasink.ErrFenced) || !errors.Is(err, kerr.InvalidTxnState) {
					t.Fatalf("the unguarded newer instance's Write: %v, want ErrFenced from the broker's INVALID_TXN_STATE answer to its commit", err)
				}
				newer = newSink(t, brokers, name, zombieConfig(name, brokers))
				write(t, newer, b)
			}
			d := sinktest.Inserts("public", "orders", 400, 16, 5)
			write(t, newer, d)
			sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, name+".public.orders"), append(append(z.committed, b...), d...))
		})
	}
}

// zombie is an older instance whose last commit the broker applied but
// whose answer was lost, with its recovery's producer id re-initialisation
// held back until release is closed.
type zombie struct {
	sink      *kafkasink.Sink
	committed []kafkasink.Event // what it committed, the last commit included
	release   chan struct{}
	err       chan error // its Write's result, once released
}

// startZombie makes a zombie of sink id name on brokers.
func startZombie(t *testing.T, brokers []string, name string) *zombie {
	t.Helper()
	var armed atomic.Bool
	z := &zombie{release: make(chan struct{}), err: make(chan error, 1)}
	proxies := startProxies(t, brokers, func(r faultproxy.Request) faultproxy.Fault {
		if !armed.Load() {
			return faultproxy.Fault{}
		}
		switch kmsg.Key(r.Key) {
		case kmsg.EndTxn:
			return faultproxy.Fault{Kind: faultproxy.DropResponse}
		case kmsg.InitProducerID:
			<-z.release
		}
		return faultproxy.Fault{}
	})
	t.Cleanup(func() {
		select {
		case <-z.release:
		default:
			close(z.release) // a failed test's held request: let the proxies close
		}
	})
	z.sink = newSink(t, proxies.Addrs(), name, zombieConfig(name, proxies.Addrs()))
	a := sinktest.Inserts("public", "orders", 100, 1, 5)
	write(t, z.sink, a)
	armed.Store(true)
	zb := sinktest.Inserts("public", "orders", 200, 6, 5)
	z.committed = append(a, zb...)
	go func() { z.err <- z.sink.Write(context.Background(), kafkasink.Batch{Events: zb}) }()
	for deadline := time.Now().Add(30 * time.Second); proxies.Counts()[faultproxy.Count{API: "EndTxn", Kind: faultproxy.DropResponse}] == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the older instance's commit never reached the broker (faults: %v)", proxies.Applied())
		}
	}
	return z
}

// checkFenced checks the zombie's Write error, err, and that it stays
// fenced.
func (z *zombie) checkFenced(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, kafkasink.ErrFenced) || !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("the older instance's Write: %v, want ErrFenced from the broker's PRODUCER_FENCED answer to its recovery", err)
	}
	if err := z.sink.Write(ctxT(t), kafkasink.Batch{Events: sinktest.Inserts("public", "orders", 350, 900, 2)}); !errors.Is(err, kafkasink.ErrFenced) {
		t.Fatalf("the older instance's next Write: %v, want ErrFenced", err)
	}
}

// zombieConfig is the configuration of every instance of the zombie tests.
func zombieConfig(name string, brokers []string) func(*kafkasink.Config) {
	return func(c *kafkasink.Config) {
		c.Brokers = brokers
		c.CheckpointTopic = name + ".checkpoints"
		c.Topics = kafkasink.Topics{Prefix: name, Partitions: 3, ReplicationFactor: 3}
		c.TransactionTimeout = 10 * time.Second
	}
}
