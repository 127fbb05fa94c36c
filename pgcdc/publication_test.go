package pgcdc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
	"github.com/kafkasink/kafkasink/pgcdc/internal/pgoutputmsg"
)

// sqlf fills %[1]s in each statement with the test's unique name.
func (e *pgEnv) sqlf(stmts ...string) {
	e.t.Helper()
	for _, s := range stmts {
		e.exec(fmt.Sprintf(s, e.name))
	}
}

// syncStream commits marker, a change the publication streams, and waits
// until it is written: everything committed before it is then in Kafka,
// also changes the publication filters out and that leave no trace.
func (e *pgEnv) syncStream(r *run, tr *tracker, marker string) {
	e.t.Helper()
	before := e.queryLSN("SELECT pg_current_wal_lsn()::text")
	e.sqlf(marker)
	waitFor(e.t, 30*time.Second, "the marker change "+marker, r, func() bool { return tr.written().LSN > before })
}

// checkTopicIsTable checks what an upsert consumer of topic ends with: per
// Kafka key the last row image, none after a delete. Those rows must be the
// rows of query (which selects the published columns of the published
// rows), and every record must name the same key columns, wantKey, whether
// it comes from the snapshot or the stream.
func (e *pgEnv) checkTopicIsTable(topic, query string, wantKey []string) {
	e.t.Helper()
	t := e.t
	state := make(map[string]map[string]any)
	reads := 0
	for _, kr := range sinktest.ReadCommitted(t, e.brokers, topic) {
		var v record
		if err := json.Unmarshal(kr.Value, &v); err != nil {
			t.Fatalf("%s: record value %q: %v", topic, kr.Value, err)
		}
		if !slices.Equal(v.Key, wantKey) {
			t.Errorf("%s: %s record %s has key columns %q, want %q", topic, v.Op, v.ID, v.Key, wantKey)
		}
		switch v.Op {
		case "read", "insert", "update":
			reads += b2i(v.Op == "read")
			state[string(kr.Key)] = v.After
		case "delete":
			delete(state, string(kr.Key))
		default:
			t.Fatalf("%s: unexpected %s record %s", topic, v.Op, v.ID)
		}
	}
	if reads == 0 {
		t.Errorf("%s: no snapshot record", topic)
	}
	var got []string
	for _, row := range state {
		got = append(got, canonicalJSON(t, row))
	}
	var want []string
	e.mu.Lock()
	rows, err := e.db.Query(context.Background(), "SELECT row_to_json(q)::text FROM ("+fmt.Sprintf(query, e.name)+") q")
	if err == nil {
		var texts []string
		texts, err = pgx.CollectRows(rows, pgx.RowTo[string])
		for _, s := range texts {
			var m map[string]any
			if err := json.Unmarshal([]byte(s), &m); err != nil {
				t.Fatal(err)
			}
			want = append(want, canonicalJSON(t, m))
		}
	}
	e.mu.Unlock()
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s: the topic's final state differs from %s\n topic: %s\ntable: %s", topic, fmt.Sprintf(query, e.name), got, want)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func canonicalJSON(t *testing.T, v map[string]any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// publicationCase is a publication and changes made around a snapshot of
// it. Every SQL text has %[1]s for the test's unique name.
type publicationCase struct {
	name  string
	needs []pgFeature // what a server must have for the case (requirePG)
	setup []string    // tables and rows, before the publication
	pub   string      // what follows CREATE PUBLICATION <name>
	// cleanup drops what the test environment does not: other schemas
	// and publications.
	cleanup []string
	keys    map[string][]string // Config.KeyColumns by table
	// during run after the slot exists and before the snapshot reads a
	// row: the snapshot must not see them, the stream delivers them.
	during []string
	after  []string // run once the snapshot is written
	marker string   // a change the publication streams, committed last
	// topics maps each topic (suffix after "t.") to the query of the
	// published columns and rows and to the key columns.
	topics map[string]topicWant
}

type topicWant struct {
	query string
	key   []string
}

const secretTable = "CREATE TABLE %[1]s (id int PRIMARY KEY, secret text, pub text)"
const secretRows = "INSERT INTO %[1]s SELECT i, 's' || i, 'p' || i FROM generate_series(1, 10) i"

// secretChanges touch rows inside and outside a filter on id > 4 and
// change the unpublished column alone.
var secretChanges = []string{
	"INSERT INTO %[1]s VALUES (11, 's11', 'p11'), (12, 's12', 'p12')",
	"UPDATE %[1]s SET pub = pub || 'u' WHERE id IN (1, 6)",
	"DELETE FROM %[1]s WHERE id IN (3, 7)",
}
var secretChangesAfter = []string{
	"UPDATE %[1]s SET secret = 'new' WHERE id IN (4, 8)",
	"UPDATE %[1]s SET id = 14 WHERE id = 4", // into the filter: an insert
	"UPDATE %[1]s SET id = 0 WHERE id = 9",  // out of it: a delete
	"DELETE FROM %[1]s WHERE id = 5",
}

// TestSnapshotReadsWhatThePublicationStreams runs each case of
// publicationCases: a snapshot and the stream around it deliver what the
// publication publishes, no more.
func TestSnapshotReadsWhatThePublicationStreams(t *testing.T) {
	t.Parallel()
	for _, c := range publicationCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newPGEnv(t)
			e.runPublicationCase(c)
		})
	}
}

