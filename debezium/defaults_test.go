package debezium

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
)

// goldenImage is a change record's before and after images as Debezium
// wrote them (the payload's, with schemas.enable=true), bytes unchanged.
type goldenImage struct {
	Op     string          `json:"op"`
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
}

// goldenImages returns the change records of table in a golden file, in
// order (tombstones left out).
func goldenImages(t *testing.T, file, table string) []goldenImage {
	t.Helper()
	f, err := os.Open("../testdata/debezium/" + file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []goldenImage
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20) // toast_types's records are over 100 kB
	for sc.Scan() {
		var rec struct {
			Topic string
			Value json.RawMessage
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Topic != "dbz.dbzconf."+table || string(rec.Value) == "null" {
			continue
		}
		v := rec.Value
		if strings.HasSuffix(file, "-schemas-true.jsonl") {
			v = splitSchemaDoc(t, "Debezium's value", v).Payload
		}
		var img goldenImage
		if err := json.Unmarshal(v, &img); err != nil {
			t.Fatal(err)
		}
		out = append(out, img)
	}
	if err := sc.Err(); err != nil || len(out) == 0 {
		t.Fatalf("%s: %d records of %s, %v", file, len(out), table, err)
	}
	return out
}

// encodedImages encodes e and returns its before and after images.
func encodedImages(t *testing.T, enc Encoder, e *kafkasink.Event) goldenImage {
	t.Helper()
	out, err := enc.Encode(nil, e)
	if err != nil {
		t.Fatal(err)
	}
	if enc.SchemasEnable {
		out = splitSchemaDoc(t, "our value", out).Payload
	}
	var img goldenImage
	if err := json.Unmarshal(out, &img); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return img
}

// mixedDefaultsNulls is a row of mixed_defaults with NULL in every
// column but id and d_serial, as the workload inserts ids 2 and 12.
func mixedDefaultsNulls(id, serial int32) kafkasink.Row {
	row := kafkasink.Row{}
	for _, c := range mixedDefaultsRelation.Columns {
		col := kafkasink.Column{Name: c.Name}
		switch c.Name {
		case "id":
			col.Value = id
		case "d_serial":
			col.Value = serial
		}
		row = append(row, col)
	}
	return row
}

// TestDebeziumDefaultsReplaceNull encodes mixed_defaults' streamed insert
// of explicit NULLs (id 12) and its REPLICA IDENTITY DEFAULT delete (a
// before image of the key only) in every captured configuration, both
// schemas.enable settings: with MatchDebeziumLosses each NULL of a column
// with a declared default is that default, in the configuration's value
// form, and the images are Debezium's bytes (JsonConverter's
// replace.null.with.default); without it they stay null and the schema
// declares no default (JsonConverter would read the NULLs as defaults).
func TestDebeziumDefaultsReplaceNull(t *testing.T) {
	t.Parallel()
	insert := &kafkasink.Event{Op: kafkasink.OpInsert, Schema: "dbzconf", Table: "mixed_defaults", Relation: mixedDefaultsRelation,
		Key: []string{"id"}, After: mixedDefaultsNulls(12, 200)}
	del := &kafkasink.Event{Op: kafkasink.OpDelete, Schema: "dbzconf", Table: "mixed_defaults", Relation: mixedDefaultsRelation,
		Key: []string{"id"}, Before: kafkasink.Row{{Name: "id", Value: int32(1)}}}
	for config, opts := range goldenConfigs {
		for _, schemas := range []bool{false, true} {
			file := config + "-schemas-" + map[bool]string{false: "false", true: "true"}[schemas] + ".jsonl"
			var wantInsert, wantDelete *goldenImage
			for _, g := range goldenImages(t, file, "mixed_defaults") {
				switch {
				case g.Op == "c" && bytes.Contains(g.After, []byte(`"id":12,`)):
					wantInsert = &g
				case g.Op == "d":
					wantDelete = &g
				}
			}
			if wantInsert == nil || wantDelete == nil {
				t.Fatalf("%s: no insert of id 12 or no delete of mixed_defaults", file)
			}
			enc := opts
			enc.Name, enc.SchemasEnable, enc.MatchDebeziumLosses = "dbz", schemas, true
			if got := encodedImages(t, enc, insert).After; !bytes.Equal(got, wantInsert.After) {
				t.Errorf("%s insert of NULLs, MatchDebeziumLosses:\n got %s\nwant %s", file, got, wantInsert.After)
			}
			if got := encodedImages(t, enc, del).Before; !bytes.Equal(got, wantDelete.Before) {
				t.Errorf("%s delete, MatchDebeziumLosses:\n got %s\nwant %s", file, got, wantDelete.Before)
			}
			enc.MatchDebeziumLosses = false
			if got := string(encodedImages(t, enc, insert).After); !strings.Contains(got, `"d_int":null,`) || !strings.Contains(got, `"d_now":null,`) {
				t.Errorf("%s insert of NULLs without MatchDebeziumLosses: %s, want the NULLs kept", file, got)
			}
			if out, _ := enc.Encode(nil, insert); schemas && (bytes.Contains(out, []byte(`"default":42,`)) || bytes.Contains(out, []byte(`"default":"hello",`))) {
				t.Errorf("%s without MatchDebeziumLosses: the schema declares a default: %s", file, out)
			}
		}
	}
}

// TestDebeziumDefaultForms checks Debezium's reading of DEFAULT
// expressions beyond the workload's: a function call is the type's
// placeholder, a NULL::<type> of a number or boolean, a numeric without
// a scale (precise), an expression, a domain, an enum, an array and an
// unterminated quote have none, and a numeric's value is raised to the
// column's scale.
func TestDebeziumDefaultForms(t *testing.T) {
	t.Parallel()
	tNum5x3 := &kafkasink.TypeInfo{Name: "numeric", Modifier: 5<<16 | 3 + 4, Kind: 'b'}
	cases := []struct {
		enc  Encoder
		typ  *kafkasink.TypeInfo
		expr string
		want string // "" for none
	}{
		{Encoder{}, tInt4, "42", "42"},
		{Encoder{}, tInt2, "'-3'::integer", "-3"},
		{Encoder{}, tInt2, "70000", ""},
		{Encoder{}, tInt8, "nextval('s'::regclass)", "0"},
		{Encoder{}, tInt4, "NULL::integer", ""},
		{Encoder{}, tInt4, "(1 + 2)", ""},
		{Encoder{}, tBool, "false", "false"},
		{Encoder{}, tFloat8, "'100000000000000000000'::numeric", "100000000000000000000"}, // Debezium: 1.0E20
		{Encoder{}, tNum5x3, "1.5", `"Bdw="`},                                             // 1.500: 1500
		{Encoder{DecimalHandling: DecimalString}, tNum5x3, "1.5", `"1.5"`},
		{Encoder{}, tNumeric, "1.5", ""},
		{Encoder{DecimalHandling: DecimalDouble}, tNumeric, "1.5", "1.5"},
		{Encoder{}, tText, "upper('x'::text)", `""`},
		{Encoder{}, tText, "'it''s'::text", `"it"`},
		{Encoder{}, tText, "'open", ""},
		{Encoder{}, tDate, "CURRENT_DATE", ""},
		{Encoder{TimePrecision: TimeIsostring}, tDate, "'2024-02-29'::date", `"2024-02-29Z"`},
		{Encoder{}, tTimestamp, "now()", "0"},
		{Encoder{}, tTstz, "'2024-02-29 08:15:59.5+05:30'::timestamp with time zone", `"2024-02-29T02:45:59.500000Z"`},
		{Encoder{}, tTstz, "CURRENT_TIMESTAMP", ""},
		{Encoder{}, tPosint, "1", ""},
		{Encoder{}, tMood, "'ok'::mood", ""},
		{Encoder{}, tInt4Arr, "'{1}'::integer[]", ""},
		{Encoder{}, tUUID, "gen_random_uuid()", ""},
	}
	for _, c := range cases {
		got := c.enc.columnDefault(&kafkasink.ColumnInfo{Name: "v", Type: c.typ, Default: c.expr}).json
		if string(got) != c.want {
			t.Errorf("%s DEFAULT %s under %+v: %q, want %q", c.typ.Name, c.expr, c.enc, got, c.want)
		}
	}
}

// TestDebeziumDroppedArrays encodes rare_arrays' streamed insert: with
// MatchDebeziumLosses the arrays of money, interval, varbit, point, xml
// and a domain are left out, as Debezium leaves them out (its after image
// byte for byte, in every configuration, both schemas.enable settings);
// without it they are written.
func TestDebeziumDroppedArrays(t *testing.T) {
	t.Parallel()
	e := &kafkasink.Event{Op: kafkasink.OpInsert, Schema: "dbzconf", Table: "rare_arrays", Relation: rareArraysRelation, Key: []string{"id"},
		After: kafkasink.Row{{Name: "id", Value: int32(11)}, {Name: "a_money", Value: []any{"-$2.25"}},
			{Name: "a_interval", Value: []any{"1 year 2 mons", "-00:00:01"}}, {Name: "a_varbit", Value: []any{"", "1111"}},
			{Name: "a_point", Value: []any{"(0,0)"}}, {Name: "a_xml", Value: []any{"<b/>"}},
			{Name: "a_domain", Value: []any{int32(1), int32(2)}}, {Name: "n", Value: int32(11)}}}
	for config, opts := range goldenConfigs {
		for _, schemas := range []bool{false, true} {
			file := config + "-schemas-" + map[bool]string{false: "false", true: "true"}[schemas] + ".jsonl"
			want := goldenImages(t, file, "rare_arrays")[2]
			if want.Op != "c" {
				t.Fatalf("%s: rare_arrays' third record is %q, want the insert", file, want.Op)
			}
			enc := opts
			enc.Name, enc.SchemasEnable, enc.MatchDebeziumLosses = "dbz", schemas, true
			if got := encodedImages(t, enc, e).After; !bytes.Equal(got, want.After) {
				t.Errorf("%s MatchDebeziumLosses:\n got %s\nwant %s", file, got, want.After)
			}
			enc.MatchDebeziumLosses = false
			if got := string(encodedImages(t, enc, e).After); !strings.Contains(got, `"a_xml":["<b/>"]`) || !strings.Contains(got, `"a_domain":[1,2]`) {
				t.Errorf("%s without MatchDebeziumLosses: %s, want the arrays", file, got)
			}
		}
	}
}

// TestDebeziumDefaultsAllocs holds the encoder to zero allocations per
// event when it writes defaults in place of NULLs and leaves arrays out.
func TestDebeziumDefaultsAllocs(t *testing.T) {
	now := time.Unix(0, 0)
	e := &kafkasink.Event{Op: kafkasink.OpInsert, Schema: "dbzconf", Table: "mixed_defaults", Relation: mixedDefaultsRelation,
		Key: []string{"id"}, After: mixedDefaultsNulls(12, 200)}
	for _, schemas := range []bool{false, true} {
		enc := Encoder{Name: "dbz", MatchDebeziumLosses: true, SchemasEnable: schemas, Now: func() time.Time { return now }}
		buf := make([]byte, 0, 1<<14)
		if n := testing.AllocsPerRun(50, func() { _, _ = enc.Encode(buf[:0], e) }); n != 0 {
			t.Errorf("schemas=%t: %v allocations per event, want 0", schemas, n)
		}
	}
}
