package txnend

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestWritten: the first record of each topic is kept, in the order the
// topics came, also when a topic comes back after another.
func TestWritten(t *testing.T) {
	t.Parallel()
	var w Written
	for _, topic := range []string{"a", "a", "b", "a", "c", "b"} {
		w.Sent(&kgo.Record{Topic: topic})
	}
	if got := strings.Join(w.Topics(), ","); got != "a,b,c" {
		t.Errorf("Topics() = %s, want a,b,c", got)
	}
}

// TestAwaitLoaded: a partition the producer has loaded passes at once,
// and is remembered; one it has not loaded fails when ctx ends, naming
// the partition; a new client forgets what was loaded.
func TestAwaitLoaded(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("txnend"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	r := &kgo.Record{Topic: "t", Value: []byte("v")}
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var (
		p Producer
		w Written
	)
	w.Sent(r)
	if err := p.AwaitLoaded(ctx, cl, &w); err != nil {
		t.Fatalf("AwaitLoaded of a produced partition: %v", err)
	}
	if !p.loaded["t"] {
		t.Error("the loaded topic is not remembered")
	}
	if err := p.Abort(ctx, cl, true); err != nil {
		t.Fatalf("Abort: %v", err)
	}

	short, cancelShort := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancelShort()
	w.Sent(&kgo.Record{Topic: "never-produced", Partition: 0})
	if err := p.AwaitLoaded(short, cl, &w); err == nil || !strings.Contains(err.Error(), "never-produced[0], written in this transaction, is not among the partitions") {
		t.Errorf("AwaitLoaded of a partition never loaded: %v, want an error naming it", err)
	}
	p.NewClient()
	if p.loaded != nil || p.commitMovesEpoch {
		t.Errorf("NewClient left %+v, want the zero Producer", p)
	}
}
