package kafkasinkavro_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink/kafkasinkavro"
	"github.com/kafkasink/kafkasink/kafkasinktest/pgtest"
)

// TestTypesRoundTrip streams the row of pgcdc's golden type test
// (testdata/types.sql of the root module: every type pgcdc supports, from
// a real PostgreSQL) through pgcdc and the sink with the Avro encoder into
// the real broker, and decodes each record with the schema the registry
// has under its id, with two Avro libraries the encoder does not use: the values are the database's, and an update
// that leaves a TOASTed column unchanged lists it as unchanged. The Apache
// Avro Java library reads them the same, and the Decoder reads them back
// into the JSON of pgcdc's golden file.
func TestTypesRoundTrip(t *testing.T) {
	e := newAvroEnv(t)
	sql := pgtest.LoadTypesSQL(t, e.name)
	table := sql.Table
	e.exec(sql.Setup)
	t.Cleanup(func() { e.exec(sql.Drop) })
	_, done, _ := e.run(table)
	e.exec(sql.Insert)
	e.exec(sql.Update)
	recs := e.readRecords(e.name+".public."+table, 2, done)

	after := map[string]any{
		"row_id": int64(1),
		"i2":     int64(-32768), "i4": int64(2147483647), "i8": int64(9223372036854775807), "o": int64(4294967295),
		"f4": "float:1.5", "f8": "double:0.1", "f8_nan": "double:NaN", "f8_inf": "double:+Inf", "f8_ninf": "double:-Inf",
		"num": "12345678901234567890.000000000000000001", "num_big": "decimal:12345678900123456789/10000000000", "num_nan": "NaN",
		"num_small": "decimal:-2469/2",
		"b":         true, "t": `Grüße, "quotes" \ and |pipes|`, "vc": "varchar", "bp": "ab   ", "nm": "a_name",
		"u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "j": `{"b": 1, "a": [true, null]}`, "jb": `{"a": [true, null], "b": 1}`, "by": "bytes:00ff10",
		"d": "2024-02-29T00:00:00Z", "d_inf": time.Unix(math.MaxInt32*86400, 0).UTC().Format(time.RFC3339Nano),
		"ts": "2024-02-29T13:14:15.123456Z", "ts_inf": time.UnixMicro(math.MinInt64).UTC().Format(time.RFC3339Nano),
		"tstz": "2024-02-29T12:14:15.5Z", "tm": "time:13h14m15s", "tmtz": "13:14:15+02", "iv": "1 year 2 mons 3 days 04:05:06.5",
		"a_int": []any{int64(1), int64(2), nil, int64(4)}, "a_text": []any{"a", "b,c", nil, `d"e`},
		"a_2d": []any{[]any{int64(1), int64(2)}, []any{int64(3), int64(4)}}, "a_null": nil,
		"mood": "happy", "pos": int64(7), "ip": "192.168.0.1/24", "pt": "(1.5,-2)",
		"nothing": nil, "big": strings.Repeat("x", 3000),
	}
	ins := e.decode(recs[0].Value)
	checkField(t, "insert", ins.value, "op", "insert")
	checkField(t, "insert", ins.value, "before", nil)
	checkField(t, "insert", ins.value, "unchanged", []any{})
	checkField(t, "insert", ins.value, "key", []any{"row_id"})
	checkField(t, "insert", ins.value, "after", after)

	after["t"] = "changed"
	after["big"] = "" // NOT NULL: its type's zero value, listed as unchanged
	upd := e.decode(recs[1].Value)
	checkField(t, "update", upd.value, "op", "update")
	checkField(t, "update", upd.value, "after", after)
	checkField(t, "update", upd.value, "unchanged", []any{"big"})
	if upd.id != ins.id {
		t.Errorf("the update's schema id is %d, the insert's %d: one table version has one schema", upd.id, ins.id)
	}
	for i, r := range recs {
		key := e.decode(r.Key)
		if got := fmt.Sprint(key.value); got != "map[row_id:1]" {
			t.Errorf("record %d: key %s, want map[row_id:1]", i, got)
		}
	}
	// The Decoder reads them back into the JSON JSONEncoder wrote for the
	// same row in pgcdc's golden type test.
	t.Run("decoder", func(t *testing.T) {
		dec := kafkasinkavro.NewDecoder(e.registry)
		values := make([][]byte, len(recs))
		for i, r := range recs {
			var err error
			if values[i], err = dec.Value(context.Background(), r.Value); err != nil {
				t.Fatal(err)
			}
		}
		golden := pgtest.TypesGoldenFile(t)
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if got := pgtest.TypesGolden(t, values, e.name); string(got) != string(want) {
			t.Errorf("the decoded records differ from %s:\n%s", golden, got)
		}
	})
	// Apache Avro's Java library, what Confluent's deserializer and
	// Kafka Connect's AvroConverter decode with, reads the same records
	// with the registry's schema and its own logical type conversions.
	t.Run("java", func(t *testing.T) {
		got := e.javaRead(t, [][]byte{recs[0].Value, recs[1].Value, recs[0].Key})
		javaAfter := map[string]any{
			"row_id": "1", "i2": "-32768", "i4": "2147483647", "i8": "9223372036854775807", "o": "4294967295",
			"f4": "1.5", "f8": "0.1", "f8_nan": "NaN", "f8_inf": "Infinity", "f8_ninf": "-Infinity",
			"num": "12345678901234567890.000000000000000001", "num_big": "1234567890.0123456789", "num_nan": "NaN", "num_small": "-1234.50",
			"b": "true", "t": `Grüße, "quotes" \ and |pipes|`, "vc": "varchar", "bp": "ab   ", "nm": "a_name",
			"u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "j": `{"b": 1, "a": [true, null]}`, "jb": `{"a": [true, null], "b": 1}`, "by": "00ff10",
			"d": "2024-02-29", "d_inf": "+5881580-07-11", "ts": "2024-02-29T13:14:15.123456", "ts_inf": "-290308-12-21T19:59:05.224192",
			"tstz": "2024-02-29T12:14:15.500Z", "tm": "13:14:15", "tmtz": "13:14:15+02", "iv": "1 year 2 mons 3 days 04:05:06.5",
			"a_int": "[1, 2, null, 4]", "a_text": `[a, b,c, null, d"e]`, "a_2d": "[[1, 2], [3, 4]]", "a_null": "null",
			"mood": "happy", "pos": "7", "ip": "192.168.0.1/24", "pt": "(1.5,-2)", "nothing": "null", "big": strings.Repeat("x", 3000),
		}
		checkField(t, "insert (Java)", got[0], "op", "insert")
		checkField(t, "insert (Java)", got[0], "after", javaAfter)
		javaAfter["t"], javaAfter["big"] = "changed", ""
		checkField(t, "update (Java)", got[1], "after", javaAfter)
		checkField(t, "update (Java)", got[1], "unchanged", "[big]")
		checkField(t, "key (Java)", got[2], "row_id", "1")
	})
}

// checkField compares field name of a decoded record with want (in
// canonical form).
func checkField(t *testing.T, what string, rec map[string]any, name string, want any) {
	t.Helper()
	got, ok := rec[name]
	if !ok {
		t.Errorf("%s: no field %q in %v", what, name, rec)
		return
	}
	if g, w := fmt.Sprint(got), fmt.Sprint(want); g != w {
		t.Errorf("%s: %s is\n%s\nwant\n%s", what, name, g, w)
	}
}
