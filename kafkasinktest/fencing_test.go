package kafkasinktest_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kafkasink/kafkasink/internal/sinktest"
	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// An old instance re-initialises its producer id, as its recovery does,
// with an epoch the broker gave it in a response, which no request carried
// before a newer instance claimed the transactional id, while the newer
// one has a transaction open. The broker refuses the old one, but aborts
// the newer one's transaction first; the newer one recovers by
// re-initialising at its own epoch, and goes on. The real broker does
// this, and the fake cluster does it as the real one (kfake alone would
// accept the old epoch and fence the newer instance for good).
func TestFenceLikeKafkaOldReinitialisationAbortsNewerTransaction(t *testing.T) {
	t.Parallel()
	for _, tv := range []struct {
		name     string
		versions *kversion.Versions
	}{{"tv2", kversion.Stable()}, {"tv1", sinktest.TransactionVersion1()}} {
		t.Run("fake/"+tv.name, func(t *testing.T) {
			t.Parallel()
			olderReinitialisesAfterNewerClaim(t, kafkasinktest.NewCluster(t).Brokers(), "fencing-response-epoch", tv.versions)
		})
		t.Run("real/"+tv.name, func(t *testing.T) {
			t.Parallel()
			olderReinitialisesAfterNewerClaim(t, sinktest.RealBrokers(t, sinktest.EnvBrokers), sinktest.UniqueName(t), tv.versions)
		})
	}
}

// olderReinitialisesAfterNewerClaim runs the scenario on brokers, the newer
// instance's client capped at versions.
func olderReinitialisesAfterNewerClaim(t *testing.T, brokers []string, txnID string, versions *kversion.Versions) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	seeds := kgo.SeedBrokers(brokers...)
	old, err := kgo.NewClient(seeds)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if _, err := kadm.NewClient(old).CreateTopic(ctx, 1, 1, nil, txnID); err != nil {
		t.Fatal(err)
	}
	// initPID sends the old instance's InitProducerID, retried while the
	// broker answers CONCURRENT_TRANSACTIONS, as kgo retries it.
	initPID := func(id int64, epoch int16) *kmsg.InitProducerIDResponse {
		t.Helper()
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = kmsg.StringPtr(txnID)
		req.TransactionTimeoutMillis = 10000
		req.ProducerID, req.ProducerEpoch = id, epoch
		for {
			resp, err := req.RequestWith(ctx, old)
			if err != nil {
				t.Fatal(err)
			}
			if resp.ErrorCode != kerr.ConcurrentTransactions.Code {
				return resp
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	first := initPID(-1, -1) // the old instance's claim
	if err := kerr.ErrorForCode(first.ErrorCode); err != nil {
		t.Fatalf("claim: %v", err)
	}
	// Its recovery: the broker answers with the next epoch, which no
	// request carries before the newer instance claims the id.
	bumped := initPID(first.ProducerID, first.ProducerEpoch)
	if err := kerr.ErrorForCode(bumped.ErrorCode); err != nil {
		t.Fatalf("re-initialisation: %v", err)
	}

	newer, err := kgo.NewClient(seeds, kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(txnID), kgo.MaxVersions(versions))
	if err != nil {
		t.Fatal(err)
	}
	defer newer.Close()
	// A first transaction: kgo opts in to transaction version 2 once it
	// knows the broker's features.
	if _, _, err := newer.ProducerID(ctx); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"committed", "aborted"} {
		if err := newer.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := newer.ProduceSync(ctx, kgo.StringRecord(v)).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if v == "committed" {
			if err := newer.EndTransaction(ctx, kgo.TryCommit); err != nil {
				t.Fatal(err)
			}
		}
	}

	stale := initPID(bumped.ProducerID, bumped.ProducerEpoch)
	if err := kerr.ErrorForCode(stale.ErrorCode); !errors.Is(err, kerr.ProducerFenced) {
		t.Fatalf("the old instance's re-initialisation at epoch %d answered %v, want PRODUCER_FENCED", bumped.ProducerEpoch, err)
	}
	if err := newer.ProduceSync(ctx, kgo.StringRecord("refused")).FirstErr(); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("the newer instance's produce in its aborted transaction: %v, want INVALID_PRODUCER_EPOCH", err)
	}
	// The newer instance's recovery (KIP-588) re-initialises at its epoch.
	if err := newer.AbortBufferedRecords(ctx); err != nil {
		t.Fatal(err)
	}
	if err := newer.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatalf("the newer instance's recovery: %v", err)
	}
	if err := newer.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := newer.ProduceSync(ctx, kgo.StringRecord("committed")).FirstErr(); err != nil {
		t.Fatalf("the newer instance's produce after its recovery: %v", err)
	}
	if err := newer.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("the newer instance's commit after its recovery: %v", err)
	}
	recs, err := kafkasinktest.FetchCommitted(ctx, brokers, txnID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, string(r.Value))
	}
	if want := []string{"committed", "committed"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed sees %q, want %q: the first transaction's record and the recovered one's", got, want)
	}
}
