package kafkasink

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The test kit of the package's internal tests: the fixed events and
// golden files that the encoder and key tests share.

// update rewrites the golden files under testdata/golden from the current
// output: go test -run Golden -update . Review the diff before committing.
var update = flag.Bool("update", false, "rewrite golden files in testdata/golden")

// goldenNow is the fixed clock of the Debezium encoder in tests.
var goldenNow = time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)

// goldenEvent is one named event of the fixed set the golden files cover.
type goldenEvent struct {
	name string
	ev   Event
}

// goldenEvents returns the fixed events of the golden files: every
// operation, every value type, an unchanged TOAST column, non-finite
// floats, invalid UTF-8, nested arrays and maps, and NULLs.
func goldenEvents() []goldenEvent {
	commit := time.Date(2024, 5, 31, 22, 15, 30, 123456789, time.FixedZone("CEST", 2*3600))
	allTypes := Row{
		{Name: "id", Value: int64(9007199254740993)}, // 2^53+1: must survive as a number
		{Name: "i", Value: int(-1)},
		{Name: "i8", Value: int8(math.MinInt8)},
		{Name: "i16", Value: int16(math.MaxInt16)},
		{Name: "i32", Value: int32(math.MinInt32)},
		{Name: "u", Value: uint(1)},
		{Name: "u8", Value: uint8(255)},
		{Name: "u16", Value: uint16(65535)},
		{Name: "u32", Value: uint32(math.MaxUint32)},
		{Name: "u64", Value: uint64(math.MaxUint64)},
		{Name: "f32", Value: float32(0.1)},
		{Name: "f64", Value: 1e21},
		{Name: "small", Value: 1e-7},
		{Name: "nan", Value: math.NaN()},
		{Name: "inf", Value: math.Inf(1)},
		{Name: "ninf", Value: float32(math.Inf(-1))},
		{Name: "t", Value: true},
		{Name: "f", Value: false},
		{Name: "text", Value: "quote \" backslash \\ tab \t nl \n <html> & \u2028 żółw 🐢"},
		{Name: "bad_utf8", Value: "ok\xff\xfeend\xe2\x82"},
		{Name: "empty", Value: ""},
		{Name: "bytes", Value: []byte{0xde, 0xad, 0xbe, 0xef}},
		{Name: "ts", Value: commit},
		{Name: "num", Value: Decimal("12345678901234567890.000000001")},
		{Name: "doc", Value: json.RawMessage(`{"a": [1, 2.5, "x"], "b": null}`)},
		// A jsonb 'null', SQL NULL and a jsonb '"null"' must stay three
		// different things, in a column and in an array.
		{Name: "doc_null", Value: json.RawMessage(`null`)},
		{Name: "docs", Value: []any{json.RawMessage(`null`), nil, json.RawMessage(`"null"`)}},
		{Name: "arr", Value: []any{int64(1), "two", nil, []any{true, Decimal("3.0")}, map[string]any{"z": 1, "a": "b"}}},
		{Name: "obj", Value: map[string]any{"zeta": []any{}, "alpha": map[string]any{"n": nil, "f": 1.5}, "": "empty key"}},
		{Name: "null", Value: nil},
		{Name: "weird \"name\"|\\", Value: "column names are escaped too"},
	}
	return []goldenEvent{
		{"insert", Event{
			Op: OpInsert, Schema: "public", Table: "all_types",
			Position: Position{LSN: 0x16_B374D848, Index: 0}, LSN: 0x16_B374D800, XID: 4242,
			Commit: commit, Key: []string{"id"}, After: allTypes,
		}},
		{"update", Event{
			Op: OpUpdate, Schema: "public", Table: "users",
			Position: Position{LSN: 0x16_B374D848, Index: 1}, LSN: 0x16_B374D810, XID: 4242,
			Commit: commit, Key: []string{"tenant", "id"},
			Before: Row{{Name: "tenant", Value: "acme"}, {Name: "id", Value: int32(7)}, {Name: "name", Value: "Old"}, {Name: "bio", Unchanged: true}},
			After:  Row{{Name: "tenant", Value: "acme"}, {Name: "id", Value: int32(7)}, {Name: "name", Value: "New|Name\\"}, {Name: "bio", Unchanged: true}, {Name: "avatar", Unchanged: true}},
		}},
		{"delete", Event{
			Op: OpDelete, Schema: "public", Table: "users",
			Position: Position{LSN: 0x16_B374D848, Index: 2}, LSN: 0x16_B374D820, XID: 4242,
			Commit: commit, Key: []string{"tenant", "id"},
			Before: Row{{Name: "tenant", Value: "acme"}, {Name: "id", Value: int32(8)}, {Name: "name", Value: nil}},
		}},
		{"truncate", Event{
			Op: OpTruncate, Schema: "public", Table: "users",
			Position: Position{LSN: 0xFFFFFFFF_FFFFFFFF, Index: 3}, XID: math.MaxUint32,
			Commit: commit, Truncate: TruncateOptions{RestartIdentity: true},
		}},
		{"read", Event{
			Op: OpRead, Schema: "sales", Table: "orders",
			Position: Position{LSN: 0x15_00000000, Index: 17},
			Key:      []string{"order_id"},
			After: Row{
				{Name: "order_id", Value: uint64(18446744073709551615)},
				{Name: "amount", Value: Decimal("-0.01")},
				{Name: "note", Value: "\\N"},
				{Name: "shipped_at", Value: nil},
			},
			BackfillRunID: "run-2024-06-01",
		}},
	}
}

// checkGolden compares got with testdata/golden/<name>.json, or rewrites
// the file under -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run Golden -update . to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run with -update and review the diff):\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

func goldenByName(t *testing.T, name string) *Event {
	t.Helper()
	for _, g := range goldenEvents() {
		if g.name == name {
			return &g.ev
		}
	}
	t.Fatalf("no golden event %q", name)
	return nil
}
