package pgcdc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/debezium"
	"github.com/kafkasink/kafkasink/internal/sinktest"
	"github.com/kafkasink/kafkasink/pgcdc/internal/pgoutputmsg"
)

// TestEventSourceFields checks what Run tells the encoders about where
// each event comes from (Event.Source): the database, the snapshot's
// marks, transaction id and time on snapshot rows, including a table that
// fills its chunks exactly (its last row is known only by reading past
// it) and an empty last table (the run's last row is in the table before
// it), and the end of the previous commit on streamed changes.
func TestEventSourceFields(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	a, b, c := e.createTable("_a"), e.createTable("_b"), e.createTable("_c")
	e.fillTable(a, 4)
	e.fillTable(b, 1)

	var (
		mu     sync.Mutex
		events []kafkasink.Event
	)
	sink := &recSink{Sink: e.newSink(e.name), tr: newTracker(), after: func(_ int, bt *kafkasink.Batch) error {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, bt.Events...)
		return nil
	}}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(events) }
	cfg := e.config("public."+a, "public."+b, "public."+c)
	cfg.Snapshot = true
	cfg.SnapshotChunkRows = 2
	stop, r := start(t, cfg, sink)
	waitFor(t, 30*time.Second, "the 5 snapshot rows", r, func() bool { return count() >= 5 })
	e.exec("INSERT INTO " + c + " (id, seq) VALUES (1, 1)")
	e.txn(func(tx pgx.Tx) {
		for _, sql := range []string{"UPDATE " + a + " SET seq = 10 WHERE id = 1", "DELETE FROM " + b + " WHERE id = 1"} {
			if _, err := tx.Exec(t.Context(), sql); err != nil {
				t.Fatal(err)
			}
		}
	})
	waitFor(t, 30*time.Second, "the 3 changes", r, func() bool { return count() >= 8 })
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}

	var db string
	if err := e.db.QueryRow(t.Context(), "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]kafkasink.SnapshotMark{
		a + "/1": kafkasink.SnapshotFirst | kafkasink.SnapshotFirstInTable,
		a + "/2": 0, a + "/3": 0,
		a + "/4": kafkasink.SnapshotLastInTable,
		b + "/1": kafkasink.SnapshotFirstInTable | kafkasink.SnapshotLastInTable | kafkasink.SnapshotLast,
	}
	snap := events[0].Source
	if snap.SnapshotXID == 0 || snap.SnapshotTime.IsZero() || time.Since(snap.SnapshotTime) > time.Minute {
		t.Errorf("snapshot row: SnapshotXID %d, SnapshotTime %v: want the snapshot transaction's id and start time", snap.SnapshotXID, snap.SnapshotTime)
	}
	for i, ev := range events {
		if ev.Source.Database != db {
			t.Errorf("event %d (%s %s): Source.Database = %q, want %q", i, ev.Op, ev.Table, ev.Source.Database, db)
		}
		if ev.Op != kafkasink.OpRead {
			continue
		}
		id := fmt.Sprint(ev.After[0].Value)
		if m, ok := want[ev.Table+"/"+id]; !ok || ev.Source.Snapshot != m {
			t.Errorf("snapshot row %s id %s: Source.Snapshot = %04b, want %04b", ev.Table, id, ev.Source.Snapshot, m)
		}
		if ev.Source.SnapshotXID != snap.SnapshotXID || !ev.Source.SnapshotTime.Equal(snap.SnapshotTime) || ev.XID != 0 || !ev.Commit.IsZero() {
			t.Errorf("snapshot row %s id %s: Source %+v, XID %d, Commit %v: want the first row's snapshot id and time, and no XID or Commit", ev.Table, id, ev.Source, ev.XID, ev.Commit)
		}
	}
	changes := slices.DeleteFunc(slices.Clone(events), func(ev kafkasink.Event) bool { return ev.Op == kafkasink.OpRead })
	if len(changes) != 3 {
		t.Fatalf("got %d changes, want 3", len(changes))
	}
	// The first transaction of the connection has no previous commit,
	// unless the slot decoded another transaction of the database first
	// (a parallel test's: PostgreSQL 14's pgoutput sends empty ones),
	// whose commit ended before it; both changes of the second carry the
	// end of the first's commit record, which lies between its commit LSN
	// and their own LSNs.
	if got := changes[0].Source.PrevCommitEnd; got != 0 && got >= changes[0].LSN {
		t.Errorf("first streamed change at %s: PrevCommitEnd = %s, want 0 or the end of an earlier commit", changes[0].LSN, got)
	}
	end := changes[1].Source.PrevCommitEnd
	for _, ch := range changes[1:] {
		if ch.Source.PrevCommitEnd != end || end <= changes[0].Position.LSN || end > ch.LSN {
			t.Errorf("change %s of %s at %s: PrevCommitEnd = %s, want the same for the transaction, above %s (the previous commit) and at most its own LSN",
				ch.Op, ch.Table, ch.LSN, ch.Source.PrevCommitEnd, changes[0].Position.LSN)
		}
	}
}

