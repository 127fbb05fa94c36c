package pgcdc

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafkasink/kafkasink/internal/sinktest"
)

// The backfill under load, on the real PostgreSQL and the real Kafka: a
// writer inserts, updates (also keys, also TOASTed values, also leaving
// them unchanged) and deletes rows at a steady rate while a backfill of
// the table runs, asked for through the library (Backfills) or through a
// signal in the stream. Run connects as a role that has only REPLICATION
// and SELECT, so nothing it does can write to the database. A
// read_committed reader then checks that every row's last record is the
// database's row, that no row is missing, that no read record of a key
// comes after a newer change of it, that the changes of a key keep their
// order, and that each row has at most one record of the backfill.

// bfLoad is one load test's table, role and workload.
type bfLoad struct {
	e     *pgEnv
	table string
	role  string
	// seq numbers every value the writer writes, increasing, so that
	// the records of a key must show increasing seqs.
	seq    atomic.Int64
	nextID atomic.Int64
	live   []int64 // the writer's: ids that exist
	txns   atomic.Int64
	// serverDies is set by a test that kills the server under the
	// writer: a transaction whose connection dies is then not the
	// writer's failure; it connects again and goes on, and unknown
	// counts those transactions, which may or may not have committed.
	// The checks allow either: they compare the topic with the table as
	// it is, and a stale live only makes later changes miss a row.
	serverDies bool
	unknown    atomic.Int64
}

// newBFLoad creates the table with rows rows, its publication (FOR TABLE
// the table, then pub: a column list, a row filter), and a role with
// REPLICATION and SELECT on it only, dropped at the end.
func newBFLoad(t *testing.T, rows int, pub string) *bfLoad {
	e := newPGEnv(t)
	_, e.brokers = realEnv(t)
	role := e.name + "_ro"
	e.exec("CREATE ROLE " + role + " LOGIN REPLICATION PASSWORD 'ro'")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		db, err := pgx.Connect(ctx, e.conn)
		if err != nil {
			return
		}
		defer db.Close(ctx)
		// After the test's own cleanup has dropped the slot and the
		// table, which run first: cleanups run last in, first out.
		dropTestObjects(ctx, db, e.name)
		db.Exec(ctx, "DROP ROLE IF EXISTS "+role)
	})
	l := e.bfTable(e.name+"_bf", role, rows)
	e.exec("CREATE PUBLICATION " + e.name + " FOR TABLE " + l.table + pub)
	return l
}

// bfTable creates a load's table with rows rows, readable by role.
func (e *pgEnv) bfTable(table, role string, rows int) *bfLoad {
	l := &bfLoad{e: e, table: table, role: role}
	e.exec("CREATE TABLE " + l.table + " (id bigint PRIMARY KEY, seq bigint NOT NULL, note text, big text)")
	e.exec("ALTER TABLE " + l.table + " ALTER COLUMN big SET STORAGE EXTERNAL") // out of line, uncompressed: TOASTed
	e.exec(fmt.Sprintf("INSERT INTO %s SELECT g, g, 'n' || g, CASE WHEN g %% 3 = 0 THEN repeat(md5(g::text), 100) END FROM generate_series(1, %d) g", l.table, rows))
	e.exec("ANALYZE " + l.table)
	l.seq.Store(int64(rows))
	l.nextID.Store(int64(rows))
	for i := range rows {
		l.live = append(l.live, int64(i+1))
	}
	e.exec("GRANT SELECT ON " + l.table + " TO " + l.role)
	return l
}

// config is Run's configuration as the read-only role.
func (l *bfLoad) config() Config {
	cfg := l.e.config()
	cfg.Tables = nil
	cfg.CreatePublication = false
	cfg.BackfillChunkRows = 200
	cfg.ConfigureConn = func(_ context.Context, c *pgconn.Config) error {
		c.User, c.Password = l.role, "ro"
		return nil
	}
	return cfg
}

