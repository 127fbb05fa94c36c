package kafkasink

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ConnOptions returns the options of the Kafka clients New makes that do
// not produce: the brokers, the client id, TLS and SASL, and the
// ClientOptions that are not producer options. A tool that must see the
// cluster as the sink sees it, with the sink's principal (a pre-flight
// check of its rights and topics), connects with them. It returns the
// problems of cfg as New does, as one *ConfigError.
func (c Config) ConnOptions() ([]kgo.Opt, error) {
	c = c.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	s := &Sink{cfg: c, log: c.Logger.With("sink", c.SinkID)}
	return s.connOptions(), nil
}

// TopicFor returns the topic a Sink made with cfg writes the changes of
// schema.table to (Topics: Route, Routes, Template or Prefix), so that a
// tool that checks the topics before the sink runs (kafkasink check)
// names the same ones. It returns the problems of cfg as New does, as
// one *ConfigError, and an invalid topic name as the sink would reject
// the table's events.
func (c Config) TopicFor(schema, table string) (string, error) {
	c = c.withDefaults()
	if err := c.validate(); err != nil {
		return "", err
	}
	topic, _, err := newRouter(&c).Route(schema, table)
	if err != nil {
		return "", fmt.Errorf("kafkasink: %w", err)
	}
	return topic, nil
}
