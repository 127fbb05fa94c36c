package kafkasink

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// goldenEncoders are the encoders the golden files pin, by file name.
var goldenEncoders = []struct {
	name string
	enc  Encoder
}{
	{"json", JSONEncoder{}},
	{"upsert", UpsertEncoder{}},
	// The debezium package's Encoder is added by debezium_encode_test.go
	// (AddGoldenEncoder): the root does not import it.
}

// TestGoldenEncoders pins every built-in encoder's output over the fixed
// events. A golden file is one JSON object mapping each event's name to
// {"value": <the encoded value>} or {"tombstone": true}, indented for
// review; the encoded values are embedded byte for byte (json.Indent only
// changes whitespace between tokens).
func TestGoldenEncoders(t *testing.T) {
	for _, ge := range goldenEncoders {
		t.Run(ge.name, func(t *testing.T) {
			var doc []byte
			doc = append(doc, '{')
			for i, g := range goldenEvents() {
				out, err := ge.enc.Encode(make([]byte, 0, 64), &g.ev)
				if err != nil {
					t.Fatalf("%s: %v", g.name, err)
				}
				if i > 0 {
					doc = append(doc, ',')
				}
				doc = append(doc, '"')
				doc = append(doc, g.name...)
				doc = append(doc, `":`...)
				if out == nil {
					doc = append(doc, `{"tombstone":true}`...)
					continue
				}
				if !json.Valid(out) || !utf8.Valid(out) {
					t.Fatalf("%s: output is not valid JSON: %s", g.name, out)
				}
				doc = append(doc, `{"value":`...)
				doc = append(doc, out...)
				doc = append(doc, '}')
			}
			doc = append(doc, '}')
			var indented bytes.Buffer
			if err := json.Indent(&indented, doc, "", "  "); err != nil {
				t.Fatal(err)
			}
			indented.WriteByte('\n')
			checkGolden(t, ge.name, indented.Bytes())
		})
	}
}

// decode parses an encoder's output into generic JSON for field checks.
func decodeObject(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatalf("output %s: %v", b, err)
	}
	return m
}

func TestJSONEncoderFields(t *testing.T) {
	t.Parallel()
	e := goldenByName(t, "update")
	out, err := JSONEncoder{}.Encode([]byte{}, e)
	if err != nil {
		t.Fatal(err)
	}
	// The field order is part of the contract: check the raw prefix.
	const prefix = `{"id":"16/B374D848:1","op":"update","schema":"public","table":"users","lsn":"97500059664","commit_lsn":"97500059720","index":1,"xid":4242,"commit_time":"2024-05-31T20:15:30.123456789Z","key":["tenant","id"],"before":`
	if !strings.HasPrefix(string(out), prefix) {
		t.Errorf("got  %s\nwant prefix %s", out, prefix)
	}
	m := decodeObject(t, out)
	if got := m["unchanged"]; !sameJSON(got, []any{"bio", "avatar"}) {
		t.Errorf("unchanged = %v, want [bio avatar] (each once, After's first)", got)
	}
	after := m["after"].(map[string]any)
	if _, ok := after["bio"]; ok {
		t.Error("after must leave out the unchanged column bio")
	}
	if _, ok := m["backfill_run_id"]; ok {
		t.Error("backfill_run_id must be omitted when empty")
	}

	r := goldenByName(t, "read")
	r.Commit = time.Time{}
	m = decodeObject(t, mustEncode(JSONEncoder{}.Encode([]byte{}, r)))
	if m["commit_time"] != nil {
		t.Errorf("commit_time = %v, want null for a zero commit time", m["commit_time"])
	}
	if m["backfill_run_id"] != "run-2024-06-01" || m["op"] != "read" || m["before"] != nil {
		t.Errorf("read event fields wrong: %v", m)
	}
	if _, ok := m["unchanged"]; ok {
		t.Error("unchanged must be omitted when no column is unchanged")
	}
	if m["lsn"] != "0" {
		t.Errorf("lsn = %v, want \"0\" when the source has none", m["lsn"])
	}
}

