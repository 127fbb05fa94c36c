package pgcdc

// Conformance of backfills with the real Debezium 3.6.1's incremental
// snapshot (issue 26). internal/debeziumref/capture-incremental.sh ran
// Debezium (defaults, snapshot.mode=no_data, signal.data.collection
// dbzconf.zz_signal) on the conformance workload, inserted one
// execute-snapshot row into its signal table and captured what it wrote,
// into testdata/debezium/incremental-schemas-false.jsonl. This test
// inserts the same row into the same table under Run with
// Config.SignalTable, and compares the read records (and the signal row's
// own record) field by field with Debezium's: the differences must be
// exactly those listed in deviations-incremental-schemas-false.txt.

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/debezium"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// incrementalSignal returns the signal row's data the capture inserted,
// read from the golden file (Debezium's record of it), with dbzconf
// renamed to schema.
func incrementalSignal(t *testing.T, golden []dbzRecord, schema string) string {
	t.Helper()
	for _, r := range golden {
		if r.Topic != "dbz."+debeziumSchema+".zz_signal" || r.op() != "c" {
			continue
		}
		after := unwrapPayload(decodeJSON(r.Value)).(map[string]any)["after"].(map[string]any)
		if after["type"] == "execute-snapshot" {
			return regexp.MustCompile(`\b`+debeziumSchema+`\.`).ReplaceAllString(after["data"].(string), schema+".")
		}
	}
	t.Fatal("the golden file holds no execute-snapshot row")
	return ""
}

