package kafkasink

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The encode benchmarks compare each built-in encoder with encoding/json
// marshalling a Go value of the same content, in the same run:
//
//	go test -run '^$' -bench Encode -count 6 . | benchstat -col /impl -
//
// The baselines get the most favourable input encoding/json can have: a
// typed struct built once outside the loop, so they measure marshalling
// only, while the encoders also derive every field from the Event.

var (
	benchCreated = time.Date(2023, 11, 14, 8, 30, 0, 0, time.UTC)
	benchUpdated = time.Date(2024, 6, 1, 12, 34, 56, 789012000, time.UTC)
)

// benchEvent is a realistic update of a 10-column row: integers, text,
// numeric, timestamptz, bool, float and a NULL.
func benchEvent() Event {
	return Event{
		Op: OpUpdate, Schema: "public", Table: "accounts",
		Position: Position{LSN: 0x1A_2B3C4D5E, Index: 12}, LSN: 0x1A_2B3C4D00, XID: 987654,
		Commit: benchUpdated, Key: []string{"id"},
		After: Row{
			{Name: "id", Value: int64(1234567)},
			{Name: "account_id", Value: int64(42)},
			{Name: "email", Value: "jane.doe@example.com"},
			{Name: "name", Value: "Jane \"JD\" Doe"},
			{Name: "balance", Value: Decimal("10234.57")},
			{Name: "created_at", Value: benchCreated},
			{Name: "updated_at", Value: benchUpdated},
			{Name: "active", Value: true},
			{Name: "score", Value: 0.875},
			{Name: "deleted_at", Value: nil},
		},
	}
}