// publicationCases are the publications TestSnapshotReadsWhatThePublicationStreams
// snapshots: column lists, row filters, partitions, inheritance, generated
// columns, a table reached two ways or in two publications, a unique
// index as replica identity.
func publicationCases() []publicationCase {
	partitioned := []string{
		"CREATE TABLE %[1]s (id int, k int, pub text, PRIMARY KEY (id, k)) PARTITION BY RANGE (k)",
		"CREATE TABLE %[1]s_a PARTITION OF %[1]s FOR VALUES FROM (0) TO (5)",
		"CREATE TABLE %[1]s_b PARTITION OF %[1]s FOR VALUES FROM (5) TO (100)",
		"INSERT INTO %[1]s SELECT i, i %% 10, 'p' || i FROM generate_series(1, 20) i",
	}
	partitionChanges := []string{
		"UPDATE %[1]s SET k = 7 WHERE id = 3",  // from a to b
		"UPDATE %[1]s SET k = 1 WHERE id = 16", // from b to a
		"UPDATE %[1]s SET pub = 'u' WHERE id IN (1, 4, 5, 12)",
		"DELETE FROM %[1]s WHERE id IN (2, 13)",
		"INSERT INTO %[1]s VALUES (21, 1, 'n'), (22, 8, 'n')",
	}
	return []publicationCase{{
		name:   "column list",
		needs:  []pgFeature{pgColumnLists},
		setup:  []string{secretTable, secretRows},
		pub:    "FOR TABLE %[1]s (id, pub)",
		during: secretChanges, after: secretChangesAfter,
		marker: "INSERT INTO %[1]s VALUES (100, 's', 'p')",
		topics: map[string]topicWant{"public.%[1]s": {"SELECT id, pub FROM %[1]s", []string{"id"}}},
	}, {
		name:   "row filter",
		needs:  []pgFeature{pgRowFilters},
		setup:  []string{secretTable, secretRows},
		pub:    "FOR TABLE %[1]s WHERE (id > 4)",
		during: secretChanges, after: secretChangesAfter,
		marker: "INSERT INTO %[1]s VALUES (100, 's', 'p')",
		topics: map[string]topicWant{"public.%[1]s": {"SELECT * FROM %[1]s WHERE id > 4", []string{"id"}}},
	}, {
		name:   "column list and row filter",
		needs:  []pgFeature{pgColumnLists, pgRowFilters},
		setup:  []string{secretTable, secretRows},
		pub:    "FOR TABLE %[1]s (id, pub) WHERE (id > 4)",
		during: secretChanges, after: secretChangesAfter,
		marker: "INSERT INTO %[1]s VALUES (100, 's', 'p')",
		topics: map[string]topicWant{"public.%[1]s": {"SELECT id, pub FROM %[1]s WHERE id > 4", []string{"id"}}},
	}, {
		// With FULL the old row holds the filtered column, so an
		// update that leaves the filter is streamed as a delete and
		// one that enters it as an insert.
		name:  "row filter on a non-key column with replica identity full",
		needs: []pgFeature{pgRowFilters},
		setup: []string{secretTable, secretRows, "ALTER TABLE %[1]s REPLICA IDENTITY FULL",
			"UPDATE %[1]s SET pub = 'hidden' WHERE id IN (2, 3, 9)"},
		pub:  "FOR TABLE %[1]s WHERE (pub <> 'hidden')",
		keys: map[string][]string{"%[1]s": {"id"}},
		during: []string{
			"UPDATE %[1]s SET pub = 'shown' WHERE id = 2",
			"UPDATE %[1]s SET pub = 'hidden' WHERE id = 5",
			"INSERT INTO %[1]s VALUES (11, 's', 'hidden'), (12, 's', 'p12')",
		},
		after: []string{
			"UPDATE %[1]s SET pub = 'shown' WHERE id = 3",
			"UPDATE %[1]s SET pub = 'hidden' WHERE id = 6",
			"UPDATE %[1]s SET secret = 'x' WHERE id IN (7, 9)",
			"DELETE FROM %[1]s WHERE id IN (8, 11)",
		},
		marker: "INSERT INTO %[1]s VALUES (100, 's', 'p')",
		topics: map[string]topicWant{"public.%[1]s": {"SELECT * FROM %[1]s WHERE pub <> 'hidden'", []string{"id"}}},
	}, {
		// Without publish_via_partition_root each partition is
		// published as itself, with its own column list and row
		// filter; the root's entry gives the others none.
		name:   "partitions published as themselves",
		needs:  []pgFeature{pgColumnLists, pgRowFilters},
		setup:  partitioned,
		pub:    "FOR TABLE %[1]s, %[1]s_a (id, k) WHERE (id > 2)",
		during: partitionChanges[:2], after: partitionChanges[2:],
		marker: "INSERT INTO %[1]s VALUES (100, 9, 'm')",
		topics: map[string]topicWant{
			"public.%[1]s_a": {"SELECT id, k FROM %[1]s_a WHERE id > 2", []string{"id", "k"}},
			"public.%[1]s_b": {"SELECT * FROM %[1]s_b", []string{"id", "k"}},
		},
	}, {
		name:   "partitions published via the root",
		needs:  []pgFeature{pgColumnLists, pgRowFilters},
		setup:  partitioned,
		pub:    "FOR TABLE %[1]s (id, k) WHERE (id > 2) WITH (publish_via_partition_root = true)",
		during: partitionChanges[:2], after: partitionChanges[2:],
		marker: "INSERT INTO %[1]s VALUES (100, 9, 'm')",
		topics: map[string]topicWant{"public.%[1]s": {"SELECT id, k FROM %[1]s WHERE id > 2", []string{"id", "k"}}},
	}, {
		// Via the root, the root's column list and row filter apply,
		// not those the publication gives a partition.
		name:   "partition and root in the publication, via the root",
		needs:  []pgFeature{pgColumnLists, pgRowFilters},
		setup:  partitioned,
		pub:    "FOR TABLE %[1]s (id, k) WHERE (id > 2), %[1]s_a (id, k, pub) WHERE (id > 10) WITH (publish_via_partition_root = true)",
		during: partitionChanges[:2], after: partitionChanges[2:],
		marker: "INSERT INTO %[1]s VALUES (100, 9, 'm')",
		topics: map[string]topicWant{"public.%[1]s": {"SELECT id, k FROM %[1]s WHERE id > 2", []string{"id", "k"}}},
	}, {
		// Partitions without a column list or row filter, which
		// every supported version can publish: the cases above
		// cover PostgreSQL 15 and later only.
		name:   "whole partitions published as themselves",
		setup:  partitioned,
		pub:    "FOR TABLE %[1]s",
		during: partitionChanges[:2], after: partitionChanges[2:],
		marker: "INSERT INTO %[1]s VALUES (100, 9, 'm')",
		topics: map[string]topicWant{
			"public.%[1]s_a": {"SELECT * FROM %[1]s_a", []string{"id", "k"}},
			"public.%[1]s_b": {"SELECT * FROM %[1]s_b", []string{"id", "k"}},
		},
	}, {
		name:   "whole partitions published via the root",
		setup:  partitioned,
		pub:    "FOR TABLE %[1]s WITH (publish_via_partition_root = true)",
		during: partitionChanges[:2], after: partitionChanges[2:],
		marker: "INSERT INTO %[1]s VALUES (100, 9, 'm')",
		topics: map[string]topicWant{"public.%[1]s": {"SELECT * FROM %[1]s", []string{"id", "k"}}},
	}, {
		// A table with inheritance children is read without them:
		// the publication lists each child, and pgoutput streams a
		// child's changes as the child's.
		name: "inheritance children",
		setup: []string{
			"CREATE TABLE %[1]s (id int PRIMARY KEY, pub text)",
			"CREATE TABLE %[1]s_c (extra text) INHERITS (%[1]s)",
			"ALTER TABLE %[1]s_c ADD PRIMARY KEY (id)",
			"INSERT INTO %[1]s SELECT i, 'p' || i FROM generate_series(1, 5) i",
			"INSERT INTO %[1]s_c SELECT i, 'c' || i, 'x' FROM generate_series(6, 10) i",
		},
		cleanup: []string{"DROP TABLE IF EXISTS %[1]s_c"},
		pub:     "FOR TABLE %[1]s",
		during:  []string{"UPDATE %[1]s SET pub = 'u' WHERE id IN (1, 6)"},
		after:   []string{"DELETE FROM %[1]s WHERE id IN (2, 7)", "INSERT INTO %[1]s_c VALUES (11, 'c', 'y')"},
		marker:  "INSERT INTO %[1]s VALUES (100, 'm')",
		topics: map[string]topicWant{
			"public.%[1]s":   {"SELECT * FROM ONLY %[1]s", []string{"id"}},
			"public.%[1]s_c": {"SELECT * FROM %[1]s_c", []string{"id"}},
		},
	}, {
		name: "generated columns",
		setup: []string{
			"CREATE TABLE %[1]s (id int PRIMARY KEY, v int, g int GENERATED ALWAYS AS (v * 2) STORED)",
			"INSERT INTO %[1]s (id, v) SELECT i, i FROM generate_series(1, 10) i",
		},
		pub:    "FOR TABLE %[1]s",
		during: []string{"UPDATE %[1]s SET v = 0 WHERE id = 1"},
		after:  []string{"INSERT INTO %[1]s (id, v) VALUES (11, 11)", "DELETE FROM %[1]s WHERE id = 2"},
		marker: "INSERT INTO %[1]s (id, v) VALUES (100, 1)",
		topics: map[string]topicWant{"public.%[1]s": {"SELECT id, v FROM %[1]s", []string{"id"}}},
	}, {
		name:  "generated columns published",
		needs: []pgFeature{pgGeneratedColumns},
		setup: []string{
			"CREATE TABLE %[1]s (id int PRIMARY KEY, v int, g int GENERATED ALWAYS AS (v * 2) STORED)",
			"INSERT INTO %[1]s (id, v) SELECT i, i FROM generate_series(1, 10) i",
		},
		pub:    "FOR TABLE %[1]s WITH (publish_generated_columns = stored)",
		during: []string{"UPDATE %[1]s SET v = 0 WHERE id = 1"},
		after:  []string{"INSERT INTO %[1]s (id, v) VALUES (11, 11)", "DELETE FROM %[1]s WHERE id = 2"},
		marker: "INSERT INTO %[1]s (id, v) VALUES (100, 1)",
		topics: map[string]topicWant{"public.%[1]s": {"SELECT id, v, g FROM %[1]s", []string{"id"}}},
	}, {
		name:  "generated column in a column list",
		needs: []pgFeature{pgColumnLists, pgGeneratedColumns},
		setup: []string{
			"CREATE TABLE %[1]s (id int PRIMARY KEY, v int, g int GENERATED ALWAYS AS (v * 2) STORED)",
			"INSERT INTO %[1]s (id, v) SELECT i, i FROM generate_series(1, 10) i",
		},
		pub:    "FOR TABLE %[1]s (id, g)",
		during: []string{"UPDATE %[1]s SET v = 0 WHERE id = 1"},
		after:  []string{"INSERT INTO %[1]s (id, v) VALUES (11, 11)", "DELETE FROM %[1]s WHERE id = 2"},
		marker: "INSERT INTO %[1]s (id, v) VALUES (100, 1)",
		topics: map[string]topicWant{"public.%[1]s": {"SELECT id, g FROM %[1]s", []string{"id"}}},
	}, {
		// Named with a filter and reached through its schema: the
		// schema publishes every row, so no filter applies.
		name:  "table reached two ways in the publication",
		needs: []pgFeature{pgRowFilters, pgSchemaPublish},
		setup: []string{"CREATE SCHEMA %[1]s",
			"CREATE TABLE %[1]s.t (id int PRIMARY KEY, secret text, pub text)",
			"INSERT INTO %[1]s.t SELECT i, 's' || i, 'p' || i FROM generate_series(1, 10) i"},
		cleanup: []string{"DROP SCHEMA IF EXISTS %[1]s CASCADE"},
		pub:     "FOR TABLE %[1]s.t WHERE (id > 4), TABLES IN SCHEMA %[1]s",
		during:  []string{"DELETE FROM %[1]s.t WHERE id = 1"},
		after:   []string{"UPDATE %[1]s.t SET pub = 'u' WHERE id IN (2, 6)"},
		marker:  "INSERT INTO %[1]s.t VALUES (100, 's', 'p')",
		topics:  map[string]topicWant{"%[1]s.t": {"SELECT * FROM %[1]s.t", []string{"id"}}},
	}, {
		// Only the publication given to the slot counts.
		name:  "table in two publications",
		needs: []pgFeature{pgColumnLists, pgRowFilters},
		setup: []string{secretTable, secretRows,
			"CREATE PUBLICATION %[1]s_other FOR TABLE %[1]s"},
		cleanup: []string{"DROP PUBLICATION IF EXISTS %[1]s_other"},
		pub:     "FOR TABLE %[1]s (id, pub) WHERE (id > 4)",
		during:  secretChanges, after: secretChangesAfter,
		marker: "INSERT INTO %[1]s VALUES (100, 's', 'p')",
		topics: map[string]topicWant{"public.%[1]s": {"SELECT id, pub FROM %[1]s WHERE id > 4", []string{"id"}}},
	}, {
		// No primary key: chunks follow the replica identity index,
		// whose columns are the events' key, in the index's order;
		// an update of the key is a delete and an insert.
		name: "unique index as replica identity",
		setup: []string{
			"CREATE TABLE %[1]s (id int NOT NULL, code text NOT NULL, pub text)",
			"CREATE UNIQUE INDEX %[1]s_code ON %[1]s (code, id)",
			"ALTER TABLE %[1]s REPLICA IDENTITY USING INDEX %[1]s_code",
			"INSERT INTO %[1]s SELECT i, 'c' || (i %% 3), 'p' || i FROM generate_series(1, 10) i",
		},
		pub:    "FOR TABLE %[1]s",
		during: []string{"UPDATE %[1]s SET pub = 'u' WHERE id = 1", "DELETE FROM %[1]s WHERE id = 2"},
		after: []string{
			"UPDATE %[1]s SET code = 'z' WHERE id = 3",
			"INSERT INTO %[1]s VALUES (11, 'c1', 'n')",
			"DELETE FROM %[1]s WHERE id = 4",
		},
		marker: "INSERT INTO %[1]s VALUES (100, 'm', 'm')",
		topics: map[string]topicWant{"public.%[1]s": {"SELECT * FROM %[1]s", []string{"code", "id"}}},
	}}
}

