package kafkasinkavro

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/kafkasink/kafkasink/debezium"
	"github.com/kafkasink/kafkasink/encoding/jsonw"
	"github.com/kafkasink/kafkasink/kafkasinkavro/internal/registry"
)

// This file turns the Kafka Connect schemas debezium.Encoder
// declares (debezium.ConnectSchema: its ValueSchema and FrameSchemas, the
// schemas its SchemasEnable documents carry) into Avro schemas as Kafka Connect's AvroConverter
// writes them (AvroData.fromConnectSchema, connect.meta.data=true, its
// default; testdata/debezium/avro-schemas.json holds what Debezium's
// records get). The root encoder writes each record's payload in the
// Avro encoding of the same schema (debezium.Encoder.AppendAvro). The Connect schemas are not copied here: they
// are read from the root encoder's output, which is measured against
// Debezium's (pgcdc's TestDebeziumConformance).

// Connect's logical types that AvroData maps to Avro logical types.
const (
	connectDecimal   = "org.apache.kafka.connect.data.Decimal"
	connectDate      = "org.apache.kafka.connect.data.Date"
	connectTime      = "org.apache.kafka.connect.data.Time"
	connectTimestamp = "org.apache.kafka.connect.data.Timestamp"
)

// avroSchemaWriter writes Avro schemas as AvroData does, defining each
// record type once and naming it by its full name after that.
type avroSchemaWriter struct {
	b       strings.Builder
	records map[string]bool // the records defined, by full name
}

// convertConnectSchema returns the Avro schema text of s.
func convertConnectSchema(s *debezium.ConnectSchema) (string, error) {
	w := avroSchemaWriter{records: make(map[string]bool)}
	if err := w.write(s, true); err != nil {
		return "", err
	}
	return w.b.String(), nil
}

// write writes s; top is false for a struct's field and an array's
// items, whose optional schemas are unions.
// The union of an optional schema is ["null", T], or [T, "null"] when
// the schema has a default (a union's default is its first branch's);
// the root's writer picks the branches by the same rule.
func (w *avroSchemaWriter) write(s *debezium.ConnectSchema, top bool) error {
	if !s.Optional || top {
		return w.writeBase(s)
	}
	if len(s.Default) == 0 || string(s.Default) == "null" {
		w.b.WriteString(`["null",`)
		if err := w.writeBase(s); err != nil {
			return err
		}
		w.b.WriteString(`]`)
		return nil
	}
	w.b.WriteString(`[`)
	if err := w.writeBase(s); err != nil {
		return err
	}
	w.b.WriteString(`,"null"]`)
	return nil
}

// writeBase writes s's type without its optionality: a plain type name,
// or an object with AvroData's connect.* properties.
func (w *avroSchemaWriter) writeBase(s *debezium.ConnectSchema) error {
	var avroType, connectType, logical string
	switch s.Type {
	case "int8", "int16":
		avroType, connectType = "int", s.Type
	case "int32":
		avroType = "int"
	case "int64":
		avroType = "long"
	case "float", "double", "boolean", "string", "bytes":
		avroType = s.Type
	case "array":
		w.b.WriteString(`{"type":"array","items":`)
		if err := w.write(s.Items, false); err != nil {
			return err
		}
		w.writeProps(s, connectType)
		w.b.WriteString(`}`)
		return nil
	case "struct":
		return w.writeRecord(s)
	default:
		return fmt.Errorf("the Connect type %q (of %q) has no Avro form in kafkasinkavro", s.Type, s.Name)
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
		return nil
	}
	w.b.WriteString(`{"type":"` + avroType + `"`)
	if logical == "decimal" {
		scale, precision, err := decimalParameters(s.Parameters)
		if err != nil {
			return err
		}
		w.b.WriteString(`,"scale":` + strconv.Itoa(scale) + `,"precision":` + strconv.Itoa(precision))
	}
	w.writeProps(s, connectType)
	if logical != "" {
		w.b.WriteString(`,"logicalType":"` + logical + `"`)
	}
	w.b.WriteString(`}`)
	return nil
}

// writeProps writes AvroData's connect.* properties of s, in its order.
func (w *avroSchemaWriter) writeProps(s *debezium.ConnectSchema, connectType string) {
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
		w.b.Write(parametersJSON(s.Parameters))
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
func (w *avroSchemaWriter) writeRecord(s *debezium.ConnectSchema) error {
	full := s.Name
	if full == "" {
		return fmt.Errorf("a Connect struct without a name (fields %s) has no Avro form in kafkasinkavro", fieldNames(s))
	}
	if w.records[full] {
		// Debezium gives one name one schema (the Value struct of before
		// and after, io.debezium.data.VariableScaleDecimal, ...).
		w.b.WriteString(strconv.Quote(full))
		return nil
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
		if err := w.write(f, false); err != nil {
			return err
		}
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
	w.records[full] = true
	return nil
}

func fieldNames(s *debezium.ConnectSchema) string {
	names := make([]string, len(s.Fields))
	for i := range s.Fields {
		names[i] = s.Fields[i].Field
	}
	return strings.Join(names, ",")
}

// avroDefault is s's default in Avro's JSON encoding of default values:
// bytes as a string of one code point per byte (U+0000 to U+00FF); every
// other type as JsonConverter writes it.
func avroDefault(s *debezium.ConnectSchema) string {
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

// parametersJSON is a Connect schema's parameters as JsonConverter
// writes them: an object of strings, in their order.
func parametersJSON(params []debezium.ConnectParameter) []byte {
	dst := []byte{'{'}
	for i, p := range params {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(jsonw.AppendString(dst, p.Name), ':')
		dst = jsonw.AppendString(dst, p.Value)
	}
	return append(dst, '}')
}

// decimalParameters reads a Connect Decimal's scale and precision
// (connect.decimal.precision; AvroData's default, 64, without it).
func decimalParameters(params []debezium.ConnectParameter) (scale, precision int, err error) {
	p := make(map[string]string, len(params))
	for _, kv := range params {
		p[kv.Name] = kv.Value
	}
	if scale, err = strconv.Atoi(p["scale"]); err != nil {
		return 0, 0, fmt.Errorf("the Connect Decimal's parameters %s have no scale", parametersJSON(params))
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
func keyConnectSchema(value *debezium.ConnectSchema, columns []string) (*debezium.ConnectSchema, error) {
	if len(value.Fields) == 0 || value.Fields[0].Type != "struct" {
		return nil, fmt.Errorf("the Envelope schema %q has no before struct", value.Name)
	}
	row := &value.Fields[0]
	fields, missing := registry.Pick(row.Fields, func(f debezium.ConnectSchema) string { return f.Field }, columns)
	if missing != "" {
		return nil, fmt.Errorf("the key column %q is not in the table's Debezium row (a type Debezium leaves out, or not a column)", missing)
	}
	return &debezium.ConnectSchema{Type: "struct", Name: strings.TrimSuffix(row.Name, ".Value") + ".Key", Fields: fields}, nil
}
