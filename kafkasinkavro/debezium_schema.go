package kafkasinkavro

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/kafkasink/kafkasink/internal/jsonw"
)

// This file turns the Kafka Connect schemas kafkasink.DebeziumEncoder
// declares (its SchemasEnable documents: {"schema":<Connect schema>,
// "payload":...}) into Avro schemas as Kafka Connect's AvroConverter
// writes them (AvroData.fromConnectSchema, connect.meta.data=true, its
// default; testdata/debezium/avro-schemas.json holds what Debezium's
// records get), and into the node tree the transcoder (debezium_transcode.go)
// writes each payload by. The Connect schemas are not copied here: they
// are read from the root encoder's output, which is measured against
// Debezium's (pgcdc's TestDebeziumConformance).

// connectSchema is a Connect schema as JsonConverter writes it.
type connectSchema struct {
	Type       string          `json:"type"`
	Fields     []connectSchema `json:"fields"`
	Items      *connectSchema  `json:"items"`
	Optional   bool            `json:"optional"`
	Name       string          `json:"name"`
	Version    int             `json:"version"`
	Doc        string          `json:"doc"`
	Parameters json.RawMessage `json:"parameters"` // an object of strings, kept in its order
	Default    json.RawMessage `json:"default"`    // in JsonConverter's form
	Field      string          `json:"field"`      // the name, as a struct's field
}

// Connect's logical types that AvroData maps to Avro logical types.
const (
	connectDecimal   = "org.apache.kafka.connect.data.Decimal"
	connectDate      = "org.apache.kafka.connect.data.Date"
	connectTime      = "org.apache.kafka.connect.data.Time"
	connectTimestamp = "org.apache.kafka.connect.data.Timestamp"
)

// nodeKind is how the transcoder writes a value.
type nodeKind uint8

const (
	nodeInt nodeKind = iota + 1 // int and long: a zig-zag varint
	nodeFloat
	nodeDouble
	nodeBoolean
	nodeString
	nodeBytes // base64 in the payload
	nodeRecord
	nodeArray
)

// payloadNode is one Avro type of a table version's schema, as the
// transcoder writes a payload's value of it.
type payloadNode struct {
	kind     nodeKind
	optional bool // a union with null
	// nullFirst: the union is ["null", T] (no default), else [T, "null"]
	// (the Connect schema has a default, which must be the first branch's).
	nullFirst bool
	fields    []payloadField // a record's
	items     *payloadNode   // an array's
}

type payloadField struct {
	name string // the Connect field's name: the payload's member
	// member is the JSON text the root writes before the field's value:
	// {"name": for a record's first field, ,"name": for the others. The
	// transcoder matches it whole, one comparison per field.
	member string
	node   *payloadNode
}

// unionNull and unionValue are the branch bytes of the node's union.
func (n *payloadNode) unionBranches() (null, value byte) {
	if n.nullFirst {
		return unionNull, unionValue
	}
	return unionValue, unionNull
}

// avroSchemaWriter writes Avro schemas as AvroData does, defining each
// record type once and naming it by its full name after that.
type avroSchemaWriter struct {
	b       strings.Builder
	records map[string]*payloadNode // the records defined, by full name
}

// convertConnectSchema returns the Avro schema text of s and its node
// tree.
func convertConnectSchema(s *connectSchema) (string, *payloadNode, error) {
	w := avroSchemaWriter{records: make(map[string]*payloadNode)}
	n, err := w.write(s, true)
	if err != nil {
		return "", nil, err
	}
	return w.b.String(), n, nil
}

// write writes s; top is false for a struct's field and an array's
// items, whose optional schemas are unions.
func (w *avroSchemaWriter) write(s *connectSchema, top bool) (*payloadNode, error) {
	if !s.Optional || top {
		return w.writeBase(s)
	}
	n := &payloadNode{}
	if len(s.Default) == 0 || string(s.Default) == "null" {
		w.b.WriteString(`["null",`)
		var err error
		if n, err = w.writeBase(s); err != nil {
			return nil, err
		}
		n.nullFirst = true
		w.b.WriteString(`]`)
	} else {
		w.b.WriteString(`[`)
		var err error
		if n, err = w.writeBase(s); err != nil {
			return nil, err
		}
		w.b.WriteString(`,"null"]`)
	}
	n.optional = true
	return n, nil
}