// stdRow is benchEvent's row as a typed struct for encoding/json.
type stdRow struct {
	ID        int64      `json:"id"`
	AccountID int64      `json:"account_id"`
	Email     string     `json:"email"`
	Name      string     `json:"name"`
	Balance   string     `json:"balance"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	Active    bool       `json:"active"`
	Score     float64    `json:"score"`
	DeletedAt *time.Time `json:"deleted_at"`
}

func benchStdRow() *stdRow {
	return &stdRow{1234567, 42, "jane.doe@example.com", "Jane \"JD\" Doe", "10234.57", benchCreated, benchUpdated, true, 0.875, nil}
}

type stdJSONEnvelope struct {
	ID            string     `json:"id"`
	Op            string     `json:"op"`
	Schema        string     `json:"schema"`
	Table         string     `json:"table"`
	LSN           string     `json:"lsn"`
	CommitLSN     string     `json:"commit_lsn"`
	Index         uint64     `json:"index"`
	XID           uint32     `json:"xid"`
	CommitTime    *time.Time `json:"commit_time"`
	Key           []string   `json:"key"`
	Before        *stdRow    `json:"before"`
	After         *stdRow    `json:"after"`
	Unchanged     []string   `json:"unchanged,omitempty"`
	BackfillRunID string     `json:"backfill_run_id,omitempty"`
}

func benchStdJSON(e *Event) any {
	ct := e.Commit
	return &stdJSONEnvelope{
		ID: e.ID(), Op: e.Op.String(), Schema: e.Schema, Table: e.Table,
		LSN: strconv.FormatUint(uint64(e.LSN), 10), CommitLSN: strconv.FormatUint(uint64(e.Position.LSN), 10),
		Index: e.Position.Index, XID: e.XID, CommitTime: &ct, Key: e.Key, After: benchStdRow(),
	}
}

type stdUpsert struct {
	Operation string  `json:"operation"`
	ID        string  `json:"id"`
	Document  *stdRow `json:"document"`
	Metadata  struct {
		Schema      string    `json:"schema"`
		Table       string    `json:"table"`
		Action      string    `json:"action"`
		CommitLSN   string    `json:"commit_lsn"`
		CommitIndex uint64    `json:"commit_index"`
		CommitTime  time.Time `json:"commit_time"`
		IsBackfill  bool      `json:"is_backfill"`
	} `json:"metadata"`
}

func benchStdUpsert(e *Event) any {
	u := &stdUpsert{Operation: "upsert", ID: e.ID(), Document: benchStdRow()}
	u.Metadata.Schema, u.Metadata.Table, u.Metadata.Action = e.Schema, e.Table, e.Op.String()
	u.Metadata.CommitLSN = strconv.FormatUint(uint64(e.Position.LSN), 10)
	u.Metadata.CommitIndex, u.Metadata.CommitTime = e.Position.Index, e.Commit
	return u
}

type stdDebezium struct {
	Before *stdRow `json:"before"`
	After  *stdRow `json:"after"`
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

func benchStdDebezium(e *Event, now time.Time) *stdDebezium {
	d := &stdDebezium{After: benchStdRow(), Op: "u", TsMs: now.UnixMilli(), TsUs: now.UnixMicro(), TsNs: now.UnixNano()}
	s := &d.Source
	s.Version, s.Connector, s.Name, s.Snapshot = DebeziumVersion, "postgresql", "kafkasink", "false"
	s.TsMs, s.TsUs, s.TsNs = e.Commit.UnixMilli(), e.Commit.UnixMicro(), e.Commit.UnixMicro()*1000
	s.Sequence = `[null,"` + strconv.FormatUint(uint64(e.LSN), 10) + `"]`
	s.Schema, s.Table, s.TxID, s.LSN = e.Schema, e.Table, e.XID, uint64(e.LSN)
	return d
}

// TestStdlibBaselinesEquivalent proves each baseline marshals the same
// content as the encoder it is compared with, so the ratios compare like
// with like.
func TestStdlibBaselinesEquivalent(t *testing.T) {
	e := benchEvent()
	now := time.UnixMilli(1717245296789)
	deb := benchStdDebezium(&e, now)
	cases := []struct {
		name string
		enc  Encoder
		std  any
	}{
		{"json", JSONEncoder{}, benchStdJSON(&e)},
		{"upsert", UpsertEncoder{}, benchStdUpsert(&e)},
		{"debezium", DebeziumEncoder{Now: func() time.Time { return now }}, deb},
	}
	for _, c := range cases {
		ours, err := c.enc.Encode([]byte{}, &e)
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := json.Marshal(c.std)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ours, theirs) {
			t.Errorf("%s: encoder and baseline differ:\nours   %s\nstdlib %s", c.name, ours, theirs)
		}
	}
}

func benchEncoder(b *testing.B, enc Encoder) { benchEncoderOn(b, enc, func(*Event) {}) }

// benchEncoderOn measures enc on benchEvent as changed by prepare.
func benchEncoderOn(b *testing.B, enc Encoder, prepare func(*Event)) {
	e := benchEvent()
	prepare(&e)
	buf := make([]byte, 0, 1<<14) // room for a schema-carrying value (BenchmarkEncodeDebezium_Schemas)
	b.ReportAllocs()
	var n int
	for b.Loop() {
		out, err := enc.Encode(buf[:0], &e)
		if err != nil {
			b.Fatal(err)
		}
		n = len(out)
	}
	b.SetBytes(int64(n))
}

func benchStdlib(b *testing.B, v func() any) {
	b.ReportAllocs()
	var n int
	for b.Loop() {
		out, err := json.Marshal(v())
		if err != nil {
			b.Fatal(err)
		}
		n = len(out)
	}
	b.SetBytes(int64(n))
}

func BenchmarkEncodeJSON(b *testing.B) { benchEncoder(b, JSONEncoder{}) }

func BenchmarkEncodeJSON_StdlibBaseline(b *testing.B) {
	e := benchEvent()
	v := benchStdJSON(&e)
	benchStdlib(b, func() any { return v })
}

func BenchmarkEncodeUpsert(b *testing.B) { benchEncoder(b, UpsertEncoder{}) }

func BenchmarkEncodeUpsert_StdlibBaseline(b *testing.B) {
	e := benchEvent()
	v := benchStdUpsert(&e)
	benchStdlib(b, func() any { return v })
}

// The Debezium encoder reads the clock for ts_ms on every event, so its
// baseline does too.
func BenchmarkEncodeDebezium(b *testing.B) { benchEncoder(b, DebeziumEncoder{}) }

// benchRelation declares benchEvent's columns as pgcdc would, so that
// BenchmarkEncodeDebezium_Declared takes the path of real pgcdc events:
// values rendered by declared type (balance as a Kafka Connect Decimal).
var benchRelation = func() *Relation {
	typ := func(name string, mod int32) *TypeInfo { return &TypeInfo{Name: name, Modifier: mod, Kind: 'b'} }
	int8, text, tstz := typ("int8", -1), typ("text", -1), typ("timestamptz", -1)
	return &Relation{Columns: []ColumnInfo{
		{Name: "id", Type: int8, NotNull: true}, {Name: "account_id", Type: int8}, {Name: "email", Type: text},
		{Name: "name", Type: text}, {Name: "balance", Type: typ("numeric", 12<<16|2+4)}, {Name: "created_at", Type: tstz},
		{Name: "updated_at", Type: tstz}, {Name: "active", Type: typ("bool", -1)}, {Name: "score", Type: typ("float8", -1)},
		{Name: "deleted_at", Type: tstz},
	}}
}()

func BenchmarkEncodeDebezium_Declared(b *testing.B) {
	benchEncoderOn(b, DebeziumEncoder{}, func(e *Event) { e.Relation = benchRelation })
}

// BenchmarkEncodeDebezium_Schemas is the declared path with
// SchemasEnable: the cached schema document before the same envelope.
func BenchmarkEncodeDebezium_Schemas(b *testing.B) {
	benchEncoderOn(b, DebeziumEncoder{SchemasEnable: true}, func(e *Event) { e.Relation = benchRelation })
}

func BenchmarkEncodeDebezium_StdlibBaseline(b *testing.B) {
	e := benchEvent()
	v := benchStdDebezium(&e, time.Now())
	benchStdlib(b, func() any {
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
	benchEncoderOn(b, DebeziumEncoder{ProvideTransactionMetadata: true}, func(e *Event) {
		e.Relation = benchRelation
		e.Txn = TxnPlace{Order: 1234, TableOrder: 56}
	})
}

// BenchmarkEncodeJSON_Text1KB is benchEvent with a 1 KB text column, the
// shape of the bench suite's 1 KB events, where escaping text is most of
// the work.
func BenchmarkEncodeJSON_Text1KB(b *testing.B) {
	note := strings.Repeat("The quick brown fox jumps over the lazy dog 0123456789. ", 19)[:1024]
	benchEncoderOn(b, JSONEncoder{}, func(e *Event) { e.After = append(e.After, Column{Name: "note", Value: note}) })
}

// benchAnnotations are three annotations of the kind a deployment sets.
var benchAnnotations = map[string]string{"env": "prod", "region": "eu-west-1", "team": "payments"}

// BenchmarkEncodeAnnotations measures each annotating encoder on
// benchEvent without annotations and with benchAnnotations in the value:
//
//	go test -run '^$' -bench EncodeAnnotations -count 10 . | benchstat -col /annotations -
func BenchmarkEncodeAnnotations(b *testing.B) {
	for _, c := range []struct {
		name string
		enc  Annotator
	}{{"json", JSONEncoder{}}, {"upsert", UpsertEncoder{}}, {"debezium", DebeziumEncoder{WriteAnnotations: true}}} {
		annotated, err := c.enc.Annotate(benchAnnotations)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("encoder="+c.name+"/annotations=none", func(b *testing.B) { benchEncoder(b, c.enc.(Encoder)) })
		b.Run("encoder="+c.name+"/annotations=3", func(b *testing.B) { benchEncoder(b, annotated) })
	}
}