func mustEncode(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func sameJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func TestUpsertEncoder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		tombstone bool
	}{{"insert", false}, {"update", false}, {"delete", true}, {"truncate", true}, {"read", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := goldenByName(t, tc.name)
			out, err := UpsertEncoder{}.Encode(make([]byte, 0, 8), e)
			if err != nil {
				t.Fatal(err)
			}
			if (out == nil) != tc.tombstone {
				t.Fatalf("tombstone = %v, want %v", out == nil, tc.tombstone)
			}
			if tc.tombstone {
				return
			}
			m := decodeObject(t, out)
			md := m["metadata"].(map[string]any)
			// The golden update leaves out unchanged TOAST columns.
			wantOp := "upsert"
			if tc.name == "update" {
				wantOp = "partial"
			}
			if m["operation"] != wantOp || m["id"] != e.ID() || md["action"] != e.Op.String() {
				t.Errorf("wrong head fields: %s", out)
			}
			if md["is_backfill"] != (e.Op == OpRead) {
				t.Errorf("is_backfill = %v for %s", md["is_backfill"], e.Op)
			}
		})
	}
}

// TestEncodersKeepNegativeZero: a real's and a double's -0, scalars and
// array elements, is -0.0 in every JSON encoder (the debezium package's
// Encoder too: TestDebeziumKeepsNegativeZero), which JSON readers that
// type numbers by their spelling keep (Jackson and Python read -0 as the
// integer 0), and in the key's JSON form; the text key keeps its -0.
func TestEncodersKeepNegativeZero(t *testing.T) {
	t.Parallel()
	negZero := math.Copysign(0, -1)
	e := Event{Op: OpInsert, Schema: "s", Table: "t", Key: []string{"f8"},
		After: Row{{Name: "f4", Value: float32(negZero)}, {Name: "f8", Value: negZero},
			{Name: "a4", Value: []any{float32(negZero), float32(0)}}, {Name: "a8", Value: []any{negZero, 0.0}}}}
	const want = `{"f4":-0.0,"f8":-0.0,"a4":[-0.0,0],"a8":[-0.0,0]}`
	for _, c := range []struct {
		name string
		enc  Encoder
		e    *Event
	}{
		{"JSONEncoder", JSONEncoder{}, &e},
		{"UpsertEncoder", UpsertEncoder{}, &e},
	} {
		out, err := c.enc.Encode(nil, c.e)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !strings.Contains(string(out), want) {
			t.Errorf("%s: %s\nwant the row %s", c.name, out, want)
		}
	}
	for format, want := range map[KeyFormat]string{KeyJSON: `{"f8":-0.0}`, KeyText: `-0`} {
		key, err := AppendKey(nil, &e, nil, format)
		if err != nil {
			t.Fatal(err)
		}
		if string(key) != want {
			t.Errorf("key in format %v: %s, want %s", format, key, want)
		}
	}
}

func TestEncoderAppendsToDst(t *testing.T) {
	t.Parallel()
	e := goldenByName(t, "insert")
	for _, ge := range goldenEncoders {
		out, err := ge.enc.Encode([]byte("prefix"), e)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(out, []byte("prefix{")) {
			t.Errorf("%s: Encode must append to dst, got %.20q", ge.name, out)
		}
	}
}

