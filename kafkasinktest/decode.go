package kafkasinktest

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
)

// Encoding names what wrote a record's value.
type Encoding string

// The encodings Decode knows: those of the library's encoders.
const (
	EventJSON Encoding = "json"     // kafkasink.JSONEncoder: the change event
	Upsert    Encoding = "upsert"   // kafkasink.UpsertEncoder: the row's document
	Debezium  Encoding = "debezium" // debezium.Encoder: Debezium's envelope
	// Tombstone is a null value: an UpsertEncoder delete or truncate, or
	// the record a debezium.Encoder writes after each delete.
	Tombstone Encoding = "tombstone"
)

// Record is one record of a topic a sink writes to, decoded.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       string             // the record key as text (see kafkasink.Config.KeyFormat)
	Op        kafkasink.Op       // the event's operation (the kafkasink.op header)
	Position  kafkasink.Position // the event's position, its id (the kafkasink.id header)
	Encoding  Encoding           // what wrote the value
	// Value is the row the record carries, column names to values, with
	// numbers as json.Number: the after image, or the before image of a
	// delete (JSONEncoder, debezium.Encoder), or the document
	// (UpsertEncoder). Nil for a tombstone and for a truncate.
	Value map[string]any
}

// String names the record by where it is, then its key, op and position.
func (r Record) String() string {
	return fmt.Sprintf("%s[%d]@%d key=%s %s %s", r.Topic, r.Partition, r.Offset, r.Key, r.Op, r.Position)
}

// Decode decodes a record a sink wrote with any of the library's encoders.
// The position and op come from the kafkasink.id and kafkasink.op headers
// (DecodeHeaders), which every record carries unless the sink's
// Config.Headers is HeadersNone; where the value repeats them (the
// event's id and op, Debezium's op), Decode checks they agree. It returns
// an error naming the record when it is not a record of a sink's data
// topic (the checkpoint topic's records, for one, have no such headers) or
// its value is in none of the encodings.
func Decode(r *kgo.Record) (Record, error) {
	out, err := DecodeHeaders(r)
	if err != nil || out.Encoding == Tombstone {
		return out, err
	}
	where, id, op := out.where(), Header(r, kafkasink.HeaderID), Header(r, kafkasink.HeaderOp)
	var v struct {
		// JSONEncoder and UpsertEncoder.
		ID string `json:"id"`
		// JSONEncoder's op word, debezium.Encoder's op letter.
		Op        string          `json:"op"`
		CommitLSN *string         `json:"commit_lsn"`
		Operation *string         `json:"operation"`
		Document  json.RawMessage `json:"document"`
		Source    json.RawMessage `json:"source"`
		Before    json.RawMessage `json:"before"`
		After     json.RawMessage `json:"after"`
	}
	if err := json.Unmarshal(r.Value, &v); err != nil {
		return out, fmt.Errorf("%s: value is not a JSON object of the library's encoders: %w", where, err)
	}
	row := v.After
	if out.Op == kafkasink.OpDelete {
		row = v.Before
	}
	switch {
	case v.Operation != nil:
		out.Encoding, row = Upsert, v.Document
		if v.ID != id {
			return out, fmt.Errorf("%s: upsert value's id %q, header %s %q", where, v.ID, kafkasink.HeaderID, id)
		}
	case v.Source != nil:
		out.Encoding = Debezium
		if want := debeziumOps[out.Op]; v.Op != want {
			return out, fmt.Errorf("%s: Debezium op %q, want %q for header %s %q", where, v.Op, want, kafkasink.HeaderOp, op)
		}
	case v.CommitLSN != nil:
		out.Encoding = EventJSON
		if v.ID != id || v.Op != op {
			return out, fmt.Errorf("%s: event id %q op %q, headers %q %q", where, v.ID, v.Op, id, op)
		}
	default:
		return out, fmt.Errorf("%s: value %.80q is in none of the library's encodings (JSONEncoder, UpsertEncoder, DebeziumEncoder)", where, r.Value)
	}
	if out.Value, err = decodeRow(row); err != nil {
		return out, fmt.Errorf("%s: row: %w", where, err)
	}
	return out, nil
}

// DecodeHeaders is Decode for records of any encoder, the library's or
// another: it takes the position and op from the headers and leaves
// Encoding empty (Tombstone for a null value) and Value nil.
func DecodeHeaders(r *kgo.Record) (Record, error) {
	out := Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: string(r.Key)}
	id, op := Header(r, kafkasink.HeaderID), Header(r, kafkasink.HeaderOp)
	if id == "" || op == "" {
		return out, fmt.Errorf("%s has no %s or %s header: it was not written by a kafkasink sink to a data topic, or by one whose Config.Headers is HeadersNone (the program's -headers none); "+
			"the test kit needs HeadersMinimal or HeadersAll", out.where(), kafkasink.HeaderID, kafkasink.HeaderOp)
	}
	var err error
	if out.Position, err = kafkasink.ParsePosition(id); err != nil {
		return out, fmt.Errorf("%s: header %s: %w", out.where(), kafkasink.HeaderID, err)
	}
	if out.Op = parseOp(op); out.Op == 0 {
		return out, fmt.Errorf("%s: header %s is %q, not an operation", out.where(), kafkasink.HeaderOp, op)
	}
	if r.Value == nil {
		out.Encoding = Tombstone
	}
	return out, nil
}

// where names the record for errors.
func (r Record) where() string {
	return fmt.Sprintf("record %s[%d]@%d", r.Topic, r.Partition, r.Offset)
}

// debeziumOps is each operation's letter in Debezium's envelope.
var debeziumOps = map[kafkasink.Op]string{
	kafkasink.OpInsert: "c", kafkasink.OpUpdate: "u", kafkasink.OpDelete: "d", kafkasink.OpRead: "r", kafkasink.OpTruncate: "t",
}

// parseOp returns the operation named s (Op.String's names), 0 for none.
func parseOp(s string) kafkasink.Op {
	for op := kafkasink.OpInsert; op.Valid(); op++ {
		if op.String() == s {
			return op
		}
	}
	return 0
}

// decodeRow decodes a row object, nil for JSON null or no row.
func decodeRow(raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var m map[string]any
	err := d.Decode(&m)
	return m, err
}

// Header returns the value of r's first header named key, "" when it has
// none: the sink's kafkasink.id (HeaderID), kafkasink.op (HeaderOp) and
// the others of Config.Headers, for records read with ReadCommittedRaw.
func Header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}
