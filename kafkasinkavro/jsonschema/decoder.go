package jsonschema

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/kafkasink/kafkasink/kafkasinkavro/internal/registry"
)

// Decoder reads back what an Encoder writes, for tests and for tools that
// read kafkasink.JSONEncoder's JSON: the JSON document of a record's key
// or value, after checking that the record is in the Confluent wire
// format and that the schema of its id is a JSON Schema (not another
// serializer's Avro or Protobuf). It fetches the schema of each id from
// the registry once: the schemas of a Schema Registry's ids never change.
// It does not validate the document against the schema. It is safe for
// concurrent use.
type Decoder struct {
	schemas *registry.Schemas[struct{}]
}

// NewDecoder returns a Decoder that fetches schemas from reg.
func NewDecoder(reg *sr.Client) *Decoder {
	// Only the schema's type is checked: the document is returned as
	// written, so nothing of the schema is kept.
	return &Decoder{schemas: registry.NewSchemas(reg, sr.TypeJSON, func(string) (struct{}, error) { return struct{}{}, nil })}
}

// Decode returns the JSON document of b, a record key or value an Encoder
// wrote: an event's value is the change event as kafkasink.JSONEncoder
// writes it, and a key the JSON object of its key columns
// (kafkasink.KeyJSON's form). It refuses b unless it is the wire format
// around one JSON document, behind the id of a JSON Schema. The result
// shares b's memory.
func (d *Decoder) Decode(ctx context.Context, b []byte) ([]byte, error) {
	_, doc, err := d.schemas.Read(ctx, b)
	if err != nil {
		return nil, err
	}
	if !json.Valid(doc) {
		return nil, fmt.Errorf("the payload after the header is not a JSON document: %.60q", doc)
	}
	return doc, nil
}

// Transcode returns a copy of r with its value and key the JSON documents
// they hold (see Decode), for readers of JSONEncoder's JSON such as
// kafkasinktest.ReadCommittedWith. A null value stays null, and so does a
// key not in the Confluent wire format (a zero byte first): the sink
// writes a truncate's key, and that of a table without key columns, as it
// does without this encoder.
func (d *Decoder) Transcode(ctx context.Context, r *kgo.Record) (*kgo.Record, error) {
	return registry.Transcode(ctx, r, "jsonschema", d.Decode, d.Decode)
}