func TestEncodeErrors(t *testing.T) {
	t.Parallel()
	bad := []struct {
		name     string
		value    any
		wantType string
	}{
		{"chan", make(chan int), "chan int"},
		{"struct", struct{ X int }{1}, "struct { X int }"},
		{"pointer", new(string), "*string"},
		{"nested", []any{1, map[string]any{"k": make(chan int)}}, "chan int"},
	}
	for _, ge := range goldenEncoders {
		for _, b := range bad {
			t.Run(ge.name+"/"+b.name, func(t *testing.T) {
				t.Parallel()
				e := &Event{Op: OpUpdate, Schema: "s", Table: "tbl", Key: []string{"id"},
					Before: Row{{Name: "id", Value: 1}},
					After:  Row{{Name: "id", Value: 1}, {Name: "broken", Value: b.value}}}
				out, err := ge.enc.Encode([]byte{}, e)
				var ee *EncodeError
				if !errors.As(err, &ee) {
					t.Fatalf("error = %v (out %s), want *EncodeError", err, out)
				}
				if ee.Schema != "s" || ee.Table != "tbl" || ee.Column != "broken" {
					t.Errorf("EncodeError names %s.%s column %q, want s.tbl column broken", ee.Schema, ee.Table, ee.Column)
				}
				msg := err.Error()
				for _, want := range []string{"s.tbl", `"broken"`, b.wantType, "kafkasink.Decimal"} {
					if !strings.Contains(msg, want) {
						t.Errorf("message %q lacks %q", msg, want)
					}
				}
			})
		}
	}

	// Invalid raw JSON is refused, not passed through.
	e := &Event{Op: OpInsert, Schema: "s", Table: "t", After: Row{{Name: "j", Value: json.RawMessage(`{"a":`)}}}
	if _, err := (JSONEncoder{}).Encode([]byte{}, e); !errors.As(err, new(*EncodeError)) {
		t.Errorf("invalid raw JSON: error = %v, want *EncodeError", err)
	}

	// An invalid Op is an invalid batch for every encoder.
	for _, ge := range goldenEncoders {
		if _, err := ge.enc.Encode([]byte{}, &Event{Op: 0, Table: "t"}); !errors.Is(err, ErrInvalidBatch) {
			t.Errorf("%s: invalid op: error = %v, want ErrInvalidBatch", ge.name, err)
		}
	}
}

func TestEncodeAllocs(t *testing.T) {
	e := benchEvent()
	buf := make([]byte, 0, 4096)
	for _, ge := range goldenEncoders {
		allocs := testing.AllocsPerRun(200, func() {
			if _, err := ge.enc.Encode(buf[:0], &e); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s allocates %v times per event, want 0", ge.name, allocs)
		}
	}
}

// FuzzJSONEncoder checks that any column names and values the fuzzer finds
// give valid JSON that reads back to the same strings and numbers.
func FuzzJSONEncoder(f *testing.F) {
	f.Add("public", "t", "id", "value", int64(1), 1.5, []byte("b"), true)
	f.Add("s\"", "t\\", "\xff", "\x00\u2028<&>", int64(math.MinInt64), math.Inf(-1), []byte(nil), false)
	f.Add("", "", "", "\\N|", int64(0), math.NaN(), []byte{0xff}, true)
	f.Fuzz(func(t *testing.T, schema, table, col, s string, i int64, fl float64, b []byte, flag bool) {
		e := &Event{
			Op: OpUpdate, Schema: schema, Table: table, Key: []string{col},
			Position: Position{LSN: LSN(i), Index: uint64(i)}, LSN: LSN(i), XID: uint32(i),
			Commit:        time.Unix(0, i),
			Before:        Row{{Name: col, Value: s}},
			After:         Row{{Name: col, Value: s}, {Name: "n", Value: i}, {Name: "f", Value: fl}, {Name: "b", Value: b}, {Name: "x", Value: flag}, {Name: "arr", Value: []any{s, map[string]any{s: fl}}}, {Name: "u", Unchanged: true}},
			BackfillRunID: s,
		}
		for _, ge := range goldenEncoders {
			out, err := ge.enc.Encode([]byte{}, e)
			if err != nil {
				t.Fatalf("%s: %v", ge.name, err)
			}
			if !json.Valid(out) || !utf8.Valid(out) {
				t.Fatalf("%s: invalid JSON: %q", ge.name, out)
			}
		}
		m := decodeObject(t, mustEncode(JSONEncoder{}.Encode([]byte{}, e)))
		if utf8.ValidString(s) && utf8.ValidString(col) && col != "n" && col != "f" && col != "b" && col != "x" && col != "arr" {
			after := m["after"].(map[string]any)
			if after[col] != s {
				t.Fatalf("string %q came back as %q", s, after[col])
			}
			if after["n"].(json.Number).String() != jsonInt(i) {
				t.Fatalf("int %d came back as %v", i, after["n"])
			}
		}
	})
}

func jsonInt(i int64) string { return string(mustEncode(json.Marshal(i))) }
