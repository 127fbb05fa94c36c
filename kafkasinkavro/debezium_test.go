package kafkasinkavro_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/twmb/avro"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/debezium"
	"github.com/kafkasink/kafkasink/kafkasinkavro"
)

// preparedDebezium returns a DebeziumEncoder with e's table version
// prepared for topic in the fake registry reg, and the registry's client.
func preparedDebezium(tb testing.TB, reg *srfake.Registry, dbz debezium.Encoder, e *kafkasink.Event, topic string) (*kafkasinkavro.DebeziumEncoder, *sr.Client) {
	tb.Helper()
	cl, err := sr.NewClient(sr.URLs(reg.URL()))
	if err != nil {
		tb.Fatal(err)
	}
	enc, err := kafkasinkavro.NewDebezium(kafkasinkavro.Config{Registry: cl}, dbz)
	if err != nil {
		tb.Fatal(err)
	}
	if err := enc.Prepare(context.Background(), []kafkasink.Event{*e}, []kafkasink.EventRoute{{Topic: topic, KeyColumns: e.Key}}); err != nil {
		tb.Fatal(err)
	}
	return enc, cl
}

var fixedNow = func() time.Time { return benchUpdated }

// BenchmarkDebeziumEncode compares the Debezium Avro encoder with
// JSONEncoder and the JSON DebeziumEncoder on the same event, in the same
// run, value and key:
//
//	go test -run '^$' -bench DebeziumEncode -count 6 . | benchstat -col /impl -
func BenchmarkDebeziumEncode(b *testing.B) {
	reg := srfake.New()
	defer reg.Close()
	e := benchEvent()
	dbz := debezium.Encoder{Name: "shop", Now: fixedNow}
	enc, _ := preparedDebezium(b, reg, dbz, &e, "shop.public.accounts")
	benchEncoders(b, 2048, []benchEncoder{
		{"json", func(dst []byte) ([]byte, error) { return kafkasink.JSONEncoder{}.Encode(dst, &e) }},
		{"debezium-json", func(dst []byte) ([]byte, error) { return dbz.Encode(dst, &e) }},
		{"debezium-avro", func(dst []byte) ([]byte, error) { return enc.Encode(dst, &e) }},
		{"json-key", func(dst []byte) ([]byte, error) { return kafkasink.AppendKey(dst, &e, nil, kafkasink.KeyJSON) }},
		{"debezium-avro-key", func(dst []byte) ([]byte, error) { return enc.EncodeKey(dst, &e, e.Key) }},
	})
}

