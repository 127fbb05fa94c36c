package topicadmin

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCacheDeleted: a topic deleted under the sink is found by the index
// of its first record, with an error wrapping Missing, which every later
// Get of the topic returns; records whose topics all exist find none.
func TestCacheDeleted(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	missing := errors.New("topic missing")
	cache := NewCache(Settings{MustExist: true, Missing: missing})
	for _, topic := range []string{"a", "b"} {
		if _, err := cache.Get(ctx, cl, topic); err != nil {
			t.Fatal(err)
		}
	}
	records := []*kgo.Record{{Topic: "a"}, {Topic: "b"}, {Topic: "b"}}
	if j, err := cache.Deleted(ctx, cl, records); j != -1 || err != nil {
		t.Fatalf("Deleted with every topic there = %d, %v; want -1, nil", j, err)
	}
	if _, err := kadm.NewClient(cl).DeleteTopics(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	j, err := cache.Deleted(ctx, cl, records)
	if j != 1 || !errors.Is(err, missing) {
		t.Fatalf("Deleted after b was deleted = %d, %v; want 1 and an error wrapping Missing", j, err)
	}
	if _, gerr := cache.Get(ctx, cl, "b"); gerr != err {
		t.Errorf("Get of the deleted topic: %v, want Deleted's error %v", gerr, err)
	}
	if _, known := cache.Peek("b"); known {
		t.Error("the deleted topic's info is still known")
	}
}

// TestCacheRefresh: Refresh reads each topic of the records once, keeps
// what it read, and reports a max.message.bytes lowered since.
func TestCacheRefresh(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cache := NewCache(Settings{MustExist: true})
	before := map[string]Info{}
	for _, topic := range []string{"a", "b"} {
		if before[topic], err = cache.Get(ctx, cl, topic); err != nil {
			t.Fatal(err)
		}
	}
	lower := "10000"
	if _, err := kadm.NewClient(cl).AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: &lower}}, "a"); err != nil {
		t.Fatal(err)
	}
	type report struct {
		topic    string
		now, was int
	}
	var got []report
	err = cache.Refresh(ctx, cl, []*kgo.Record{{Topic: "a"}, {Topic: "b"}, {Topic: "a"}}, func(topic string, now, was int) {
		got = append(got, report{topic, now, was})
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := (report{"a", 10000, before["a"].MaxMessageBytes}); len(got) != 1 || got[0] != want {
		t.Errorf("lowered reported %v, want [%v]", got, want)
	}
	if info, _ := cache.Peek("a"); info.MaxMessageBytes != 10000 {
		t.Errorf("a's max.message.bytes after Refresh: %d, want 10000", info.MaxMessageBytes)
	}
	if err := cache.Refresh(ctx, cl, []*kgo.Record{{Topic: "gone"}}, func(string, int, int) {}); err == nil {
		t.Error("Refresh of a topic that does not exist: no error")
	}
}