// TestDecoderPrevCommitEnd: the events of a transaction carry the end of
// the previous transaction's commit record on the same connection; the
// first transaction, and the first after Reset, carry zero.
func TestDecoderPrevCommitEnd(t *testing.T) {
	t.Parallel()
	d, rec := newTestDecoder(t, DecoderConfig{})
	txn := func(start, commitLSN, end kafkasink.LSN) {
		feed(t, d,
			wal{start, pgoutputmsg.Begin(commitLSN, t0, 7)},
			wal{start, usersR},
			wal{start + 0x10, pgoutputmsg.Insert(0, 16384, pgoutputmsg.Text("1"), pgoutputmsg.Text("a"), pgoutputmsg.Text("1"))},
			wal{commitLSN, pgoutputmsg.Commit(commitLSN, end, t0)},
		)
	}
	txn(0x100, 0x500, 0x530)
	txn(0x600, 0x700, 0x730)
	if err := d.Reset(); err != nil {
		t.Fatal(err)
	}
	txn(0x800, 0x900, 0x930)
	var got []kafkasink.LSN
	for _, e := range rec.events {
		got = append(got, e.Source.PrevCommitEnd)
	}
	if want := []kafkasink.LSN{0, 0x530, 0}; !slices.Equal(got, want) {
		t.Errorf("PrevCommitEnd of the three transactions' events = %v, want %v", got, want)
	}
}

// endsBefore reports whether end, an LSN in decimal text, is below lsn.
func endsBefore(end string, lsn uint64) bool {
	n, err := strconv.ParseUint(end, 10, 64)
	return err == nil && n > 0 && n < lsn
}

