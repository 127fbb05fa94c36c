package debezium

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/kafkasink/kafkasink"
)

// jsonConnectSchema reads a Connect schema as JsonConverter writes it:
// the form the kafkasinkavro module read from Encode's SchemasEnable
// documents before ValueSchema and FrameSchemas gave it
// ConnectSchema.
type jsonConnectSchema struct {
	Type       string              `json:"type"`
	Fields     []jsonConnectSchema `json:"fields"`
	Items      *jsonConnectSchema  `json:"items"`
	Optional   bool                `json:"optional"`
	Name       string              `json:"name"`
	Version    int                 `json:"version"`
	Doc        string              `json:"doc"`
	Parameters json.RawMessage     `json:"parameters"`
	Default    json.RawMessage     `json:"default"`
	Field      string              `json:"field"`
}

// exported is what ConnectSchema holds of s: the same members, the
// parameters as a list in their order.
func (s *jsonConnectSchema) exported(t *testing.T) *ConnectSchema {
	t.Helper()
	out := &ConnectSchema{Type: s.Type, Optional: s.Optional, Name: s.Name, Version: s.Version, Doc: s.Doc, Default: s.Default, Field: s.Field}
	for i := range s.Fields {
		out.Fields = append(out.Fields, *s.Fields[i].exported(t))
	}
	if s.Items != nil {
		out.Items = s.Items.exported(t)
	}
	if len(s.Parameters) > 0 {
		dec := json.NewDecoder(bytes.NewReader(s.Parameters))
		if _, err := dec.Token(); err != nil { // {
			t.Fatal(err)
		}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				t.Fatal(err)
			}
			var v string
			if err := dec.Decode(&v); err != nil {
				t.Fatal(err)
			}
			out.Parameters = append(out.Parameters, ConnectParameter{Name: k.(string), Value: v})
		}
	}
	return out
}

// TestValueSchemaIsTheDocumentsSchema: ValueSchema is the schema Encode
// writes with SchemasEnable, member for member, for every golden table
// under every golden configuration, with and without
// MatchDebeziumLosses and LSNAsString; FrameSchemas are those of
// AppendFrame's records.
func TestValueSchemaIsTheDocumentsSchema(t *testing.T) {
	t.Parallel()
	for config, opts := range goldenConfigs {
		for _, variant := range []struct {
			name   string
			losses bool
			lsn    bool
		}{{"", false, false}, {"/losses", true, false}, {"/lsn-as-string", false, true}} {
			enc := opts
			enc.Name, enc.SchemasEnable, enc.MatchDebeziumLosses, enc.LSNAsString = "dbz", true, variant.losses, variant.lsn
			for table, g := range goldenRelations {
				e := &kafkasink.Event{Op: kafkasink.OpInsert, Schema: "public", Table: table, Relation: g.rel}
				doc, err := enc.Encode(nil, e)
				if err != nil {
					t.Fatalf("%s%s %s: %v", config, variant.name, table, err)
				}
				var parsed struct {
					Schema jsonConnectSchema `json:"schema"`
				}
				if err := json.Unmarshal(doc, &parsed); err != nil {
					t.Fatal(err)
				}
				got, err := enc.ValueSchema(e)
				if err != nil {
					t.Fatal(err)
				}
				if want := parsed.Schema.exported(t); !reflect.DeepEqual(got, want) {
					t.Errorf("%s%s %s: ValueSchema differs from the document's schema:\ngot  %+v\nwant %+v", config, variant.name, table, got, want)
				}
			}
		}
	}
	enc := Encoder{Name: "dbz", SchemasEnable: true, ProvideTransactionMetadata: true}
	doc, keyLen := enc.AppendFrame(nil, &kafkasink.Event{Op: kafkasink.OpInsert, Schema: "public", Table: "t"}, false)
	key, value := enc.FrameSchemas()
	for _, part := range []struct {
		name string
		doc  []byte
		got  *ConnectSchema
	}{{"key", doc[:keyLen], key}, {"value", doc[keyLen:], value}} {
		var parsed struct {
			Schema jsonConnectSchema `json:"schema"`
		}
		if err := json.Unmarshal(part.doc, &parsed); err != nil {
			t.Fatal(err)
		}
		if want := parsed.Schema.exported(t); !reflect.DeepEqual(part.got, want) {
			t.Errorf("FrameSchemas' %s differs from the record's schema:\ngot  %+v\nwant %+v", part.name, part.got, want)
		}
	}
	if _, err := enc.ValueSchema(&kafkasink.Event{Op: kafkasink.OpInsert, Schema: "s", Table: "t"}); err == nil {
		t.Error("ValueSchema of an event without a Relation: no error")
	}
}
