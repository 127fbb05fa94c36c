package pgtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafkasink/kafkasink/kafkasinktest"
	"github.com/kafkasink/kafkasink/kafkasinktest/pgtest"
)

// LoadTypesSQL gives every step of testdata/types.sql with the objects
// named after the test.
func TestLoadTypesSQL(t *testing.T) {
	t.Parallel()
	s := pgtest.LoadTypesSQL(t, "pgtest_x")
	if s.Table != "pgtest_x_types" || s.Mood != "pgtest_x_mood" || s.PosInt != "pgtest_x_posint" {
		t.Errorf("names %q %q %q", s.Table, s.Mood, s.PosInt)
	}
	for name, step := range map[string]string{"setup": s.Setup, "insert": s.Insert, "update": s.Update, "drop": s.Drop} {
		if !strings.Contains(step, s.Table) || strings.Contains(step, "{table}") || strings.Contains(step, "{mood}") {
			t.Errorf("step %s does not name the table %s, or keeps a placeholder:\n%s", name, s.Table, step)
		}
	}
	if !strings.Contains(s.Setup, "CREATE TYPE "+s.Mood) || !strings.Contains(s.Setup, "CREATE DOMAIN "+s.PosInt) {
		t.Errorf("setup makes neither %s nor %s:\n%s", s.Mood, s.PosInt, s.Setup)
	}
}

// TypesGolden masks what differs between runs and the test's name, and
// gives the form of the golden file, which TypesGoldenFile names.
func TestTypesGolden(t *testing.T) {
	t.Parallel()
	v := []byte(`{"id":"0/16B3748:0","op":"insert","table":"run7_types","lsn":"23803720","commit_lsn":"23803721","xid":740,"commit_time":"2026-12-02T03:40:00Z","after":{"row_id":1}}`)
	got := pgtest.TypesGolden(t, [][]byte{v, v}, "run7")
	var doc []map[string]any
	if err := json.Unmarshal(got, &doc); err != nil || len(doc) != 2 {
		t.Fatalf("not a JSON array of the two values (%v):\n%s", err, got)
	}
	for _, f := range []string{"id", "lsn", "commit_lsn", "xid", "commit_time"} {
		if doc[0][f] != "*" {
			t.Errorf("%s = %v, want *", f, doc[0][f])
		}
	}
	if doc[0]["table"] != "T_types" || doc[0]["op"] != "insert" {
		t.Errorf("table %v op %v, want T_types insert", doc[0]["table"], doc[0]["op"])
	}
	golden, err := os.ReadFile(pgtest.TypesGoldenFile(t))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(golden, []byte("[\n  {\n    \"id\": \"*\"")) || !bytes.HasPrefix(got, []byte("[\n  {\n    \"id\": \"*\"")) {
		t.Errorf("the rendering and the golden file start differently:\n%.40s\n%.40s", got, golden)
	}
}

// connect connects to the test environment's PostgreSQL, or skips.
func connect(t *testing.T) *pgx.Conn {
	t.Helper()
	url := kafkasinktest.Env(t, "KAFKASINK_TEST_PG")[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	return db
}

// DropSlot drops a slot a walsender holds.
func TestDropSlot(t *testing.T) {
	db := connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	slot := strings.ReplaceAll(kafkasinktest.UniqueName(t), "-", "_")
	if _, err := db.Exec(ctx, `CREATE PUBLICATION `+slot); err != nil {
		t.Fatal(err)
	}
	defer db.Exec(context.Background(), `DROP PUBLICATION IF EXISTS `+slot)
	if _, err := db.Exec(ctx, `SELECT pg_create_logical_replication_slot($1, 'pgoutput')`, slot); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgconn.ParseConfig(db.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["replication"] = "database"
	repl, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer repl.Close(context.Background())
	if err := pglogrepl.StartReplication(ctx, repl, slot, 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", "publication_names '" + slot + "'"}}); err != nil {
		t.Fatal(err)
	}
	var active bool
	if err := db.QueryRow(ctx, `SELECT active FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&active); err != nil || !active {
		t.Fatalf("the slot is not held by a walsender (active %v, %v)", active, err)
	}
	pgtest.DropSlot(ctx, db, slot)
	var n int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1`, slot).Scan(&n); err != nil || n != 0 {
		t.Errorf("after DropSlot, %d slots named %s (%v)", n, slot, err)
	}
}

// SkipWithoutExtension lets a test on where the extension is and skips
// it where it is not.
func TestSkipWithoutExtension(t *testing.T) {
	db := connect(t)
	ran := false
	t.Run("plpgsql", func(t *testing.T) { pgtest.SkipWithoutExtension(t, db, "plpgsql"); ran = true })
	if !ran {
		t.Error("skipped without plpgsql, which every database has")
	}
	ran = false
	t.Run("missing", func(t *testing.T) { pgtest.SkipWithoutExtension(t, db, "pgtest_no_such_extension"); ran = true })
	if ran {
		t.Error("went on without an extension the database lacks")
	}
}