// TestDebeziumEncodeAllocs pins what BenchmarkDebeziumEncode shows: a
// steady-state event, its table version prepared, costs no allocation,
// value or key.
func TestDebeziumEncodeAllocs(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	e := benchEvent()
	enc, _ := preparedDebezium(t, reg, debezium.Encoder{Name: "shop", Now: fixedNow}, &e, "shop.public.accounts")
	buf := make([]byte, 0, 2048)
	enc.Encode(buf[:0], &e) // the payload buffer's first use grows it
	if n := testing.AllocsPerRun(100, func() {
		if _, err := enc.Encode(buf[:0], &e); err != nil {
			t.Fatal(err)
		}
		if _, err := enc.EncodeKey(buf[:0], &e, e.Key); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("encoding a prepared event's value and key allocates %.1f times, want 0", n)
	}
}

// TestDebeziumEncodeStrings: text values with every kind of JSON escape
// (quotes, backslashes, control characters, characters outside the BMP),
// of lengths whose Avro length prefix takes one, two and three bytes,
// bytes and an empty array come out as the values they are, decoded by
// twmb/avro with the schema the encoder registered.
func TestDebeziumEncodeStrings(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	texts := []string{"", "plain", `quote " and \ backslash`, "tab\tnew\nline\r\x00\x01\x1f", "é 日本 𝄞 ✓ \u2028", "<>&",
		strings.Repeat("x", 63), strings.Repeat("é", 32), strings.Repeat("y", 8191), strings.Repeat("z", 8192)}
	for _, s := range texts {
		e := kafkasink.Event{
			Op: kafkasink.OpInsert, Schema: "public", Table: "strs", Key: []string{"id"},
			After: kafkasink.Row{{Name: "id", Value: int32(1)}, {Name: "s", Value: s}, {Name: "b", Value: []byte(s)}, {Name: "a", Value: []any{}}},
			Relation: &kafkasink.Relation{Columns: []kafkasink.ColumnInfo{
				{Name: "id", Type: typeInfo("int4", -1), NotNull: true},
				{Name: "s", Type: typeInfo("text", -1)},
				{Name: "b", Type: typeInfo("bytea", -1)},
				{Name: "a", Type: &kafkasink.TypeInfo{Name: "_int4", Kind: 'b', Elem: typeInfo("int4", -1)}},
			}},
		}
		enc, cl := preparedDebezium(t, reg, debezium.Encoder{Name: "shop"}, &e, "shop.public.strs")
		out, err := enc.Encode(nil, &e)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		schema, err := cl.SchemaByID(context.Background(), int(binary.BigEndian.Uint32(out[1:5])))
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if _, err := avro.MustParse(schema.Schema).Decode(out[5:], &v); err != nil {
			t.Fatalf("%q: decoding with the registered schema: %v", s, err)
		}
		after, _ := v["after"].(map[string]any)
		if after["s"] != s || string(after["b"].([]byte)) != s {
			t.Errorf("%q: after.s %q, after.b %q; want the text in both", s, after["s"], after["b"])
		}
		if a, _ := after["a"].([]any); a == nil || len(a) != 0 {
			t.Errorf("%q: after.a %#v, want an empty array", s, after["a"])
		}
	}
}

// TestDebeziumEncodeIntegers: bigint values at the edges of the varint
// encoding (one digit, 18 and 19 digits, int64's bounds) and an int4
// array come out as the values they are, decoded by
// twmb/avro with the schema the encoder registered, as do the 19-digit
// ts_ns of the envelope and its source.
func TestDebeziumEncodeIntegers(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	values := []int64{0, 7, -1, 999_999_999_999_999_999, -999_999_999_999_999_999, 1_000_000_000_000_000_000, -1_000_000_000_000_000_000,
		math.MaxInt64, math.MinInt64, math.MaxInt64 - 1, math.MinInt64 + 1}
	for _, n := range values {
		e := kafkasink.Event{
			Op: kafkasink.OpInsert, Schema: "public", Table: "ints", Key: []string{"id"}, Commit: benchUpdated,
			After: kafkasink.Row{{Name: "id", Value: n}, {Name: "a", Value: []any{int32(math.MinInt32), int32(-5), int32(math.MaxInt32)}}},
			Relation: &kafkasink.Relation{Columns: []kafkasink.ColumnInfo{
				{Name: "id", Type: typeInfo("int8", -1), NotNull: true},
				{Name: "a", Type: &kafkasink.TypeInfo{Name: "_int4", Kind: 'b', Elem: typeInfo("int4", -1)}},
			}},
		}
		enc, cl := preparedDebezium(t, reg, debezium.Encoder{Name: "shop", Now: fixedNow}, &e, "shop.public.ints")
		out, err := enc.Encode(nil, &e)
		if err != nil {
			t.Fatalf("%d: %v", n, err)
		}
		schema, err := cl.SchemaByID(context.Background(), int(binary.BigEndian.Uint32(out[1:5])))
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if _, err := avro.MustParse(schema.Schema).Decode(out[5:], &v); err != nil {
			t.Fatalf("%d: decoding with the registered schema: %v", n, err)
		}
		after, _ := v["after"].(map[string]any)
		if after["id"] != n {
			t.Errorf("after.id %v, want %d", after["id"], n)
		}
		if a := fmt.Sprint(after["a"]); a != "[-2147483648 -5 2147483647]" {
			t.Errorf("%d: after.a %s, want [-2147483648 -5 2147483647]", n, a)
		}
		source, _ := v["source"].(map[string]any)
		if source["ts_ns"] != benchUpdated.UnixMicro()*1000 || v["ts_ns"] != benchUpdated.UnixNano() {
			t.Errorf("%d: source.ts_ns %v, ts_ns %v; want %d and %d", n, source["ts_ns"], v["ts_ns"], benchUpdated.UnixMicro()*1000, benchUpdated.UnixNano())
		}
	}
}

// TestDebeziumSchemaEvolution changes a table while it is streamed with
// the DebeziumEncoder, ADD COLUMN then DROP COLUMN, with a row written
// after each change: each change makes a new version of the value
// subject, registered before the first record that needs it, each record
// carries its own table version's schema id, and decodes (hamba/avro and
// twmb/avro, and Apache Avro's Java library, with the registry's schema)
// into the row the database had.
func TestDebeziumSchemaEvolution(t *testing.T) {
	e := newAvroEnv(t)
	enc, err := kafkasinkavro.NewDebezium(kafkasinkavro.Config{Registry: e.registry}, debezium.Encoder{Name: e.name})
	if err != nil {
		t.Fatal(err)
	}
	e.encoder = enc
	table := e.table("dbzevo", "id int PRIMARY KEY, a text")
	_, done, _ := e.run(table)
	e.exec("INSERT INTO " + table + " VALUES (1, 'one')")
	e.exec("ALTER TABLE " + table + " ADD COLUMN b int")
	e.exec("INSERT INTO " + table + " VALUES (2, 'two', 22)")
	e.exec("ALTER TABLE " + table + " DROP COLUMN a")
	e.exec("INSERT INTO " + table + " VALUES (3, 33)")
	topic := e.name + ".public." + table
	recs := e.readRecords(topic, 3, done)

	want := []string{"map[a:one id:1]", "map[a:two b:22 id:2]", "map[b:33 id:3]"}
	ids := make([]int, len(recs))
	for i, r := range recs {
		d := e.decode(r.Value)
		ids[i] = d.id
		if got := fmt.Sprint(d.value["after"]); got != want[i] {
			t.Errorf("record %d: after %s, want %s", i, got, want[i])
		}
		if !strings.Contains(d.schema, `"connect.name":"`+e.name+".public."+table+`.Envelope"`) {
			t.Errorf("record %d: schema %s, want Debezium's Envelope", i, d.schema)
		}
	}
	e.checkVersions(topic, ids)
	// Apache Avro's Java library, which Kafka Connect's AvroConverter
	// decodes with, parses the schemas (their connect.* properties
	// included) and reads the same records.
	t.Run("java", func(t *testing.T) {
		got := e.javaRead(t, [][]byte{recs[0].Value, recs[1].Value, recs[2].Value, recs[0].Key})
		for i, after := range []map[string]any{{"id": "1", "a": "one"}, {"id": "2", "a": "two", "b": "22"}, {"id": "3", "b": "33"}} {
			checkField(t, fmt.Sprintf("record %d (Java)", i), got[i], "op", "c")
			checkField(t, fmt.Sprintf("record %d (Java)", i), got[i], "after", after)
		}
		checkField(t, "key (Java)", got[3], "id", "1")
	})
}

// TestDebeziumUnchangedToast: an unchanged TOAST value is Debezium's
// placeholder in the column's own form (the string in a text column, its
// bytes in a bytea, a list in the arrays Debezium gives a placeholder
// of their own); in an array of another type, whose Avro type cannot hold
// the placeholder string, the event is refused naming the column and the
// fix (REPLICA IDENTITY FULL), not written otherwise.
func TestDebeziumUnchangedToast(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	const p = "__debezium_unavailable_value"
	var signed []any // the placeholder's bytes as integers
	for _, b := range []byte(p) {
		signed = append(signed, int(b))
	}
	array := func(elem string) *kafkasink.TypeInfo {
		return &kafkasink.TypeInfo{Name: "_" + elem, Kind: 'b', Elem: typeInfo(elem, -1)}
	}
	for _, c := range []struct {
		typ  *kafkasink.TypeInfo
		want any // nil: refused
	}{
		{typeInfo("text", -1), p},
		{typeInfo("jsonb", -1), p},
		{typeInfo("bytea", -1), []byte(p)},
		{array("text"), []any{p}},
		{array("bytea"), []any{[]byte(p)}},
		{array("int4"), signed},
		{array("int8"), signed},
		{array("uuid"), []any{"b68a35a7-17ad-35b3-af2a-ae46edb4545a"}}, // as Debezium 3.6.1 wrote it (testdata/debezium)
		{array("numeric"), nil},
		{array("bool"), nil},
	} {
		e := kafkasink.Event{
			Op: kafkasink.OpUpdate, Schema: "public", Table: "toast" + c.typ.Name, Key: []string{"id"},
			After: kafkasink.Row{{Name: "id", Value: int32(1)}, {Name: "v", Unchanged: true}},
			Relation: &kafkasink.Relation{Columns: []kafkasink.ColumnInfo{
				{Name: "id", Type: typeInfo("int4", -1), NotNull: true},
				{Name: "v", Type: c.typ},
			}},
		}
		enc, cl := preparedDebezium(t, reg, debezium.Encoder{Name: "shop"}, &e, "shop.public.toast"+c.typ.Name)
		out, err := enc.Encode(nil, &e)
		var ee *kafkasink.EncodeError
		switch {
		case c.want == nil && (!errors.As(err, &ee) || ee.Column != "v" || !strings.Contains(err.Error(), "REPLICA IDENTITY FULL")):
			t.Errorf("%s: %v, want an EncodeError for column v naming REPLICA IDENTITY FULL", c.typ.Name, err)
		case c.want != nil && err != nil:
			t.Errorf("%s: %v", c.typ.Name, err)
		case c.want != nil:
			schema, err := cl.SchemaByID(context.Background(), int(binary.BigEndian.Uint32(out[1:5])))
			if err != nil {
				t.Fatal(err)
			}
			var v map[string]any
			if _, err := avro.MustParse(schema.Schema).Decode(out[5:], &v); err != nil {
				t.Fatal(err)
			}
			if got := v["after"].(map[string]any)["v"]; fmt.Sprintf("%T %v", got, got) != fmt.Sprintf("%T %v", c.want, c.want) {
				t.Errorf("%s: after.v %#v, want Debezium's placeholder %#v", c.typ.Name, got, c.want)
			}
		}
	}
}

// TestDebeziumIncompatibleRetypeIsFatal: an ALTER TYPE int to text while
// streaming with the Debezium Avro encoder makes a schema the registry's
// BACKWARD level refuses: Run stops with a fatal PrepareError naming the
// table, the subject, the registry's answer, the level, the column's
// change in Connect types and the fixes, and nothing of the batch is
// produced.
func TestDebeziumIncompatibleRetypeIsFatal(t *testing.T) {
	e := newAvroEnv(t)
	enc, err := kafkasinkavro.NewDebezium(kafkasinkavro.Config{Registry: e.registry}, debezium.Encoder{Name: e.name})
	if err != nil {
		t.Fatal(err)
	}
	e.encoder = enc
	table, topic, err := e.retypeWhileStreaming(t, "dbzretype")
	for _, part := range []string{
		"public." + table, "subject " + topic + "-value", "HTTP 409", "global BACKWARD",
		`changed "n" from int32 to string`, "PUT /config/" + topic + "-value", "kafkasink.Config.Topics; -topic-routes",
	} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("the error does not name %q: %v", part, err)
		}
	}
}