// write runs one transaction of 1 to 3 random changes.
func (l *bfLoad) write(ctx context.Context, db *pgx.Conn, rng *rand.Rand) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	live := slices.Clone(l.live)
	pick := func() (int, int64) { i := rng.IntN(len(live)); return i, live[i] }
	for range 1 + rng.IntN(3) {
		var err error
		switch op := rng.IntN(10); {
		case op < 3 || len(live) < 10: // insert
			id := l.nextID.Add(1)
			_, err = tx.Exec(ctx, "INSERT INTO "+l.table+" VALUES ($1::bigint, $2::bigint, 'i', CASE WHEN $1::bigint % 2 = 0 THEN repeat(md5($2::bigint::text), 100) END)", id, l.seq.Add(1))
			live = append(live, id)
		case op < 5: // update, the TOASTed value left unchanged
			_, id := pick()
			_, err = tx.Exec(ctx, "UPDATE "+l.table+" SET seq = $2, note = 'u' WHERE id = $1", id, l.seq.Add(1))
		case op < 7: // update of the TOASTed value
			_, id := pick()
			s := l.seq.Add(1)
			_, err = tx.Exec(ctx, "UPDATE "+l.table+" SET seq = $2, big = repeat(md5($2::bigint::text), 120) WHERE id = $1", id, s)
		case op < 8: // a key change
			i, id := pick()
			nid := l.nextID.Add(1)
			_, err = tx.Exec(ctx, "UPDATE "+l.table+" SET id = $2, seq = $3 WHERE id = $1", id, nid, l.seq.Add(1))
			live[i] = nid
		default: // delete
			i, id := pick()
			_, err = tx.Exec(ctx, "DELETE FROM "+l.table+" WHERE id = $1", id)
			live = slices.Delete(live, i, i+1)
		}
		if err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	l.live = live
	l.txns.Add(1)
	return nil
}

// writer writes a transaction every few milliseconds until stop closes.
func (l *bfLoad) writer(t *testing.T, stop <-chan struct{}) (wait func()) {
	db, err := pgx.Connect(context.Background(), l.e.conn)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var werr error
	wg.Go(func() {
		defer func() {
			if db != nil {
				db.Close(context.Background())
			}
		}()
		rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
		tick := time.NewTicker(3 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if werr = l.write(context.Background(), db, rng); werr == nil {
				continue
			}
			if !l.serverDies || !db.IsClosed() {
				return
			}
			l.unknown.Add(1)
			if db, werr = connectAgain(stop, l.e.conn); db == nil {
				return
			}
		}
	})
	return func() {
		wg.Wait()
		if werr != nil {
			t.Fatalf("writer: %v", werr)
		}
	}
}

// bfRecord is one record of the table's topic, in its partition's order.
type bfRecord struct {
	partition int32
	offset    int64
	op        string
	id        int64
	after     map[string]any
	runID     string
}

// readBF reads the table's topic with read_committed.
func (l *bfLoad) read(t *testing.T) []bfRecord {
	recs := sinktest.ReadCommitted(t, l.e.brokers, "t.public."+l.table)
	out := make([]bfRecord, 0, len(recs))
	for _, r := range recs {
		var v record
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("record %q: %v", r.Value, err)
		}
		id := num(v.After, "id")
		if v.After == nil {
			id = num(v.Before, "id")
		}
		out = append(out, bfRecord{partition: r.Partition, offset: r.Offset, op: v.Op, id: id, after: v.After, runID: v.RunID})
	}
	slices.SortFunc(out, func(a, b bfRecord) int {
		return cmp.Or(cmp.Compare(a.partition, b.partition), cmp.Compare(a.offset, b.offset))
	})
	return out
}

// bfCheck is what checkBF counted.
type bfCheck struct {
	records, reads, rows, backfilled int
	// bigUnknown counts the rows no record gave the TOASTed value of:
	// inserted by a key change and not changed or read since.
	bigUnknown int
	// heldAhead counts the change records older than a read record of
	// the key before them: changes a chunk's snapshot already held,
	// which the stream delivered after the chunk (see docs/backfill.md).
	heldAhead int
}

