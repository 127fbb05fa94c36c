package debezium

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
)

// debeziumGolden returns record i (0-based line) of Debezium 3.6.1's
// captured output for the "defaults" configuration, as its value bytes
// and headers.
func debeziumGolden(t *testing.T, i int) (value []byte, headers []struct{ Key, Value string }) {
	t.Helper()
	f, err := os.Open("../testdata/debezium/defaults-schemas-false.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 0; sc.Scan(); n++ {
		if n != i {
			continue
		}
		var rec struct {
			Value   json.RawMessage
			Headers []struct{ Key, Value string }
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		return rec.Value, rec.Headers
	}
	t.Fatalf("golden record %d not found: %v", i, sc.Err())
	return nil, nil
}

// identDefault is a row of the workload's table ident_default.
func identDefault(id, n int64, name any) kafkasink.Row {
	return kafkasink.Row{{Name: "id", Value: id}, {Name: "name", Value: name}, {Name: "n", Value: n}}
}

// TestDebeziumEnvelopeMatchesDebezium builds the events pgcdc delivers for
// records of the captured workload and compares Encoder's value
// with Debezium's bytes: the envelope and source block, field for field
// and in Debezium's order.
func TestDebeziumEnvelopeMatchesDebezium(t *testing.T) {
	t.Parallel()
	snapshot := kafkasink.Source{Database: "kafkasink", SnapshotXID: 1603, SnapshotTime: time.UnixMicro(1796160598569001)}
	snap := func(m kafkasink.SnapshotMark) kafkasink.Source { s := snapshot; s.Snapshot = m; return s }
	stream := kafkasink.Source{Database: "kafkasink", PrevCommitEnd: 35030896}
	commit := time.UnixMicro(1796160599748924)
	cases := []struct {
		name string
		line int
		now  int64 // the top-level ts_ns Debezium wrote
		e    kafkasink.Event
	}{
		{"snapshot first", 0, 1796160598871699829, kafkasink.Event{Op: kafkasink.OpRead, Schema: "dbzconf", Table: "ident_default",
			Position: kafkasink.Position{LSN: 35024600}, Key: []string{"id"}, After: identDefault(1, 10, "one"), Source: snap(kafkasink.SnapshotFirst | kafkasink.SnapshotFirstInTable)}},
		{"snapshot middle", 1, 1796160598875073367, kafkasink.Event{Op: kafkasink.OpRead, Schema: "dbzconf", Table: "ident_default",
			Position: kafkasink.Position{LSN: 35024600, Index: 1}, Key: []string{"id"}, After: identDefault(2, 20, "two"), Source: snapshot}},
		{"snapshot last in table", 2, 1796160598875812026, kafkasink.Event{Op: kafkasink.OpRead, Schema: "dbzconf", Table: "ident_default",
			Position: kafkasink.Position{LSN: 35024600, Index: 2}, Key: []string{"id"}, After: identDefault(3, 30, "three"), Source: snap(kafkasink.SnapshotLastInTable)}},
		{"update", 38, 1796160600039128479, kafkasink.Event{Op: kafkasink.OpUpdate, Schema: "dbzconf", Table: "ident_default",
			Position: kafkasink.Position{LSN: 35031128}, LSN: 35030896, XID: 1611, Commit: commit, Key: []string{"id"}, After: identDefault(1, 10, "uno"), Source: stream}},
		{"insert of a key change", 41, 1796160600042519347, kafkasink.Event{Op: kafkasink.OpInsert, Schema: "dbzconf", Table: "ident_default",
			Position: kafkasink.Position{LSN: 35031128, Index: 2}, LSN: 35030976, XID: 1611, Commit: commit, Key: []string{"id"}, After: identDefault(10, 20, "two"), Source: stream}},
	}
	for _, c := range cases {
		want, _ := debeziumGolden(t, c.line)
		enc := Encoder{Name: "dbz", Now: func() time.Time { return time.Unix(0, c.now) }}
		got, err := enc.Encode(nil, &c.e)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, want)
		}
	}
}

// TestDebeziumSnapshotMarks checks source.snapshot for every combination
// of marks, with Debezium's precedence: the run's last row, its first,
// a table's last, a table's first.
func TestDebeziumSnapshotMarks(t *testing.T) {
	t.Parallel()
	cases := []struct {
		op   kafkasink.Op
		mark kafkasink.SnapshotMark
		want string
	}{
		{kafkasink.OpInsert, 0, "false"},
		{kafkasink.OpInsert, kafkasink.SnapshotFirst, "false"},
		{kafkasink.OpRead, 0, "true"},
		{kafkasink.OpRead, kafkasink.SnapshotFirstInTable, "first_in_data_collection"},
		{kafkasink.OpRead, kafkasink.SnapshotLastInTable, "last_in_data_collection"},
		{kafkasink.OpRead, kafkasink.SnapshotFirstInTable | kafkasink.SnapshotLastInTable, "last_in_data_collection"},
		{kafkasink.OpRead, kafkasink.SnapshotFirst | kafkasink.SnapshotFirstInTable, "first"},
		{kafkasink.OpRead, kafkasink.SnapshotFirst | kafkasink.SnapshotFirstInTable | kafkasink.SnapshotLastInTable, "first"},
		{kafkasink.OpRead, kafkasink.SnapshotLast | kafkasink.SnapshotLastInTable, "last"},
		{kafkasink.OpRead, kafkasink.SnapshotFirst | kafkasink.SnapshotLast | kafkasink.SnapshotFirstInTable | kafkasink.SnapshotLastInTable, "last"},
		{kafkasink.OpRead, kafkasink.SnapshotIncremental, "incremental"},
	}
	for _, c := range cases {
		e := kafkasink.Event{Op: c.op, Source: kafkasink.Source{Snapshot: c.mark}}
		if got := debeziumSnapshot(&e); got != c.want {
			t.Errorf("%s with marks %04b: snapshot = %q, want %q", c.op, c.mark, got, c.want)
		}
	}
}

