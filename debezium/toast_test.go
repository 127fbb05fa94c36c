package debezium

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/kafkasink/kafkasink"
)

// toastTypesRelation is the workload's toast_types table
// (testdata/debezium/workload.sql): a column of each type Debezium gives
// its own placeholder form, and a jsonb, whose placeholder is the string,
// and an hstore, whose placeholder is a map.
var toastTypesRelation = &kafkasink.Relation{Columns: []kafkasink.ColumnInfo{
	{Name: "id", Type: tInt4, NotNull: true},
	{Name: "t_bytea", Type: tBytea},
	{Name: "t_text", Type: tTextArr},
	{Name: "t_varchar", Type: &kafkasink.TypeInfo{Name: "_varchar", Modifier: 40 + 4, Kind: 'b', Elem: &kafkasink.TypeInfo{Name: "varchar", Modifier: 40 + 4, Kind: 'b'}}},
	{Name: "t_jsonbs", Type: &kafkasink.TypeInfo{Name: "_jsonb", Modifier: -1, Kind: 'b', Elem: tJSONB}},
	{Name: "t_int4", Type: tInt4Arr},
	{Name: "t_int8", Type: &kafkasink.TypeInfo{Name: "_int8", Modifier: -1, Kind: 'b', Elem: tInt8}},
	{Name: "t_date", Type: &kafkasink.TypeInfo{Name: "_date", Modifier: -1, Kind: 'b', Elem: tDate}},
	{Name: "t_uuid", Type: &kafkasink.TypeInfo{Name: "_uuid", Modifier: -1, Kind: 'b', Elem: tUUID}},
	{Name: "t_byteas", Type: &kafkasink.TypeInfo{Name: "_bytea", Modifier: -1, Kind: 'b', Elem: tBytea}},
	{Name: "t_jsonb", Type: tJSONB},
	{Name: "t_hstore", Type: tHstore},
	{Name: "n", Type: tInt4},
}}

// toastTypesUpdate is the workload's update of toast_types that leaves
// every TOASTed column unchanged (workload-changes.sql).
func toastTypesUpdate() *kafkasink.Event {
	after := kafkasink.Row{{Name: "id", Value: int32(1)}}
	for _, c := range toastTypesRelation.Columns[1 : len(toastTypesRelation.Columns)-1] {
		after = append(after, kafkasink.Column{Name: c.Name, Unchanged: true})
	}
	after = append(after, kafkasink.Column{Name: "n", Value: int32(2)})
	return &kafkasink.Event{Op: kafkasink.OpUpdate, Schema: "dbzconf", Table: "toast_types", Relation: toastTypesRelation, After: after}
}

// TestDebeziumUnchangedMatchesGolden: with MatchDebeziumLosses, the
// placeholder of every unchanged TOAST column of toast_types is what
// Debezium 3.6.1 wrote for the workload's update in each configuration,
// with and without schemas (testdata/debezium/<config>-schemas-*.jsonl):
// bytes, lists of the placeholder's text, bytes, signed bytes or UUID,
// the string, or null where Debezium's converter cannot take it.
func TestDebeziumUnchangedMatchesGolden(t *testing.T) {
	for config, enc := range goldenConfigs {
		enc.MatchDebeziumLosses = true
		for _, schemas := range []bool{false, true} {
			enc.SchemasEnable = schemas
			want := goldenToastUpdate(t, config, schemas)
			out, err := enc.Encode(nil, toastTypesUpdate())
			if err != nil {
				t.Fatalf("%s schemas=%v: %v", config, schemas, err)
			}
			got := afterOf(t, out, schemas)
			for _, c := range toastTypesRelation.Columns {
				if !jsonEqual(t, got[c.Name], want[c.Name]) {
					t.Errorf("%s schemas=%v: %s = %s, Debezium wrote %s", config, schemas, c.Name, got[c.Name], want[c.Name])
				}
			}
		}
	}
}

