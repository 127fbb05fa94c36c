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
