package kafkasinktest_test

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// NewCluster's options: broker count, seed topics, the default partition
// count of topics the sink creates.
func TestNewClusterOptions(t *testing.T) {
	t.Parallel()
	c := kafkasinktest.NewCluster(t, kafkasinktest.Brokers(2), kafkasinktest.Topic("seeded", 5), kafkasinktest.Partitions(4))
	s, cfg := newSink(t, c, "options")
	writeAgain(t, s, orders(100, 1, 3))

	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).Metadata(context.Background(), "seeded", ordersTopic)
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Brokers) != 2 {
		t.Errorf("%d brokers, want 2", len(md.Brokers))
	}
	for topic, want := range map[string]int{"seeded": 5, ordersTopic: 4} {
		if got := len(md.Topics[topic].Partitions); got != want {
			t.Errorf("%s has %d partitions, want %d", topic, got, want)
		}
	}
	if len(c.Brokers()) != 2 || c.Kfake() == nil {
		t.Errorf("Brokers() %v, Kfake() %v", c.Brokers(), c.Kfake())
	}
}
