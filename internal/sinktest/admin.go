package sinktest

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
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

// DeleteTopics deletes every topic whose name starts with prefix, so a
// long-lived shared broker does not pile up the topics of passed tests.
func DeleteTopics(ctx context.Context, brokers []string, prefix string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	all, err := adm.ListTopics(ctx)
	if err != nil {
		return err
	}
	var mine []string
	for _, topic := range all.Names() {
		if strings.HasPrefix(topic, prefix) {
			mine = append(mine, topic)
		}
	}
	if len(mine) == 0 {
		return nil
	}
	_, err = adm.DeleteTopics(ctx, mine...)
	return err
}
