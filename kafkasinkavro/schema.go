package kafkasinkavro

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kafkasink/kafkasink"
)

// kind is the Avro type a column's values are written as.
type kind uint8

const (
	kindBoolean kind = iota + 1
	kindInt
	kindLong
	kindFloat
	kindDouble
	kindString
	kindBytes
	kindDecimal              // bytes with logicalType decimal
	kindUUID                 // string with logicalType uuid
	kindDate                 // int with logicalType date
	kindTimeMicros           // long with logicalType time-micros
	kindTimestampMicros      // long with logicalType timestamp-micros
	kindLocalTimestampMicros // long with logicalType local-timestamp-micros
)

// maxArrayDims is PostgreSQL's MAXDIM: an array column's values may have
// up to this many dimensions, whatever the column declares (PostgreSQL
// does not enforce a declared dimension), so its schema nests that deep.
const maxArrayDims = 6

// column is one column of a table version as this encoder writes it.
type column struct {
	name      string // the column's name in PostgreSQL, as in the Row
	field     string // its Avro field name (see avroName)
	kind      kind
	precision int  // a decimal's
	scale     int  // a decimal's
	array     bool // an array of kind, elements nullable
	nullable  bool // a union with null: not declared NOT NULL
}

// columnOf maps a column's declared type to its Avro type (see the
// package documentation for the table).
func columnOf(ci *kafkasink.ColumnInfo) column {
	c := column{name: ci.Name, field: avroName(ci.Name), nullable: !ci.NotNull}
	t := ci.Type
	for t.Base != nil { // a domain is written as its base type
		t = t.Base
	}
	if t.Elem != nil {
		c.array = true
		t = t.Elem
		for t.Base != nil {
			t = t.Base
		}
	}
	switch t.Name {
	case "bool":
		c.kind = kindBoolean
	case "int2", "int4":
		c.kind = kindInt
	case "int8", "oid":
		c.kind = kindLong
	case "float4":
		c.kind = kindFloat
	case "float8":
		c.kind = kindDouble
	case "bytea":
		c.kind = kindBytes
	case "uuid":
		c.kind = kindUUID
	case "date":
		c.kind = kindDate
	case "time":
		c.kind = kindTimeMicros
	case "timestamp":
		c.kind = kindLocalTimestampMicros
	case "timestamptz":
		c.kind = kindTimestampMicros
	case "numeric":
		c.kind = kindString
		if p, s, ok := numericTypmod(t.Modifier); ok {
			c.kind, c.precision, c.scale = kindDecimal, p, s
		}
	default:
		c.kind = kindString
	}
	return c
}

// numericTypmod decodes a numeric's declared precision and scale. ok is
// false without a declaration (numeric alone, any scale per value) and for
// the scales PostgreSQL 15 allows but Avro's decimal does not: negative,
// or above the precision.
func numericTypmod(typmod int32) (precision, scale int, ok bool) {
	if typmod < 4 { // VARHDRSZ: no declared precision and scale
		return 0, 0, false
	}
	mod := typmod - 4
	precision = int(mod>>16) & 0xffff
	scale = int((mod&0x7ff)^1024) - 1024 // 11 bits, signed since PostgreSQL 15
	return precision, scale, scale >= 0 && scale <= precision
}