// TestDebeziumIncrementalConformance: the backfill's read records, asked
// for through the signal table, against Debezium's incremental snapshot.
func TestDebeziumIncrementalConformance(t *testing.T) {
	e := newPGEnv(t)
	sinktest.SkipWithoutExtension(t, e.db, "hstore")
	schema := e.name
	t.Cleanup(func() { e.exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE") })
	for _, stmt := range workloadStatements(t, "workload.sql", schema) {
		e.exec(stmt)
	}
	e.exec("CREATE TABLE " + schema + ".zz_signal (id varchar(42) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048) NULL)")
	golden := readDebeziumGolden(t, "incremental-schemas-false.jsonl")
	var want []dbzRecord
	for _, r := range golden {
		// The read records, and the signal row's own record: not
		// Debezium's window rows, which Run does not write.
		if r.op() == "r" || strings.Contains(string(r.Key), `"conformance-1"`) {
			want = append(want, r)
		}
	}
	reads := int64(len(want) - 1)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sink, err := kafkasink.New(ctx, kafkasink.Config{
		Brokers:   e.brokers,
		SinkID:    e.name,
		Topics:    kafkasink.Topics{Prefix: "dbz", Partitions: 1},
		KeyFormat: kafkasink.KeyJSON,
		Encoder:   debezium.Encoder{Name: "dbz"},
	})
	if err != nil {
		t.Fatalf("kafkasink.New: %v", err)
	}
	t.Cleanup(func() { sink.Close(context.Background()) })
	var got atomic.Int64
	watched := &recSink{Sink: sink, tr: newTracker(), after: func(_ int, b *kafkasink.Batch) error {
		for i := range b.Events {
			if b.Events[i].Op == kafkasink.OpRead {
				got.Add(1)
			}
		}
		return nil
	}}
	tables := append(debeziumTables(t), "zz_signal")
	cfg := e.config()
	for _, table := range tables {
		cfg.Tables = append(cfg.Tables, schema+"."+table)
	}
	mon := &Monitor{}
	cfg.Monitor, cfg.SignalTable, cfg.KeylessTables = mon, schema+".zz_signal", true
	stop, r := start(t, cfg, watched)
	waitFor(t, time.Minute, "streaming", r, func() bool { return mon.Stats().State == RunStreaming })
	e.exec("INSERT INTO "+schema+".zz_signal VALUES ('conformance-1', 'execute-snapshot', $1)", incrementalSignal(t, golden, schema))
	waitFor(t, time.Minute, fmt.Sprintf("the %d read records", reads), r, func() bool { return got.Load() >= reads })
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want context.Canceled", err)
	}
	if e := mon.Stats().LastBackfillError; e != "" {
		t.Fatalf("Monitor: %s", e)
	}

	var topics []string
	for _, table := range tables {
		topics = append(topics, "dbz."+schema+"."+table)
	}
	var ours []dbzRecord
	for _, rec := range sinktest.ReadCommitted(t, e.brokers, topics...) {
		ours = append(ours, ourDebeziumRecord(rec, schema))
	}
	checkDeviations(t, "incremental", "deviations-incremental-schemas-false.txt", debeziumDeviations(want, ours))

	// The order around the window: as in Debezium's capture (see
	// TestDebeziumIncrementalGolden), every read record follows the
	// signal row's record; here by position (the kafkasink.id header),
	// as the records are on the topics of their tables.
	var signal kafkasink.Position
	var readsAt []kafkasink.Position
	for _, r := range ours {
		id, _ := headerValue(r.Headers, kafkasink.HeaderID).(string)
		pos, err := kafkasink.ParsePosition(id)
		if err != nil {
			t.Fatalf("%s: header %s: %v", r.Topic, kafkasink.HeaderID, err)
		}
		switch {
		case strings.HasSuffix(r.Topic, ".zz_signal"):
			signal = pos
		case r.op() == "r":
			readsAt = append(readsAt, pos)
		}
	}
	for _, pos := range readsAt {
		if pos.Compare(signal) <= 0 {
			t.Errorf("a read record at %s does not follow the signal row's record at %s", pos, signal)
		}
	}
}

// The capture this test compares with exists and holds what it says: a
// read record of every workload table with a key, each with
// source.snapshot "incremental". And Debezium's order around its
// windows: the execute-snapshot row's record first, then per chunk the
// record of the window-open row Debezium inserted into the signal table,
// the chunk's read records, and the record of its window-close row,
// nothing else in between (the workload's changes came after the
// snapshot): Debezium holds a chunk until the stream reaches its close
// row, and emits it there.
func TestDebeziumIncrementalGolden(t *testing.T) {
	golden := readDebeziumGolden(t, "incremental-schemas-false.jsonl")
	read := make(map[string]bool)
	open := "" // the window open, by its id without -open
	windows := 0
	for i, r := range golden {
		if strings.HasSuffix(r.Topic, ".zz_signal") {
			after := unwrapPayload(decodeJSON(r.Value)).(map[string]any)["after"].(map[string]any)
			id, typ := after["id"].(string), after["type"].(string)
			switch {
			case i == 0 && typ == "execute-snapshot":
			case typ == "snapshot-window-open" && open == "":
				open = strings.TrimSuffix(id, "-open")
			case typ == "snapshot-window-close" && open != "" && id == open+"-close":
				open = ""
				windows++
			default:
				t.Fatalf("record %d: signal row %s %s out of order (window open: %q)", i, id, typ, open)
			}
			continue
		}
		if i == 0 {
			t.Fatalf("the first record is on %s, not the execute-snapshot row's", r.Topic)
		}
		if r.op() != "r" {
			if open != "" {
				t.Errorf("record %d: a change (%s %s) inside window %s", i, r.Topic, r.op(), open)
			}
			continue
		}
		if open == "" {
			t.Errorf("record %d: a read record of %s outside every window", i, r.Topic)
		}
		src := unwrapPayload(decodeJSON(r.Value)).(map[string]any)["source"].(map[string]any)
		if src["snapshot"] != "incremental" {
			t.Errorf("%s: source.snapshot %v, want incremental", r.Topic, src["snapshot"])
		}
		read[strings.TrimPrefix(r.Topic, "dbz."+debeziumSchema+".")] = true
	}
	for _, table := range debeziumTables(t) {
		if table != "no_pk" && table != "zz_end" && !read[table] {
			t.Errorf("no read record of %s in the capture", table)
		}
	}
	if windows < len(read) {
		t.Errorf("%d windows for %d tables", windows, len(read))
	}
}
