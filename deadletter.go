package kafkasink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/kafkasink/kafkasink/internal/topicadmin"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The values of the kafkasink.value header of a dead-lettered record.
const (
	// ValueEncoded: the value is the Config.Encoder's, as it would have
	// gone to the event's topic.
	ValueEncoded = "encoded"
	// ValueEvent: the Encoder failed, or made a tombstone, which carries
	// nothing: the value is the event as JSONEncoder writes it, with any
	// column value JSON cannot represent written as a string of its Go
	// text form (fmt's %v; the kafkasink.error header names the column).
	ValueEvent = "event"
	// ValueOmitted: the value does not fit the dead-letter topic itself
	// (its max.message.bytes or Config.MaxRecordBytes); the record has the
	// key (the event id when the key itself is too large) and the headers
	// only, and the sink logs an Error: the row's values are in no Kafka
	// record. Truncating the value instead would pass a part of a row for
	// the row.
	ValueOmitted = "omitted"
)

// deadLetter turns the draft of a rejected event into its dead-letter
// record (see deadLetterRecord), making sure of the dead-letter topic
// first, and logs an Error when the record cannot carry the event's value.
func (s *Sink) deadLetter(ctx context.Context, es *encoderState, e *Event, d draft, rej *Rejection) (*kgo.Record, error) {
	info, err := s.topics.Get(ctx, s.cl, s.cfg.DeadLetterTopic)
	if err != nil {
		return nil, err
	}
	r, lost := deadLetterRecord(&s.cfg, es, e, d, rej, info)
	if lost != nil {
		s.logLostValue(*lost)
	}
	return r, nil
}

// deadLetterRecord turns the draft of a rejected event into its
// dead-letter record, as Config.DeadLetterTopic and ValueEncoded,
// ValueEvent and ValueOmitted describe it, for a dead-letter topic of
// info. lost is the value it left out (ValueOmitted), for the caller to
// log at Error; nil when the record carries it.
func deadLetterRecord(cfg *Config, es *encoderState, e *Event, d draft, rej *Rejection, info topicadmin.Info) (r *kgo.Record, lost *lostValue) {
	limit := cfg.recordLimit(info)
	r = d.record
	r.Topic = cfg.DeadLetterTopic
	if !d.keyMade {
		r.Key = es.eventID(e)
	}
	// The error text is cut short, to leave room for the event on a
	// topic with a small max.message.bytes.
	errText := truncate(rej.Err.Error(), min(4096, limit/4))
	if set := cfg.Headers; set != HeadersAll {
		// A dead letter is read by people and repair tools, which need
		// the table and the LSNs: it carries every standard header, and
		// after them the Encoder's.
		r.Headers = append(es.standardHeaders(HeadersAll, e), r.Headers[set.count():]...)
	}
	r.Headers = append(r.Headers,
		kgo.RecordHeader{Key: HeaderReason, Value: []byte(rej.Reason)},
		kgo.RecordHeader{Key: HeaderError, Value: []byte(errText)},
		kgo.RecordHeader{Key: HeaderTopic, Value: []byte(rej.Topic)},
	)
	fixed := recordSize(r) - len(r.Value) + len(HeaderValue) + len(ValueOmitted) + 2 + recordOverhead
	kind := ValueEncoded
	switch {
	case d.valueMade && r.Value != nil:
	case d.valueErr == nil && !d.valueMade && fixed+minValueSize(cfg.Encoder, e) <= limit:
		// Not encoded yet (rejected first, or too large for its own
		// topic); it may fit this one.
		if d.valueErr = encodeValue(es, r, cfg.Encoder, e); d.valueErr == nil && r.Value != nil {
			break
		}
		fallthrough
	default:
		kind, r.Value = ValueEvent, nil
		if fixed+minValueSize(JSONEncoder{}, e) <= limit {
			start := len(es.arena)
			if out, err := eventJSON(es.arena, e); err == nil {
				es.arena = out
				r.Value = es.take(start)
			}
		}
	}
	if r.Value == nil || fixed+len(r.Value) > limit {
		kind, r.Value = ValueOmitted, nil
		lost = &lostValue{position: e.Position, schema: e.Schema, table: e.Table, reason: rej.Reason, limit: limit}
		if fixed > limit {
			r.Key = es.eventID(e) // the key is what is too large
		}
	}
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: HeaderValue, Value: []byte(kind)})
	return r, lost
}

// eventJSON appends e as JSONEncoder writes it. A column value JSON cannot
// represent (an unsupported Go type, invalid raw JSON) is written as a
// string of its Go text form instead, so that one bad value never loses
// the event. It fails only for an event Write refuses before encoding (an
// invalid Op).
func eventJSON(dst []byte, e *Event) ([]byte, error) {
	c := *e
	for {
		out, err := (JSONEncoder{}).Encode(dst, &c)
		var ee *EncodeError
		if err == nil || !errors.As(err, &ee) {
			return out, err
		}
		before, okBefore := withText(c.Before, ee.Column)
		after, okAfter := withText(c.After, ee.Column)
		if !okBefore && !okAfter {
			return nil, err
		}
		c.Before, c.After = before, after
	}
}

// withText returns a copy of row with column's value replaced by its Go
// text form, and whether row has the column with a value that is not
// text already.
func withText(row Row, column string) (Row, bool) {
	for i := range row {
		if row[i].Name != column {
			continue
		}
		var text string
		switch v := row[i].Value.(type) {
		case string:
			return row, false
		case json.RawMessage:
			text = string(v)
		default:
			text = fmt.Sprintf("%v", v)
		}
		out := append(Row(nil), row...)
		out[i].Value = text
		return out, true
	}
	return row, false
}

// truncate cuts s to n bytes, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
