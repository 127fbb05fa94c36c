package pgcdc

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/kafkasink/kafkasink"
)

// addedChange waits until mon shows table joining (added) or leaving
// the publication, and returns it.
func addedChange(t *testing.T, r *run, mon *Monitor, table string, added bool) PublicationChange {
	t.Helper()
	var c PublicationChange
	waitFor(t, time.Minute, "the publication change of "+table, r, func() bool {
		i := slices.IndexFunc(mon.Stats().PublicationChanges, func(c PublicationChange) bool { return c.Table == table && c.Added == added })
		if i >= 0 {
			c = mon.Stats().PublicationChanges[i]
		}
		return i >= 0
	})
	return c
}

// A table added to the publication while Run streams, on the real
// PostgreSQL and the real Kafka, under a writer load on it and on the
// table already published: Run notices it without a restart, streams its
// changes and backfills its rows (Config.BackfillAddedTables). A
// read_committed reader then finds, for both tables, every row's last
// record equal to the database's row and no row missing; for the added
// one, each row at most one read record, all of the one backfill, and no
// read record after a newer change of its key; the tables the initial
// snapshot read are not backfilled. A table that then leaves
// the publication is logged, shown in the Monitor, and no longer
// streamed.
func TestBackfillAddedTable(t *testing.T) {
	l := newBFLoad(t, 2000, "")
	added := l.e.bfTable(l.e.name+"_add", l.role, 5000)
	cfg := l.config()
	cfg.BackfillAddedTables = true
	cfg.Snapshot = true // the rows of the table published from the start
	mon := &Monitor{}
	cfg.Monitor = mon
	logs := newLogRecorder(t)
	cfg.Logger = slog.New(logs)
	_, r := start(t, cfg, l.e.newSink(l.e.name))
	waitFor(t, time.Minute, "streaming", r, func() bool { return mon.Stats().State == RunStreaming })

	stopW := make(chan struct{})
	waitA, waitB := l.writer(t, stopW), added.writer(t, stopW)
	time.Sleep(300 * time.Millisecond) // changes flow on both tables, the added one not yet published
	before := added.txns.Load()
	l.e.exec("ALTER PUBLICATION " + l.e.name + " ADD TABLE " + added.table)
	name := kafkasink.TableName("public", added.table)
	change := addedChange(t, r, mon, name, true)
	if change.Backfill == "" {
		t.Fatalf("the added table's change in the Monitor names no backfill: %+v (last backfill error %q)", change, mon.Stats().LastBackfillError)
	}
	waitFor(t, 3*time.Minute, "the added table's backfill to end", r, func() bool { return len(mon.Stats().Backfills) == 0 })
	during := added.txns.Load() - before
	time.Sleep(300 * time.Millisecond) // changes flow after it
	close(stopW)
	waitA()
	waitB()
	if during == 0 {
		t.Fatal("the writer committed nothing on the added table while it was added and backfilled: the test proves nothing")
	}
	for _, ld := range []*bfLoad{l, added} {
		marker := ld.nextID.Add(1)
		l.e.exec("INSERT INTO "+ld.table+" VALUES ($1, $2, 'marker', NULL)", marker, ld.seq.Add(1))
		waitFor(t, time.Minute, "the marker row of "+ld.table+" in Kafka", r, func() bool {
			return slices.ContainsFunc(ld.read(t), func(r bfRecord) bool { return r.id == marker })
		})
	}
	cA := l.check(t, "")
	cB := added.check(t, change.Backfill)
	switch {
	case cA.reads != 2000:
		t.Errorf("the table published from the start has %d read records, want the initial snapshot's 2000 and no backfill", cA.reads)
	case cB.backfilled == 0:
		t.Error("the added table's backfill delivered no row")
	case cB.reads != cB.backfilled:
		t.Errorf("the added table has %d read records, %d of them of backfill %s: want every read record of that one backfill, one per row", cB.reads, cB.backfilled, change.Backfill)
	}
	if st := mon.Stats(); st.Reconnects != 0 || st.LastBackfillError != "" {
		t.Errorf("Monitor: %d reconnects, last backfill error %q: want none", st.Reconnects, st.LastBackfillError)
	}
	t.Logf("added table: %d records, %d read records of backfill %s, %d rows in the table, %d changes held ahead by a chunk, %d writer transactions while it was added and backfilled; "+
		"published table: %d records, %d rows",
		cB.records, cB.backfilled, change.Backfill, cB.rows, cB.heldAhead, during, cA.records, cA.rows)

	// The first table leaves the publication: logged, in the Monitor,
	// and a change of it after that is not streamed.
	l.e.exec("ALTER PUBLICATION " + l.e.name + " DROP TABLE " + l.table)
	left := kafkasink.TableName("public", l.table)
	addedChange(t, r, mon, left, false)
	if n := logs.matching("a table left the publication", left); n != 1 {
		t.Errorf("%d warnings that %s left the publication, want 1", n, left)
	}
	gone := l.nextID.Add(1)
	l.e.exec("INSERT INTO "+l.table+" VALUES ($1, 0, 'after it left', NULL)", gone)
	marker := added.nextID.Add(1)
	l.e.exec("INSERT INTO "+added.table+" VALUES ($1, $2, 'marker', NULL)", marker, added.seq.Add(1))
	waitFor(t, time.Minute, "the last marker in Kafka", r, func() bool {
		return slices.ContainsFunc(added.read(t), func(r bfRecord) bool { return r.id == marker })
	})
	if slices.ContainsFunc(l.read(t), func(r bfRecord) bool { return r.id == gone }) {
		t.Errorf("a row inserted after %s left the publication was streamed", left)
	}
}

