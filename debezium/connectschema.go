package debezium

import (
	"encoding/json"

	"github.com/kafkasink/kafkasink"
)

// ConnectSchema is a Kafka Connect schema as Encoder declares it with
// SchemasEnable (JsonConverter's schemas.enable=true), for encoders that
// write Debezium's records in another form from the same schema, such as
// the kafkasinkavro module's Avro (Kafka Connect's AvroData makes the
// Avro schema from it). Its fields are those JsonConverter writes, in
// its order. A ConnectSchema returned by Encoder is the caller's; nothing
// else holds it.
type ConnectSchema struct {
	// Type is Connect's type: int8, int16, int32, int64, float, double,
	// boolean, string, bytes, array or struct.
	Type string
	// Fields are a struct's fields, in order, each with its Field.
	Fields []ConnectSchema
	// Items is an array's element schema; nil for other types.
	Items *ConnectSchema
	// Optional is true when the value may be null.
	Optional bool
	// Name is the schema's name: a logical type's
	// (io.debezium.time.MicroTimestamp,
	// org.apache.kafka.connect.data.Decimal) or a struct's full name
	// (<Name>.<schema>.<table>.Envelope); "" for none.
	Name string
	// Version is the named schema's version; 0 for none.
	Version int
	// Doc is the schema's documentation; "" for none.
	Doc string
	// Parameters are the schema's parameters, in order
	// (__debezium.source.column.type, scale, allowed, ...).
	Parameters []ConnectParameter
	// Default is the field's default value, as JsonConverter writes it
	// (a Decimal's or bytes' default is the base64 string); nil for
	// none.
	Default json.RawMessage
	// Field is the schema's name as a struct's field; "" for a schema
	// that is not a field.
	Field string
}

// ConnectParameter is one of a ConnectSchema's parameters.
type ConnectParameter struct {
	Name, Value string
}

// ValueSchema returns the Connect schema of the values Encoder writes
// for e's table version with SchemasEnable, whatever d's SchemasEnable:
// Debezium's <Name>.<schema>.<table>.Envelope, whose before and after
// are the table's Value struct. It depends on e's schema, table and
// Relation and d's options only, not on e's rows: a row value the
// encoder cannot write is an error of Encode, not of ValueSchema. An
// event without a Relation is an *kafkasink.EncodeError.
func (d Encoder) ValueSchema(e *kafkasink.Event) (*ConnectSchema, error) {
	if e.Relation == nil {
		return nil, errNoRelation(e)
	}
	return d.schemasOf(e).envelope.export(""), nil
}

// FrameSchemas returns the Connect schemas of the key and the value of
// the transaction records AppendFrame writes (Debezium's
// io.debezium.connector.common.TransactionMetadataKey and
// TransactionMetadataValue).
func (d Encoder) FrameSchemas() (key, value *ConnectSchema) {
	return debeziumTxnKeySchema.export(""), debeziumTxnValueSchema.export("")
}

// export returns s as a ConnectSchema; field is its name in a struct.
func (s *connectSchema) export(field string) *ConnectSchema {
	out := &ConnectSchema{
		Type: s.typ, Optional: s.optional, Name: s.name, Version: s.version, Doc: s.doc, Field: field,
	}
	if len(s.fields) > 0 {
		out.Fields = make([]ConnectSchema, len(s.fields))
		for i := range s.fields {
			out.Fields[i] = *s.fields[i].schema.export(s.fields[i].name)
		}
	}
	if s.items != nil {
		out.Items = s.items.export("")
	}
	if len(s.params) > 0 {
		out.Parameters = make([]ConnectParameter, len(s.params))
		for i, p := range s.params {
			out.Parameters[i] = ConnectParameter{Name: p[0], Value: p[1]}
		}
	}
	if s.def != "" {
		out.Default = json.RawMessage(s.def)
	}
	return out
}
