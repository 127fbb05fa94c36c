package jsonschema

import (
	"strings"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/encoding/jsonw"
)

// quote is s as a JSON string.
func quote(s string) string { return string(jsonw.AppendString(nil, s)) }

// column is one column of a table version and its JSON Schema.
type column struct {
	name   string
	schema string // the JSON Schema of its values, null included when nullable
}

// columnOf returns the schema of ci's values (see the package
// documentation's table).
func columnOf(ci *kafkasink.ColumnInfo) column {
	s := typeSchema(ci.Type)
	if !ci.NotNull {
		s = `{"oneOf":[{"type":"null"},` + s + `]}`
	}
	return column{name: ci.Name, schema: s}
}

// typeSchema is the schema of a non-null value of t. An array's elements
// are null, of its element type, or arrays of the next dimension, which
// the schema leaves unchecked: PostgreSQL does not enforce a column's
// declared dimensions.
func typeSchema(t *kafkasink.TypeInfo) string {
	for t.Base != nil { // a domain is written as its base type
		t = t.Base
	}
	if t.Elem != nil {
		return `{"type":"array","items":{"anyOf":[{"type":"null"},` + typeSchema(t.Elem) + `,{"type":"array"}]}}`
	}
	if t.Kind == 'c' {
		return `{"type":"object"}`
	}
	switch t.Name {
	case "int2", "int4", "int8", "oid":
		return `{"type":"integer"}`
	case "float4", "float8":
		return `{"oneOf":[{"type":"number"},{"type":"string","enum":["NaN","Infinity","-Infinity"]}]}`
	case "bool":
		return `{"type":"boolean"}`
	case "bytea":
		return `{"type":"string","contentEncoding":"base64"}`
	}
	return `{"type":"string"}`
}

// rowSchema is the schema of a row image of cols: an object with a
// property per column, none required, no other.
func rowSchema(cols []column) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","additionalProperties":false,"properties":{`)
	for i, c := range cols {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(quote(c.name) + ":" + c.schema)
	}
	b.WriteString(`}}`)
	return b.String()
}

// valueSchema is the schema, titled title, of the envelope whose row
// images have cols.
func valueSchema(title string, cols []column) string {
	row := rowSchema(cols)
	return `{"$schema":"http://json-schema.org/draft-07/schema#","title":` + quote(title) + `,` +
		`"type":"object","additionalProperties":false,"properties":{` +
		`"id":{"type":"string"},` +
		`"op":{"type":"string","enum":["insert","update","delete","truncate","read"]},` +
		`"schema":{"type":"string"},"table":{"type":"string"},` +
		`"lsn":{"type":"string"},"commit_lsn":{"type":"string"},` +
		`"index":{"type":"integer"},"xid":{"type":"integer"},` +
		`"commit_time":{"oneOf":[{"type":"null"},{"type":"string"}]},` +
		`"key":{"type":"array","items":{"type":"string"}},` +
		`"before":{"oneOf":[{"type":"null"},` + row + `]},` +
		`"after":{"oneOf":[{"type":"null"},` + row + `]},` +
		`"unchanged":{"type":"array","items":{"type":"string"}},` +
		`"truncate":{"type":"object","additionalProperties":false,"properties":{"cascade":{"type":"boolean"},"restart_identity":{"type":"boolean"}},"required":["cascade","restart_identity"]},` +
		`"backfill_run_id":{"type":"string"}},` +
		`"required":["id","op","schema","table","lsn","commit_lsn","index","xid","commit_time","key","before","after"]}`
}

// keySchema is the schema, titled title, of the key object of cols, each
// required.
func keySchema(title string, cols []column) string {
	var b strings.Builder
	b.WriteString(`{"$schema":"http://json-schema.org/draft-07/schema#","title":` + quote(title) + `,"type":"object","additionalProperties":false,"properties":{`)
	for i, c := range cols {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(quote(c.name) + ":" + c.schema)
	}
	b.WriteString(`},"required":[`)
	for i, c := range cols {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(quote(c.name))
	}
	b.WriteString(`]}`)
	return b.String()
}