// TestDebeziumUnchangedOwnForms: without MatchDebeziumLosses, where
// Debezium writes null for an unchanged value its converter cannot take,
// the encoder writes the placeholder in the field's declared form (the
// text in a string field, a list of it in a list of strings, the signed
// bytes in a list of connect dates), so that it is not read as a NULL;
// and a configured placeholder is used in every form.
func TestDebeziumUnchangedOwnForms(t *testing.T) {
	const text = `"__debezium_unavailable_value"`
	const ints = `[95,95,100,101,98,101,122,105,117,109,95,117,110,97,118,97,105,108,97,98,108,101,95,118,97,108,117,101]`
	cases := []struct {
		enc    Encoder
		column string
		want   string
	}{
		{Encoder{BinaryHandling: BinaryBase64}, "t_bytea", text},
		{Encoder{BinaryHandling: BinaryBase64URLSafe}, "t_bytea", text},
		{Encoder{BinaryHandling: BinaryBase64}, "t_byteas", "[" + text + "]"},
		{Encoder{BinaryHandling: BinaryHex}, "t_byteas", "[" + text + "]"},
		{Encoder{TimePrecision: TimeIsostring}, "t_date", "[" + text + "]"},
		{Encoder{TimePrecision: TimeConnect}, "t_date", ints},
		{Encoder{UnavailableValuePlaceholder: "é?"}, "t_bytea", `"w6k/"`},
		{Encoder{UnavailableValuePlaceholder: "é?", BinaryHandling: BinaryHex}, "t_bytea", `"é?"`},
		{Encoder{UnavailableValuePlaceholder: "é?"}, "t_text", `["é?"]`},
		{Encoder{UnavailableValuePlaceholder: "é?"}, "t_byteas", `["w6k/"]`},
		{Encoder{UnavailableValuePlaceholder: "é?"}, "t_int8", `[-61,-87,63]`}, // Java's signed bytes
		// UUID.nameUUIDFromBytes of the placeholder's UTF-8 bytes.
		{Encoder{UnavailableValuePlaceholder: "é?"}, "t_uuid", `["` + nameUUIDOfText(t, "é?") + `"]`},
		{Encoder{UnavailableValuePlaceholder: "é?"}, "t_jsonb", `"é?"`},
		// The map of the placeholder to itself, as JSON text: a quote in
		// it is escaped twice, in the object's text and in the string.
		{Encoder{UnavailableValuePlaceholder: `é"?`}, "t_hstore", `"{\"é\\\"?\":\"é\\\"?\"}"`},
	}
	for _, c := range cases {
		for _, schemas := range []bool{false, true} {
			c.enc.SchemasEnable = schemas
			out, err := c.enc.Encode(nil, toastTypesUpdate())
			if err != nil {
				t.Fatal(err)
			}
			if got := afterOf(t, out, schemas)[c.column]; !jsonEqual(t, got, json.RawMessage(c.want)) {
				t.Errorf("%+v schemas=%v: %s = %s, want %s", c.enc, schemas, c.column, got, c.want)
			}
		}
	}
}

// nameUUIDOfText is the UUID Debezium's golden files show for the default
// placeholder when text is it, else nameUUID(text) checked against that
// golden UUID first, so the test does not take the function on trust.
func nameUUIDOfText(t *testing.T, text string) string {
	t.Helper()
	var golden []string
	if err := json.Unmarshal(goldenToastUpdate(t, "defaults", false)["t_uuid"], &golden); err != nil || len(golden) != 1 {
		t.Fatalf("golden t_uuid: %v %q", err, golden)
	}
	if got := nameUUID(defaultUnavailablePlaceholder); got != golden[0] {
		t.Fatalf("nameUUID(%q) = %s, Debezium wrote %s", defaultUnavailablePlaceholder, got, golden[0])
	}
	return nameUUID(text)
}

// goldenToastUpdate returns the after image of Debezium's record of the
// update of toast_types in a configuration's golden file.
func goldenToastUpdate(t *testing.T, config string, schemas bool) map[string]json.RawMessage {
	t.Helper()
	file := config + "-schemas-false.jsonl"
	if schemas {
		file = config + "-schemas-true.jsonl"
	}
	for _, img := range goldenImages(t, file, "toast_types") {
		if img.Op == "u" {
			var after map[string]json.RawMessage
			if err := json.Unmarshal(img.After, &after); err != nil {
				t.Fatal(err)
			}
			return after
		}
	}
	t.Fatalf("%s: no update of toast_types", file)
	return nil
}

// afterOf returns the after image's columns of an encoded value.
func afterOf(t *testing.T, value []byte, schemas bool) map[string]json.RawMessage {
	t.Helper()
	var v struct {
		After   map[string]json.RawMessage
		Payload struct{ After map[string]json.RawMessage }
	}
	if err := json.Unmarshal(value, &v); err != nil {
		t.Fatalf("%v: %s", err, value)
	}
	if schemas {
		return v.Payload.After
	}
	return v.After
}

// jsonEqual reports whether two JSON texts are the same value.
func jsonEqual(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%v: %s", err, a)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// TestPlaceholderIsString pins the types whose unchanged placeholder
// kafkasinkavro's Debezium encoder must find a string field for: every
// type Debezium does not single out, and a domain over an array (Debezium
// matches the column's own type name), but not a domain over bytea.
func TestPlaceholderIsString(t *testing.T) {
	t.Parallel()
	typ := func(name string) *kafkasink.TypeInfo { return &kafkasink.TypeInfo{Name: name, Modifier: -1, Kind: 'b'} }
	domain := func(name string, base *kafkasink.TypeInfo) *kafkasink.TypeInfo {
		return &kafkasink.TypeInfo{Name: name, Modifier: -1, Kind: 'd', Base: base}
	}
	for _, c := range []struct {
		name string
		t    *kafkasink.TypeInfo
		want bool
	}{
		{"nil", nil, true},
		{"text", typ("text"), true},
		{"jsonb", typ("jsonb"), true},
		{"numeric array", typ("_numeric"), true},
		{"bytea", typ("bytea"), false},
		{"domain over bytea", domain("blob", typ("bytea")), false},
		{"text array", typ("_text"), false},
		{"bytea array", typ("_bytea"), false},
		{"int4 array", typ("_int4"), false},
		{"uuid array", typ("_uuid"), false},
		{"hstore", typ("hstore"), false},
		{"domain over an int4 array", domain("ints", typ("_int4")), true},
	} {
		if got := PlaceholderIsString(c.t); got != c.want {
			t.Errorf("%s: PlaceholderIsString = %v, want %v", c.name, got, c.want)
		}
	}
}
