package pgcdc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/internal/sinktest"
)

func TestSignalRowJSON(t *testing.T) {
	for _, c := range []struct {
		row  kafkasink.Row
		want string
	}{
		{kafkasink.Row{{Name: "id", Value: "1"}, {Name: "type", Value: "pause-snapshot"}, {Name: "data", Value: nil}},
			`{"id":"1","type":"pause-snapshot","data":null}`},
		// By position, whatever the names, as Debezium reads them.
		{kafkasink.Row{{Name: "a", Value: "x"}, {Name: "b", Value: "execute-snapshot"}, {Name: "c", Value: `{"data-collections":["t"]}`}},
			`{"id":"x","type":"execute-snapshot","data":"{\"data-collections\":[\"t\"]}"}`},
		{kafkasink.Row{{Name: "id", Value: int64(1)}, {Name: "type", Value: int64(2)}}, `{"id":"","type":"","data":null}`},
	} {
		if got := string(signalRowJSON(c.row)); got != c.want {
			t.Errorf("%v: %s, want %s", c.row, got, c.want)
		}
	}
	// What a row carries reads as the signal a message would carry.
	a, err := parseSignal(signalRowJSON(kafkasink.Row{{Value: "1"}, {Value: "execute-snapshot"},
		{Value: `{"data-collections":["public.t"],"type":"incremental","additional-conditions":[{"data-collection":"public.t","filter":"id > 1"}]}`}}))
	if err != nil || a.kind != cmdRequest || !slices.Equal(a.reqs, []BackfillRequest{{Table: "public.t", Where: "id > 1"}}) {
		t.Fatalf("parseSignal: %+v, %v", a, err)
	}
	if _, err := parseSignal(signalRowJSON(kafkasink.Row{{Value: "1"}, {Value: nil}, {Value: nil}})); err == nil || !strings.Contains(err.Error(), `no "type"`) {
		t.Fatalf("a row without a type: %v, want it refused for that", err)
	}
}

// Only inserts into the signal table are signals, and not the window
// rows a Debezium sharing the table writes there.
func TestSignalRowTaken(t *testing.T) {
	b := &backfiller{r: &runner{signal: signalTable{schema: "public", table: "sig"}}}
	row := func(typ string) kafkasink.Row {
		return kafkasink.Row{{Name: "id", Value: "x"}, {Name: "type", Value: typ}, {Name: "data", Value: nil}}
	}
	for _, e := range []kafkasink.Event{
		{Op: kafkasink.OpInsert, Schema: "public", Table: "sig", XID: 1, LSN: 10, After: row("pause-snapshot")},
		{Op: kafkasink.OpUpdate, Schema: "public", Table: "sig", XID: 2, After: row("pause-snapshot")},
		{Op: kafkasink.OpDelete, Schema: "public", Table: "sig", XID: 3, Before: row("pause-snapshot")},
		{Op: kafkasink.OpRead, Schema: "public", Table: "sig", After: row("pause-snapshot")},
		{Op: kafkasink.OpInsert, Schema: "other", Table: "sig", XID: 4, After: row("pause-snapshot")},
		{Op: kafkasink.OpInsert, Schema: "public", Table: "sig", XID: 5, After: row("snapshot-window-open")},
		{Op: kafkasink.OpInsert, Schema: "public", Table: "sig", XID: 6, After: row("snapshot-window-close")},
		{Op: kafkasink.OpInsert, Schema: "public", Table: "sig", XID: 7, LSN: 70, After: row("resume-snapshot")},
	} {
		b.signalRow(&e)
	}
	if len(b.pending) != 2 || b.pending[0].xid != 1 || b.pending[0].lsn != 10 || b.pending[1].xid != 7 || b.pending[1].lsn != 70 {
		t.Fatalf("pending signals %+v, want the inserts of transactions 1 and 7 alone", b.pending)
	}
}

func TestSignalTableConfig(t *testing.T) {
	cfg := Config{ConnString: "postgres://localhost/db", Slot: "s", Publication: "p", SignalTable: "a.b.c"}.withDefaults()
	if err := cfg.validate(); err == nil || !strings.Contains(err.Error(), "Config.SignalTable") {
		t.Fatalf("validate: %v, want Config.SignalTable named", err)
	}
}

