package kafkasinkavro_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/kafkasinktest"
)

// TestSchemaEvolution changes a table while it is streamed, ADD COLUMN,
// DROP COLUMN, then ALTER TYPE int to bigint (Avro's int to long, which
// BACKWARD allows), with a row written after each change: each change
// makes a new version of the value subject, registered before the first
// record that needs it, and every record carries the id of its own table
// version's schema, with the row as the database had it.
func TestSchemaEvolution(t *testing.T) {
	e := newAvroEnv(t)
	table := e.table("evo", "id int PRIMARY KEY, a text")
	_, done, _ := e.run(table)
	e.exec("INSERT INTO " + table + " VALUES (1, 'one')")
	e.exec("ALTER TABLE " + table + " ADD COLUMN b int")
	e.exec("INSERT INTO " + table + " VALUES (2, 'two', 22)")
	e.exec("ALTER TABLE " + table + " DROP COLUMN a")
	e.exec("INSERT INTO " + table + " VALUES (3, 33)")
	e.exec("ALTER TABLE " + table + " ALTER COLUMN b TYPE bigint")
	e.exec("INSERT INTO " + table + " VALUES (4, 9223372036854775807)")
	topic := e.name + ".public." + table
	recs := e.readRecords(topic, 4, done)

	want := []string{"map[a:one id:1]", "map[a:two b:22 id:2]", "map[b:33 id:3]", "map[b:9223372036854775807 id:4]"}
	ids := make([]int, len(recs))
	for i, r := range recs {
		d := e.decode(r.Value)
		ids[i] = d.id
		if got := fmt.Sprint(d.value["after"]); got != want[i] {
			t.Errorf("record %d: after %s, want %s", i, got, want[i])
		}
	}
	e.checkVersions(topic, ids)
}

// TestIncompatibleChangeIsFatal adds a NOT NULL column while the table is
// streamed: its schema is not BACKWARD compatible with the subject's
// (a reader of the new schema has no value for old records), so the
// registry refuses it and Run stops with a fatal error naming the table,
// the subject, the registry's message, the compatibility level and the
// column; nothing of the refused transaction reaches the topic.
func TestIncompatibleChangeIsFatal(t *testing.T) {
	e := newAvroEnv(t)
	table := e.table("incompat", "id int PRIMARY KEY")
	_, done, runErr := e.run(table)
	e.exec("INSERT INTO " + table + " VALUES (1)")
	topic := e.name + ".public." + table
	e.readRecords(topic, 1, done)
	e.exec("ALTER TABLE " + table + " ADD COLUMN c int NOT NULL DEFAULT 0")
	e.exec("INSERT INTO " + table + " VALUES (2, 5)")
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not stop after the registry refused the new schema")
	}
	err := runErr()
	var pe *kafkasink.PrepareError
	if !errors.As(err, &pe) || !kafkasink.IsFatal(err) {
		t.Fatalf("Run stopped with %v; want a fatal *kafkasink.PrepareError", err)
	}
	for _, part := range []string{"public." + table, topic + "-value", "HTTP 409", "global BACKWARD", `added "c" (NOT NULL int)`} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("the error does not name %q: %v", part, err)
		}
	}
	if n := len(e.readRecords(topic, 1, nil)); n != 1 {
		t.Errorf("the topic holds %d records, want only the one before the change", n)
	}
}

// TestSnapshotRows reads a table's rows in pgcdc's initial snapshot: they
// are Avro records like streamed ones, op "read" with the snapshot's run
// id, keyed by the primary key.
func TestSnapshotRows(t *testing.T) {
	e := newAvroEnv(t)
	table := e.table("snap", "id int PRIMARY KEY, note text")
	e.exec("INSERT INTO " + table + " SELECT g, 'row ' || g FROM generate_series(1, 3) g")
	e.snapshot = true
	_, done, _ := e.run(table)
	recs := e.readRecords(e.name+".public."+table, 3, done)
	for i, r := range recs {
		v := e.decode(r.Value).value
		want := fmt.Sprintf("map[id:%d note:row %d]", i+1, i+1)
		if v["op"] != "read" || fmt.Sprint(v["after"]) != want || v["backfill_run_id"] == nil {
			t.Errorf("record %d: op %v, after %v, backfill_run_id %v; want read, %s and a run id", i, v["op"], v["after"], v["backfill_run_id"], want)
		}
		if k := fmt.Sprint(e.decode(r.Key).value); k != fmt.Sprintf("map[id:%d]", i+1) {
			t.Errorf("record %d: key %s", i, k)
		}
	}
}

