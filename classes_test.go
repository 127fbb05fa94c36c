package kafkasink_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// kafkaErrors is every error code kerr knows, UNKNOWN_SERVER_ERROR first.
func kafkaErrors() []*kerr.Error {
	var out []*kerr.Error
	for code := int16(-1); code < 200; code++ {
		if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok && code != 0 && (e.Code == code) {
			out = append(out, e)
		}
	}
	return out
}

// sinkRequests are the requests the sink sends, with whether their error
// code is a top-level one.
var sinkRequests = []struct {
	key      kmsg.Key
	topLevel bool
}{
	{kmsg.Produce, false}, {kmsg.AddPartitionsToTxn, false}, {kmsg.EndTxn, true}, {kmsg.InitProducerID, true},
	{kmsg.FindCoordinator, false}, {kmsg.Metadata, false}, {kmsg.ListOffsets, false}, {kmsg.Fetch, false},
	{kmsg.DescribeConfigs, false}, {kmsg.CreateTopics, false},
}

// Every error New and Write return is in exactly one class, whatever
// Kafka error code answers whichever request the sink sends (issue 8,
// defect 3). Each code answers each request twice, on a fresh cluster,
// during New and a first Write; a second Write after the fault is gone
// must then succeed unless the first said fatal.
func TestEveryKafkaErrorIsInOneClass(t *testing.T) {
	skipInShort(t, "every Kafka error code on every request, about 1,400 fake clusters")
	t.Parallel()
	codes := kafkaErrors()
	if len(codes) < 100 {
		t.Fatalf("kerr knows %d codes; expected well over 100", len(codes))
	}
	for _, req := range sinkRequests {
		t.Run(req.key.Name(), func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			counts := map[string]int{}
			for _, code := range codes {
				got := oneFault(t, req.key, req.topLevel, code)
				if testing.Verbose() {
					t.Logf("%s: %v", code.Message, got)
				}
				mu.Lock()
				for _, c := range got {
					counts[c]++
				}
				mu.Unlock()
			}
			t.Logf("%s: %d codes, classes of the errors returned: %v", req.key.Name(), len(codes), counts)
		})
	}
}

// oneFault runs New and Write against a cluster whose key requests answer
// code twice, and returns the class of every error they returned.
func oneFault(t *testing.T, key kmsg.Key, topLevel bool, code *kerr.Error) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := c.ListenAddrs()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := kafkasink.Config{Brokers: brokers, SinkID: "classes", TransactionTimeout: 3 * time.Second}
	// A first instance leaves a checkpoint, so that New reads one back
	// (ListOffsets, Fetch) under the fault.
	first, err := kafkasink.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Write(ctx, kafkasink.Batch{Events: sinktest.Inserts("public", "orders", 50, 1, 3)}); err != nil {
		t.Fatal(err)
	}
	first.Close(ctx)
	h := c.Fault(kfake.Fault{Keys: []kmsg.Key{key}, Err: code, TopLevel: topLevel, Count: 2})
	defer h.Remove()

	var classes []string
	check := func(what string, err error) bool {
		if err == nil {
			return true
		}
		class := errorClass(err)
		classes = append(classes, class)
		if class == "none" || len(class) > len("retryable") {
			t.Errorf("%s answering %s: %s returned %v: in %s, want exactly one class", code.Message, key.Name(), what, err, class)
		}
		return class != "fatal"
	}
	s, err := kafkasink.New(ctx, cfg)
	if err != nil {
		check("New", err)
		return classes
	}
	defer s.Close(context.Background())
	b := kafkasink.Batch{Events: sinktest.Inserts("public", "orders", 100, 4, 3)}
	if !check("Write", s.Write(ctx, b)) {
		return classes
	}
	h.Remove()
	for attempt := 0; ; attempt++ {
		err := s.Write(ctx, b)
		if err == nil || !check("Write after the fault", err) {
			break
		}
		if attempt == 5 {
			t.Errorf("%s answering %s: Write still failing after the fault was removed: %v", code.Message, key.Name(), err)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if ctx.Err() != nil {
		t.Errorf("%s answering %s: New and Write did not finish within 30s", code.Message, key.Name())
	}
	return classes
}

// INVALID_TXN_STATE fences an instance only when it answers a commit: the
// transaction ended at the broker, as an older instance's re-initialisation
// does on Kafka 4.4 (TestZombieRecoveryDuringNewerTransaction). Answering
// a produce (a partition not in the transaction, after AddPartitionsToTxn
// failed) it is no such evidence: the Write fails as unexpected, not as
// fenced, and a guarded sink does not claim its transactional id afresh.
// Either way franz-go failed the producer id for good, and a new instance
// goes on.
func TestInvalidTxnStateFencesOnlyFromACommit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		key       kmsg.Key
		topLevel  bool
		guarded   bool
		wantFence bool
	}{
		{"produce", kmsg.Produce, false, false, false},
		{"produce, guarded", kmsg.Produce, false, true, false},
		{"commit", kmsg.EndTxn, true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, brokers := sinktest.Cluster(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cfg := kafkasink.Config{Brokers: brokers, SinkID: "txnstate"}
			if tc.guarded {
				cfg.Guard = func() error { return nil }
			}
			s, err := kafkasink.New(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(context.Background())
			h := c.Fault(kfake.Fault{Keys: []kmsg.Key{tc.key}, Err: kerr.InvalidTxnState, TopLevel: tc.topLevel, Count: 1})
			b := kafkasink.Batch{Events: sinktest.Inserts("public", "orders", 100, 4, 3)}
			err = s.Write(ctx, b)
			h.Remove()
			if !errors.Is(err, kerr.InvalidTxnState) || !kafkasink.IsFatal(err) {
				t.Fatalf("Write: %v, want a fatal error from INVALID_TXN_STATE", err)
			}
			if errors.Is(err, kafkasink.ErrFenced) != tc.wantFence {
				t.Fatalf("Write: %v: fenced %t, want %t", err, !tc.wantFence, tc.wantFence)
			}
			next, err := kafkasink.New(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer next.Close(context.Background())
			if err := next.Write(ctx, b); err != nil {
				t.Fatalf("a new instance's Write: %v", err)
			}
		})
	}
}
