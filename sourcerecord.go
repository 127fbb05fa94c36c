package kafkasink

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink/internal/topicadmin"
)

// SourceRecord is a record a source made whole, such as an outbox message
// an application emitted in its own transaction (package outbox; pgcdc's
// Config.Outbox): the sink writes it in its event's place, in the same
// part of the batch as the events around it (with ExactlyOnce, the same
// Kafka transaction as the row changes of its source transaction when
// they fit in one, see Config.MaxTransactionRecords), to its own topic
// with its own key, value and headers. The Encoder, Topics, KeyColumns and
// the topic claims of tables are not consulted for it: the source decides,
// and the source is where a topic allow-list belongs.
//
// The record's headers are the sink's standard ones (Config.Headers, with
// kafkasink.table naming the event's Schema and Table), then Headers, then
// the annotation headers. A nil Key is written as a null key to partition
// 0, as a keyless table's events.
type SourceRecord struct {
	Topic   string
	Key     []byte
	Value   []byte
	Headers []Header
	// Refused, when set, is why the source will not have the record
	// delivered, such as a topic outside its allow-list: the event is
	// rejected as unroutable (ReasonUnroutable) with this error, so it
	// fails the Write, or with a DeadLetterTopic goes there with its
	// key, value and headers. The sink never makes sure of the Topic of
	// a refused record: it may be any text, or empty.
	Refused error
}

// routeKey is the key of an event's route: its schema and table; for
// one carrying a SourceRecord, its topic under the empty schema, which no
// table has (checkBatch requires one), so that records share a route per
// topic and never a table's. Refused records share the one route of the
// empty topic, which is never made sure of.
func routeKey(e *Event) [2]string {
	switch {
	case e.Record != nil && e.Record.Refused != nil:
		return [2]string{"", ""}
	case e.Record != nil:
		return [2]string{"", e.Record.Topic}
	}
	return [2]string{e.Schema, e.Table}
}

// sourceRecordRoute is the route of an event carrying a SourceRecord.
// The sink's own topics are no record's: a record for one is rejected.
func (s *Sink) sourceRecordRoute(r *SourceRecord) tableRoute {
	switch {
	case r.Refused != nil:
		return tableRoute{err: errors.New("refused by the source")} // encodeSourceRecord says why
	case r.Topic == "":
		return tableRoute{err: fmt.Errorf("the source record has no topic")}
	}
	if err := topicadmin.ValidateName(r.Topic); err != nil {
		return tableRoute{topic: r.Topic, err: fmt.Errorf("the source record's topic: %w", err)}
	}
	if r.Topic == s.cfg.CheckpointTopic || r.Topic == s.cfg.DeadLetterTopic || r.Topic == s.frameTopic {
		return tableRoute{topic: r.Topic, err: fmt.Errorf("the source record's topic %s is the sink's own (checkpoints, dead letters or the Encoder's frames)", r.Topic)}
	}
	return tableRoute{topic: r.Topic}
}

// encodeSourceRecord fills the draft of an event carrying a SourceRecord
// (see encodeEvent): its key, value and headers are the record's.
func (en *encoding) encodeSourceRecord(e *Event, t *routedTable, d draft) (draft, *Rejection) {
	es, src := en.es, e.Record
	r := d.record
	*r = kgo.Record{Topic: t.topic, Key: src.Key, Value: src.Value}
	r.Headers = extendHeaders(es, es.standardHeaders(en.cfg.Headers, e), src.Headers)
	r.Headers = extendHeaders(es, r.Headers, en.cfg.annotationHeaders)
	d.keyMade, d.valueMade = true, true
	reject := func(reason Reason, err error) (draft, *Rejection) {
		return d, &Rejection{Position: e.Position, Schema: e.Schema, Table: e.Table, Topic: r.Topic, Reason: reason, Err: err}
	}
	switch {
	case src.Refused != nil:
		d.record.Topic = src.Topic
		return reject(ReasonUnroutable, src.Refused)
	case t.err != nil:
		return reject(ReasonUnroutable, t.err)
	}
	if err := en.cfg.checkRecordSize(recordSize(r), true, t.topic, t.info); err != nil {
		return reject(ReasonTooLarge, err)
	}
	return d, nil
}
