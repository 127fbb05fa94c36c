package checkpointlog

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestWrite: records written in a transaction, and without one, are
// there for a read_committed reader once Write returns, in order.
func TestWrite(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "ck"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := Partition{Topic: "ck"}
	for _, tc := range []struct {
		key           string
		transactional bool
	}{{"txn", true}, {"plain", false}} {
		opts := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
		if tc.transactional {
			opts = append(opts, kgo.TransactionalID("checkpointlog-write"))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		from, err := p.End(ctx, kadm.NewClient(cl))
		if err != nil {
			t.Fatal(err)
		}
		if err := Write(ctx, cl, tc.transactional, 5*time.Second,
			&kgo.Record{Topic: "ck", Key: []byte(tc.key)}, &kgo.Record{Topic: "ck", Key: []byte(tc.key), Value: []byte("v")}); err != nil {
			t.Fatalf("Write (transactional %t): %v", tc.transactional, err)
		}
		end, err := p.End(ctx, kadm.NewClient(cl))
		if err != nil {
			t.Fatal(err)
		}
		var values []string
		if _, _, err := p.scan(ctx, []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, tc.key, from, end, func(error) bool { return true }, func(r *kgo.Record) error {
			values = append(values, string(r.Value))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(values) != 2 || values[0] != "" || values[1] != "v" {
			t.Errorf("transactional %t: read back %q, want the tombstone and then v", tc.transactional, values)
		}
	}
}
