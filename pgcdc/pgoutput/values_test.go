package pgoutput

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/pgcdc/internal/pgoutputmsg"
)

func TestTextValues(t *testing.T) {
	t.Parallel()
	c := newValueConverter()
	utc := func(y int, mo time.Month, d, h, mi, s, ns int) time.Time {
		return time.Date(y, mo, d, h, mi, s, ns, time.UTC)
	}
	for _, tc := range []struct {
		name string
		oid  uint32
		in   string
		want any
	}{
		{"bool true", pgtype.BoolOID, "t", true},
		{"bool false", pgtype.BoolOID, "f", false},
		{"int2", pgtype.Int2OID, "-32768", int16(-32768)},
		{"int4", pgtype.Int4OID, "2147483647", int32(2147483647)},
		{"int8", pgtype.Int8OID, "-9223372036854775808", int64(math.MinInt64)},
		{"oid", pgtype.OIDOID, "4294967295", uint32(4294967295)},
		{"float4", pgtype.Float4OID, "1.5", float32(1.5)},
		{"float4 exponent", pgtype.Float4OID, "3.4028235e+38", float32(math.MaxFloat32)},
		{"float8", pgtype.Float8OID, "0.1", 0.1},
		{"float8 infinity", pgtype.Float8OID, "Infinity", math.Inf(1)},
		{"float8 -infinity", pgtype.Float8OID, "-Infinity", math.Inf(-1)},
		{"float4 -infinity", pgtype.Float4OID, "-Infinity", float32(math.Inf(-1))},
		{"numeric", pgtype.NumericOID, "12345678901234567890.000001", kafkasink.Decimal("12345678901234567890.000001")},
		{"numeric negative", pgtype.NumericOID, "-0.50", kafkasink.Decimal("-0.50")},
		{"numeric NaN", pgtype.NumericOID, "NaN", kafkasink.Decimal("NaN")},
		{"numeric infinity", pgtype.NumericOID, "-Infinity", kafkasink.Decimal("-Infinity")},
		{"text", pgtype.TextOID, "héllo\nworld", "héllo\nworld"},
		{"varchar", pgtype.VarcharOID, "", ""},
		{"bpchar", pgtype.BPCharOID, "ab  ", "ab  "},
		{"name", pgtype.NameOID, "pg_class", "pg_class"},
		{"char", pgtype.QCharOID, "x", "x"},
		{"uuid", pgtype.UUIDOID, "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
		{"json", pgtype.JSONOID, `{"b": 1, "a": [1.10, null]}`, json.RawMessage(`{"b": 1, "a": [1.10, null]}`)},
		{"jsonb", pgtype.JSONBOID, `{"a": 1}`, json.RawMessage(`{"a": 1}`)},
		{"bytea hex", pgtype.ByteaOID, `\x00ff10`, []byte{0, 0xff, 0x10}},
		{"bytea empty", pgtype.ByteaOID, `\x`, []byte{}},
		{"bytea escape", pgtype.ByteaOID, `a\\b\000\377`, []byte{'a', '\\', 'b', 0, 0xff}},
		{"date", pgtype.DateOID, "2024-02-29", "2024-02-29"},
		{"date infinity", pgtype.DateOID, "infinity", "infinity"},
		{"date -infinity", pgtype.DateOID, "-infinity", "-infinity"},
		{"date BC", pgtype.DateOID, "0044-03-15 BC", "-0043-03-15"},
		{"date 1 BC", pgtype.DateOID, "0001-01-01 BC", "0000-01-01"},
		{"date five-digit year", pgtype.DateOID, "10000-01-02", "10000-01-02"},
		{"timestamp", pgtype.TimestampOID, "2024-02-29 23:59:58.123456", "2024-02-29T23:59:58.123456"},
		{"timestamp whole second", pgtype.TimestampOID, "2024-02-29 00:00:00", "2024-02-29T00:00:00"},
		{"timestamp BC", pgtype.TimestampOID, "0044-03-15 10:00:00 BC", "-0043-03-15T10:00:00"},
		{"timestamp infinity", pgtype.TimestampOID, "infinity", "infinity"},
		{"timestamptz utc", pgtype.TimestamptzOID, "2024-02-29 23:59:58.5+00", utc(2024, 2, 29, 23, 59, 58, 500000000)},
		{"timestamptz offset", pgtype.TimestamptzOID, "2024-03-01 05:29:58.000001+05:30", utc(2024, 2, 29, 23, 59, 58, 1000)},
		{"timestamptz negative offset", pgtype.TimestamptzOID, "2024-02-29 20:00:00-04", utc(2024, 3, 1, 0, 0, 0, 0)},
		{"timestamptz lmt offset", pgtype.TimestamptzOID, "1850-01-01 00:00:00-00:01:15", utc(1850, 1, 1, 0, 1, 15, 0)},
		{"timestamptz Z", pgtype.TimestamptzOID, "2024-02-29 23:59:58Z", utc(2024, 2, 29, 23, 59, 58, 0)},
		{"timestamptz BC", pgtype.TimestamptzOID, "0044-03-15 10:00:00+00 BC", utc(-43, 3, 15, 10, 0, 0, 0)},
		{"timestamptz infinity", pgtype.TimestamptzOID, "infinity", "infinity"},
		{"timestamptz -infinity", pgtype.TimestamptzOID, "-infinity", "-infinity"},
		{"time", pgtype.TimeOID, "24:00:00", "24:00:00"},
		{"timetz", pgtype.TimetzOID, "12:00:00.5+02", "12:00:00.5+02"},
		{"interval", pgtype.IntervalOID, "1 year 2 mons -3 days 04:05:06.7", "1 year 2 mons -3 days 04:05:06.7"},
		{"inet keeps text", pgtype.InetOID, "10.0.0.1/8", "10.0.0.1/8"},
		{"enum or unknown oid", 70000, "happy", "happy"},
		{"int4 array", pgtype.Int4ArrayOID, "{1,NULL,-3}", []any{int32(1), nil, int32(-3)}},
		{"empty array", pgtype.Int4ArrayOID, "{}", []any{}},
		{"2-d array", pgtype.Int8ArrayOID, "{{1,2},{3,NULL}}", []any{[]any{int64(1), int64(2)}, []any{int64(3), nil}}},
		{"array with bounds", pgtype.Int2ArrayOID, "[0:1]={5,6}", []any{int16(5), int16(6)}},
		{"2-d array with bounds", pgtype.Int2ArrayOID, "[0:0][2:3]={{5,6}}", []any{[]any{int16(5), int16(6)}}},
		{"text array quoting", pgtype.TextArrayOID, `{"a,b","say \"hi\"","back\\slash","NULL",null,""}`,
			[]any{"a,b", `say "hi"`, `back\slash`, "NULL", nil, ""}},
		{"numeric array", pgtype.NumericArrayOID, "{1.5,NaN}", []any{kafkasink.Decimal("1.5"), kafkasink.Decimal("NaN")}},
		{"bool array", pgtype.BoolArrayOID, "{t,f}", []any{true, false}},
		{"float8 array", pgtype.Float8ArrayOID, "{Infinity,-0.5}", []any{math.Inf(1), -0.5}},
		{"uuid array", pgtype.UUIDArrayOID, "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}", []any{"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"}},
		{"jsonb array", pgtype.JSONBArrayOID, `{"{\"a\": 1}","[]"}`, []any{json.RawMessage(`{"a": 1}`), json.RawMessage(`[]`)}},
		{"bytea array", pgtype.ByteaArrayOID, `{"\\x0102",NULL}`, []any{[]byte{1, 2}, nil}},
		{"date array", pgtype.DateArrayOID, "{2024-01-02,infinity}", []any{"2024-01-02", "infinity"}},
		{"timestamp array", pgtype.TimestampArrayOID, `{"2024-01-02 03:04:05"}`, []any{"2024-01-02T03:04:05"}},
		{"timestamptz array", pgtype.TimestamptzArrayOID, `{"2024-01-02 03:04:05+01"}`, []any{utc(2024, 1, 2, 2, 4, 5, 0)}},
		{"interval array", pgtype.IntervalArrayOID, `{"1 day",00:00:01}`, []any{"1 day", "00:00:01"}},
		{"box array delimiter", pgtype.BoxArrayOID, "{(1,1),(0,0);(2,2),(1,1)}", []any{"(1,1),(0,0)", "(2,2),(1,1)"}},
		{"inet array", pgtype.InetArrayOID, "{10.0.0.1,::1}", []any{"10.0.0.1", "::1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := c.text(tc.oid, []byte(tc.in))
			if err != nil {
				t.Fatalf("text(%d, %q): %v", tc.oid, tc.in, err)
			}
			if f, ok := tc.want.(float64); ok && math.IsNaN(f) {
				if g, ok := got.(float64); !ok || !math.IsNaN(g) {
					t.Fatalf("got %#v, want NaN", got)
				}
				return
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("text(%d, %q) = %#v (%T), want %#v (%T)", tc.oid, tc.in, got, got, tc.want, tc.want)
			}
		})
	}
}

func TestTextNaN(t *testing.T) {
	t.Parallel()
	c := newValueConverter()
	for _, oid := range []uint32{pgtype.Float4OID, pgtype.Float8OID} {
		v, err := c.text(oid, []byte("NaN"))
		if err != nil {
			t.Fatal(err)
		}
		switch f := v.(type) {
		case float32:
			if oid != pgtype.Float4OID || !math.IsNaN(float64(f)) {
				t.Errorf("oid %d: got %v", oid, v)
			}
		case float64:
			if oid != pgtype.Float8OID || !math.IsNaN(f) {
				t.Errorf("oid %d: got %v", oid, v)
			}
		default:
			t.Errorf("oid %d: got %T", oid, v)
		}
	}
}

func TestTextValueErrors(t *testing.T) {
	t.Parallel()
	c := newValueConverter()
	for _, tc := range []struct {
		name string
		oid  uint32
		in   string
	}{
		{"bool", pgtype.BoolOID, "true"},
		{"int2 overflow", pgtype.Int2OID, "32768"},
		{"int4 text", pgtype.Int4OID, "one"},
		{"int8 empty", pgtype.Int8OID, ""},
		{"oid negative", pgtype.OIDOID, "-1"},
		{"float hex", pgtype.Float8OID, "0x1p3"},
		{"float inf spelling", pgtype.Float8OID, "inf"},
		{"float4 overflow", pgtype.Float4OID, "1e39"},
		{"numeric exponent", pgtype.NumericOID, "1e5"},
		{"numeric empty", pgtype.NumericOID, ""},
		{"numeric trailing dot", pgtype.NumericOID, "1."},
		{"numeric plus", pgtype.NumericOID, "+1"},
		{"uuid short", pgtype.UUIDOID, "a0eebc99"},
		{"uuid bad hex", pgtype.UUIDOID, "g0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
		{"json", pgtype.JSONOID, "{"},
		{"jsonb", pgtype.JSONBOID, "nope"},
		{"bytea hex odd", pgtype.ByteaOID, `\x0`},
		{"bytea bad escape", pgtype.ByteaOID, `\9`},
		{"date", pgtype.DateOID, "2024-13-01"},
		{"date short year", pgtype.DateOID, "24-01-01"},
		{"date trailing", pgtype.DateOID, "2024-01-01x"},
		{"timestamp without time", pgtype.TimestampOID, "2024-01-01"},
		{"timestamp with zone", pgtype.TimestampOID, "2024-01-01 00:00:00+00"},
		{"timestamp bad hour", pgtype.TimestampOID, "2024-01-01 25:00:00"},
		{"timestamptz without zone", pgtype.TimestamptzOID, "2024-01-01 00:00:00"},
		{"timestamptz bad zone", pgtype.TimestamptzOID, "2024-01-01 00:00:00+5"},
		{"timestamptz empty fraction", pgtype.TimestamptzOID, "2024-01-01 00:00:00.+00"},
		{"array unterminated", pgtype.Int4ArrayOID, "{1,2"},
		{"array not array", pgtype.Int4ArrayOID, "1,2"},
		{"array bad element", pgtype.Int4ArrayOID, "{1,x}"},
		{"array empty element", pgtype.Int4ArrayOID, "{1,,2}"},
		{"array trailing", pgtype.Int4ArrayOID, "{1}x"},
		{"array bad bounds", pgtype.Int4ArrayOID, "[a:b]={1}"},
		{"array too deep", pgtype.Int4ArrayOID, "{{{{{{{1}}}}}}}"},
		{"array quote unterminated", pgtype.TextArrayOID, `{"abc}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if v, err := c.text(tc.oid, []byte(tc.in)); err == nil {
				t.Fatalf("text(%d, %q) = %#v, want an error", tc.oid, tc.in, v)
			}
		})
	}
}

// TestBinaryMatchesText pins that a value sent in binary yields what its
// text form yields, for the types the mapping names.
func TestBinaryMatchesText(t *testing.T) {
	t.Parallel()
	c := newValueConverter()
	m := pgtype.NewMap()
	for _, tc := range []struct {
		oid  uint32
		text string
	}{
		{pgtype.BoolOID, "t"},
		{pgtype.Int2OID, "-7"},
		{pgtype.Int8OID, "9223372036854775807"},
		{pgtype.OIDOID, "4000000000"},
		{pgtype.Float4OID, "1.25"},
		{pgtype.Float8OID, "-Infinity"},
		{pgtype.NumericOID, "-123.4500"},
		{pgtype.NumericOID, "NaN"},
		{pgtype.NumericOID, "-Infinity"},
		{pgtype.NumericOID, "0"},
		{pgtype.NumericOID, "0.0001"},
		{pgtype.NumericOID, "0.000000012"},
		{pgtype.NumericOID, "10000"},
		{pgtype.NumericOID, "12345678901234567890.000001"},
		{pgtype.VarcharOID, "hé"},
		{pgtype.UUIDOID, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
		{pgtype.DateOID, "0044-03-15 BC"},
		{pgtype.DateOID, "infinity"},
		{pgtype.TimestampOID, "2024-02-29 23:59:58.000001"},
		{pgtype.TimestamptzOID, "2024-02-29 23:59:58.25+05:30"},
		{pgtype.TimestamptzOID, "-infinity"},
		{pgtype.TimeOID, "12:34:56.5"},
		{pgtype.IntervalOID, "1 day 02:00:00"},
		{pgtype.TextArrayOID, `{"a b",NULL,c}`},
		{pgtype.NumericArrayOID, `{1.5,NULL,3}`},
		{pgtype.TimeOID, "12:34:56"},
		{pgtype.TimeOID, "00:00:00.000001"},
	} {
		want, err := c.text(tc.oid, []byte(tc.text))
		if err != nil {
			t.Fatalf("text(%d, %q): %v", tc.oid, tc.text, err)
		}
		// Turn the text into pgx's Go value and that into binary, as the
		// server would send it.
		typ, _ := m.TypeForOID(tc.oid)
		v, err := typ.Codec.DecodeValue(m, tc.oid, pgtype.TextFormatCode, []byte(tc.text))
		if err != nil {
			t.Fatalf("pgx decode %d %q: %v", tc.oid, tc.text, err)
		}
		if inf, ok := v.(pgtype.InfinityModifier); ok {
			switch tc.oid {
			case pgtype.DateOID:
				v = pgtype.Date{InfinityModifier: inf, Valid: true}
			case pgtype.TimestamptzOID:
				v = pgtype.Timestamptz{InfinityModifier: inf, Valid: true}
			}
		}
		b, err := m.Encode(tc.oid, pgtype.BinaryFormatCode, v, nil)
		if err != nil {
			t.Fatalf("pgx encode %d %q: %v", tc.oid, tc.text, err)
		}
		got, err := c.binary(tc.oid, b)
		if err != nil {
			t.Fatalf("binary(%d) of %q: %v", tc.oid, tc.text, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("binary(%d) of %q = %#v, text gives %#v", tc.oid, tc.text, got, want)
		}
	}
}

func TestBinaryMultiDimArray(t *testing.T) {
	t.Parallel()
	e := &pgoutputmsg.Encoder{}
	e.Uint32(2).Uint32(1).Uint32(pgtype.Int4OID) // two dimensions, has NULLs, int4
	e.Uint32(2).Uint32(1).Uint32(2).Uint32(0)    // 2 rows from 1, 2 columns from 0
	for _, v := range []int32{1, 2, -1, 4} {
		if v == -1 {
			e.Uint32(0xFFFFFFFF)
			continue
		}
		e.Uint32(4).Uint32(uint32(v))
	}
	b := e.Bytes()
	got, err := newValueConverter().binary(pgtype.Int4ArrayOID, b)
	if err != nil {
		t.Fatal(err)
	}
	want := []any{[]any{int32(1), int32(2)}, []any{nil, int32(4)}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
	for _, bad := range [][]byte{
		b[:len(b)-1],                          // truncated element
		append(b[:0:0], b[:8]...),             // header cut short
		append(append([]byte{}, b...), 0),     // trailing byte
		{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 25}, // element type text, not int4
		{0x30, 0x30, 0x30, 0x30, 0, 0},        // huge dimension count, header cut short
		{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 23, 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 1}, // huge dimension
	} {
		if v, err := newValueConverter().binary(pgtype.Int4ArrayOID, bad); err == nil {
			t.Errorf("binary(% x) = %#v, want an error", bad, v)
		}
	}
}

// TestCustomTypeValues converts domains, arrays of custom types and
// composites the way resolve describes them, without a database.
func TestCustomTypeValues(t *testing.T) {
	t.Parallel()
	const (
		moodOID, moodArrayOID  = 90001, 90002
		pairOID, pairArrayOID  = 90003, 90004
		posOID, intListOID     = 90005, 90006
		emptyOID, changedOID   = 90007, 90008
		unknownOID, moodDomOID = 90009, 90010
	)
	catalog := map[uint32]customType{
		moodOID:      {}, // an enum: text
		moodArrayOID: {array: true, elem: moodOID, delim: ','},
		pairOID:      {composite: true, attrs: []typeAttr{{"a", pgtype.Int4OID}, {"b", pgtype.TextOID}, {"m", moodArrayOID}}},
		pairArrayOID: {array: true, elem: pairOID, delim: ','},
		posOID:       {base: pgtype.Int4OID},
		intListOID:   {base: pgtype.Int4ArrayOID, array: true, elem: pgtype.Int4OID, delim: ','},
		emptyOID:     {composite: true},
		changedOID:   {composite: true, attrs: []typeAttr{{"a", pgtype.Int4OID}}},
		moodDomOID:   {base: moodArrayOID},
	}
	c := newValueConverter()
	var looked []uint32
	c.describe = func(oid uint32) (customType, bool, error) {
		looked = append(looked, oid)
		ct, ok := catalog[oid]
		return ct, ok, nil
	}
	seen := make(map[uint32]bool)
	for _, oid := range []uint32{pairArrayOID, posOID, intListOID, emptyOID, changedOID, unknownOID, moodDomOID, pgtype.Int4OID} {
		if err := c.resolve(oid, seen); err != nil {
			t.Fatal(err)
		}
	}
	for _, oid := range looked {
		if oid == pgtype.Int4OID || oid == pgtype.TextOID {
			t.Errorf("resolve looked up built-in type %d", oid)
		}
	}
	for _, tc := range []struct {
		name string
		oid  uint32
		in   string
		want any
	}{
		{"enum array", moodArrayOID, `{happy,"o k",NULL,"NULL"}`, []any{"happy", "o k", nil, "NULL"}},
		{"domain over int", posOID, "7", int32(7)},
		{"domain over int[]", intListOID, "{1,NULL,3}", []any{int32(1), nil, int32(3)}},
		{"domain over enum[]", moodDomOID, "{{sad},{happy}}", []any{[]any{"sad"}, []any{"happy"}}},
		{"composite", pairOID, `(1,"a ""q"" \\ b","{happy,""o k""}")`,
			map[string]any{"a": int32(1), "b": `a "q" \ b`, "m": []any{"happy", "o k"}}},
		{"composite NULL and empty", pairOID, `(,"",)`, map[string]any{"a": nil, "b": "", "m": nil}},
		{"composite array", pairArrayOID, `{"(1,x,)",NULL,"(2,\"y z\",{sad})"}`,
			[]any{map[string]any{"a": int32(1), "b": "x", "m": nil}, nil, map[string]any{"a": int32(2), "b": "y z", "m": []any{"sad"}}}},
		{"composite without attributes", emptyOID, "()", map[string]any{}},
		{"composite changed since", changedOID, "(1,2)", "(1,2)"},
		{"type the catalog no longer has", unknownOID, "{x}", "{x}"},
	} {
		got, err := c.text(tc.oid, []byte(tc.in))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %#v, want %#v", tc.name, got, tc.want)
		}
	}
	for _, bad := range []string{"(1", `("a`, `(1,x\`, "1,2"} {
		if _, err := c.text(pairOID, []byte(bad)); err == nil {
			t.Errorf("composite %q parsed", bad)
		}
	}
}

// TestCompositeCatchesUpWithTheCatalog checks the stream's converter: a
// value that does not fit the composite as described makes it describe the
// type again once; a value from before the change keeps its text without
// asking again; a failing lookup is a catalogError, not a syntax error.
func TestCompositeCatchesUpWithTheCatalog(t *testing.T) {
	t.Parallel()
	const pairOID = 90001
	two := customType{composite: true, attrs: []typeAttr{{"a", pgtype.Int4OID}, {"b", pgtype.TextOID}}}
	three := customType{composite: true, attrs: append(slices.Clone(two.attrs), typeAttr{"c", pgtype.Int4OID})}
	current := two
	var lookups int
	var lookupErr error
	c := newValueConverter()
	c.liveCatalog = true
	c.describe = func(uint32) (customType, bool, error) {
		lookups++
		return current, true, lookupErr
	}
	if err := c.resolve(pairOID, map[uint32]bool{}); err != nil {
		t.Fatal(err)
	}
	current = three // ALTER TYPE ... ADD ATTRIBUTE c int
	for _, step := range []struct {
		in      string
		want    any
		lookups int
	}{
		{"(1,x)", map[string]any{"a": int32(1), "b": "x"}, 1},                  // described before the change: fits
		{"(2,y,3)", map[string]any{"a": int32(2), "b": "y", "c": int32(3)}, 2}, // does not fit: described again
		{"(3,z)", "(3,z)", 3}, // from before the change: text
		{"(4,w)", "(4,w)", 3}, // the same layout again: no lookup
		{"(5,v,6)", map[string]any{"a": int32(5), "b": "v", "c": int32(6)}, 3},
	} {
		got, err := c.text(pairOID, []byte(step.in))
		if err != nil || !reflect.DeepEqual(got, step.want) || lookups != step.lookups {
			t.Errorf("%s: %#v, %v after %d lookups; want %#v after %d", step.in, got, err, lookups, step.want, step.lookups)
		}
	}
	lookupErr = errors.New("connection lost")
	_, err := c.text(pairOID, []byte("(1,2,3,4)"))
	var ce *catalogError
	if !errors.As(err, &ce) || !errors.Is(err, lookupErr) {
		t.Errorf("a failed lookup: %v, want a catalogError wrapping it", err)
	}
}
