package pgcdc

import (
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