func (e *pgEnv) runPublicationCase(c publicationCase) {
	t := e.t
	requirePG(t, c.needs...)
	for _, s := range c.cleanup {
		t.Cleanup(func() { e.sqlf(s) })
	}
	e.sqlf(c.setup...)
	e.sqlf("CREATE PUBLICATION %[1]s " + c.pub)

	tr := newTracker()
	var once sync.Once
	sink := &recSink{Sink: e.newSink(e.name), tr: tr,
		before: func(n int, b *kafkasink.Batch) error {
			if n == 1 && len(b.Events) == 0 && b.Cursor != nil {
				once.Do(func() { e.sqlf(c.during...) })
			}
			return nil
		}}
	cfg := e.config()
	cfg.Snapshot = true
	cfg.SnapshotChunkRows = 3
	logs := newLogRecorder(t)
	cfg.Logger = slog.New(logs)
	if c.keys != nil {
		cfg.KeyColumns = make(kafkasink.TableKeys)
		for name, k := range c.keys {
			cfg.KeyColumns["public."+fmt.Sprintf(name, e.name)] = k
		}
	}
	_, r := start(t, cfg, sink)
	waitFor(t, 30*time.Second, "the snapshot", r, func() bool {
		cur, ok := parseCursor(sink.Checkpoint().Cursor)
		return ok && cur.Done
	})
	e.sqlf(c.after...)
	e.syncStream(r, tr, c.marker)
	for topic, w := range c.topics {
		e.checkTopicIsTable("t."+fmt.Sprintf(topic, e.name), w.query, w.key)
	}
	// The snapshot and the stream agree on the columns: no false alarm.
	for _, w := range logs.warnings() {
		if strings.Contains(w.msg, columnsChangedMsg) {
			t.Errorf("warning %q, but no column list or table changed", w.msg)
		}
	}
}

