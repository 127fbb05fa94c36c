package pgcdc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// TestQuotedTablesOneTopic streams two tables whose names differ only in
// where the dot is, "<n>.b".c and <n>."b.c", named in Config.Tables with
// quotes. With a topic prefix both map to t.<n>.b.c: Run must stop with a
// fatal error naming both tables once the second arrives, leaving the
// topic to the first. With a Topics.Routes entry for each (keys quoted the
// same way) a second Run delivers each table to its own topic.
func TestQuotedTablesOneTopic(t *testing.T) {
	e := newPGEnv(t)
	dotted, plain := e.name+".b", e.name
	tableA, tableB := pgx.Identifier{dotted, "c"}.Sanitize(), pgx.Identifier{plain, "b.c"}.Sanitize()
	nameA, nameB := kafkasink.TableName(dotted, "c"), kafkasink.TableName(plain, "b.c")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, s := range []string{dotted, plain} {
			if _, err := e.db.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{s}.Sanitize()+" CASCADE"); err != nil {
				t.Logf("dropping schema %s: %v", s, err)
			}
		}
	})
	for _, s := range []string{dotted, plain} {
		e.exec("CREATE SCHEMA " + pgx.Identifier{s}.Sanitize())
	}
	for _, tb := range []string{tableA, tableB} {
		e.exec("CREATE TABLE " + tb + " (id int PRIMARY KEY, seq bigint NOT NULL, note text)")
	}
	if nameA != `"`+dotted+`".c` || nameB != plain+`."b.c"` {
		t.Fatalf("table names %s and %s", nameA, nameB)
	}

	// Derived topics: both tables map to t.<n>.b.c.
	shared := "t." + e.name + ".b.c"
	tr := newTracker()
	cfg := e.config(nameA, nameB)
	_, r := start(t, cfg, &recSink{Sink: e.newSink(e.name), tr: tr})
	waitFor(t, 30*time.Second, "the slot", r, func() bool { return e.confirmedFlush() != 0 })
	e.exec("INSERT INTO " + tableA + " VALUES (1, 1, 'a')")
	waitFor(t, 30*time.Second, "the first table's row", r, func() bool { return tr.delivered() == 1 })
	e.exec("INSERT INTO " + tableB + " VALUES (1, 1, 'b')")
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not stop when a second table reached the first table's topic")
	}
	var ce *kafkasink.ConfigError
	if !errors.As(r.err, &ce) || !kafkasink.IsFatal(r.err) {
		t.Fatalf("Run: %v, want a fatal *kafkasink.ConfigError", r.err)
	}
	for _, w := range []string{nameA, nameB, shared, "Topics.Routes"} {
		if !strings.Contains(r.err.Error(), w) {
			t.Errorf("Run's error %q does not name %s", r.err, w)
		}
	}
	checkTableRows(t, sinktest.ReadCommitted(t, e.brokers, shared), dotted, "c", 1)

	// Explicit routes, keyed by the same quoted names, keep them apart.
	topicA, topicB := e.name+".one", e.name+".two"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	routed, err := kafkasink.New(ctx, kafkasink.Config{
		Brokers: e.brokers,
		SinkID:  e.name + "_routed",
		Topics:  kafkasink.Topics{Prefix: "t", Routes: map[string]string{nameA: topicA, nameB: topicB}},
	})
	if err != nil {
		t.Fatalf("kafkasink.New: %v", err)
	}
	t.Cleanup(func() { routed.Close(context.Background()) })
	tr = newTracker()
	stop, r := start(t, cfg, &recSink{Sink: routed, tr: tr})
	e.exec("INSERT INTO " + tableA + " VALUES (2, 2, 'a')")
	e.exec("INSERT INTO " + tableB + " VALUES (2, 2, 'b')")
	// The slot may not have confirmed the first row before Run stopped,
	// so the new sink may see it again; the second table's first row was
	// never delivered and must come.
	waitFor(t, 30*time.Second, "both tables' rows", r, func() bool { return tr.delivered() >= 3 })
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want context.Canceled", err)
	}
	recsA := sinktest.ReadCommitted(t, e.brokers, topicA)
	if len(recsA) == 2 {
		checkTableRows(t, recsA, dotted, "c", 1, 2)
	} else {
		checkTableRows(t, recsA, dotted, "c", 2)
	}
	checkTableRows(t, sinktest.ReadCommitted(t, e.brokers, topicB), plain, "b.c", 1, 2)
}

// checkTableRows checks that recs are inserts of schema.table with the
// given ids (in any order: the records come from several partitions).
func checkTableRows(t *testing.T, recs []*kgo.Record, schema, table string, ids ...int64) {
	t.Helper()
	var got []int64
	for _, rec := range recs {
		var v struct {
			Op     string         `json:"op"`
			Schema string         `json:"schema"`
			Table  string         `json:"table"`
			After  map[string]any `json:"after"`
		}
		if err := json.Unmarshal(rec.Value, &v); err != nil {
			t.Fatalf("record value %q: %v", rec.Value, err)
		}
		if v.Op != "insert" || v.Schema != schema || v.Table != table {
			t.Errorf("record in %s is %s of %s.%s, want an insert of %s.%s", rec.Topic, v.Op, v.Schema, v.Table, schema, table)
		}
		got = append(got, num(v.After, "id"))
	}
	slices.Sort(got)
	if !slices.Equal(got, ids) {
		t.Fatalf("ids %v in the topic, want %v", got, ids)
	}
}

