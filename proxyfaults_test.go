package kafkasink_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/faultproxy"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// TestRetryAfterUnclearCommitIsAccepted is the sequence the real-broker
// checker (TestRealBrokerFaultsExactlyOnce) found, made exact with the
// fault proxy on the fake cluster: the first part of a two-part batch
// commits but its answer is lost, and reading the checkpoint back fails
// (ListOffsets cut), so Write fails retryably. The caller writes the same
// batch again, as it must: that Write recovers, learns the first part is
// committed, and must deliver the rest, not refuse the batch for starting
// past the failed one, and not write the first part twice.
func TestRetryAfterUnclearCommitIsAccepted(t *testing.T) {
	t.Parallel()
	_, brokers := sinktest.Cluster(t)
	var faulty atomic.Bool
	proxies := startProxies(t, brokers, func(r faultproxy.Request) faultproxy.Fault {
		if !faulty.Load() {
			return faultproxy.Fault{}
		}
		switch kmsg.Key(r.Key) {
		case kmsg.EndTxn:
			return faultproxy.Fault{Kind: faultproxy.DropResponse}
		case kmsg.ListOffsets:
			return faultproxy.Fault{Kind: faultproxy.CutBefore}
		}
		return faultproxy.Fault{}
	})
	s := newSink(t, proxies.Addrs(), "unclear-commit", func(c *kafkasink.Config) {
		c.MaxTransactionRecords = 2
		c.TransactionTimeout = 3 * time.Second
	})
	batch := kafkasink.Batch{Events: sinktest.Inserts("public", "t", 100, 1, 4)}

	faulty.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := s.Write(ctx, batch)
	faulty.Store(false)
	if err == nil {
		t.Fatalf("the Write under faults returned nil (faults applied: %v)", proxies.Applied())
	}
	t.Logf("the Write under faults: %v (retryable=%t)", err, kafkasink.IsRetryable(err))
	if !kafkasink.IsRetryable(err) {
		t.Fatalf("the Write under faults returned an error that is not retryable: %v", err)
	}
	counts := proxies.Counts()
	if counts[faultproxy.Count{API: "EndTxn", Kind: faultproxy.DropResponse}] == 0 || counts[faultproxy.Count{API: "ListOffsets", Kind: faultproxy.CutBefore}] == 0 {
		t.Fatalf("the faults did not happen as planned: %v", proxies.Applied())
	}
	if err := proxies.Err(); err != nil {
		t.Fatal(err)
	}

	if err := s.Write(ctx, batch); err != nil {
		t.Fatalf("writing the same batch again, without faults: %v (retryable=%t fatal=%t)", err, kafkasink.IsRetryable(err), kafkasink.IsFatal(err))
	}
	if got, want := s.Checkpoint().Position, batch.Events[3].Position; got != want {
		t.Fatalf("checkpoint %s, want %s", got, want)
	}
	sinktest.CheckExactlyOnce(t, sinktest.ReadCommitted(t, brokers, "kafkasink.public.t"), batch.Events)
}