// avroName makes a PostgreSQL identifier an Avro name, [A-Za-z_][A-Za-z0-9_]*:
// every other character becomes '_', and a leading digit gets a '_' before
// it (as Debezium's field.name.adjustment.mode=avro does).
func avroName(s string) string {
	valid := s != "" && !isDigit(s[0])
	for i := 0; i < len(s) && valid; i++ {
		valid = isNameChar(s[i])
	}
	if valid {
		return s
	}
	var b strings.Builder
	if s == "" || isDigit(s[0]) {
		b.WriteByte('_')
	}
	for i := 0; i < len(s); i++ {
		if isNameChar(s[i]) {
			b.WriteByte(s[i])
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || isDigit(c)
}

// avroNamespace makes a topic name an Avro namespace: its dot-separated
// parts, each an Avro name.
func avroNamespace(topic string) string {
	parts := strings.Split(topic, ".")
	for i, p := range parts {
		parts[i] = avroName(p)
	}
	return strings.Join(parts, ".")
}

// tableColumns maps every column of rel, and refuses two columns whose
// Avro names coincide.
func tableColumns(e *kafkasink.Event) ([]column, error) {
	cols := make([]column, len(e.Relation.Columns))
	seen := make(map[string]string, len(cols))
	for i := range e.Relation.Columns {
		cols[i] = columnOf(&e.Relation.Columns[i])
		if other, dup := seen[cols[i].field]; dup {
			return nil, fmt.Errorf("columns %q and %q of %s are both the Avro field %q (Avro names allow only letters, digits and '_'); rename one of them",
				other, cols[i].name, kafkasink.TableName(e.Schema, e.Table), cols[i].field)
		}
		seen[cols[i].field] = cols[i].name
	}
	return cols, nil
}

// valueSchema is the Avro schema of the envelope (see the package
// documentation) whose row images have cols, in namespace ns.
func valueSchema(ns string, cols []column) string {
	var b strings.Builder
	b.WriteString(`{"type":"record","name":"Envelope","namespace":"` + ns + `","fields":[`)
	b.WriteString(`{"name":"id","type":"string"},`)
	b.WriteString(`{"name":"op","type":"string"},`)
	b.WriteString(`{"name":"schema","type":"string"},`)
	b.WriteString(`{"name":"table","type":"string"},`)
	b.WriteString(`{"name":"lsn","type":"long"},`)
	b.WriteString(`{"name":"commit_lsn","type":"long"},`)
	b.WriteString(`{"name":"index","type":"long"},`)
	b.WriteString(`{"name":"xid","type":"long"},`)
	b.WriteString(`{"name":"commit_time","type":["null",{"type":"long","logicalType":"timestamp-micros"}],"default":null},`)
	b.WriteString(`{"name":"key","type":{"type":"array","items":"string"}},`)
	b.WriteString(`{"name":"before","type":["null",`)
	writeRecord(&b, "Value", "", cols)
	b.WriteString(`],"default":null},`)
	b.WriteString(`{"name":"after","type":["null","Value"],"default":null},`)
	b.WriteString(`{"name":"unchanged","type":{"type":"array","items":"string"}},`)
	b.WriteString(`{"name":"truncate","type":["null",{"type":"record","name":"Truncate","fields":[` +
		`{"name":"cascade","type":"boolean"},{"name":"restart_identity","type":"boolean"}]}],"default":null},`)
	b.WriteString(`{"name":"backfill_run_id","type":["null","string"],"default":null}`)
	b.WriteString(`]}`)
	return b.String()
}

// keySchema is the Avro schema of the key record of cols, in namespace ns.
func keySchema(ns string, cols []column) string {
	var b strings.Builder
	writeRecord(&b, "Key", ns, cols)
	return b.String()
}

// writeRecord writes a record schema named name, in namespace ns unless
// it is empty (then the enclosing one's), with a field per column.
func writeRecord(b *strings.Builder, name, ns string, cols []column) {
	b.WriteString(`{"type":"record","name":"` + name + `",`)
	if ns != "" {
		b.WriteString(`"namespace":"` + ns + `",`)
	}
	b.WriteString(`"fields":[`)
	for i := range cols {
		c := &cols[i]
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"name":"` + c.field + `","type":`)
		if c.nullable {
			b.WriteString(`["null",`)
		}
		if c.array {
			writeArray(b, c, maxArrayDims)
		} else {
			writeType(b, c)
		}
		if c.nullable {
			b.WriteString(`],"default":null`)
		}
		if c.name != c.field {
			b.WriteString(`,"doc":` + strconv.Quote("column "+c.name))
		}
		b.WriteByte('}')
	}
	b.WriteString(`]}`)
}

// writeArray writes an array of c's kind whose elements may be null or,
// while dims allows, arrays of the next dimension.
func writeArray(b *strings.Builder, c *column, dims int) {
	b.WriteString(`{"type":"array","items":["null",`)
	writeType(b, c)
	if dims > 1 {
		b.WriteByte(',')
		writeArray(b, c, dims-1)
	}
	b.WriteString(`]}`)
}

// writeType writes the Avro type of c's kind.
func writeType(b *strings.Builder, c *column) {
	switch c.kind {
	case kindBoolean:
		b.WriteString(`"boolean"`)
	case kindInt:
		b.WriteString(`"int"`)
	case kindLong:
		b.WriteString(`"long"`)
	case kindFloat:
		b.WriteString(`"float"`)
	case kindDouble:
		b.WriteString(`"double"`)
	case kindString:
		b.WriteString(`"string"`)
	case kindBytes:
		b.WriteString(`"bytes"`)
	case kindDecimal:
		b.WriteString(`{"type":"bytes","logicalType":"decimal","precision":` + strconv.Itoa(c.precision) + `,"scale":` + strconv.Itoa(c.scale) + `}`)
	case kindUUID:
		b.WriteString(`{"type":"string","logicalType":"uuid"}`)
	case kindDate:
		b.WriteString(`{"type":"int","logicalType":"date"}`)
	case kindTimeMicros:
		b.WriteString(`{"type":"long","logicalType":"time-micros"}`)
	case kindTimestampMicros:
		b.WriteString(`{"type":"long","logicalType":"timestamp-micros"}`)
	case kindLocalTimestampMicros:
		b.WriteString(`{"type":"long","logicalType":"local-timestamp-micros"}`)
	}
}