// TestPrevCommitEndAcrossReconnects checks that the first transaction
// after a reconnect, and after a restart from the checkpoint, carries the
// end of the previous transaction's commit record in source.sequence[0]
// of its Debezium record, as Debezium does from the lsn_commit of its
// offsets, rather than null. The oracle is a second Run on a slot of its
// own that streams the same transactions without interruption: every
// record of the interrupted Run, read back from Kafka, must carry the
// sequence the uninterrupted one gave the same change, and the topic must
// hold the table's rows.
func TestPrevCommitEndAcrossReconnects(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	table := e.createTable("")
	oracleSlot := e.name + "_oracle"
	t.Cleanup(func() { sinktest.DropSlot(context.Background(), e.db, oracleSlot) })

	newSink := func(id, prefix string) *kafkasink.Sink {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s, err := kafkasink.New(ctx, kafkasink.Config{
			Brokers: e.brokers, SinkID: id,
			Topics:  kafkasink.Topics{Prefix: prefix, Partitions: 1},
			Encoder: debezium.Encoder{},
		})
		if err != nil {
			t.Fatalf("kafkasink.New: %v", err)
		}
		t.Cleanup(func() { s.Close(context.Background()) })
		return s
	}
	sink := newSink(e.name, "t")
	stop, r := start(t, e.config("public."+table), sink)
	waitFor(t, 20*time.Second, "the slot", r, func() bool { return e.confirmedFlush() != 0 })

	// The oracle: the same publication through its own slot.
	var (
		mu     sync.Mutex
		oracle = make(map[kafkasink.LSN]kafkasink.LSN) // change LSN -> PrevCommitEnd
	)
	ocfg := e.config()
	ocfg.Slot, ocfg.CreatePublication = oracleSlot, false
	osink := &recSink{Sink: newSink(oracleSlot, "oracle"), tr: newTracker(), after: func(_ int, b *kafkasink.Batch) error {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range b.Events {
			oracle[ev.LSN] = ev.Source.PrevCommitEnd
		}
		return nil
	}}
	_, or := start(t, ocfg, osink)
	waitFor(t, 20*time.Second, "the oracle's slot", or, func() bool {
		var n int
		e.mu.Lock()
		defer e.mu.Unlock()
		e.db.QueryRow(context.Background(), "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1 AND confirmed_flush_lsn IS NOT NULL", oracleSlot).Scan(&n)
		return n == 1
	})

	delivered := func(r *run, n int) {
		t.Helper()
		waitFor(t, 30*time.Second, fmt.Sprintf("%d records", n), r, func() bool {
			return len(sinktest.ReadCommitted(t, e.brokers, "t.public."+table)) >= n
		})
	}
	e.exec("INSERT INTO " + table + " (id, seq) VALUES (1, 1)")
	e.exec("INSERT INTO " + table + " (id, seq) VALUES (2, 2)")
	delivered(r, 2)
	// A reconnect: the walsender ends, Run connects again.
	e.exec("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1", e.name)
	e.exec("UPDATE " + table + " SET seq = 3 WHERE id = 1")
	delivered(r, 3)
	// A restart: a new Run and a new sink, from the checkpoint.
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	sink.Close(context.Background())
	e.exec("INSERT INTO " + table + " (id, seq) VALUES (3, 4)")
	_, r = start(t, e.config("public."+table), newSink(e.name, "t"))
	delivered(r, 4)
	waitFor(t, 30*time.Second, "the oracle's 4 changes", or, func() bool { mu.Lock(); defer mu.Unlock(); return len(oracle) >= 4 })

	recs := sinktest.ReadCommitted(t, e.brokers, "t.public."+table)
	if len(recs) != 4 {
		t.Fatalf("%d records, want 4", len(recs))
	}
	ids := make(map[float64]bool)
	mu.Lock()
	defer mu.Unlock()
	for i, rec := range recs {
		var v struct {
			After  map[string]any `json:"after"`
			Source struct {
				LSN      uint64 `json:"lsn"`
				Sequence string `json:"sequence"`
			} `json:"source"`
		}
		if err := json.Unmarshal(rec.Value, &v); err != nil {
			t.Fatal(err)
		}
		ids[v.After["id"].(float64)] = true
		var seq []*string
		if err := json.Unmarshal([]byte(v.Source.Sequence), &seq); err != nil || len(seq) != 2 {
			t.Fatalf("record %d: sequence %q is not a JSON array of two", i, v.Source.Sequence)
		}
		want, ok := oracle[kafkasink.LSN(v.Source.LSN)]
		if !ok {
			t.Fatalf("record %d: the oracle has no change at LSN %d", i, v.Source.LSN)
		}
		switch {
		case i == 0 && seq[0] != nil && !endsBefore(*seq[0], v.Source.LSN):
			// The first change after the slot was made: null, unless
			// the slot decoded another transaction of the database
			// first (a parallel test's), whose commit ended before it.
			t.Errorf("record 0, the first change after the slot was made: sequence[0] = %s, want null or the end of an earlier commit", *seq[0])
		case i > 0 && (seq[0] == nil || *seq[0] != strconv.FormatUint(uint64(want), 10)):
			got := "null"
			if seq[0] != nil {
				got = *seq[0]
			}
			t.Errorf("record %d: sequence[0] = %s, want %d (%s), the end of the previous commit", i, got, uint64(want), want)
		}
	}
	var rows int
	if err := e.db.QueryRow(t.Context(), "SELECT count(*) FROM "+table).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if len(ids) != rows {
		t.Errorf("the topic holds ids %v, the table %d rows", ids, rows)
	}
}