// check compares the topic with the table: the last record of every key
// is its row (or a delete, when there is none), no row is missing, the
// seqs of each key's records never go down and nothing follows a delete
// (the writer never reuses an id), and run's rows appear at most once
// each.
func (l *bfLoad) check(t *testing.T, run string) bfCheck {
	t.Helper()
	recs := l.read(t)
	type row struct {
		seq       int64
		note, big *string
	}
	rows, err := l.e.db.Query(context.Background(), "SELECT id, seq, note, big FROM "+l.table)
	if err != nil {
		t.Fatal(err)
	}
	db := make(map[int64]row)
	for rows.Next() {
		var id int64
		var r row
		if err := rows.Scan(&id, &r.seq, &r.note, &r.big); err != nil {
			t.Fatal(err)
		}
		db[id] = r
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	last := make(map[int64]bfRecord)
	// big is the last value of the TOASTed column a record of the key
	// carried: an update that leaves it unchanged leaves it out, as does
	// the insert under the new key of a key change.
	big := make(map[int64]any)
	// seen is the highest seq of a key's records so far, changed that of
	// its change records.
	seen := make(map[int64]int64)
	changed := make(map[int64]int64)
	deleted := make(map[int64]bool)
	reads := make(map[int64]int)
	c := bfCheck{records: len(recs), rows: len(db)}
	for _, r := range recs {
		if deleted[r.id] {
			t.Errorf("id %d: a %s record (partition %d offset %d) follows its delete", r.id, r.op, r.partition, r.offset)
		}
		if v, ok := r.after["big"]; ok {
			big[r.id] = v
		} else if r.op == "read" {
			t.Errorf("id %d: a read record without the TOASTed value", r.id)
		}
		if r.op == "read" {
			c.reads++
			if r.runID == run {
				reads[r.id]++
			}
		}
		if r.op == "delete" {
			deleted[r.id] = true
		} else {
			s := num(r.after, "seq")
			switch {
			case r.op == "read" && s < seen[r.id]:
				t.Errorf("id %d: a read record of seq %d (partition %d offset %d) follows a change to seq %d: an older state overwrote a newer one",
					r.id, s, r.partition, r.offset, seen[r.id])
			case r.op != "read" && s < changed[r.id]:
				t.Errorf("id %d: a %s record of seq %d (partition %d offset %d) follows a change to seq %d: the stream's order is broken",
					r.id, r.op, s, r.partition, r.offset, changed[r.id])
			case r.op != "read" && s < seen[r.id]:
				// A change the chunk's snapshot already held, which
				// the stream had not reached when the chunk ran.
				c.heldAhead++
			}
			seen[r.id] = max(seen[r.id], s)
			if r.op != "read" {
				changed[r.id] = max(changed[r.id], s)
			}
		}
		last[r.id] = r
	}
	for id, n := range reads {
		if n > 1 {
			t.Errorf("id %d has %d records of backfill %s, want at most 1", id, n, run)
		}
	}
	c.backfilled = len(reads)
	for id, want := range db {
		r, ok := last[id]
		switch {
		case !ok:
			t.Errorf("id %d (seq %d) is in the table but has no record", id, want.seq)
			continue
		case r.op == "delete":
			t.Errorf("id %d (seq %d) is in the table, its last record is a delete", id, want.seq)
			continue
		}
		b, hasBig := big[id]
		gotBig, _ := b.(string)
		if !hasBig {
			c.bigUnknown++
		}
		if num(r.after, "seq") != want.seq || r.after["note"] != ptrOr(want.note) || hasBig && ((want.big == nil) != (b == nil) || gotBig != ptrOr(want.big)) {
			t.Errorf("id %d: last record %s has seq %v note %v, big of %d bytes (known %v); the row has seq %d note %q, big of %d bytes",
				id, r.op, r.after["seq"], r.after["note"], len(gotBig), hasBig, want.seq, ptrOr(want.note), len(ptrOr(want.big)))
		}
	}
	for id, r := range last {
		if _, ok := db[id]; !ok && r.op != "delete" {
			t.Errorf("id %d is not in the table, its last record is %s", id, r.op)
		}
	}
	return c
}

func ptrOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// settle stops the writer and waits until a last change is in Kafka, so
// that everything before it is too; then it checks the topic against
// the table for backfill id.
func (l *bfLoad) settle(t *testing.T, r *run, stopW chan struct{}, waitW func(), id string) bfCheck {
	t.Helper()
	close(stopW)
	waitW()
	marker := l.nextID.Add(1)
	l.e.exec("INSERT INTO "+l.table+" VALUES ($1, $2, 'marker', NULL)", marker, l.seq.Add(1))
	waitFor(t, time.Minute, "the marker row in Kafka", r, func() bool {
		return slices.ContainsFunc(l.read(t), func(r bfRecord) bool { return r.id == marker })
	})
	return l.check(t, id)
}

// TestBackfillUnderLoad runs the load test for each way of asking but
// the program's (cmd/kafkasink tests that): each asks for a backfill of
// the table, with Run's configuration set up for it, and returns its id.
func TestBackfillUnderLoad(t *testing.T) {
	for _, way := range []struct {
		how   string
		setup func(l *bfLoad, cfg *Config)
		ask   func(t *testing.T, l *bfLoad, ctrl *Backfills, r *run) string
	}{
		{how: "api", ask: func(t *testing.T, l *bfLoad, ctrl *Backfills, _ *run) string {
			st, err := request(t, ctrl, l.table, "")
			if err != nil {
				t.Fatal(err)
			}
			return st.ID
		}},
		{how: "signal",
			setup: func(_ *bfLoad, cfg *Config) { cfg.SignalPrefix = "kafkasink.signal" },
			ask: func(t *testing.T, l *bfLoad, ctrl *Backfills, r *run) string {
				l.e.exec("SELECT pg_logical_emit_message(true, 'kafkasink.signal', $1)",
					fmt.Sprintf(`{"type":"execute-snapshot","data":{"data-collections":["public.%s"],"type":"incremental"}}`, l.table))
				return waitBackfill(t, ctrl, r)
			}},
		{how: "signal table",
			setup: func(l *bfLoad, cfg *Config) {
				sig := l.table + "_signal"
				l.e.exec("CREATE TABLE " + sig + " (id varchar(42) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048))")
				l.e.exec("GRANT SELECT ON " + sig + " TO " + l.role)
				l.e.exec("ALTER PUBLICATION " + l.e.name + " ADD TABLE " + sig)
				cfg.SignalTable = "public." + sig
			},
			ask: func(t *testing.T, l *bfLoad, ctrl *Backfills, r *run) string {
				l.e.exec("INSERT INTO "+l.table+"_signal VALUES ('load-1', 'execute-snapshot', $1)",
					fmt.Sprintf(`{"data-collections":["public.%s"],"type":"incremental"}`, l.table))
				return waitBackfill(t, ctrl, r)
			}},
	} {
		t.Run(way.how, func(t *testing.T) {
			l := newBFLoad(t, 10000, "")
			cfg := l.config()
			ctrl, mon := &Backfills{}, &Monitor{}
			cfg.Backfills, cfg.Monitor = ctrl, mon
			if way.setup != nil {
				way.setup(l, &cfg)
			}
			_, r := start(t, cfg, l.e.newSink(l.e.name))
			waitFor(t, time.Minute, "streaming", r, func() bool { return mon.Stats().State == RunStreaming })

			stopW := make(chan struct{})
			waitW := l.writer(t, stopW)
			time.Sleep(300 * time.Millisecond) // changes flow before the backfill
			before := l.txns.Load()
			id := way.ask(t, l, ctrl, r)
			// Monitor.Stats shows the backfill's progress meanwhile.
			var progress BackfillProgress
			waitFor(t, 3*time.Minute, "the backfill's end", r, func() bool {
				if p := mon.Stats().Backfills; len(p) == 1 && p[0].Rows > 0 && p[0].LastKey != nil && p[0].RowsLeft > 0 && p[0].RowsPerSecond > 0 {
					progress = p[0]
				}
				return len(ctrl.List()) == 0
			})
			if progress.ID != id || progress.Rows+progress.RowsLeft < 9000 || progress.Rows+progress.RowsLeft > 11000 {
				t.Errorf("Monitor showed progress %+v: want rows done and left adding up to about the table's 10000", progress)
			}
			if p := mon.Stats().Backfills; p != nil {
				t.Errorf("Monitor shows %+v after the backfill's end, want nil", p)
			}
			during := l.txns.Load() - before
			if during == 0 {
				t.Fatal("the writer committed nothing while the backfill ran: the test proves nothing")
			}
			time.Sleep(300 * time.Millisecond) // changes flow after it
			c := l.settle(t, r, stopW, waitW, id)
			if st := mon.Stats(); st.LastBackfillError != "" || st.SnapshotRows != int64(c.reads) {
				t.Errorf("Monitor: %d snapshot rows, want the %d read records; last backfill error %q", st.SnapshotRows, c.reads, st.LastBackfillError)
			}
			if c.backfilled == 0 {
				t.Fatal("the backfill delivered no row")
			}
			t.Logf("%s: %d records, %d read records (%d rows of backfill %s); %d rows in the table (%d without a TOASTed value in Kafka, after a key change); %d changes held ahead by a chunk; %d writer transactions, %d while the backfill ran",
				way.how, c.records, c.reads, c.backfilled, id, c.rows, c.bigUnknown, c.heldAhead, l.txns.Load(), during)
		})
	}
}

// waitBackfill waits until a signal's backfill is there, and returns its
// id.
func waitBackfill(t *testing.T, ctrl *Backfills, r *run) string {
	t.Helper()
	waitFor(t, 30*time.Second, "the signal's backfill", r, func() bool { return len(ctrl.List()) == 1 })
	return ctrl.List()[0].ID
}