// retypeWhileStreaming streams a new table (named after prefix) of
// columns id int and n int with e's encoder, and once its first row is
// in the topic retypes n to text in the same transaction as a row that
// needs the new type. It returns the table, its topic and the error Run
// stopped with, which must be a fatal *kafkasink.PrepareError; the
// refused batch must have produced nothing (read_uncommitted, the topic
// holds the one row).
func (e *avroEnv) retypeWhileStreaming(t *testing.T, prefix string) (table, topic string, err error) {
	t.Helper()
	table = e.table(prefix, "id int PRIMARY KEY, n int")
	_, done, runErr := e.run(table)
	e.exec("INSERT INTO " + table + " VALUES (1, 11)")
	topic = e.name + ".public." + table
	e.readRecords(topic, 1, done)
	e.exec("BEGIN; ALTER TABLE " + table + " ALTER COLUMN n TYPE text; INSERT INTO " + table + " VALUES (2, 'two'); COMMIT")
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not stop after the registry refused the retyped table's schema")
	}
	err = runErr()
	var pe *kafkasink.PrepareError
	if !errors.As(err, &pe) || !kafkasink.IsFatal(err) || kafkasink.IsRetryable(err) {
		t.Fatalf("Run stopped with %v; want a fatal *kafkasink.PrepareError", err)
	}
	recs, ferr := kafkasinktest.FetchUncommitted(context.Background(), e.brokers, topic)
	if ferr != nil {
		t.Fatal(ferr)
	}
	if len(recs) != 1 {
		t.Errorf("read_uncommitted: the topic holds %d records, want 1: the refused batch must produce nothing", len(recs))
	}
	return table, topic, err
}

// TestIncompatibleRetypeIsFatal retypes a column while the table is
// streamed, integer to text in the same transaction as a row that needs
// the new type: Avro's int to string is not BACKWARD compatible (a reader
// of the new schema cannot read the old records' ints as strings), so the
// registry refuses the new value schema and Run stops with a fatal
// *kafkasink.PrepareError naming the table, the column and how it changed,
// the subject, the registry's message, the compatibility level and the
// fix. The refused batch produced nothing: the topic holds only the row
// before the change, for read_committed and read_uncommitted readers
// alike, and the subject still has its one version.
func TestIncompatibleRetypeIsFatal(t *testing.T) {
	e := newAvroEnv(t)
	table, topic, err := e.retypeWhileStreaming(t, "retype")
	for _, part := range []string{
		"public." + table,                        // the table
		"subject " + topic + "-value",            // the subject
		"HTTP 409",                               // the registry's answer
		"incompatible",                           // in the registry's message
		"global BACKWARD",                        // the compatibility level
		`changed "n" from int to string`,         // the column and how it changed
		"PUT /config/" + topic + "-value",        // a fix: let the subject accept it
		"kafkasink.Config.Topics; -topic-routes", // a fix: a new topic
		"no column may change its type",          // why
	} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("the error does not name %q: %v", part, err)
		}
	}
	if n := len(e.readRecords(topic, 1, nil)); n != 1 {
		t.Errorf("read_committed: the topic holds %d records, want only the one before the change", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	versions, err := e.registry.Schemas(ctx, topic+"-value")
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) != 1 {
		t.Errorf("subject %s-value has %d versions, want 1: the refused schema registered nothing", topic, len(versions))
	}
}
