package kafkasink_test

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkasink/kafkasink"
)

// TestConnOptions: the options reach the configured brokers, and a
// configuration New refuses is refused the same way.
func TestConnOptions(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	opts, err := kafkasink.Config{Brokers: c.ListenAddrs(), SinkID: "conn"}.ConnOptions()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(context.Background(), cl); err != nil {
		t.Fatalf("metadata through ConnOptions: %v", err)
	}
	_, err = kafkasink.Config{SinkID: "conn"}.ConnOptions()
	var ce *kafkasink.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("a config without brokers: got %v, want a *ConfigError", err)
	}
}

// TestTopicFor: the topic of each kind of route, as the sink writes to
// it, and the refusals.
func TestTopicFor(t *testing.T) {
	for _, c := range []struct {
		topics kafkasink.Topics
		want   string // "" for an error
	}{
		{kafkasink.Topics{}, "kafkasink.public.orders"},
		{kafkasink.Topics{Prefix: "shop"}, "shop.public.orders"},
		{kafkasink.Topics{Template: "cdc-{table}"}, "cdc-orders"},
		{kafkasink.Topics{Prefix: "shop", Routes: map[string]string{"public.orders": "orders"}}, "orders"},
		{kafkasink.Topics{Template: "bad/{table}"}, ""},
	} {
		got, err := kafkasink.Config{Brokers: []string{"b:9092"}, SinkID: "s", Topics: c.topics}.TopicFor("public", "orders")
		if got != c.want || (err == nil) != (c.want != "") {
			t.Errorf("%+v: %q, %v; want %q", c.topics, got, err, c.want)
		}
	}
}
