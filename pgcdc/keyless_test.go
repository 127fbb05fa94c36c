package pgcdc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// keylessRows is how many rows the keyless tables of these tests start
// with; with keylessFiller each page holds about seven, so the snapshot
// reads several ranges of pages.
const keylessRows = 60

const keylessFiller = "repeat('x', 1000)"

// TestKeylessTables checks Config.KeylessTables against real PostgreSQL:
// a table without a key with REPLICA IDENTITY FULL (snapshot in several
// ranges of pages, then inserts, an update and a delete, with a duplicate
// row among them) and one with REPLICA IDENTITY DEFAULT (whose updates
// PostgreSQL refuses, so only inserts stream) are delivered with null
// keys to partition 0 of their 3-partition topics, and the rows Kafka
// holds at the end, applying each record to a multiset of rows, are the
// rows each table holds: none lost, none twice.
func TestKeylessTables(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	full, def := e.name+"_full", e.name+"_default"
	e.exec("CREATE TABLE " + full + " (a int, b text, filler text)")
	e.exec("ALTER TABLE " + full + " REPLICA IDENTITY FULL")
	e.exec("CREATE TABLE " + def + " (a int, b text)")
	e.exec(fmt.Sprintf("INSERT INTO %s SELECT i, 'snap', %s FROM generate_series(1, %d) i", full, keylessFiller, keylessRows))
	e.exec("INSERT INTO " + full + " VALUES (1, 'snap', 'dup')") // a second row a=1
	e.exec("INSERT INTO " + def + " VALUES (1, 'snap')")

	cfg := e.config("public."+full, "public."+def)
	cfg.Snapshot = true
	cfg.SnapshotChunkRows = 10
	cfg.KeylessTables = true
	tr := newTracker()
	sink := &recSink{Sink: e.newSink(e.name), tr: tr}
	_, done := start(t, cfg, sink)
	waitFor(t, 30*time.Second, "the snapshot", done, func() bool { tr.mu.Lock(); defer tr.mu.Unlock(); return len(tr.ids) >= keylessRows+2 })
	if tr.readWrites < 4 {
		t.Errorf("the snapshot wrote its rows in %d chunks, want several ranges of pages", tr.readWrites)
	}
	e.exec("INSERT INTO " + full + " VALUES (100, 'new', 'f'), (100, 'new', 'f')")
	e.exec("UPDATE " + full + " SET b = 'upd' WHERE a = 2")
	e.exec("DELETE FROM " + full + " WHERE a = 3")
	e.exec("INSERT INTO " + def + " VALUES (2, 'new')")
	e.mu.Lock()
	_, err := e.db.Exec(context.Background(), "UPDATE "+def+" SET b = 'upd'")
	e.mu.Unlock()
	if !isPgCode(err, "55000") {
		t.Errorf("UPDATE of a published table without replica identity: %v, want PostgreSQL's refusal (55000)", err)
	}
	e.exec("INSERT INTO " + full + " VALUES (-1, 'end', 'f')")

	for _, c := range []struct {
		table string
		n     int
	}{{def, 2}, {full, keylessRows + 1 + 2 + 1 + 1 + 1}} {
		var recs []*kgo.Record
		waitFor(t, 30*time.Second, fmt.Sprintf("%d records of %s", c.n, c.table), done, func() bool {
			recs = sinktest.ReadCommitted(t, e.brokers, "t.public."+c.table)
			return len(recs) >= c.n
		})
		checkKeylessTopic(t, e, c.table, recs, true)
	}
}

// checkKeylessTopic checks a keyless table's records: null keys in
// partition 0, and, applied to a multiset of rows (a read or insert adds
// its after image, an update replaces its before image, a delete removes
// it), the rows of the table when complete, else a part of them, each row
// at most as often as the table holds it.
func checkKeylessTopic(t *testing.T, e *pgEnv, table string, recs []*kgo.Record, complete bool) {
	t.Helper()
	rows := make(map[string]int)
	for i, r := range recs {
		if r.Key != nil || r.Partition != 0 {
			t.Errorf("%s record %d: key %q in partition %d, want a null key in partition 0", table, i, r.Key, r.Partition)
		}
		var v record
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatal(err)
		}
		if v.Before != nil {
			rows[rowText(v.Before)]--
		}
		if v.After != nil {
			rows[rowText(v.After)]++
		}
	}
	want := make(map[string]int)
	e.mu.Lock()
	dbRows, err := e.db.Query(context.Background(), "SELECT to_jsonb(t) FROM "+table+" t")
	for err == nil && dbRows.Next() {
		var m map[string]any
		dbRows.Scan(&m)
		want[rowText(m)]++
	}
	if err == nil {
		dbRows.Close()
		err = dbRows.Err()
	}
	e.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	maps.DeleteFunc(rows, func(_ string, n int) bool { return n == 0 })
	for row, n := range rows {
		if n < 0 || n > want[row] || complete && n != want[row] {
			t.Errorf("%s: row %s is %d times in Kafka, %d times in the table", table, row, n, want[row])
		}
	}
	if complete && len(rows) != len(want) {
		t.Errorf("%s: %d distinct rows in Kafka, %d in the table", table, len(rows), len(want))
	}
}