// reads returns the backfill run ids of the read records of table's
// topic, one per record.
func (e *pgEnv) reads(table string) []string {
	var out []string
	for _, r := range e.readTopic(table) {
		if r.Op == "read" {
			out = append(out, r.RunID)
		}
	}
	return out
}

// The ways a table joins and leaves the publication, beyond the stream's
// first change of it: a table that joins with no change is noticed when
// Run reads the publication again, and backfilled, with a warning when
// Config.Tables does not name it, and asked for again when the backfill
// connection fails as it is asked for; after a restart, a table that joined
// while Run was stopped is backfilled and one that left is reported, as
// the cursor's list of tables shows, and a table backfilled before is not
// backfilled again; with the option off a table that joins is reported,
// streamed and not backfilled, and one that leaves has its backfill
// cancelled; and the first change of a table that
// joins makes Run read the publication at once.
func TestPublicationChanges(t *testing.T) {
	e := newPGEnv(t)
	a := e.createTable("_a")
	e.fillTable(a, 10)
	cfg := e.config(a)
	cfg.Snapshot, cfg.BackfillAddedTables = true, true
	logs := newLogRecorder(t)
	cfg.Logger = slog.New(logs)
	sink := e.newSink(e.name)
	runWith := func(cfg Config, sink Sink) (func() error, *run, *Monitor) {
		mon := &Monitor{}
		cfg.Monitor = mon
		stop, r := start(t, cfg, sink)
		waitFor(t, time.Minute, "streaming", r, func() bool { return mon.Stats().State == RunStreaming })
		return stop, r, mon
	}
	stop, r, mon := runWith(cfg, sink)

	// No change of the table follows: no Relation message names it.
	c := e.createTable("_c")
	e.fillTable(c, 50)
	e.exec("ALTER PUBLICATION " + e.name + " ADD TABLE " + c)
	cName := kafkasink.TableName("public", c)
	ch := addedChange(t, r, mon, cName, true)
	if ch.Backfill == "" {
		t.Fatalf("%s joined with no backfill: %+v (%s)", c, ch, mon.Stats().LastBackfillError)
	}
	var got []string
	waitFor(t, time.Minute, "the backfill of "+c, r, func() bool { got = e.reads(c); return len(got) >= 50 })
	if n := logs.matching("a table joined the publication but Config.Tables (-tables) does not name it", cName); n != 1 {
		t.Errorf("%d warnings that Tables does not name %s, want 1", n, cName)
	}

	// The backfill connection fails as c2 joins: its backfill is asked
	// for again at the next reading.
	var killed int
	if err := e.db.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = 'kafkasink-pgcdc' AND backend_type = 'client backend' AND lower(query) = 'commit'`).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminating the backfill connection: %d terminated, %v", killed, err)
	}
	c2 := e.createTable("_c2")
	e.fillTable(c2, 7)
	e.exec("ALTER PUBLICATION " + e.name + " ADD TABLE " + c2)
	c2Name := kafkasink.TableName("public", c2)
	if ch := addedChange(t, r, mon, c2Name, true); ch.Backfill == "" {
		t.Errorf("%s joined with no backfill: %+v (%s)", c2, ch, mon.Stats().LastBackfillError)
	}
	waitFor(t, time.Minute, "the backfill of "+c2, r, func() bool { return len(e.reads(c2)) >= 7 })
	if n := logs.matching("a table joined the publication, and asking for its backfill failed", c2Name); n != 1 {
		t.Errorf("%d warnings that asking for the backfill of %s failed, want 1", n, c2Name)
	}
	if err := stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}

	// While Run is stopped, d joins and a leaves.
	d := e.createTable("_d")
	e.fillTable(d, 30)
	e.exec("ALTER PUBLICATION " + e.name + " ADD TABLE " + d)
	e.exec("ALTER PUBLICATION " + e.name + " DROP TABLE " + a)
	cfg.Tables = nil
	stop, r, mon = runWith(cfg, sink)
	dName, aName := kafkasink.TableName("public", d), kafkasink.TableName("public", a)
	chD := addedChange(t, r, mon, dName, true)
	addedChange(t, r, mon, aName, false)
	waitFor(t, time.Minute, "the backfill of "+d, r, func() bool { return len(e.reads(d)) >= 30 })
	if got := e.reads(d); len(got) != 30 || slices.ContainsFunc(got, func(id string) bool { return id != chD.Backfill }) {
		t.Errorf("%s: read records of backfills %v, want 30 of %s", d, got, chD.Backfill)
	}
	if st := mon.Stats(); len(st.PublicationChanges) != 2 {
		t.Errorf("after the restart the Monitor shows %+v, want %s joined and %s left", st.PublicationChanges, dName, aName)
	}
	if err := stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}

	// With the option off, a table that joins is streamed, not read; a
	// table that leaves has its backfill cancelled (paused here, while
	// its first chunk's Write waits).
	cfg.BackfillAddedTables = false
	ctrl, gate := &Backfills{}, &gateSink{Sink: sink, open: make(chan struct{})}
	cfg.Backfills, cfg.BackfillChunkRows = ctrl, 10 // d's 30 rows: 3 chunks
	stop, r, mon = runWith(cfg, gate)
	st, err := request(t, ctrl, d, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := ctrl.Pause(context.Background(), st.ID); err != nil {
		t.Fatal(err)
	}
	e.exec("ALTER PUBLICATION " + e.name + " DROP TABLE " + d)
	addedChange(t, r, mon, dName, false)
	waitFor(t, time.Minute, "the backfill of "+d+" cancelled", r, func() bool { return len(ctrl.List()) == 0 })
	close(gate.open)
	if e := mon.Stats().LastBackfillError; e != "" {
		t.Errorf("the backfill of %s, whose table left: %q, want it cancelled, not failed", d, e)
	}
	f := e.createTable("_f")
	e.fillTable(f, 20)
	e.exec("ALTER PUBLICATION " + e.name + " ADD TABLE " + f)
	if ch := addedChange(t, r, mon, kafkasink.TableName("public", f), true); ch.Backfill != "" {
		t.Errorf("with the option off, %s joined with backfill %s", f, ch.Backfill)
	}
	e.exec("INSERT INTO " + f + " VALUES (100, 100, 'after')")
	var recs []record
	waitFor(t, time.Minute, "the row inserted into "+f, r, func() bool { recs = e.readTopic(f); return len(recs) > 0 })
	if len(recs) != 1 || recs[0].Op != "insert" {
		t.Errorf("%s: %+v, want only the insert", f, recs)
	}
	if err := stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}

	// The option on again, with StandbyInterval an hour: the first change
	// of a table that joins makes Run read the publication, nothing else
	// would within the test. The first Run with the option takes the
	// publication as it is: f, which joined while it was off, is not
	// backfilled.
	cfg.BackfillAddedTables, cfg.StandbyInterval, cfg.Backfills = true, time.Hour, nil
	_, r, mon = runWith(cfg, sink)
	g := e.createTable("_g")
	e.fillTable(g, 5)
	e.exec("ALTER PUBLICATION " + e.name + " ADD TABLE " + g)
	e.exec("INSERT INTO " + g + " VALUES (100, 100, 'after')")
	chG := addedChange(t, r, mon, kafkasink.TableName("public", g), true)
	waitFor(t, time.Minute, "the backfill of "+g, r, func() bool { return len(e.reads(g)) >= 5 })
	if got := e.reads(g); slices.ContainsFunc(got, func(id string) bool { return id != chG.Backfill }) {
		t.Errorf("%s: read records of backfills %v, want all of %s", g, got, chG.Backfill)
	}
	if changes := mon.Stats().PublicationChanges; len(changes) != 1 || changes[0].Table != kafkasink.TableName("public", g) {
		t.Errorf("the Monitor shows %+v, want only %s joining", changes, g)
	}
	// c was backfilled once, before the restarts, and f never.
	if got := e.reads(c); len(got) != 50 || slices.ContainsFunc(got, func(id string) bool { return id != ch.Backfill }) {
		t.Errorf("%s: read records of backfills %v, want 50 of %s", c, got, ch.Backfill)
	}
	if got := e.reads(f); len(got) != 0 {
		t.Errorf("%s, which joined while the option was off: read records of backfills %v, want none", f, got)
	}
}