// columnsChangedMsg is part of the warning Run logs when a table's
// streamed columns change.
const columnsChangedMsg = "the columns streamed for a table changed"

// TestSnapshotResumesFilteredSnapshotAfterCrash stops a snapshot of a
// publication with a column list and a row filter in the middle of the
// table, by cancelling Run or by a Write that fails for good, changes rows,
// and resumes it: chunks hold SnapshotChunkRows published rows each, and
// the resumed run starts after the last key.
func TestSnapshotResumesFilteredSnapshotAfterCrash(t *testing.T) {
	t.Parallel()
	requirePG(t, pgColumnLists, pgRowFilters)
	for _, failingSink := range []bool{false, true} {
		name := "cancelled Run"
		if failingSink {
			name = "failing sink"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testFilteredSnapshotCrash(t, failingSink)
		})
	}
}

func testFilteredSnapshotCrash(t *testing.T, failingSink bool) {
	e := newPGEnv(t)
	e.sqlf(secretTable,
		"INSERT INTO %[1]s SELECT i, 's' || i, 'p' || i FROM generate_series(1, 60) i",
		"CREATE PUBLICATION %[1]s FOR TABLE %[1]s (id, pub) WHERE (id %% 3 <> 0)")
	const chunk, crashAfter = 5, 3
	cfg := e.config()
	cfg.Snapshot = true
	cfg.SnapshotChunkRows = chunk

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := newTracker()
	var sizes []int
	errBroken := fmt.Errorf("test: the sink broke: %w", kafkasink.ErrFenced)
	wantErr := context.Canceled
	sink1 := &recSink{Sink: e.newSink(e.name), tr: tr,
		before: func(n int, b *kafkasink.Batch) error {
			if failingSink && len(b.Events) > 0 && len(sizes) == crashAfter {
				return errBroken
			}
			return nil
		},
		after: func(n int, b *kafkasink.Batch) error {
			if len(b.Events) > 0 {
				if sizes = append(sizes, len(b.Events)); len(sizes) == crashAfter && !failingSink {
					cancel()
				}
			}
			return nil
		}}
	if failingSink {
		wantErr = errBroken
	}
	if err := Run(ctx, cfg, sink1); !errors.Is(err, wantErr) {
		t.Fatalf("first Run = %v, want %v", err, wantErr)
	}
	sink1.Close(context.Background())
	// Rows 1 2 4 5 7 | 8 10 11 13 14 | 16 17 19 20 22 pass the filter.
	if !slices.Equal(sizes, []int{chunk, chunk, chunk}) {
		t.Fatalf("chunks of %v rows before the crash, want %d of %d", sizes, crashAfter, chunk)
	}
	cur, ok := parseCursor(sink1.Checkpoint().Cursor)
	if !ok || cur.Done || !slices.Equal(cur.LastKey, []string{"22"}) || !slices.Equal(cur.KeyColumns, []string{"id"}) {
		t.Fatalf("checkpoint cursor after the crash %s, want the table in progress after id 22", sink1.Checkpoint().Cursor)
	}

	// Rows read, not read, inside and outside the filter change while
	// nothing runs.
	e.sqlf("UPDATE %[1]s SET pub = 'u', secret = 'u' WHERE id IN (2, 3, 40, 42)",
		"UPDATE %[1]s SET id = 61 WHERE id = 4", // read, leaves the key range read
		"UPDATE %[1]s SET id = 63 WHERE id = 5", // read, leaves the filter
		"DELETE FROM %[1]s WHERE id IN (8, 50, 51)",
		"INSERT INTO %[1]s VALUES (64, 's', 'p'), (66, 's', 'p')")

	var firstKey int32 = -1
	sink2 := &recSink{Sink: e.newSink(e.name), tr: tr,
		before: func(n int, b *kafkasink.Batch) error {
			if firstKey < 0 && len(b.Events) > 0 && b.Events[0].Op == kafkasink.OpRead {
				v, _ := b.Events[0].After.Get("id")
				firstKey = v.Value.(int32)
			}
			return nil
		}}
	_, r := start(t, cfg, sink2)
	e.syncStream(r, tr, "INSERT INTO %[1]s VALUES (100, 's', 'p')")
	e.checkTopicIsTable("t.public."+e.name, "SELECT id, pub FROM %[1]s WHERE id %% 3 <> 0", []string{"id"})
	if firstKey != 23 {
		t.Errorf("the resumed snapshot began at row %d, want 23 (the first published row after the cursor)", firstKey)
	}
}

