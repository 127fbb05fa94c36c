package kafkasink_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/faultproxy"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// TestOlderRecoveryDisturbsNewerRealBroker is the second finding of issue
// 30's independent checker on the real broker. An older instance lost its
// commit's answer; its recovery re-initialises its producer id at its
// epoch (KIP-360, transaction version 1), a request sent while its
// Config.Guard still consented, and reaches the broker after a newer
// instance claimed the transactional id, while the newer one has a
// transaction open. Kafka aborts the newer instance's transaction before
// it answers the older one PRODUCER_FENCED, and the newer instance's next
// produce is refused INVALID_PRODUCER_EPOCH or PRODUCER_FENCED, as after a
// newer claim. The newer instance, its guard consenting, must go on,
// exactly once: by re-initialising its producer id where the client can,
// by claiming the id afresh where it cannot.
func TestOlderRecoveryDisturbsNewerRealBroker(t *testing.T) {
	t.Parallel()
	brokers, name := onRealBrokers(t, sinktest.EnvBrokers)
	topic := name + ".public.orders"

	// The older instance talks through proxies: once armed, its commit's
	// answer is dropped after the broker applied it, and its recovery's
	// producer id re-initialisation is held until released.
	var armed atomic.Bool
	var holding sync.Once
	held, release := make(chan struct{}), make(chan struct{})
	proxies := startProxies(t, brokers, func(r faultproxy.Request) faultproxy.Fault {
		if !armed.Load() {
			return faultproxy.Fault{}
		}
		switch kmsg.Key(r.Key) {
		case kmsg.EndTxn:
			return faultproxy.Fault{Kind: faultproxy.DropResponse}
		case kmsg.InitProducerID:
			holding.Do(func() { close(held) })
			<-release
		}
		return faultproxy.Fault{}
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release) // let the proxies close
		}
	})
	enc := &pausingEncoder{at: 150, paused: make(chan struct{}), resume: make(chan struct{})}
	// The lease's guard: the older instance loses its turn when the newer
	// one starts.
	var newerStarted atomic.Bool
	config := func(brokers []string, guard func() error) func(*kafkasink.Config) {
		return func(c *kafkasink.Config) {
			c.Brokers = brokers
			c.Guard = guard
			c.CheckpointTopic = name + ".checkpoints"
			c.Topics.Prefix = name
			c.Encoder = enc
			c.ClientOptions = []kgo.Opt{kgo.MaxVersions(sinktest.TransactionVersion1())}
		}
	}
	a := sinktest.Inserts("public", "orders", 100, 1, 5)
	older := newSink(t, proxies.Addrs(), name, config(proxies.Addrs(), func() error {
		if newerStarted.Load() {
			return errors.New("the lease moved to the newer instance")
		}
		return nil
	}))
	write(t, older, a)
	armed.Store(true)
	zb := sinktest.Inserts("public", "orders", 150, 900, 2)
	olderErr := make(chan error, 1)
	go func() { olderErr <- older.Write(context.Background(), kafkasink.Batch{Events: zb}) }()
	select {
	case <-held:
	case err := <-olderErr:
		t.Fatalf("the older instance's Write returned before its recovery re-initialised its producer id: %v (faults: %v)", err, proxies.Applied())
	case <-time.After(30 * time.Second):
		t.Fatalf("the older instance's recovery never re-initialised its producer id (faults: %v)", proxies.Applied())
	}

	newerStarted.Store(true)
	aborts := &hookLog{}
	newer := newSink(t, brokers, name, config(brokers, func() error { return nil }), func(c *kafkasink.Config) {
		c.Hooks = []kafkasink.Hook{aborts}
	})
	b := sinktest.Inserts("public", "orders", 200, 100, 200)
	newerErr := make(chan error, 1)
	go func() { newerErr <- newer.Write(context.Background(), kafkasink.Batch{Events: b}) }()
	select {
	case <-enc.paused: // the newer instance's transaction is open, records sent
	case err := <-newerErr:
		t.Fatalf("the newer instance's Write returned before its encoder paused: %v", err)
	}
	time.Sleep(500 * time.Millisecond) // the sent records reach the broker

	close(release)
	if err := <-olderErr; !errors.Is(err, kafkasink.ErrFenced) {
		t.Fatalf("the older instance's Write: %v, want ErrFenced", err)
	}
	close(enc.resume)
	if err := <-newerErr; err != nil {
		t.Fatalf("the newer instance's Write, whose transaction the older one's recovery aborted: %v, want it to recover and deliver", err)
	}
	aborts.mu.Lock()
	disturbed := len(aborts.aborted)
	aborts.mu.Unlock()
	if disturbed == 0 {
		t.Fatal("the newer instance's Write aborted no transaction: the older one's recovery did not reach it")
	}
	c := sinktest.Inserts("public", "orders", 300, 400, 5)
	write(t, newer, c)
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, topic), append(append(append(a, zb...), b...), c...))
}

// pausingEncoder is JSONEncoder that, the first time it encodes the event
// of index at, says so on paused and waits for resume.
type pausingEncoder struct {
	kafkasink.JSONEncoder
	at             uint64
	once           sync.Once
	paused, resume chan struct{}
}

func (p *pausingEncoder) Encode(dst []byte, e *kafkasink.Event) ([]byte, error) {
	if e.Position.Index == p.at {
		p.once.Do(func() {
			close(p.paused)
			<-p.resume
		})
	}
	return p.JSONEncoder.Encode(dst, e)
}
