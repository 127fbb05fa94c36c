package pgcdc

import (
	"fmt"
	"strings"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/outbox"
)

// Outbox delivers the messages applications emit with package outbox
// (pg_logical_emit_message(true, Prefix, payload), docs/outbox.md): each
// goes to its own topic, key, value and headers, in its place among its
// transaction's row changes and in the same Kafka transaction as them
// when they fit in one batch and one Kafka transaction
// (Config.BatchMaxEvents, BatchMaxBytes; the sink's
// MaxTransactionRecords and MaxTransactionBytes), exactly once with the
// sink's ExactlyOnce mode.
//
// A message for a topic outside Topics, or whose payload breaks the
// format, is rejected by the sink as unroutable: with the sink's
// DeadLetterTopic it is dead-lettered there with its content (the
// message's key, value and headers; for a payload that does not parse,
// the payload as the value), without one the Write fails and Run stops
// (the message is not lost: it is sent again when Run starts anew). A
// message emitted non-transactionally (pg_logical_emit_message(false,
// ...)) has no commit to deliver with: Run logs it at Error with its
// content and goes on.
type Outbox struct {
	// Prefix is the messages' prefix; "" means outbox.DefaultPrefix
	// ("kafkasink.outbox"). It must differ from Config.SignalPrefix and
	// "kafkasink.heartbeat".
	Prefix string
	// Topics is the allow-list of topics messages may go to; required.
	// An entry is a topic name, or a prefix ending in "*" ("orders.*");
	// "*" alone allows any topic but the sink's own.
	Topics []string
	// MaxBytes is the largest size of key, value and headers of a
	// message, as outbox.Emitter.MaxBytes; 0 means
	// outbox.DefaultMaxBytes. A larger message is dead-lettered.
	MaxBytes int
}

// OutboxSchema and OutboxTable are the Schema and Table of the events Run
// makes of outbox messages: the sink's kafkasink.table header and dead
// letters name them so.
const (
	OutboxSchema = "kafkasink"
	OutboxTable  = "outbox"
)

func (o *Outbox) prefix() string {
	if o.Prefix == "" {
		return outbox.DefaultPrefix
	}
	return o.Prefix
}

// problems lists what is wrong with o, in the words of Config's fields.
func (o *Outbox) problems(signalPrefix string) []string {
	var out []string
	switch p := o.prefix(); p {
	case heartbeatPrefix:
		out = append(out, fmt.Sprintf("Config.Outbox.Prefix %q is the heartbeats' prefix: choose another, such as %q", p, outbox.DefaultPrefix))
	case signalPrefix:
		out = append(out, fmt.Sprintf("Config.Outbox.Prefix %q is also Config.SignalPrefix: give them different prefixes", p))
	}
	if len(o.Topics) == 0 {
		out = append(out, `Config.Outbox.Topics is empty: list the topics outbox messages may go to (an entry ending in "*" is a prefix; "*" allows any)`)
	}
	for _, t := range o.Topics {
		name, _ := strings.CutSuffix(t, "*")
		if name == "" && t == "*" {
			continue
		}
		// A prefix need not be a whole name, but only its characters
		// can be wrong: check it as one.
		if err := kafkasink.ValidateTopicName(name); err != nil {
			out = append(out, fmt.Sprintf("Config.Outbox.Topics entry %q: %v", t, err))
		}
	}
	if o.MaxBytes < 0 {
		out = append(out, fmt.Sprintf("Config.Outbox.MaxBytes %d is negative: use 0 for the default", o.MaxBytes))
	}
	return out
}

// allows reports whether the allow-list has topic.
func (o *Outbox) allows(topic string) bool {
	for _, t := range o.Topics {
		if prefix, ok := strings.CutSuffix(t, "*"); ok && strings.HasPrefix(topic, prefix) || t == topic {
			return true
		}
	}
	return false
}

// indexes is the decoder's IndexMessage: outbox messages become events,
// so they take their place among their transaction's; nil without o.
func (o *Outbox) indexes() func(string) bool {
	if o == nil {
		return nil
	}
	prefix := o.prefix()
	return func(p string) bool { return p == prefix }
}

// record makes the SourceRecord of an outbox message's content: refused,
// with the content kept, when the payload breaks the format or its topic
// is outside the allow-list.
func (o *Outbox) record(content []byte) *kafkasink.SourceRecord {
	m, err := outbox.Unmarshal(content, o.MaxBytes)
	switch {
	case err != nil && m.Topic == "":
		return &kafkasink.SourceRecord{Value: content, Refused: fmt.Errorf("pgcdc: outbox message refused: %w", err)}
	case err == nil && !o.allows(m.Topic):
		err = fmt.Errorf("topic %q is not in the outbox allow-list %q (Config.Outbox.Topics, the program's -outbox-topics)", m.Topic, o.Topics)
	}
	r := &kafkasink.SourceRecord{Topic: m.Topic, Key: m.Key, Value: m.Value}
	for _, h := range m.Headers {
		r.Headers = append(r.Headers, kafkasink.Header{Key: h.Name, Value: h.Value})
	}
	if err != nil {
		r.Refused = fmt.Errorf("pgcdc: outbox message refused: %w", err)
	}
	return r
}

// outboxMessage delivers an outbox message as an event in its place
// among its transaction's (see Outbox).
func (s *session) outboxMessage(m Message) error {
	if !m.Transactional {
		s.log.Error("outbox message emitted non-transactionally, with no commit to deliver it with: not delivered; emit with pg_logical_emit_message(true, ...) (package outbox does)",
			"lsn", m.LSN.String(), "content", truncateText(m.Content, 4096))
		return nil
	}
	return s.onEvent(kafkasink.Event{
		Op: kafkasink.OpInsert, Schema: OutboxSchema, Table: OutboxTable,
		Position: m.Position, LSN: m.LSN, XID: m.XID,
		Record: s.cfg.Outbox.record(m.Content),
	})
}

// truncateText returns b as text, cut to at most n bytes.
func truncateText(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