// TestSnapshotRefusesTableWithoutKeyBeforeSlot checks that a table the
// snapshot cannot read in chunks is refused before the slot exists and
// before another table's rows are written, in one error with every other
// problem.
func TestSnapshotRefusesTableWithoutKeyBeforeSlot(t *testing.T) {
	t.Parallel()
	requirePG(t, pgColumnLists)
	e := newPGEnv(t)
	good := e.createTable("")
	e.fillTable(good, 10)
	e.sqlf("CREATE TABLE %[1]s_nokey (id int, note text)",
		"CREATE UNIQUE INDEX ON %[1]s_nokey (id)", // a unique index, not the replica identity
		"INSERT INTO %[1]s_nokey VALUES (1, 'a')",
		"CREATE PUBLICATION %[1]s FOR TABLE %[1]s (id, seq), %[1]s_nokey")
	cfg := e.config()
	cfg.Snapshot = true
	// A key column the publication leaves out is refused too, in the
	// same error.
	cfg.KeyColumns = kafkasink.TableKeys{"public." + good: {"note"}}
	tr := newTracker()
	sink := &recSink{Sink: e.newSink(e.name), tr: tr}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := Run(ctx, cfg, sink)
	var ce *kafkasink.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "public."+e.name+"_nokey") ||
		!strings.Contains(err.Error(), "REPLICA IDENTITY USING INDEX") || !strings.Contains(err.Error(), "-snapshot") {
		t.Fatalf("Run = %v, want a *kafkasink.ConfigError naming public.%s_nokey and the fixes", err, e.name)
	}
	if len(ce.Problems) != 2 || !strings.Contains(ce.Problems[0], `Config.KeyColumns names column "note" of table public.`+good) {
		t.Errorf("problems %q, want the unpublished key column of public.%s, then the table without a key", ce.Problems, good)
	}
	if sink.n != 0 {
		t.Errorf("%d Writes before the refusal, want none", sink.n)
	}
	e.mu.Lock()
	var slots int
	qerr := e.db.QueryRow(ctx, "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", e.name).Scan(&slots)
	e.mu.Unlock()
	if qerr != nil || slots != 0 {
		t.Errorf("%d slots named %s after the refusal (%v), want none", slots, e.name, qerr)
	}
}

