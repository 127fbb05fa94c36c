package debezium

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/encoding/avrobin"
	"github.com/kafkasink/kafkasink/encoding/jsonw"
)

// TestAvroTextLengths: a string the writer builds in place (beginText,
// endText) has the length prefix Avro's string of the same text has,
// when the prefix takes one byte (below 64), two or three, and the text
// moved up behind it intact.
func TestAvroTextLengths(t *testing.T) {
	for _, n := range []int{0, 1, 63, 64, 65, 127, 128, 8191, 8192, 100_000} {
		text := strings.Repeat("0123456789", n/10+1)[:n]
		for _, optional := range []bool{false, true} {
			s := plainSchema("string")
			s.optional = optional
			w := avroWriter([]byte("head"), &s)
			mark := w.beginText()
			w.buf = append(w.buf, text...)
			w.endText(mark)
			want := []byte("head")
			if optional {
				want = append(want, s.valueBranch())
			}
			want = avrobin.AppendString(want, text)
			if err := w.failed(); err != nil || !bytes.Equal(w.buf, want) {
				t.Errorf("%d bytes, optional %t: %q (%v), want %q", n, optional, w.buf[:min(len(w.buf), 12)], err, want[:min(len(want), 12)])
			}
		}
	}
}

// TestAvroTextInvalidUTF8: a string with bytes that are not UTF-8 holds
// in Avro the text its JSON string holds (U+FFFD for each such byte), so
// the two encodings give readers one value.
func TestAvroTextInvalidUTF8(t *testing.T) {
	for _, s := range []string{"ok", "a\xffb", "\xff\xfe", "é\xc3", "\xed\xa0\x80 surrogate", strings.Repeat("\x80", 70)} {
		var fromJSON string
		if err := json.Unmarshal(jsonw.AppendString(nil, s), &fromJSON); err != nil {
			t.Fatal(err)
		}
		schema := plainSchema("string")
		w := avroWriter(nil, &schema)
		w.str(s)
		if want := avrobin.AppendString(nil, fromJSON); !bytes.Equal(w.buf, want) {
			t.Errorf("%q: Avro %q, want %q (the JSON string's text)", s, w.buf, want)
		}
	}
}

// TestAvroValueOutsideItsSchema: a value the Avro schema of its column
// cannot hold (a text in an int4 column, an int4 column's integer beyond
// Avro's int, a NULL in a NOT NULL column without a default) is an
// EncodeError naming the column, not a record readers would misread.
func TestAvroValueOutsideItsSchema(t *testing.T) {
	for _, c := range []struct {
		name    string
		value   any
		notNull bool
		want    string
	}{
		{"text", "abc", false, "a string where the schema has optional int32"},
		{"beyond int", int64(1) << 40, false, "beyond Avro's int"},
		{"null", nil, true, "null where the schema (int32) requires a value"},
	} {
		e := &kafkasink.Event{
			Op: kafkasink.OpInsert, Schema: "public", Table: "t", Key: []string{"id"},
			After: kafkasink.Row{{Name: "id", Value: int32(1)}, {Name: "n", Value: c.value}},
			Relation: &kafkasink.Relation{Columns: []kafkasink.ColumnInfo{
				{Name: "id", Type: &kafkasink.TypeInfo{Name: "int4", Kind: 'b', Modifier: -1}, NotNull: true},
				{Name: "n", Type: &kafkasink.TypeInfo{Name: "int4", Kind: 'b', Modifier: -1}, NotNull: c.notNull},
			}},
		}
		_, err := Encoder{}.AppendAvro(nil, e)
		var ee *kafkasink.EncodeError
		if !errors.As(err, &ee) || ee.Column != "n" || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an EncodeError for column n saying %q", c.name, err, c.want)
		}
	}
}

// TestAppendAvroRefusals: what AppendAvro and AppendAvroKey cannot write
// is an EncodeError saying why, as their docs say: an event without a
// Relation (the Avro follows the declared columns), and the key of a
// truncate or of an event without key columns (the sink keys those).
func TestAppendAvroRefusals(t *testing.T) {
	rel := &kafkasink.Relation{Columns: []kafkasink.ColumnInfo{{Name: "id", Type: &kafkasink.TypeInfo{Name: "int4", Kind: 'b', Modifier: -1}, NotNull: true}}}
	row := kafkasink.Row{{Name: "id", Value: int32(1)}}
	d := Encoder{}
	var ee *kafkasink.EncodeError
	if _, err := d.AppendAvro(nil, &kafkasink.Event{Op: kafkasink.OpInsert, Schema: "public", Table: "t", After: row}); !errors.As(err, &ee) || !strings.Contains(err.Error(), "set Event.Relation") {
		t.Errorf("AppendAvro without a Relation: %v, want an EncodeError saying to set Event.Relation", err)
	}
	if _, err := d.AppendAvroKey(nil, &kafkasink.Event{Op: kafkasink.OpInsert, Schema: "public", Table: "t", After: row}, []string{"id"}); !errors.As(err, &ee) || !strings.Contains(err.Error(), "set Event.Relation") {
		t.Errorf("AppendAvroKey without a Relation: %v, want an EncodeError saying to set Event.Relation", err)
	}
	for _, c := range []struct {
		name    string
		e       *kafkasink.Event
		columns []string
	}{
		{"truncate", &kafkasink.Event{Op: kafkasink.OpTruncate, Schema: "public", Table: "t", Relation: rel}, []string{"id"}},
		{"no key columns", &kafkasink.Event{Op: kafkasink.OpInsert, Schema: "public", Table: "t", After: row, Relation: rel}, nil},
	} {
		if _, err := d.AppendAvroKey(nil, c.e, c.columns); !errors.As(err, &ee) || !strings.Contains(err.Error(), "the sink keys it") {
			t.Errorf("AppendAvroKey of a %s: %v, want an EncodeError saying the sink keys it", c.name, err)
		}
	}
	if out, err := d.AppendAvroKey(nil, &kafkasink.Event{Op: kafkasink.OpInsert, Schema: "public", Table: "t", After: row, Relation: rel}, []string{"id"}); err != nil || !bytes.Equal(out, avrobin.AppendLong(nil, 1)) {
		t.Errorf("AppendAvroKey of id 1: %x, %v; want the Key record holding the int 1", out, err)
	}
}
