package pgcdc

import (
	"errors"
	"strings"
	"testing"

	"github.com/kafkasink/kafkasink/outbox"
)

func TestOutboxConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		o    Outbox
		sig  string
		want string
	}{
		{"no topics", Outbox{}, "", "Config.Outbox.Topics is empty"},
		{"bad topic", Outbox{Topics: []string{"a b"}}, "", `Config.Outbox.Topics entry "a b"`},
		{"bad prefix entry", Outbox{Topics: []string{"a/*"}}, "", `Config.Outbox.Topics entry "a/*"`},
		{"heartbeat prefix", Outbox{Prefix: heartbeatPrefix, Topics: []string{"t"}}, "", "heartbeats' prefix"},
		{"signal prefix", Outbox{Topics: []string{"t"}}, outbox.DefaultPrefix, "also Config.SignalPrefix"},
		{"negative max", Outbox{Topics: []string{"t"}, MaxBytes: -1}, "", "Config.Outbox.MaxBytes -1 is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := validConfig()
			cfg.Outbox, cfg.SignalPrefix = &tc.o, tc.sig
			if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate: %v, want %q", err, tc.want)
			}
		})
	}
	cfg := validConfig()
	cfg.Outbox = &Outbox{Topics: []string{"*", "orders.events", "billing.*"}}
	if err := cfg.Validate(); err != nil {
		t.Errorf("a valid Outbox: %v", err)
	}
}

// TestOutboxRecord: what Run makes of an outbox message's content.
func TestOutboxRecord(t *testing.T) {
	t.Parallel()
	o := &Outbox{Topics: []string{"orders.events", "billing.*"}}
	payload := func(topic string) []byte {
		p, err := outbox.Marshal(outbox.Message{Topic: topic, Key: []byte("k"), Value: []byte("v"), Headers: []outbox.Header{{Name: "h", Value: []byte("1")}}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, topic := range []string{"orders.events", "billing.x", "billing."} {
		r := o.record(payload(topic))
		if r.Refused != nil || r.Topic != topic || string(r.Key) != "k" || string(r.Value) != "v" || len(r.Headers) != 1 || r.Headers[0].Key != "h" {
			t.Errorf("record for %s: %+v", topic, r)
		}
	}
	for _, topic := range []string{"orders.events2", "orders", "billin"} {
		if r := o.record(payload(topic)); r.Refused == nil || !strings.Contains(r.Refused.Error(), "allow-list") || string(r.Value) != "v" {
			t.Errorf("record for %s, outside the allow-list: %+v", topic, r)
		}
	}
	bad := []byte(`{"v":1}`)
	if r := o.record(bad); !errors.Is(r.Refused, outbox.ErrNoTopic) || string(r.Value) != string(bad) {
		t.Errorf("record for a payload without a topic: %+v, want it refused with the payload as its value", r)
	}
	garbage := []byte("not json")
	if r := o.record(garbage); !errors.Is(r.Refused, outbox.ErrBadPayload) || string(r.Value) != "not json" {
		t.Errorf("record for garbage: %+v", r)
	}
}
