package kafkasink

import "github.com/twmb/franz-go/pkg/kgo"

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
