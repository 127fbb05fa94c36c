package sinktest

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// Client returns a client on brokers with opts, closed at the end of the
// test.
func Client(t testing.TB, brokers []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// DeleteTopics is kafkasinktest.DeleteTopics.
func DeleteTopics(ctx context.Context, brokers []string, prefix string) error {
	return kafkasinktest.DeleteTopics(ctx, brokers, prefix)
}

// TransactionVersion1 caps a client at the requests of transaction version
// 1 (before KIP-890 part 2): the producer adds partitions with
// AddPartitionsToTxn and keeps its epoch across transactions. A broker
// that speaks version 2 speaks 1 to such a client.
func TransactionVersion1() *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(kmsg.Produce.Int16(), 11)
	v.SetMaxKeyVersion(kmsg.AddPartitionsToTxn.Int16(), 3)
	v.SetMaxKeyVersion(kmsg.EndTxn.Int16(), 4)
	return v
}
