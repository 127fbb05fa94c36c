package debezium

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kafkasink/kafkasink"
)

// tHstore is the hstore extension's type, as pgcdc describes it.
var tHstore = &kafkasink.TypeInfo{Name: "hstore", Modifier: -1, Kind: 'b'}

// hstoreJSON is the JSON object text Debezium writes for the hstore text
// s (hstoreInJavaOrder, then appendHstoreJSON), false when s is refused.
func hstoreJSON(s string) (string, bool) {
	pairs, ok := hstoreInJavaOrder(s, nil)
	if !ok {
		return "", false
	}
	return string(appendHstoreJSON(nil, s, pairs, false)), true
}

// TestAppendHstoreJSON: an hstore's text becomes the JSON object text
// Debezium writes (hstore.handling.mode json): NULL values null, the
// empty hstore {}, keys and values escaped as Jackson escapes them
// (upper-case hex, DEL and U+2028 as they are, as Debezium's golden
// files show), the keys in java.util.HashMap's order; a text that is not
// hstore's output is refused.
func TestAppendHstoreJSON(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"empty", ``, `{}`},
		{"NULL value", `"a"=>"1", "b"=>NULL`, `{"a":"1","b":null}`},
		{"empty key and value", `""=>""`, `{"":""}`},
		{"quote and backslash", `"q\"uote"=>"back\\slash"`, `{"q\"uote":"back\\slash"}`},
		{"short escapes", "\"\b\t\n\f\r\"=>\"x\"", `{"\b\t\n\f\r":"x"}`},
		{"other control bytes", "\"\x01\x1f\x7f\"=>\"\x00\"", "{\"\\u0001\\u001F\x7f\":\"\\u0000\"}"},
		{"non-ASCII", "\"é ✓\u2028\"=>\"😀\"", "{\"é ✓\u2028\":\"😀\"}"},
		{"=> and comma inside quotes", `"a"=>"b", "=>"=>", "`, `{"a":"b","=>":", "}`},
		// Aa and BB have one Java hash code: one bucket, insertion order.
		{"one Java hash", `"Aa"=>"1", "BB"=>"2"`, `{"Aa":"1","BB":"2"}`},
		// k010 ... k098 are in one bucket of 16 and of 32 buckets: the 9th
		// makes Java's table grow to 32 buckets (it grows a table under
		// 64 rather than make a bucket a tree), which puts x081 first.
		{"nine in a bucket", `"k010"=>"", "k021"=>"", "k032"=>"", "k043"=>"", "k054"=>"", "k065"=>"", "k076"=>"", "k087"=>"", "k098"=>"", "x081"=>""`,
			`{"x081":"","k010":"","k021":"","k032":"","k043":"","k054":"","k065":"","k076":"","k087":"","k098":""}`},
		// A 10th in that bucket grows it to 64 buckets, which splits it.
		{"ten in a bucket", `"k010"=>"", "k021"=>"", "k032"=>"", "k043"=>"", "k054"=>"", "k065"=>"", "k076"=>"", "k087"=>"", "k098"=>"", "k120"=>"", "x081"=>""`,
			`{"x081":"","k021":"","k043":"","k065":"","k087":"","k120":"","k010":"","k032":"","k054":"","k076":"","k098":""}`},
	}
	// The orders of more than one key are java.util.HashMap's (Java 17,
	// keySet() after put in the order of the text), checked with jshell.
	for _, c := range cases {
		if got, ok := hstoreJSON(c.in); !ok || got != c.want {
			t.Errorf("%s: hstoreJSON(%q) = %q, %v; want %q", c.name, c.in, got, ok, c.want)
		}
	}
	for _, in := range []string{
		`a=>b`,                          // unquoted: hstore's output quotes
		`"a"=>`,                         // no value
		`"a"=>"1`,                       // unterminated
		`"a"=>"1","b"=>"2"`,             // no space after the comma
		`"a"=>"1", `,                    // trailing separator
		`"a"=>null`,                     // NULL is upper case
		`"a\`,                           // a backslash at the end
		`"a"=>"1", "a"=>"2"`,            // a key twice
		`"Aa"=>"1", "BB"=>"", "Aa"=>""`, // a key twice, with another of its hash between
	} {
		if got, ok := hstoreJSON(in); ok {
			t.Errorf("hstoreJSON(%q) = %q, want it refused", in, got)
		}
	}
}

// TestHstoreManyKeysMatchesGolden: for the workload's
// toast_types.t_hstore, 200 keys (a HashMap of 512 buckets),
// hstoreJSON writes what Debezium 3.6.1 wrote for its snapshot
// read, byte for byte. (The types table's hstores are in typesRows,
// which TestDebeziumValuesMatchGolden compares through the encoder.)
func TestHstoreManyKeysMatchesGolden(t *testing.T) {
	var want string
	for _, img := range goldenImages(t, "defaults-schemas-false.jsonl", "toast_types") {
		if img.Op == "r" {
			want = goldenColumn(t, img.After, "t_hstore")
		}
	}
	got, ok := hstoreJSON(toastHstoreText())
	if !ok || got != want {
		t.Errorf("hstoreJSON(toast_types.t_hstore) =\n%.300s…, %v; Debezium wrote\n%.300s…", got, ok, want)
	}
}

// toastHstoreText is PostgreSQL's text of the workload's
// toast_types.t_hstore: hstore(md5 of i+1000 => md5 of -i-1000) for i in
// 1..200, keys in hstore's order (by length, then bytes).
func toastHstoreText() string {
	md5hex := func(i int) string {
		sum := md5.Sum([]byte(strconv.Itoa(i)))
		return hex.EncodeToString(sum[:])
	}
	pairs := make([]string, 0, 200)
	for i := 1; i <= 200; i++ {
		pairs = append(pairs, fmt.Sprintf(`"%s"=>"%s"`, md5hex(i+1000), md5hex(-i-1000)))
	}
	slices.Sort(pairs) // every key has 32 characters
	return strings.Join(pairs, ", ")
}

// goldenColumn returns a string column of a golden row image.
func goldenColumn(t *testing.T, row json.RawMessage, column string) string {
	t.Helper()
	var cols map[string]json.RawMessage
	if err := json.Unmarshal(row, &cols); err != nil {
		t.Fatal(err)
	}
	var s string
	if err := json.Unmarshal(cols[column], &s); err != nil {
		t.Fatalf("the golden row's %s is not a string (%v): %.200s", column, err, row)
	}
	return s
}

// TestDebeziumHstoreValue: through the encoder, an hstore column is the
// JSON object text in a string field named io.debezium.data.Json (with
// SchemasEnable), NULL stays null, and a value not in hstore's text (the
// binary form, under pgoutput's binary option) is an EncodeError naming
// the form, not a string Debezium's readers would misparse.
func TestDebeziumHstoreValue(t *testing.T) {
	rel := &kafkasink.Relation{Columns: []kafkasink.ColumnInfo{{Name: "id", Type: tInt4, NotNull: true}, {Name: "h", Type: tHstore}}}
	event := func(v any) *kafkasink.Event {
		return &kafkasink.Event{Op: kafkasink.OpInsert, Schema: "s", Table: "t", Relation: rel,
			After: kafkasink.Row{{Name: "id", Value: int32(1)}, {Name: "h", Value: v}}}
	}
	for _, schemas := range []bool{false, true} {
		enc := Encoder{SchemasEnable: schemas}
		for v, want := range map[any]string{`"a"=>"1", "b"=>NULL`: `"{\"a\":\"1\",\"b\":null}"`, nil: `null`} {
			out, err := enc.Encode(nil, event(v))
			if err != nil {
				t.Fatal(err)
			}
			if got := afterOf(t, out, schemas)["h"]; string(got) != want {
				t.Errorf("schemas=%v: h = %s, want %s", schemas, got, want)
			}
			if schemas && !strings.Contains(string(out), `{"type":"string","optional":true,"name":"io.debezium.data.Json","version":1,"field":"h"}`) {
				t.Errorf("the schema does not declare h as io.debezium.data.Json: %s", out)
			}
		}
		_, err := enc.Encode(nil, event([]byte{0, 0, 0, 1}))
		if err == nil || !strings.Contains(err.Error(), "hstore text") {
			t.Errorf("schemas=%v: the binary form: err = %v, want an error naming hstore's text form", schemas, err)
		}
	}
}

// FuzzHstoreJSON: whatever the text, hstoreInJavaOrder refuses it or
// appendHstoreJSON writes a JSON object with one member per pair, and
// the form escaped again for a JSON string (inString, what writeHstore
// writes in JSON) is a JSON string holding exactly that object's text.
func FuzzHstoreJSON(f *testing.F) {
	for _, s := range []string{``, `"a"=>"1", "b"=>NULL`, `"q\"uote"=>"back\\slash"`, "\"\x01\u2028\"=>\"😀\"",
		`"Aa"=>"1", "BB"=>"2"`, `"a"=>"1", "a"=>"2"`, `"a\`, "\"\xff\"=>\"\xc3\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		pairs, ok := hstoreInJavaOrder(s, nil)
		if !ok {
			return
		}
		text := appendHstoreJSON(nil, s, pairs, false)
		var members map[string]any
		if err := json.Unmarshal(text, &members); err != nil {
			t.Fatalf("%q: %v: %s", s, err, text)
		}
		if len(members) != len(pairs) && utf8.ValidString(s) {
			t.Fatalf("%q: %d members for %d pairs: %s", s, len(members), len(pairs), text)
		}
		quoted := append(appendHstoreJSON([]byte{'"'}, s, pairs, true), '"')
		var inner string
		if err := json.Unmarshal(quoted, &inner); err != nil || inner != string(text) {
			t.Fatalf("%q: the string %s holds %q (%v), want %s", s, quoted, inner, err, text)
		}
	})
}