// TestPublicationColumnListChangeIsLogged changes a publication's column
// list while Run streams: Run warns, naming the table and both column
// sets, and the topic shows what the package documentation says: rows
// written before keep the old columns, changes after carry the new ones.
func TestPublicationColumnListChangeIsLogged(t *testing.T) {
	t.Parallel()
	requirePG(t, pgColumnLists)
	e := newPGEnv(t)
	e.sqlf(secretTable, secretRows, "CREATE PUBLICATION %[1]s FOR TABLE %[1]s (id, pub)")
	cfg := e.config()
	cfg.Snapshot = true
	logs := newLogRecorder(t)
	cfg.Logger = slog.New(logs)
	tr := newTracker()
	_, r := start(t, cfg, &recSink{Sink: e.newSink(e.name), tr: tr})
	e.syncStream(r, tr, "INSERT INTO %[1]s VALUES (11, 's11', 'p11')")
	e.sqlf("ALTER PUBLICATION %[1]s SET TABLE %[1]s (id, secret, pub)")
	e.syncStream(r, tr, "INSERT INTO %[1]s VALUES (12, 's12', 'p12')")

	found := false
	for _, w := range logs.warnings() {
		if strings.Contains(w.msg, columnsChangedMsg) && w.attrs["table"] == "public."+e.name &&
			w.attrs["old_columns"] == "[id pub]" && w.attrs["new_columns"] == "[id secret pub]" {
			found = true
		}
	}
	if !found {
		t.Errorf("no warning naming public.%s, old columns [id pub] and new columns [id secret pub]; warnings: %v", e.name, logs.warnings())
	}
	after := map[int64]map[string]any{}
	for _, rec := range e.readTopic(e.name) {
		after[num(rec.After, "id")] = rec.After
	}
	if _, ok := after[1]["secret"]; ok || len(after) != 12 {
		t.Errorf("snapshot row 1 is %v, want no secret (12 rows, got %d)", after[1], len(after))
	}
	if after[12]["secret"] != "s12" {
		t.Errorf("row 12, inserted after the change, is %v, want secret s12", after[12])
	}
}