// TestDeadLetteredRowsCarryTheRow streams, with a dead-letter topic, rows
// the sink rejects: rows of a table whose name makes no valid topic name,
// and a row too large for its table's topic. Each dead-letter record
// carries the row as the database holds it, and the slot moves on: a row
// inserted afterwards arrives in its topic.
func TestDeadLetteredRowsCarryTheRow(t *testing.T) {
	e := newPGEnv(t)
	bad := e.name + " Bad"
	badSQL := pgx.Identifier{bad}.Sanitize()
	t.Cleanup(func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.db.Exec(context.Background(), "DROP TABLE IF EXISTS "+badSQL)
	})
	e.exec("CREATE TABLE " + badSQL + " (id int PRIMARY KEY, seq bigint NOT NULL, note text)")
	good := e.createTable("")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dlq, goodTopic := e.name+".dead", "t.public."+good
	adm := kadm.NewClient(sinktest.Client(t, e.brokers))
	for topic, max := range map[string]string{dlq: "4194304", goodTopic: "1048576"} {
		if _, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"max.message.bytes": &max}, topic); err != nil {
			t.Fatalf("creating %s: %v", topic, err)
		}
	}
	sink, err := kafkasink.New(ctx, kafkasink.Config{
		Brokers:         e.brokers,
		SinkID:          e.name,
		Topics:          kafkasink.Topics{Prefix: "t"},
		DeadLetterTopic: dlq,
		MaxRecordBytes:  4 << 20,
	})
	if err != nil {
		t.Fatalf("kafkasink.New: %v", err)
	}
	t.Cleanup(func() { sink.Close(context.Background()) })
	tr := newTracker()
	_, r := start(t, e.config(`public."`+bad+`"`, good), &recSink{Sink: sink, tr: tr})
	waitFor(t, 30*time.Second, "the slot", r, func() bool { return e.confirmedFlush() != 0 })

	big := strings.Repeat("0123456789", 150_000) // 1.5 MB: over the table topic's 1 MiB
	e.exec("INSERT INTO " + badSQL + " VALUES (1, 10, 'first'), (2, 20, NULL)")
	e.exec("INSERT INTO "+good+" VALUES (1, 1, $1)", big)
	e.exec("INSERT INTO " + good + " VALUES (2, 2, 'small')")
	waitFor(t, 30*time.Second, "four rows written", r, func() bool { return tr.delivered() == 4 })

	type row struct {
		ID   int64   `json:"id"`
		Seq  int64   `json:"seq"`
		Note *string `json:"note"`
	}
	dbRows := func(table string) map[int64]row {
		e.mu.Lock()
		defer e.mu.Unlock()
		rows, err := e.db.Query(ctx, "SELECT id, seq, note FROM "+table)
		if err != nil {
			t.Fatal(err)
		}
		out := map[int64]row{}
		for rows.Next() {
			var x row
			if err := rows.Scan(&x.ID, &x.Seq, &x.Note); err != nil {
				t.Fatal(err)
			}
			out[x.ID] = x
		}
		return out
	}
	wantDead := map[string]row{}
	for id, x := range dbRows(badSQL) {
		wantDead[fmt.Sprintf("%s/%d", bad, id)] = x
	}
	wantDead[fmt.Sprintf("%s/1", good)] = dbRows(good)[1]

	gotDead := map[string]row{}
	for _, rec := range sinktest.ReadCommitted(t, e.brokers, dlq) {
		var v struct {
			Table string `json:"table"`
			After row    `json:"after"`
		}
		if err := json.Unmarshal(rec.Value, &v); err != nil {
			t.Fatalf("dead letter %.100q: %v", rec.Value, err)
		}
		reason := sinktest.Header(rec, kafkasink.HeaderReason)
		if want := map[bool]string{true: "unroutable", false: "too_large"}[v.Table == bad]; reason != want {
			t.Errorf("dead letter of %s: reason %q, want %q", v.Table, reason, want)
		}
		if got := sinktest.Header(rec, kafkasink.HeaderValue); got != kafkasink.ValueEncoded {
			t.Errorf("dead letter of %s: value %q, want %q", v.Table, got, kafkasink.ValueEncoded)
		}
		gotDead[fmt.Sprintf("%s/%d", v.Table, v.After.ID)] = v.After
	}
	if !maps.EqualFunc(gotDead, wantDead, func(a, b row) bool {
		return a.ID == b.ID && a.Seq == b.Seq && (a.Note == nil) == (b.Note == nil) && (a.Note == nil || *a.Note == *b.Note)
	}) {
		t.Errorf("dead-lettered rows %d, want the %d the database holds (keys %v, want %v)", len(gotDead), len(wantDead), slices.Sorted(maps.Keys(gotDead)), slices.Sorted(maps.Keys(wantDead)))
	}
	checkTableRows(t, sinktest.ReadCommitted(t, e.brokers, goodTopic), "public", good, 2)
}
