package debezium

import (
	"bytes"
	"testing"

	"github.com/kafkasink/kafkasink"
)

// TestDebeziumAppendKeyPayload: AppendKeyPayload is the payload of the
// key document Encoder writes with SchemasEnable (whose keys the
// golden tests measure against Debezium's), under the encoder's options,
// for a one- and a two-column key; a truncate's key is AppendKey's in
// KeyJSON.
func TestDebeziumAppendKeyPayload(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		enc  Encoder
		e    kafkasink.Event
		want string
	}{
		{"int key", Encoder{}, kafkasink.Event{Op: kafkasink.OpInsert, Schema: "s", Table: "t", Key: []string{"id"}, Relation: goldenRelations["ident_default"].rel,
			After: kafkasink.Row{{Name: "id", Value: int32(7)}, {Name: "name", Value: "x"}}}, `{"id":7}`},
		{"two columns", Encoder{}, kafkasink.Event{Op: kafkasink.OpDelete, Schema: "s", Table: "t", Key: []string{"a", "b"}, Relation: goldenRelations["multi_pk"].rel,
			Before: kafkasink.Row{{Name: "a", Value: "k"}, {Name: "b", Value: int32(2)}}}, `{"a":"k","b":2}`},
		{"truncate", Encoder{}, kafkasink.Event{Op: kafkasink.OpTruncate, Schema: "s", Table: "t", Position: kafkasink.Position{LSN: 0x16, Index: 3}, Key: []string{"id"},
			Relation: goldenRelations["truncated"].rel}, `"0/16:3"`},
	} {
		got, err := c.enc.AppendKeyPayload([]byte("prefix"), &c.e, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !bytes.HasPrefix(got, []byte("prefix")) || string(got[len("prefix"):]) != c.want {
			t.Errorf("%s: %s, want prefix%s", c.name, got, c.want)
		}
		schemas := c.enc
		schemas.SchemasEnable = true
		doc, err := schemas.appendKey(nil, &c.e, nil, true)
		if err != nil {
			t.Fatal(err)
		}
		if payload := splitSchemaDoc(t, c.name, doc).Payload; !bytes.Equal(payload, got[len("prefix"):]) {
			t.Errorf("%s: %s, want the SchemasEnable key's payload %s", c.name, got[len("prefix"):], payload)
		}
	}
}