// TestIncrementalReadHasNoTransaction: a row of an incremental snapshot
// has source.txId and source.lsn null, as Debezium writes them
// (TestDebeziumIncrementalConformance compares whole records); a row of
// the initial snapshot keeps the snapshot's.
func TestIncrementalReadHasNoTransaction(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		mark      kafkasink.SnapshotMark
		txId, lsn string
	}{
		{kafkasink.SnapshotIncremental, "null", "null"},
		{0, "42", "4096"},
	} {
		e := kafkasink.Event{Op: kafkasink.OpRead, Schema: "public", Table: "t", Key: []string{"id"}, LSN: 4096,
			Position: kafkasink.Position{LSN: 4096}, After: kafkasink.Row{{Name: "id", Value: int64(1)}},
			Source: kafkasink.Source{Snapshot: c.mark, SnapshotXID: 42}}
		out, err := Encoder{Name: "dbz"}.Encode(nil, &e)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Source map[string]json.RawMessage `json:"source"`
		}
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		if got := string(v.Source["txId"]); got != c.txId {
			t.Errorf("marks %04b: source.txId = %s, want %s", c.mark, got, c.txId)
		}
		if got := string(v.Source["lsn"]); got != c.lsn {
			t.Errorf("marks %04b: source.lsn = %s, want %s", c.mark, got, c.lsn)
		}
	}
}

// TestDebeziumHeadersMatchDebezium compares the headers Encoder
// adds with Debezium's, key, value and order, for the delete of a key
// change (its record and its tombstone carry the same headers) and the
// insert that follows it.
func TestDebeziumHeadersMatchDebezium(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		line     int
		op       kafkasink.Op
		otherKey string
	}{
		{39, kafkasink.OpDelete, `{"id":10}`},
		{40, kafkasink.OpDelete, `{"id":10}`},
		{41, kafkasink.OpInsert, `{"id":2}`},
		{42, kafkasink.OpDelete, ""},
	} {
		_, want := debeziumGolden(t, c.line)
		runID := want[len(want)-1].Value
		e := kafkasink.Event{Op: c.op}
		var otherKey []byte
		if c.otherKey != "" {
			e.Source.KeyChange = kafkasink.Row{{Name: "id", Value: int64(0)}}
			otherKey = []byte(c.otherKey)
		}
		hs, _ := Encoder{Name: "dbz", RunID: runID}.AppendHeaders(nil, nil, &e, otherKey)
		if len(hs) != len(want) {
			t.Fatalf("record %d: %d headers %v, want %d %v", c.line, len(hs), hs, len(want), want)
		}
		for i, h := range hs {
			if h.Key != want[i].Key || string(h.Value) != want[i].Value {
				t.Errorf("record %d: header %d = %s: %s, want %s: %s", c.line, i, h.Key, h.Value, want[i].Key, want[i].Value)
			}
		}
		if shape := (Encoder{}).Shape(&e); shape.Tombstone != (c.op == kafkasink.OpDelete) || shape.Skip {
			t.Errorf("record %d: shape %+v", c.line, shape)
		}
	}
	if got := (Encoder{DisableExtendedHeaders: true}).Shape(&kafkasink.Event{Op: kafkasink.OpDelete}); !got.Tombstone {
		t.Errorf("DisableExtendedHeaders changed the tombstone: %+v", got)
	}
	if hs, _ := (Encoder{DisableExtendedHeaders: true}).AppendHeaders(nil, nil, &kafkasink.Event{Op: kafkasink.OpInsert}, nil); len(hs) != 0 {
		t.Errorf("DisableExtendedHeaders: headers %v, want none", hs)
	}
	if got := (Encoder{DisableTombstones: true}).Shape(&kafkasink.Event{Op: kafkasink.OpDelete}); got.Tombstone {
		t.Errorf("DisableTombstones: shape %+v, want no tombstone", got)
	}
}

// TestDebeziumSkippedOperations checks skipped.operations: "t" by
// default, a list, and "none"; snapshot reads are never skipped.
func TestDebeziumSkippedOperations(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		list    string
		skipped []kafkasink.Op
	}{
		{"", []kafkasink.Op{kafkasink.OpTruncate}},
		{"none", nil},
		{"c, d", []kafkasink.Op{kafkasink.OpInsert, kafkasink.OpDelete}},
		{"u,t", []kafkasink.Op{kafkasink.OpUpdate, kafkasink.OpTruncate}},
	} {
		for _, op := range []kafkasink.Op{kafkasink.OpInsert, kafkasink.OpUpdate, kafkasink.OpDelete, kafkasink.OpTruncate, kafkasink.OpRead} {
			want := false
			for _, s := range c.skipped {
				want = want || s == op
			}
			if got := (Encoder{SkippedOperations: c.list}).Shape(&kafkasink.Event{Op: op}).Skip; got != want {
				t.Errorf("SkippedOperations %q, %s: Skip = %v, want %v", c.list, op, got, want)
			}
		}
	}
}