// rowText is a row image in a canonical text form, to count rows by.
func rowText(m map[string]any) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "%s=%v;", k, m[k])
	}
	return b.String()
}

// TestKeylessSnapshotNeedsTheExportedSnapshot checks that the snapshot reads a table
// without a key (Config.KeylessTables) only from the snapshot the slot
// exports as Run creates it. A snapshot of a keyed table and then a
// keyless one is interrupted inside the keyed table (and a row is then
// inserted into the keyless one, which a later read would deliver twice:
// read, and streamed), after two chunks of the keyless table, or inside
// its first chunk with part of its rows written beyond the cursor (a
// Write the sink split, cut short); and a snapshot starts on a slot that
// exists already; and the snapshot's connection is lost after two chunks
// of the keyless table, so that Run itself reconnects and resumes. Run
// (again with a new sink from the checkpoint, but for the lost
// connection) refuses each with a *kafkasink.ConfigError naming the
// keyless table, and writes no more of it: the topic holds what the
// interrupted run wrote, rows of the table, none twice.
func TestKeylessSnapshotNeedsTheExportedSnapshot(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		// interrupt, when set, runs Run first and decides, before the
		// n-th Write that carries rows of the keyed or the keyless
		// table, whether to stop there; it may write part of the
		// batch first. Without it the slot is made before Run.
		interrupt func(t *testing.T, sink *kafkasink.Sink, keyless bool, n int, b *kafkasink.Batch) bool
		written   bool // rows of the keyless table are written before the interruption
		// reconnect, when set, ends the snapshot's connection instead
		// of Run before the n-th Write of the keyless table's rows.
		reconnect int
	}{{
		name: "in the keyed table",
		interrupt: func(_ *testing.T, _ *kafkasink.Sink, keyless bool, n int, _ *kafkasink.Batch) bool {
			return !keyless && n == 2
		},
	}, {
		name: "after two chunks of the keyless table",
		interrupt: func(_ *testing.T, _ *kafkasink.Sink, keyless bool, n int, _ *kafkasink.Batch) bool {
			return keyless && n == 3
		},
		written: true,
	}, {
		name: "inside the first chunk of the keyless table",
		interrupt: func(t *testing.T, sink *kafkasink.Sink, keyless bool, n int, b *kafkasink.Batch) bool {
			if !keyless || n != 1 {
				return false
			}
			// What a crash between two transactions of one Write
			// leaves: the first rows, without the cursor.
			if err := sink.Write(t.Context(), kafkasink.Batch{Events: b.Events[:len(b.Events)/2]}); err != nil {
				t.Fatal(err)
			}
			return true
		},
		written: true,
	}, {
		name: "on a slot that exists",
	}, {
		name:      "connection lost after two chunks of the keyless table",
		reconnect: 3,
		written:   true,
	}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newPGEnv(t)
			keyed, keyless := e.name+"_a", e.name+"_b"
			e.exec("CREATE TABLE " + keyed + " (id int PRIMARY KEY, seq bigint NOT NULL, note text)")
			e.fillTable(keyed, 25)
			e.exec("CREATE TABLE " + keyless + " (a int, b text, filler text)")
			e.exec(fmt.Sprintf("INSERT INTO %s SELECT i, 'snap', %s FROM generate_series(1, %d) i", keyless, keylessFiller, keylessRows))
			cfg := e.config("public."+keyed, "public."+keyless)
			cfg.Snapshot = true
			cfg.SnapshotChunkRows = 10
			cfg.KeylessTables = true

			if c.reconnect > 0 {
				// An application name of the test's own, so that only
				// its connections are ended on the shared server.
				cfg.ConnString += "&application_name=" + e.name
				n := 0
				sink := &recSink{Sink: e.newSink(e.name), tr: newTracker(), before: func(_ int, b *kafkasink.Batch) error {
					if len(b.Events) > 0 && b.Events[0].Table == keyless {
						if n++; n == c.reconnect {
							e.exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
								WHERE application_name = $1 AND state LIKE 'idle in transaction%'`, e.name)
						}
					}
					return nil
				}}
				_, r := start(t, cfg, sink)
				checkKeylessRefusal(t, r, keyed, keyless)
			} else if c.interrupt == nil {
				// The publication first: pgoutput reads it as of the
				// slot's position.
				e.exec("CREATE PUBLICATION " + e.name + " FOR TABLE " + keyed + ", " + keyless)
				e.exec("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", e.name)
			} else {
				first := e.newSink(e.name)
				var stopped atomic.Bool
				seen := map[bool]int{}
				sink := &recSink{Sink: first, tr: newTracker(), before: func(_ int, b *kafkasink.Batch) error {
					if len(b.Events) == 0 || stopped.Load() {
						return nil
					}
					isKeyless := b.Events[0].Table == keyless
					seen[isKeyless]++
					if c.interrupt(t, first, isKeyless, seen[isKeyless], b) {
						stopped.Store(true)
						// A fatal error: Run stops at once.
						return fmt.Errorf("%w: interrupted by the test", kafkasink.ErrFenced)
					}
					return nil
				}}
				_, r := start(t, cfg, sink)
				select {
				case <-r.done:
				case <-time.After(30 * time.Second):
					t.Fatal("Run was not interrupted")
				}
				if !stopped.Load() || !errors.Is(r.err, kafkasink.ErrFenced) {
					t.Fatalf("first Run: %v, want the test's interruption", r.err)
				}
				first.Close(context.Background())
			}
			if c.reconnect == 0 {
				e.exec("INSERT INTO " + keyless + " VALUES (1000, 'after', 'f')")
				_, r := start(t, cfg, e.newSink(e.name))
				checkKeylessRefusal(t, r, keyed, keyless)
			}
			recs := sinktest.ReadCommitted(t, e.brokers, "t.public."+keyless)
			if c.written != (len(recs) > 0) || len(recs) >= keylessRows {
				t.Errorf("%d rows of the keyless table in Kafka, want %s of its %d", len(recs), map[bool]string{true: "part", false: "none"}[c.written], keylessRows)
			}
			checkKeylessTopic(t, e, keyless, recs, false)
		})
	}
}

// checkKeylessRefusal waits for r to stop with a *kafkasink.ConfigError
// naming the keyless table and not the keyed one.
func checkKeylessRefusal(t *testing.T, r *run, keyed, keyless string) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not stop")
	}
	var ce *kafkasink.ConfigError
	if !errors.As(r.err, &ce) || !strings.Contains(r.err.Error(), "public."+keyless) || strings.Contains(r.err.Error(), "public."+keyed) {
		t.Fatalf("Run: %v, want a *kafkasink.ConfigError naming public.%s alone", r.err, keyless)
	}
}

// TestRefuseKeyless pins the decision of refuseKeyless: a table read by
// pages (no unique key, Config.KeylessTables) may be read only by a run
// of the slot's exported snapshot; the refusal names every such table,
// not the others, why, and the ways out with their flags.
func TestRefuseKeyless(t *testing.T) {
	t.Parallel()
	keyed := &tableInfo{publishedTable: publishedTable{schema: "public", table: "keyed"}}
	pages := &tableInfo{publishedTable: publishedTable{schema: "public", table: "nokey"}, byPages: true}
	pages2 := &tableInfo{publishedTable: publishedTable{schema: "s", table: "nokey2"}, byPages: true}
	for _, c := range []struct {
		plan   snapshotPlan
		tables []*tableInfo
		want   []string // in the refusal; nil: no refusal
	}{
		{snapshotExported, []*tableInfo{keyed, pages}, nil},
		{snapshotResumed, []*tableInfo{keyed}, nil},
		{snapshotCurrent, nil, nil},
		{snapshotResumed, []*tableInfo{keyed, pages, pages2}, []string{"public.nokey, s.nokey2", "interrupted", "-sink-id", "-slot", `publication "pub"`}},
		{snapshotCurrent, []*tableInfo{pages}, []string{"public.nokey", "slot existed", "-sink-id", "-slot"}},
	} {
		err := refuseKeyless(c.tables, c.plan, "pub")
		var ce *kafkasink.ConfigError
		switch {
		case c.want == nil && err != nil:
			t.Errorf("plan %d: %v, want no refusal", c.plan, err)
		case c.want != nil && (!errors.As(err, &ce) || !containsAll(err.Error(), c.want...) || strings.Contains(err.Error(), "keyed")):
			t.Errorf("plan %d: %v, want a *kafkasink.ConfigError naming %q and not public.keyed", c.plan, err, c.want)
		}
	}
}