// Debezium's signal table: Run refuses to start with one it would never
// hear from, naming why; rows inserted into it are signals, taken at
// their transaction's commit and once, also after a restart; the rows'
// own change events reach Kafka like any change.
func TestBackfillSignalTable(t *testing.T) {
	l := newBFLoad(t, 500, "")
	sig := l.table + "_signal"
	l.e.exec("CREATE TABLE " + sig + " (id varchar(42) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048) NULL)")
	l.e.exec("CREATE TABLE " + sig + "4 (id text PRIMARY KEY, type text, data text, extra int)")
	l.e.exec("CREATE TABLE " + sig + "int (id int PRIMARY KEY, type text, data text)")
	l.e.exec("GRANT SELECT ON " + sig + ", " + sig + "4, " + sig + "int TO " + l.role)
	startSig := func(table string, sink Sink) (*Backfills, *Monitor, *run) {
		t.Helper()
		cfg := l.config()
		ctrl, mon := &Backfills{}, &Monitor{}
		cfg.Backfills, cfg.Monitor, cfg.SignalTable = ctrl, mon, table
		_, r := start(t, cfg, sink)
		return ctrl, mon, r
	}
	refused := func(table, want string) {
		t.Helper()
		_, _, r := startSig(table, l.e.newSink(l.e.name))
		select {
		case <-r.done:
		case <-time.After(time.Minute):
			t.Fatalf("SignalTable %s: Run did not stop", table)
		}
		var ce *kafkasink.ConfigError
		if !errors.As(r.err, &ce) || !strings.Contains(r.err.Error(), want) {
			t.Fatalf("SignalTable %s: Run returned %v, want a *kafkasink.ConfigError saying %q", table, r.err, want)
		}
	}
	refused("public.nosuch_"+l.e.name, "no such table")
	refused(sig, fmt.Sprintf("is not in publication %q", l.e.name))
	l.e.exec("ALTER PUBLICATION " + l.e.name + " ADD TABLE " + sig + ", " + sig + "4, " + sig + "int")
	refused(sig+"4", "Debezium's signal table has three")
	refused(sig+"int", `columns ["id"] are not of a string type`)

	const signalRows = `INSERT INTO %s VALUES ($1, $2, $3)`
	insert := func(id, typ string, data any) { l.e.exec(fmt.Sprintf(signalRows, sig), id, typ, data) }
	execute := fmt.Sprintf(`{"data-collections":["%s"],"type":"incremental","additional-conditions":[{"data-collection":"%s","filter":"seq > 0"}]}`, l.table, l.table)

	// A signal of a rolled-back transaction does nothing; one that
	// commits starts a backfill, recorded by the Write that follows,
	// after which the sink stops Run.
	first := &stopAfterSink{Sink: l.e.newSink(l.e.name)}
	ctrl, mon, r := startSig(sig, first)
	waitFor(t, time.Minute, "streaming", r, func() bool { return mon.Stats().State == RunStreaming })
	l.e.txn(func(tx pgx.Tx) {
		tx.Exec(context.Background(), fmt.Sprintf(signalRows, sig), "rolled-back", "execute-snapshot", execute)
		tx.Exec(context.Background(), "ROLLBACK")
	})
	insert("ad-hoc-1", "execute-snapshot", execute)
	select {
	case <-r.done:
	case <-time.After(time.Minute):
		t.Fatal("Run did not stop after the Write that recorded the backfill")
	}
	if !errors.Is(r.err, errCrash) {
		t.Fatalf("Run returned %v, want the test's stop", r.err)
	}
	got := ctrl.List()
	if len(got) != 1 || got[0].Where != "seq > 0" || got[0].By != "signal" {
		t.Fatalf("after the signal row: backfills %+v, want one, of seq > 0, by signal (the rolled-back row does nothing)", got)
	}
	id := got[0].ID

	// The server sends the signal row's transaction again: the
	// checkpoint says it was taken. pause-snapshot with data NULL, then
	// resume-snapshot with data '' (both as Debezium's documentation
	// writes them); a blocking snapshot is refused by name, an update
	// of a signal row is no signal.
	gate := &gateSink{Sink: l.e.newSink(l.e.name), open: make(chan struct{})}
	ctrl, mon, r = startSig(sig, gate)
	waitFor(t, time.Minute, "streaming", r, func() bool { return mon.Stats().State == RunStreaming })
	if got := ctrl.List(); len(got) != 1 || got[0].ID != id {
		t.Fatalf("after the restart: backfills %+v, want %s alone", got, id)
	}
	insert("ad-hoc-2", "pause-snapshot", nil)
	waitFor(t, 30*time.Second, "the pause", r, func() bool {
		got := ctrl.List()
		return len(got) == 1 && got[0].Paused
	})
	// The pause follows the signal row sent again in the stream: taken
	// twice, it would have been refused as a second backfill.
	if e := mon.Stats().LastBackfillError; e != "" {
		t.Fatalf("the signal row sent again after the restart was taken again: %s", e)
	}
	l.e.exec("UPDATE " + sig + " SET type = 'stop-snapshot' WHERE id = 'ad-hoc-2'")
	insert("ad-hoc-3", "execute-snapshot", fmt.Sprintf(`{"data-collections":["%s"],"type":"blocking"}`, l.table))
	waitFor(t, 30*time.Second, "the blocking snapshot refused", r, func() bool {
		return strings.Contains(mon.Stats().LastBackfillError, `snapshot type "blocking" is not supported`)
	})
	if got := ctrl.List(); len(got) != 1 || got[0].ID != id {
		t.Fatalf("after an update of a signal row: backfills %+v, want %s alone, as it was", got, id)
	}
	close(gate.open)
	insert("ad-hoc-4", "resume-snapshot", "")
	waitFor(t, time.Minute, "the backfill's end", r, func() bool { return len(ctrl.List()) == 0 })

	marker := l.nextID.Add(1)
	l.e.exec("INSERT INTO "+l.table+" VALUES ($1, $2, 'marker', NULL)", marker, l.seq.Add(1))
	waitFor(t, time.Minute, "the marker row in Kafka", r, func() bool {
		return slices.ContainsFunc(l.read(t), func(r bfRecord) bool { return r.id == marker })
	})
	if c := l.check(t, id); c.backfilled != 500 || c.reads != 500 {
		t.Fatalf("%d rows of backfill %s, %d read records in all; want 500 and 500", c.backfilled, id, c.reads)
	}

	// Data collections are regular expressions matched against the
	// whole "schema.table", as Debezium reads them, in execute-snapshot
	// (its additional condition given for the same expression) and in
	// stop-snapshot.
	re := `public\\.` + strings.TrimSuffix(l.table, "_bf") + `_b.`
	l.e.txn(func(tx pgx.Tx) {
		tx.Exec(context.Background(), fmt.Sprintf(signalRows, sig), "ad-hoc-5", "execute-snapshot",
			fmt.Sprintf(`{"data-collections":["%s", "public.nosuch_.*"],"additional-conditions":[{"data-collection":"%s","filter":"id > 400"}]}`, re, re))
		tx.Exec(context.Background(), fmt.Sprintf(signalRows, sig), "ad-hoc-6", "pause-snapshot", nil)
	})
	waitFor(t, 30*time.Second, "the backfill a regular expression asks for", r, func() bool {
		got := ctrl.List()
		return len(got) == 1 && got[0].Table == "public."+l.table && got[0].Where == "id > 400" && got[0].Paused
	})
	waitFor(t, 30*time.Second, "the refusal of the expression that matches no table", r, func() bool {
		return strings.Contains(mon.Stats().LastBackfillError, "public.nosuch_.*")
	})
	insert("ad-hoc-7", "stop-snapshot", `{"data-collections":[".*_bf"]}`)
	waitFor(t, 30*time.Second, "the stop by a regular expression", r, func() bool { return len(ctrl.List()) == 0 })

	// Each committed signal row's insert is in Kafka once, as any
	// change of a published table, and the update too (on the
	// partitions of their keys: sorted). The last one's Write may
	// follow the stop it asked for.
	var ops []string
	waitFor(t, 30*time.Second, "the signal table's records", r, func() bool {
		ops = ops[:0]
		for _, rec := range sinktest.ReadCommitted(t, l.e.brokers, "t.public."+sig) {
			var v record
			if err := json.Unmarshal(rec.Value, &v); err != nil {
				t.Fatalf("record %q: %v", rec.Value, err)
			}
			rid, _ := v.After["id"].(string)
			ops = append(ops, v.Op+" "+rid)
		}
		return len(ops) >= 8
	})
	slices.Sort(ops)
	if want := []string{"insert ad-hoc-1", "insert ad-hoc-2", "insert ad-hoc-3", "insert ad-hoc-4", "insert ad-hoc-5", "insert ad-hoc-6", "insert ad-hoc-7", "update ad-hoc-2"}; !slices.Equal(ops, want) {
		t.Fatalf("the signal table's records: %q, want %q", ops, want)
	}
}