// writeBase writes s's type without its optionality: a plain type name,
// or an object with AvroData's connect.* properties.
func (w *avroSchemaWriter) writeBase(s *connectSchema) (*payloadNode, error) {
	n := &payloadNode{}
	var avroType, connectType, logical string
	switch s.Type {
	case "int8", "int16":
		n.kind, avroType, connectType = nodeInt, "int", s.Type
	case "int32":
		n.kind, avroType = nodeInt, "int"
	case "int64":
		n.kind, avroType = nodeInt, "long"
	case "float":
		n.kind, avroType = nodeFloat, "float"
	case "double":
		n.kind, avroType = nodeDouble, "double"
	case "boolean":
		n.kind, avroType = nodeBoolean, "boolean"
	case "string":
		n.kind, avroType = nodeString, "string"
	case "bytes":
		n.kind, avroType = nodeBytes, "bytes"
	case "array":
		n.kind = nodeArray
		w.b.WriteString(`{"type":"array","items":`)
		var err error
		if n.items, err = w.write(s.Items, false); err != nil {
			return nil, err
		}
		w.writeProps(s, connectType)
		w.b.WriteString(`}`)
		return n, nil
	case "struct":
		return w.writeRecord(s)
	default:
		return nil, fmt.Errorf("the Connect type %q (of %q) has no Avro form in kafkasinkavro", s.Type, s.Name)
	}
	switch s.Name {
	case connectDecimal:
		logical = "decimal"
	case connectDate:
		logical = "date"
	case connectTime:
		logical = "time-millis"
	case connectTimestamp:
		logical = "timestamp-millis"
	}
	if connectType == "" && s.Name == "" && s.Version == 0 && s.Doc == "" && len(s.Parameters) == 0 && len(s.Default) == 0 {
		w.b.WriteString(`"` + avroType + `"`)
		return n, nil
	}
	w.b.WriteString(`{"type":"` + avroType + `"`)
	if logical == "decimal" {
		scale, precision, err := decimalParameters(s.Parameters)
		if err != nil {
			return nil, err
		}
		w.b.WriteString(`,"scale":` + strconv.Itoa(scale) + `,"precision":` + strconv.Itoa(precision))
	}
	w.writeProps(s, connectType)
	if logical != "" {
		w.b.WriteString(`,"logicalType":"` + logical + `"`)
	}
	w.b.WriteString(`}`)
	return n, nil
}

// writeProps writes AvroData's connect.* properties of s, in its order.
func (w *avroSchemaWriter) writeProps(s *connectSchema, connectType string) {
	if connectType != "" {
		w.b.WriteString(`,"connect.type":"` + connectType + `"`)
	}
	if s.Doc != "" {
		w.b.WriteString(`,"connect.doc":` + strconv.Quote(s.Doc))
	}
	if s.Version != 0 {
		w.b.WriteString(`,"connect.version":` + strconv.Itoa(s.Version))
	}
	if len(s.Parameters) > 0 {
		w.b.WriteString(`,"connect.parameters":`)
		w.b.Write(s.Parameters)
	}
	if len(s.Default) > 0 && string(s.Default) != "null" {
		w.b.WriteString(`,"connect.default":`)
		w.b.WriteString(avroDefault(s))
	}
	if s.Name != "" {
		w.b.WriteString(`,"connect.name":` + strconv.Quote(s.Name))
	}
}

