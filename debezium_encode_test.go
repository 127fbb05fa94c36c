package kafkasink_test

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/debezium"
)

// This file runs the root's tests over every built-in encoder with the
// debezium package's Encoder too (golden file testdata/golden/debezium.json,
// appending to dst, encode errors, allocations), and its own checks and
// benchmarks that were the root's before the encoder moved out of it.

func init() {
	kafkasink.AddGoldenEncoder("debezium", debezium.Encoder{Name: "pg-main", Now: func() time.Time { return kafkasink.GoldenNow }})
	kafkasink.AddAnnotatingEncoder("debezium", debezium.Encoder{WriteAnnotations: true})
	kafkasink.AddStdlibBaseline("debezium", func(e *kafkasink.Event, now time.Time) (kafkasink.Encoder, any) {
		return debezium.Encoder{Now: func() time.Time { return now }}, benchStdDebezium(e, now)
	})
}

func mustEncode(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func TestDebeziumEncoder(t *testing.T) {
	t.Parallel()
	ops := map[string]string{"insert": "c", "update": "u", "delete": "d", "truncate": "t", "read": "r"}
	for name, op := range ops {
		e := kafkasink.GoldenByName(t, name)
		m := kafkasink.DecodeObject(t, mustEncode(debezium.Encoder{}.Encode([]byte{}, e)))
		if m["op"] != op {
			t.Errorf("%s: op = %v, want %s", name, m["op"], op)
		}
		src := m["source"].(map[string]any)
		wantSnap := "false"
		if name == "read" {
			wantSnap = "true"
		}
		if src["snapshot"] != wantSnap || src["name"] != "kafkasink" || src["connector"] != "postgresql" {
			t.Errorf("%s: source = %v", name, src)
		}
		if _, isNumber := src["lsn"].(json.Number); !isNumber {
			t.Errorf("%s: source.lsn = %v, want a number, as Debezium writes it", name, src["lsn"])
		}
		// A nil Now means the wall clock.
		ts, _ := m["ts_ms"].(json.Number).Int64()
		if d := time.Since(time.UnixMilli(ts)); d < 0 || d > time.Minute {
			t.Errorf("%s: ts_ms = %d is not the current time", name, ts)
		}
	}
	e := kafkasink.GoldenByName(t, "truncate")
	m := kafkasink.DecodeObject(t, mustEncode(debezium.Encoder{LSNAsString: true}.Encode([]byte{}, e)))
	if src := m["source"].(map[string]any); src["lsn"] != "18446744073709551615" {
		t.Errorf("LSNAsString: source.lsn = %v, want the string of the commit LSN", src["lsn"])
	}
	m = kafkasink.DecodeObject(t, mustEncode(debezium.Encoder{}.Encode([]byte{}, e)))
	if src := m["source"].(map[string]any); src["lsn"] != json.Number("18446744073709551615") {
		t.Errorf("truncate without its own LSN: source.lsn = %v, want the commit LSN", src["lsn"])
	}
}

// TestDebeziumKeepsNegativeZero: a real's and a double's -0, scalars and
// array elements, is -0.0 in the Debezium encoder with and without a
// Relation, as Debezium writes it (TestEncodersKeepNegativeZero checks
// the root's encoders).
func TestDebeziumKeepsNegativeZero(t *testing.T) {
	t.Parallel()
	negZero := math.Copysign(0, -1)
	e := kafkasink.Event{Op: kafkasink.OpInsert, Schema: "s", Table: "t", Key: []string{"f8"},
		After: kafkasink.Row{{Name: "f4", Value: float32(negZero)}, {Name: "f8", Value: negZero},
			{Name: "a4", Value: []any{float32(negZero), float32(0)}}, {Name: "a8", Value: []any{negZero, 0.0}}}}
	withRelation := e
	withRelation.Relation = &kafkasink.Relation{Columns: []kafkasink.ColumnInfo{
		{Name: "f4", Type: &kafkasink.TypeInfo{Name: "float4", Modifier: -1, Kind: 'b'}},
		{Name: "f8", Type: &kafkasink.TypeInfo{Name: "float8", Modifier: -1, Kind: 'b'}},
		{Name: "a4", Type: &kafkasink.TypeInfo{Name: "_float4", Modifier: -1, Kind: 'b', Elem: &kafkasink.TypeInfo{Name: "float4", Modifier: -1, Kind: 'b'}}},
		{Name: "a8", Type: &kafkasink.TypeInfo{Name: "_float8", Modifier: -1, Kind: 'b', Elem: &kafkasink.TypeInfo{Name: "float8", Modifier: -1, Kind: 'b'}}},
	}}
	const want = `{"f4":-0.0,"f8":-0.0,"a4":[-0.0,0],"a8":[-0.0,0]}`
	for _, c := range []struct {
		name string
		enc  kafkasink.Encoder
		e    *kafkasink.Event
	}{
		{"DebeziumEncoder", debezium.Encoder{}, &e},
		{"DebeziumEncoder with a Relation", debezium.Encoder{}, &withRelation},
		{"DebeziumEncoder with MatchDebeziumLosses", debezium.Encoder{MatchDebeziumLosses: true}, &withRelation},
	} {
		out, err := c.enc.Encode(nil, c.e)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !strings.Contains(string(out), want) {
			t.Errorf("%s: %s\nwant the row %s", c.name, out, want)
		}
	}
}

type stdDebezium struct {
	Before any `json:"before"`
	After  any `json:"after"`
	Source struct {
		Version   string  `json:"version"`
		Connector string  `json:"connector"`
		Name      string  `json:"name"`
		TsMs      int64   `json:"ts_ms"`
		Snapshot  string  `json:"snapshot"`
		DB        string  `json:"db"`
		Sequence  string  `json:"sequence"`
		TsUs      int64   `json:"ts_us"`
		TsNs      int64   `json:"ts_ns"`
		Schema    string  `json:"schema"`
		Table     string  `json:"table"`
		TxID      uint32  `json:"txId"`
		LSN       uint64  `json:"lsn"`
		Xmin      *uint64 `json:"xmin"`
		Origin    *string `json:"origin"`
		OriginLSN *uint64 `json:"origin_lsn"`
	} `json:"source"`
	Transaction *struct {
	} `json:"transaction"`
	Op   string `json:"op"`
	TsMs int64  `json:"ts_ms"`
	TsUs int64  `json:"ts_us"`
	TsNs int64  `json:"ts_ns"`
}

func benchStdDebezium(e *kafkasink.Event, now time.Time) *stdDebezium {
	d := &stdDebezium{After: kafkasink.BenchStdRow(), Op: "u", TsMs: now.UnixMilli(), TsUs: now.UnixMicro(), TsNs: now.UnixNano()}
	s := &d.Source
	s.Version, s.Connector, s.Name, s.Snapshot = debezium.Version, "postgresql", "kafkasink", "false"
	s.TsMs, s.TsUs, s.TsNs = e.Commit.UnixMilli(), e.Commit.UnixMicro(), e.Commit.UnixMicro()*1000
	s.Sequence = `[null,"` + strconv.FormatUint(uint64(e.LSN), 10) + `"]`
	s.Schema, s.Table, s.TxID, s.LSN = e.Schema, e.Table, e.XID, uint64(e.LSN)
	return d
}

// The Debezium encoder reads the clock for ts_ms on every event, so its
// baseline does too.
func BenchmarkEncodeDebezium(b *testing.B) {
	kafkasink.BenchEncoderOn(b, debezium.Encoder{}, func(*kafkasink.Event) {})
}

// benchRelation declares benchEvent's columns as pgcdc would, so that
// BenchmarkEncodeDebezium_Declared takes the path of real pgcdc events:
// values rendered by declared type (balance as a Kafka Connect Decimal).
var benchRelation = func() *kafkasink.Relation {
	typ := func(name string, mod int32) *kafkasink.TypeInfo {
		return &kafkasink.TypeInfo{Name: name, Modifier: mod, Kind: 'b'}
	}
	int8, text, tstz := typ("int8", -1), typ("text", -1), typ("timestamptz", -1)
	return &kafkasink.Relation{Columns: []kafkasink.ColumnInfo{
		{Name: "id", Type: int8, NotNull: true}, {Name: "account_id", Type: int8}, {Name: "email", Type: text},
		{Name: "name", Type: text}, {Name: "balance", Type: typ("numeric", 12<<16|2+4)}, {Name: "created_at", Type: tstz},
		{Name: "updated_at", Type: tstz}, {Name: "active", Type: typ("bool", -1)}, {Name: "score", Type: typ("float8", -1)},
		{Name: "deleted_at", Type: tstz},
	}}
}()

func BenchmarkEncodeDebezium_Declared(b *testing.B) {
	kafkasink.BenchEncoderOn(b, debezium.Encoder{}, func(e *kafkasink.Event) { e.Relation = benchRelation })
}

// BenchmarkEncodeDebezium_Schemas is the declared path with
// SchemasEnable: the cached schema document before the same envelope.
func BenchmarkEncodeDebezium_Schemas(b *testing.B) {
	kafkasink.BenchEncoderOn(b, debezium.Encoder{SchemasEnable: true}, func(e *kafkasink.Event) { e.Relation = benchRelation })
}

func BenchmarkEncodeDebezium_StdlibBaseline(b *testing.B) {
	e := kafkasink.BenchEvent()
	v := benchStdDebezium(&e, time.Now())
	kafkasink.BenchStdlib(b, func() any {
		now := time.Now()
		v.TsMs, v.TsUs, v.TsNs = now.UnixMilli(), now.UnixMicro(), now.UnixNano()
		return v
	})
}

// BenchmarkEncodeDebezium_TxnMetadata is the declared path with
// ProvideTransactionMetadata: the transaction block of an event in the
// middle of its transaction (BEGIN and END are records of their own,
// made once per transaction).
func BenchmarkEncodeDebezium_TxnMetadata(b *testing.B) {
	kafkasink.BenchEncoderOn(b, debezium.Encoder{ProvideTransactionMetadata: true}, func(e *kafkasink.Event) {
		e.Relation = benchRelation
		e.Txn = kafkasink.TxnPlace{Order: 1234, TableOrder: 56}
	})
}
