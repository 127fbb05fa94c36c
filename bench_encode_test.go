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

// TestStdlibBaselinesEquivalent proves each baseline marshals the same
// content as the encoder it is compared with, so the ratios compare like
// with like.
func TestStdlibBaselinesEquivalent(t *testing.T) {
	e := benchEvent()
	now := time.UnixMilli(1717245296789)
	cases := []struct {
		name string
		enc  Encoder
		std  any
	}{
		{"json", JSONEncoder{}, benchStdJSON(&e)},
		{"upsert", UpsertEncoder{}, benchStdUpsert(&e)},
	}
	for _, b := range stdlibBaselines {
		enc, std := b.baseline(&e, now)
		cases = append(cases, struct {
			name string
			enc  Encoder
			std  any
		}{b.name, enc, std})
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

// stdlibBaselines are the baselines of the encoders of other packages
// (AddStdlibBaseline): the debezium package's.
var stdlibBaselines []struct {
	name     string
	baseline func(e *Event, now time.Time) (Encoder, any)
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

// BenchmarkEncodeJSON_Text1KB is benchEvent with a 1 KB text column, the
// shape of the bench suite's 1 KB events, where escaping text is most of
// the work.
func BenchmarkEncodeJSON_Text1KB(b *testing.B) {
	note := strings.Repeat("The quick brown fox jumps over the lazy dog 0123456789. ", 19)[:1024]
	benchEncoderOn(b, JSONEncoder{}, func(e *Event) { e.After = append(e.After, Column{Name: "note", Value: note}) })
}

// annotatingEncoders are the encoders BenchmarkEncodeAnnotations
// measures; debezium_encode_test.go adds the debezium package's
// (AddAnnotatingEncoder).
var annotatingEncoders = []struct {
	name string
	enc  Annotator
}{{"json", JSONEncoder{}}, {"upsert", UpsertEncoder{}}}

// benchAnnotations are three annotations of the kind a deployment sets.
var benchAnnotations = map[string]string{"env": "prod", "region": "eu-west-1", "team": "payments"}

// BenchmarkEncodeAnnotations measures each annotating encoder on
// benchEvent without annotations and with benchAnnotations in the value:
//
//	go test -run '^$' -bench EncodeAnnotations -count 10 . | benchstat -col /annotations -
func BenchmarkEncodeAnnotations(b *testing.B) {
	for _, c := range annotatingEncoders {
		annotated, err := c.enc.Annotate(benchAnnotations)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("encoder="+c.name+"/annotations=none", func(b *testing.B) { benchEncoder(b, c.enc.(Encoder)) })
		b.Run("encoder="+c.name+"/annotations=3", func(b *testing.B) { benchEncoder(b, annotated) })
	}
}