// writeRecord writes a struct as a record named after the Connect
// schema, or a reference to it when the record was written before.
func (w *avroSchemaWriter) writeRecord(s *connectSchema) (*payloadNode, error) {
	full := s.Name
	if full == "" {
		return nil, fmt.Errorf("a Connect struct without a name (fields %s) has no Avro form in kafkasinkavro", fieldNames(s))
	}
	if defined := w.records[full]; defined != nil {
		// Debezium gives one name one schema (the Value struct of before
		// and after, io.debezium.data.VariableScaleDecimal, ...).
		w.b.WriteString(strconv.Quote(full))
		n := *defined // the caller sets its own optionality
		return &n, nil
	}
	n := &payloadNode{kind: nodeRecord}
	for i := range s.Fields {
		before := byte(',')
		if i == 0 {
			before = '{'
		}
		member := append(jsonw.AppendString([]byte{before}, s.Fields[i].Field), ':')
		n.fields = append(n.fields, payloadField{name: s.Fields[i].Field, member: string(member)})
	}
	name, ns := full, ""
	if i := strings.LastIndexByte(full, '.'); i >= 0 {
		ns, name = full[:i], full[i+1:]
	}
	w.b.WriteString(`{"type":"record","name":` + strconv.Quote(name))
	if ns != "" {
		w.b.WriteString(`,"namespace":` + strconv.Quote(ns))
	}
	w.b.WriteString(`,"fields":[`)
	for i := range s.Fields {
		f := &s.Fields[i]
		if i > 0 {
			w.b.WriteByte(',')
		}
		w.b.WriteString(`{"name":` + strconv.Quote(f.Field) + `,"type":`)
		node, err := w.write(f, false)
		if err != nil {
			return nil, err
		}
		n.fields[i].node = node
		switch {
		case len(f.Default) > 0 && string(f.Default) != "null":
			w.b.WriteString(`,"default":` + avroDefault(f))
		case f.Optional:
			w.b.WriteString(`,"default":null`)
		}
		w.b.WriteByte('}')
	}
	w.b.WriteString(`]`)
	w.writeProps(s, "")
	w.b.WriteString(`}`)
	defined := *n
	w.records[full] = &defined
	return n, nil
}

func fieldNames(s *connectSchema) string {
	names := make([]string, len(s.Fields))
	for i := range s.Fields {
		names[i] = s.Fields[i].Field
	}
	return strings.Join(names, ",")
}

// avroDefault is s's default in Avro's JSON encoding of default values:
// bytes as a string of one code point per byte (U+0000 to U+00FF); every
// other type as JsonConverter writes it.
func avroDefault(s *connectSchema) string {
	if s.Type != "bytes" {
		return string(s.Default)
	}
	var b64 string
	if json.Unmarshal(s.Default, &b64) != nil {
		return string(s.Default)
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return string(s.Default)
	}
	runes := make([]rune, len(raw))
	for i, c := range raw {
		runes[i] = rune(c)
	}
	text, _ := json.Marshal(string(runes))
	return string(text)
}

// decimalParameters reads a Connect Decimal's scale and precision
// (connect.decimal.precision; AvroData's default, 64, without it).
func decimalParameters(params json.RawMessage) (scale, precision int, err error) {
	var p map[string]string
	if err := json.Unmarshal(params, &p); err != nil {
		return 0, 0, fmt.Errorf("the Connect Decimal's parameters %s: %w", params, err)
	}
	if scale, err = strconv.Atoi(p["scale"]); err != nil {
		return 0, 0, fmt.Errorf("the Connect Decimal's parameters %s have no scale", params)
	}
	precision = 64
	if v, ok := p["connect.decimal.precision"]; ok {
		if precision, err = strconv.Atoi(v); err != nil {
			return 0, 0, fmt.Errorf("the Connect Decimal's precision %q: %w", v, err)
		}
	}
	return scale, precision, nil
}

// keyConnectSchema is Debezium's key schema for columns: the struct
// <prefix>.<schema>.<table>.Key with the row's fields of those columns,
// in key order, as DebeziumEncoder declares it (the same field schemas
// as the Value struct's). value is the Envelope's schema.
func keyConnectSchema(value *connectSchema, columns []string) (*connectSchema, error) {
	if len(value.Fields) == 0 || value.Fields[0].Type != "struct" {
		return nil, fmt.Errorf("the Envelope schema %q has no before struct", value.Name)
	}
	row := &value.Fields[0]
	key := &connectSchema{Type: "struct", Name: strings.TrimSuffix(row.Name, ".Value") + ".Key"}
	for _, c := range columns {
		i := 0
		for i < len(row.Fields) && row.Fields[i].Field != c {
			i++
		}
		if i == len(row.Fields) {
			return nil, fmt.Errorf("the key column %q is not in the table's Debezium row (a type Debezium leaves out, or not a column)", c)
		}
		key.Fields = append(key.Fields, row.Fields[i])
	}
	return key, nil
}