// TestDebeziumSubjects: under RecordName the schemas are registered under
// Debezium's record names, under TopicRecordName under the topic and the
// record name; Namespace is refused, naming its flag.
func TestDebeziumSubjects(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	cl, err := sr.NewClient(sr.URLs(reg.URL()))
	if err != nil {
		t.Fatal(err)
	}
	e := benchEvent()
	for _, c := range []struct {
		strategy   kafkasinkavro.SubjectStrategy
		value, key string
	}{
		{kafkasinkavro.TopicName, "cdc.public.accounts-value", "cdc.public.accounts-key"},
		{kafkasinkavro.RecordName, "shop.public.accounts.Envelope", "shop.public.accounts.Key"},
		{kafkasinkavro.TopicRecordName, "cdc.public.accounts-shop.public.accounts.Envelope", "cdc.public.accounts-shop.public.accounts.Key"},
	} {
		enc, err := kafkasinkavro.NewDebezium(kafkasinkavro.Config{Registry: cl, Subjects: c.strategy}, debezium.Encoder{Name: "shop"})
		if err != nil {
			t.Fatal(err)
		}
		if err := enc.Prepare(context.Background(), []kafkasink.Event{e}, []kafkasink.EventRoute{{Topic: "cdc.public.accounts", KeyColumns: e.Key}}); err != nil {
			t.Fatal(err)
		}
		for _, subject := range []string{c.value, c.key} {
			if _, err := cl.SchemaByVersion(context.Background(), subject, -1); err != nil {
				t.Errorf("%s: subject %s: %v", c.strategy, subject, err)
			}
		}
	}
	_, err = kafkasinkavro.NewDebezium(kafkasinkavro.Config{Registry: cl, Subjects: kafkasinkavro.RecordName, Namespace: "db1"}, debezium.Encoder{Name: "shop"})
	if err == nil || !strings.Contains(err.Error(), "-schema-registry-namespace") {
		t.Errorf("NewDebezium with a Namespace: %v, want an error naming -schema-registry-namespace", err)
	}
}

