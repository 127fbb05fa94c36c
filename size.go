package kafkasink

import (
	"encoding/json"
	"fmt"

	"github.com/kafkasink/kafkasink/internal/topicadmin"
	"github.com/twmb/franz-go/pkg/kgo"
)

// This file is the size of records: how large one is, how large one may
// be, and how large an event's value is known to become before it is
// encoded.

// recordOverhead bounds what Kafka adds around one record's key, value and
// headers: the record batch header (61 bytes) and the record's own varints
// and attributes. Used to reject oversized records before producing them.
const recordOverhead = 61 + 32

// recordSize is the bytes of a record's key, value and headers.
func recordSize(r *kgo.Record) int {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value) + 2
	}
	return n
}

// recordLimit is the largest record the sink sends to a topic: the smaller
// of the topic's max.message.bytes and Config.MaxRecordBytes.
func (c *Config) recordLimit(info topicadmin.Info) int {
	return min(info.MaxMessageBytes, c.MaxRecordBytes)
}

// checkRecordSize returns why a record of size bytes of key, value and
// headers is too large for topic, or nil. exact is false when size is
// only what the record is known to reach, before its value is encoded.
func (c *Config) checkRecordSize(size int, exact bool, topic string, info topicadmin.Info) error {
	size += recordOverhead
	limit := c.recordLimit(info)
	if size <= limit {
		return nil
	}
	atLeast := "at least "
	if exact {
		atLeast = ""
	}
	return fmt.Errorf("record of %s%d bytes exceeds the limit of %d (the smaller of topic %s's max.message.bytes %d and Config.MaxRecordBytes %d)",
		atLeast, size, limit, topic, info.MaxMessageBytes, c.MaxRecordBytes)
}

// minValueSize returns a size in bytes that enc's value for e is known to
// reach, from the lengths of e's column values alone (see ValueSizer for
// why). It is 0 for an Encoder it does not know and that is no
// ValueSizer, whose records are measured after encoding. The built-in
// encoders write every changed column value of the images they include
// in JSON, so for them it is MinRowSize of those images.
func minValueSize(enc Encoder, e *Event) int {
	if e.Record != nil {
		return len(e.Record.Value)
	}
	switch enc.(type) {
	case JSONEncoder, *JSONEncoder:
		return MinRowSize(e.Before) + MinRowSize(e.After)
	case UpsertEncoder, *UpsertEncoder:
		if e.Op == OpDelete || e.Op == OpTruncate {
			return 0 // a tombstone
		}
		return MinRowSize(e.After)
	}
	if s, ok := enc.(ValueSizer); ok {
		return s.MinValueSize(e)
	}
	return 0
}

// MinRowSize returns the bytes row's values take at least in JSON, for a
// ValueSizer: each value not marked unchanged (Column.Unchanged, whose
// value is not written) at its length, a string escaped, []byte in
// base64, raw JSON verbatim; the types whose size does not grow with the
// data count nothing.
func MinRowSize(row Row) int {
	n := 0
	for i := range row {
		if !row[i].Unchanged {
			n += minJSONSize(row[i].Value)
		}
	}
	return n
}

// minJSONSize is the least a value takes in JSON (see MinRowSize).
func minJSONSize(v any) int {
	switch v := v.(type) {
	case string:
		return len(v)
	case Decimal:
		return len(v)
	case json.RawMessage:
		return len(v)
	case []byte:
		return (len(v) + 2) / 3 * 4
	case []any:
		n := 0
		for _, x := range v {
			n += minJSONSize(x)
		}
		return n
	case map[string]any:
		n := 0
		for k, x := range v {
			n += len(k) + minJSONSize(x)
		}
		return n
	}
	return 0
}