func TestPlanSnapshot(t *testing.T) {
	t.Parallel()
	cursor := func(c snapshotCursor) json.RawMessage {
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	unfinished := kafkasink.Checkpoint{Cursor: cursor(snapshotCursor{Snapshot: "run", LSN: "0/1", Table: "public.t", LastKey: []string{"1"}})}
	finished := kafkasink.Checkpoint{Cursor: cursor(snapshotCursor{Snapshot: "run", LSN: "0/1", Done: true}), Position: kafkasink.Position{LSN: 1}}
	streamed := kafkasink.Checkpoint{Position: kafkasink.Position{LSN: 5, Index: 2}}
	for _, c := range []struct {
		name    string
		on      bool
		ck      kafkasink.Checkpoint
		created bool
		gap     gapSnapshot
		want    snapshotPlan
	}{
		{"off", false, kafkasink.Checkpoint{}, true, gapSnapshotNone, snapshotNone},
		{"off, unfinished", false, unfinished, false, gapSnapshotNone, snapshotNone},
		{"slot created", true, kafkasink.Checkpoint{}, true, gapSnapshotNone, snapshotExported},
		{"slot created over an old checkpoint", true, streamed, true, gapSnapshotNone, snapshotExported},
		{"unfinished", true, unfinished, false, gapSnapshotNone, snapshotResumed},
		{"nothing delivered", true, kafkasink.Checkpoint{}, false, gapSnapshotNone, snapshotCurrent},
		{"only confirmed positions recorded", true, kafkasink.Checkpoint{Cursor: json.RawMessage(`{"cursor_version":1,"confirmed_lsn":"0/5"}`)}, false, gapSnapshotNone, snapshotCurrent},
		{"finished", true, finished, false, gapSnapshotNone, snapshotNone},
		{"streaming", true, streamed, false, gapSnapshotNone, snapshotNone},
		{"off, gap, slot created", false, streamed, true, gapSnapshotFresh, snapshotExported},
		{"off, gap, slot kept", false, streamed, false, gapSnapshotFresh, snapshotCurrent},
		{"on, gap, over an unfinished run", true, unfinished, false, gapSnapshotFresh, snapshotCurrent},
		{"off, gap's run unfinished", false, unfinished, false, gapSnapshotResume, snapshotResumed},
	} {
		if got := planSnapshot(c.on, c.ck, c.created, c.gap); got != c.want {
			t.Errorf("%s: planSnapshot = %d, want %d", c.name, got, c.want)
		}
	}
}

// TestDecoderReportsRelations checks that OnRelation sees every Relation
// message as it takes effect: at once in an ordinary transaction, at the
// commit of a streamed one.
func TestDecoderReportsRelations(t *testing.T) {
	t.Parallel()
	var got []string
	d, _ := newTestDecoder(t, DecoderConfig{OnRelation: func(schema, table string, columns []string) {
		got = append(got, schema+"."+table+":"+strings.Join(columns, ","))
	}})
	const top = 800
	narrow := pgoutputmsg.Relation(top, 16384, "public", "users", 'd', pgoutputmsg.Key("id", pgtype.Int4OID))
	feed(t, d,
		wal{0x100, pgoutputmsg.Begin(0x110, t0, 700)},
		wal{0x100, usersR},
		wal{0x110, pgoutputmsg.Commit(0x110, 0x118, t0)},
		wal{0x200, pgoutputmsg.StreamStart(top, true)},
		wal{0x200, narrow},
		wal{0x210, pgoutputmsg.Insert(top, 16384, pgoutputmsg.Text("1"))},
		wal{0x220, pgoutputmsg.StreamStop()},
	)
	want := []string{"public.users:id,name,balance"}
	if !slices.Equal(got, want) {
		t.Fatalf("before the streamed commit OnRelation saw %q, want %q", got, want)
	}
	feed(t, d, wal{0x300, pgoutputmsg.StreamCommit(top, 0x300, 0x340, t0)})
	if want = append(want, "public.users:id"); !slices.Equal(got, want) {
		t.Fatalf("OnRelation saw %q, want %q", got, want)
	}
}

// An existing publication whose tables differ from Config.Tables is
// refused at start-up, naming the tables in Tables it does not publish and
// those it publishes beyond them, unless AcceptPublicationTables accepts
// it with a warning. A partitioned table named by its root matches its
// partitions, which the publication lists when it does not publish via the
// root.
func TestExistingPublicationTablesDiffer(t *testing.T) {
	e := newPGEnv(t)
	e.sqlf("CREATE TABLE %[1]s_a (id int PRIMARY KEY)",
		"CREATE TABLE %[1]s_b (id int PRIMARY KEY)",
		"CREATE TABLE %[1]s_d (id int PRIMARY KEY)",
		"CREATE TABLE %[1]s_parts (id int PRIMARY KEY) PARTITION BY RANGE (id)",
		"CREATE TABLE %[1]s_parts_1 PARTITION OF %[1]s_parts FOR VALUES FROM (0) TO (100)",
		"CREATE TABLE %[1]s_parts_2 PARTITION OF %[1]s_parts FOR VALUES FROM (100) TO (200)",
		"CREATE PUBLICATION %[1]s FOR TABLE %[1]s_a, %[1]s_b, %[1]s_parts")
	cfg := e.config(e.name+"_a", e.name+"_parts", e.name+"_d")
	run := func(cfg Config, within time.Duration) (error, int) {
		sink := &recSink{Sink: e.newSink(e.name), tr: newTracker()}
		ctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		return Run(ctx, cfg, sink), sink.n
	}

	err, writes := run(cfg, 30*time.Second)
	var ce *kafkasink.ConfigError
	missing := fmt.Sprintf(`in Tables but not published: ["public"."%s_d"]`, e.name)
	extra := fmt.Sprintf(`published but not in Tables: ["public"."%s_b"]`, e.name)
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), extra) ||
		!strings.Contains(err.Error(), "Config.AcceptPublicationTables") {
		t.Fatalf("Run = %v, want a *kafkasink.ConfigError saying %s and %s", err, missing, extra)
	}
	if writes != 0 {
		t.Errorf("%d Writes before the refusal, want none", writes)
	}

	cfg.AcceptPublicationTables = true
	logs := newLogRecorder(t)
	cfg.Logger = slog.New(logs)
	err, _ = run(cfg, 5*time.Second)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run with AcceptPublicationTables = %v, want it streaming until its context ends", err)
	}
	warned := logs.find("pgcdc: publication")
	if len(warned) != 1 || warned[0]["publication"] != e.name {
		t.Fatalf("warnings %v, want one about publication %s", logs.warnings(), e.name)
	}
	if w := logs.warnings(); !strings.Contains(w[0].msg, missing) || !strings.Contains(w[0].msg, extra) {
		t.Errorf("warning %q, want it to say %s and %s", w[0].msg, missing, extra)
	}
}