// TestNegativeZeroKeepsItsSign: a real's and a double's -0, scalars and
// array elements, decode as -0 (Avro writes a float's IEEE 754 bits),
// from the Avro Encoder and the Debezium Avro encoder alike, decoded by
// twmb/avro with the schema each registered.
func TestNegativeZeroKeepsItsSign(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	cl, err := sr.NewClient(sr.URLs(reg.URL()))
	if err != nil {
		t.Fatal(err)
	}
	negZero := math.Copysign(0, -1)
	e := kafkasink.Event{
		Op: kafkasink.OpInsert, Schema: "public", Table: "zeros", Key: []string{"id"}, Commit: benchUpdated,
		After: kafkasink.Row{{Name: "id", Value: int32(1)}, {Name: "f4", Value: float32(negZero)}, {Name: "f8", Value: negZero},
			{Name: "a4", Value: []any{float32(negZero)}}, {Name: "a8", Value: []any{negZero}}},
		Relation: &kafkasink.Relation{Columns: []kafkasink.ColumnInfo{
			{Name: "id", Type: typeInfo("int4", -1), NotNull: true},
			{Name: "f4", Type: typeInfo("float4", -1)},
			{Name: "f8", Type: typeInfo("float8", -1)},
			{Name: "a4", Type: &kafkasink.TypeInfo{Name: "_float4", Kind: 'b', Elem: typeInfo("float4", -1)}},
			{Name: "a8", Type: &kafkasink.TypeInfo{Name: "_float8", Kind: 'b', Elem: typeInfo("float8", -1)}},
		}},
	}
	dbz, _ := preparedDebezium(t, reg, debezium.Encoder{Name: "shop", Now: fixedNow}, &e, "shop.public.zeros")
	for _, enc := range []struct {
		name string
		enc  kafkasink.Encoder
	}{
		{"Encoder", preparedEncoder(t, reg, &e, "plain.public.zeros")},
		{"DebeziumEncoder", dbz},
	} {
		out, err := enc.enc.Encode(nil, &e)
		if err != nil {
			t.Fatalf("%s: %v", enc.name, err)
		}
		schema, err := cl.SchemaByID(context.Background(), int(binary.BigEndian.Uint32(out[1:5])))
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if _, err := avro.MustParse(schema.Schema).Decode(out[5:], &v); err != nil {
			t.Fatalf("%s: decoding with the registered schema: %v", enc.name, err)
		}
		after, _ := v["after"].(map[string]any)
		for _, name := range []string{"f4", "f8", "a4", "a8"} {
			x := after[name]
			if a, ok := x.([]any); ok && len(a) == 1 {
				x = a[0]
			}
			var f float64
			switch x := x.(type) {
			case float32:
				f = float64(x)
			case float64:
				f = x
			default:
				t.Fatalf("%s: after.%s is %#v, want a float", enc.name, name, after[name])
			}
			if f != 0 || !math.Signbit(f) {
				t.Errorf("%s: after.%s decodes as %v, want -0", enc.name, name, after[name])
			}
		}
	}
}

