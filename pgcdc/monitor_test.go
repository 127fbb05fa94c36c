package pgcdc

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A Monitor follows a Run against real PostgreSQL: snapshot rows, the
// stream's positions and lag, a change's commit time, a reconnect after
// the walsender is terminated with its error, and the stop.
func TestMonitor(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	table := e.createTable("")
	e.fillTable(table, 5)
	mon := &Monitor{}
	if st := mon.Stats(); st.State != RunNotStarted || st.State.String() != "not started" {
		t.Fatalf("a new Monitor's state: %v", st.State)
	}
	cfg := e.config("public." + table)
	cfg.Snapshot = true
	cfg.Monitor = mon
	stop, done := start(t, cfg, e.newSink(e.name))
	waitFor(t, 20*time.Second, "streaming", done, func() bool { return mon.Stats().State == RunStreaming })
	if st := mon.Stats(); st.SnapshotRows != 5 || st.Events != 5 || st.Reconnects != 0 || st.LastError != "" ||
		!doneTable(st.SnapshotTables["public."+table], 5) || len(st.SnapshotTables) != 1 {
		t.Fatalf("after the snapshot: %+v; want 5 snapshot rows of its one table, done, 5 events, no reconnect or error", st)
	}

	var committed time.Time
	e.txn(func(tx pgx.Tx) {
		if err := tx.QueryRow(context.Background(), "INSERT INTO "+table+" (id, seq) VALUES (100, 100) RETURNING now()").Scan(&committed); err != nil {
			t.Fatal(err)
		}
	})
	end := e.queryLSN("SELECT pg_current_wal_lsn()")
	waitFor(t, 20*time.Second, "the insert confirmed", done, func() bool { return mon.Stats().Confirmed >= end })
	st := mon.Stats()
	if st.Events != 6 || st.LastCommit.Before(committed.Add(-time.Second)) || st.ServerWALEnd < st.Confirmed ||
		st.LagBytes != int64(st.ServerWALEnd-st.Confirmed) {
		t.Fatalf("after an insert committed at %v: %+v; want 6 events, its commit time, WAL end >= confirmed and the lag between", committed, st)
	}

	e.exec("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1", e.name)
	waitFor(t, 20*time.Second, "a reconnect", done, func() bool {
		st := mon.Stats()
		return st.Reconnects >= 1 && st.State == RunStreaming
	})
	if st := mon.Stats(); st.LastError == "" || st.LastErrorTime.IsZero() {
		t.Fatalf("after a reconnect: %+v; want the failed attempt's error and time", st)
	}
	if err := stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if st := mon.Stats(); st.State != RunStopped {
		t.Fatalf("after Run returned: state %v, want stopped", st.State)
	}
}

// doneTable reports whether p is the progress of a table read to its end,
// rows rows, one chunk after another.
func doneTable(p TableProgress, rows int64) bool {
	return p.Rows == rows && p.Done && p.Ranges == nil && p.RowsLeft == 0 && p.TimeLeft == 0
}