// TestDebeziumExplainsAsDebezium: the sink's problems about the records
// around events and null keys name debezium.Encoder's options for the
// Avro encoder too (kafkasink.Explainer).
func TestDebeziumExplainsAsDebezium(t *testing.T) {
	dbz := debezium.Encoder{Name: "shop", ProvideTransactionMetadata: true, TransactionTopic: "shop.transaction", MatchDebeziumLosses: true}
	enc, err := kafkasinkavro.NewDebezium(kafkasinkavro.Config{Registry: &sr.Client{}}, dbz)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []kafkasink.Feature{kafkasink.FeatureAllKeys, kafkasink.FeatureFrameTopic, kafkasink.FeatureNullKey} {
		why, fix := enc.Explain(f)
		dbz.SchemasEnable = true // NewDebezium implies it
		wantWhy, wantFix := dbz.Explain(f)
		if why != wantWhy || fix != wantFix || why+fix == "" {
			t.Errorf("Explain(%d) = %q, %q; want debezium.Encoder's %q, %q", f, why, fix, wantWhy, wantFix)
		}
	}
}

// TestDebeziumIncrementalReadInAvro: a row of an incremental snapshot
// decodes with the registered schema, source.txId and source.lsn null as
// in Debezium's JSON (the Avro writer takes the same nulls).
func TestDebeziumIncrementalReadInAvro(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	e := kafkasink.Event{
		Op: kafkasink.OpRead, Schema: "public", Table: "inc", Key: []string{"id"}, LSN: 4096,
		Source: kafkasink.Source{Snapshot: kafkasink.SnapshotIncremental},
		After:  kafkasink.Row{{Name: "id", Value: int32(1)}},
		Relation: &kafkasink.Relation{Columns: []kafkasink.ColumnInfo{
			{Name: "id", Type: typeInfo("int4", -1), NotNull: true},
		}},
	}
	enc, cl := preparedDebezium(t, reg, debezium.Encoder{Name: "shop"}, &e, "shop.public.inc")
	out, err := enc.Encode(nil, &e)
	if err != nil {
		t.Fatal(err)
	}
	schema, err := cl.SchemaByID(context.Background(), int(binary.BigEndian.Uint32(out[1:5])))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if _, err := avro.MustParse(schema.Schema).Decode(out[5:], &v); err != nil {
		t.Fatalf("decoding with the registered schema: %v", err)
	}
	src, _ := v["source"].(map[string]any)
	if src["snapshot"] != "incremental" || src["txId"] != nil || src["lsn"] != nil {
		t.Errorf("source: snapshot %v, txId %v, lsn %v; want incremental, null, null", src["snapshot"], src["txId"], src["lsn"])
	}
}
