package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafkasink/kafkasink"
)

// scenario follows one table's changes across several Runs of one sink id,
// each with a sink of its own, as restarts of a program would.
type scenario struct {
	t     *testing.T
	e     *pgEnv
	table string
	m     model
	sq    seqs
	tr    *tracker
	rows  map[int64]int64 // each row's seq, as the table holds it

	mu     sync.Mutex
	events []SourceEvent // what Config.OnSourceEvent received
}

func newScenario(t *testing.T) *scenario {
	e := newPGEnv(t)
	sc := &scenario{t: t, e: e, table: e.createTable(""), tr: newTracker(), rows: make(map[int64]int64)}
	sc.sq.n.Store(1000)
	return sc
}

func (sc *scenario) config() Config {
	cfg := sc.e.config("public." + sc.table)
	cfg.OnSourceEvent = func(ev SourceEvent) {
		sc.mu.Lock()
		defer sc.mu.Unlock()
		sc.events = append(sc.events, ev)
	}
	return cfg
}

// insert inserts rows in one transaction; the model records them when
// track is set, else they are only in the table (changes the stream is
// not expected to deliver).
func (sc *scenario) insert(track bool, ids ...int64) {
	sc.t.Helper()
	var scratch model
	sc.e.txn(func(tx pgx.Tx) {
		m := &scratch
		if track {
			m = &sc.m
		}
		before := m.len()
		insertRows(tx, sc.t, sc.table, m, &sc.sq, ids...)
		for _, c := range m.all()[before:] {
			sc.rows[c.id] = c.seq
		}
	})
}

// fill inserts rows that exist before the first Run, and expects them as
// snapshot reads.
func (sc *scenario) fill(ids ...int64) {
	sc.insert(false, ids...)
	sc.expectReads()
}

// expectReads adds a snapshot read of every row the table holds to the
// model.
func (sc *scenario) expectReads() {
	ids := make([]int64, 0, len(sc.rows))
	for id := range sc.rows {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		sc.m.add("read", id, sc.rows[id])
	}
}

// sink returns a new sink for the scenario's sink id that records in the
// tracker.
func (sc *scenario) sink() *recSink {
	return &recSink{Sink: sc.e.newSink(sc.e.name), tr: sc.tr}
}

// stream runs Run with cfg until everything the model holds is delivered,
// running during (once Run streams from the slot) before it waits, then stops it
// and returns its sink.
func (sc *scenario) stream(cfg Config, during func(r *run)) *recSink {
	sc.t.Helper()
	sink := sc.sink()
	stop, r := start(sc.t, cfg, sink)
	waitFor(sc.t, 20*time.Second, "Run streaming from the slot", r, sc.e.streaming)
	if during != nil {
		during(r)
	}
	waitFor(sc.t, 30*time.Second, "every change delivered", r, func() bool { return sc.tr.delivered() == sc.m.len() })
	if err := stop(); !errors.Is(err, context.Canceled) {
		sc.t.Fatalf("Run after cancel = %v, want context.Canceled", err)
	}
	return sink
}

// refused runs Run with cfg, which must return a *SourceError of kind
// at once, and returns it.
func (sc *scenario) refused(cfg Config, kind SourceEventKind) *SourceError {
	sc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := Run(ctx, cfg, sc.sink())
	var se *SourceError
	if !errors.As(err, &se) || se.Kind != kind {
		sc.t.Fatalf("Run = %v, want a *SourceError of kind %v", err, kind)
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if n := len(sc.events); n == 0 || sc.events[n-1].Kind != kind || sc.events[n-1].Err == nil {
		sc.t.Errorf("source events %+v, want a refused %v last", sc.events, kind)
	}
	return se
}

// checkTopic checks that the topic holds every change of the model
// exactly once, and nothing else.
func (sc *scenario) checkTopic() {
	sc.t.Helper()
	checkExactlyOnce(sc.t, sc.e.readTopic(sc.table), sc.m.all())
}

// dropSlot drops the slot once the walsender of a stopped Run let it go.
func (sc *scenario) dropSlot() {
	sc.t.Helper()
	sc.onInactiveSlot("SELECT pg_drop_replication_slot($1)")
}

// onInactiveSlot runs sql with the slot's name as $1, again while the
// slot is still active for the walsender of a stopped Run.
func (sc *scenario) onInactiveSlot(sql string) {
	sc.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		sc.e.mu.Lock()
		_, err := sc.e.db.Exec(context.Background(), sql, sc.e.name)
		sc.e.mu.Unlock()
		if err == nil {
			return
		}
		if !isPgCode(err, "55006") || time.Now().After(deadline) {
			sc.t.Fatalf("%s: %v", sql, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (sc *scenario) slotExists(name string) bool {
	sc.t.Helper()
	sc.e.mu.Lock()
	defer sc.e.mu.Unlock()
	var n int
	if err := sc.e.db.QueryRow(context.Background(), "SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1", name).Scan(&n); err != nil {
		sc.t.Fatal(err)
	}
	return n > 0
}

// crossGap runs Run with cfg, whose SlotGap says how to go across the
// gap of cause, as stream does, then checks the topic and the gap
// recorded; it returns the sink and the gap.
func (sc *scenario) crossGap(cfg Config, cause SourceEventKind, during func(*run)) (*recSink, gapRecord) {
	sc.t.Helper()
	sink := sc.stream(cfg, during)
	sc.checkTopic()
	return sink, sc.checkGap(sink, cause, cfg.SlotGap)
}

// checkGap checks that the checkpoint's cursor ends with the record of a
// gap of cause and action, and that an event reported it.
func (sc *scenario) checkGap(sink Sink, cause SourceEventKind, action SlotGap) gapRecord {
	sc.t.Helper()
	c, err := parseRunCursor(sink.Checkpoint().Cursor)
	if err != nil {
		sc.t.Fatal(err)
	}
	if len(c.Gaps) == 0 {
		sc.t.Fatalf("checkpoint cursor %s records no gap", sink.Checkpoint().Cursor)
	}
	g := c.Gaps[len(c.Gaps)-1]
	if g.Cause != cause.String() || g.Action != action.String() || g.From == 0 || g.To <= g.From || g.Bytes != int64(g.To-g.From) {
		sc.t.Errorf("gap record %+v, want cause %v, action %v, From < To", g, cause, action)
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	found := false
	for _, ev := range sc.events {
		found = found || ev.Kind == cause && ev.Action == action && ev.Err == nil && ev.To == kafkasink.LSN(g.To)
	}
	if !found {
		sc.t.Errorf("no source event reported the %v gap gone across with %v: %+v", cause, action, sc.events)
	}
	return g
}

// TestSlotDroppedWhileStopped drops the slot while Run is stopped, with
// changes before and after the drop, and starts Run again with each
// Config.SlotGap: refuse stops before creating a slot or writing anything;
// resnapshot reads every row again from the new slot's snapshot, accept
// streams on; both record the gap in the checkpoint.
func TestSlotDroppedWhileStopped(t *testing.T) {
	t.Parallel()
	for _, snapshot := range []bool{false, true} {
		for _, gap := range []SlotGap{SlotGapRefuse, SlotGapResnapshot, SlotGapAccept} {
			t.Run(fmt.Sprintf("snapshot=%v/%v", snapshot, gap), func(t *testing.T) {
				t.Parallel()
				sc := newScenario(t)
				cfg := sc.config()
				cfg.Snapshot = snapshot
				if snapshot {
					sc.fill(101, 102)
				}
				first := sc.stream(cfg, func(*run) { sc.insert(true, 1, 2, 3) })
				ck := first.Checkpoint().Position

				sc.insert(false, 4)
				sc.insert(false, 5)
				sc.dropSlot()
				sc.insert(false, 6)
				cfg.SlotGap = gap
				if gap == SlotGapRefuse {
					err := sc.refused(cfg, SourceSlotMissing)
					if !containsAll(err.Error(), sc.e.name, ck.String(), "bytes of WAL", "-slot-gap=resnapshot", "-slot-gap=accept", "SlotGapAccept") || err.Bytes <= 0 {
						t.Errorf("refusal %q (%d bytes) does not name the slot, the checkpoint, the WAL bytes and the ways out", err, err.Bytes)
					}
					if sc.slotExists(sc.e.name) {
						t.Errorf("a refused Run left slot %s behind", sc.e.name)
					}
					sc.checkTopic()
					return
				}
				_, g := sc.crossGap(cfg, SourceSlotMissing, func(*run) {
					if gap == SlotGapResnapshot || snapshot {
						// Read from the new slot's snapshot.
						sc.expectReads()
					}
					sc.insert(true, 7)
				})
				if kafkasink.LSN(g.From) < ck.LSN {
					t.Errorf("gap from %s, before the checkpoint %s", kafkasink.LSN(g.From), ck)
				}
			})
		}
	}
}

// TestSlotLostWhileStreaming drops the slot under a running Run: it stops
// with ErrSlotLost, reports it, and writes nothing after the drop.
func TestSlotLostWhileStreaming(t *testing.T) {
	t.Parallel()
	sc := newScenario(t)
	cfg := sc.config()
	cfg.SlotGap = SlotGapAccept // applies at start-up only
	cfg.ReconnectBackoff, cfg.ReconnectMax = 2*time.Second, 2*time.Second
	_, r := start(t, cfg, sc.sink())
	waitFor(t, 20*time.Second, "the slot", r, func() bool { return sc.e.confirmedFlush() != 0 })
	sc.insert(true, 1, 2, 3)
	waitFor(t, 20*time.Second, "every change delivered", r, func() bool { return sc.tr.delivered() == sc.m.len() })

	sc.e.exec("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1", sc.e.name)
	sc.dropSlot()
	sc.insert(false, 4)
	select {
	case <-r.done:
	case <-time.After(20 * time.Second):
		t.Fatal("Run went on without its slot")
	}
	if !errors.Is(r.err, ErrSlotLost) {
		t.Fatalf("Run = %v, want ErrSlotLost", r.err)
	}
	sc.mu.Lock()
	if n := len(sc.events); n == 0 || sc.events[n-1].Kind != SourceSlotLost || !errors.Is(sc.events[n-1].Err, ErrSlotLost) {
		t.Errorf("source events %+v, want SourceSlotLost with its error last", sc.events)
	}
	sc.mu.Unlock()
	if sc.slotExists(sc.e.name) {
		t.Error("Run created the slot again while streaming")
	}
	sc.checkTopic()
}

// TestSlotAdvancedWhileStopped moves the slot with
// pg_replication_slot_advance while Run is stopped. A restart after idle
// confirmations (heartbeats beyond the last Write) goes on; one after the
// advance is refused before anything is written, and goes on across the
// recorded gap with SlotGapAccept.
func TestSlotAdvancedWhileStopped(t *testing.T) {
	t.Parallel()
	sc := newScenario(t)
	other := sc.e.createTable("_other")
	cfg := sc.config()
	cfg.HeartbeatInterval = 50 * time.Millisecond
	sc.stream(cfg, func(r *run) {
		sc.insert(true, 1, 2)
		waitFor(t, 20*time.Second, "the first rows", r, func() bool { return sc.tr.delivered() == sc.m.len() })
		// WAL without events: only idle confirmations move the slot
		// past it.
		sc.e.exec("INSERT INTO " + other + " (id, seq) VALUES (1, 1)")
		target := sc.e.queryLSN("SELECT pg_current_wal_lsn()::text")
		waitFor(t, 20*time.Second, "an idle confirmation", r, func() bool { return sc.e.confirmedFlush() >= target })
	})
	if sc.e.confirmedFlush() <= sc.tr.written().LSN {
		t.Fatalf("the slot (%s) was not confirmed beyond the last written event (%s): the restart below proves nothing", sc.e.confirmedFlush(), sc.tr.written())
	}
	// A restart after idle confirmations is not a gap.
	sc.stream(cfg, func(*run) { sc.insert(true, 3) })

	sc.insert(false, 4)
	sc.onInactiveSlot("SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())")
	sc.insert(true, 5) // after the advance: still in the slot
	err := sc.refused(cfg, SourceSlotAdvanced)
	if !containsAll(err.Error(), sc.e.name, "pg_replication_slot_advance", "bytes of WAL", "-slot-gap=accept") || err.Bytes <= 0 || err.To != sc.e.confirmedFlush() {
		t.Errorf("refusal %q (%d bytes, to %s) does not name the slot, the positions and the ways out", err, err.Bytes, err.To)
	}
	got := sc.e.readTopic(sc.table)
	checkExactlyOnce(t, got, sc.m.all()[:3]) // row 5 is not written yet

	cfg.SlotGap = SlotGapAccept
	sc.crossGap(cfg, SourceSlotAdvanced, func(*run) { sc.insert(true, 6) })
}

// TestSlotNameChangedRefused points Run at another slot with a checkpoint
// of the first: refused for the identity, before the new slot exists. A
// checkpoint without identity (an earlier version's) is refused as a slot
// missing.
func TestSlotNameChangedRefused(t *testing.T) {
	t.Parallel()
	sc := newScenario(t)
	cfg := sc.config()
	sc.stream(cfg, func(*run) { sc.insert(true, 1, 2, 3) })
	renamed := cfg
	renamed.Slot = sc.e.name + "_b"
	t.Cleanup(func() {
		sc.e.exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", renamed.Slot)
	})
	err := sc.refused(renamed, SourceIdentityMismatch)
	if !containsAll(err.Error(), fmt.Sprintf("slot %q, now %q", cfg.Slot, renamed.Slot), "-sink-id", "tombstone") {
		t.Errorf("refusal %q does not say what differs and how to proceed", err)
	}
	if sc.slotExists(renamed.Slot) {
		t.Errorf("a refused Run created slot %s", renamed.Slot)
	}

	// The same with a checkpoint as an earlier version wrote it: a
	// snapshot cursor, no identity.
	old := sc.e.newSink(sc.e.name + "_old")
	if err := old.Write(context.Background(), kafkasink.Batch{Cursor: []byte(`{"snapshot":"r","lsn":"0/1","done_tables":[],"done":true}`)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var se *SourceError
	if err := Run(ctx, renamed, old); !errors.As(err, &se) || se.Kind != SourceSlotMissing {
		t.Fatalf("Run with an earlier version's checkpoint on a new slot = %v, want a slot_missing *SourceError", err)
	}
	if sc.slotExists(renamed.Slot) {
		t.Errorf("a refused Run created slot %s", renamed.Slot)
	}
	sc.checkTopic()
}

// TestCheckpointOfAnotherSourceRefused gives Run a checkpoint written for
// another system, and one written from another database of the server.
func TestCheckpointOfAnotherSourceRefused(t *testing.T) {
	t.Parallel()
	sc := newScenario(t)
	cfg := sc.config()
	first := sc.stream(cfg, func(*run) { sc.insert(true, 1, 2, 3) })
	c, err := parseRunCursor(first.Checkpoint().Cursor)
	if err != nil || c.Source == nil {
		t.Fatalf("the checkpoint records no source: %s (%v)", first.Checkpoint().Cursor, err)
	}
	if c.Source.Slot != sc.e.name || c.Source.Database == "" || c.Source.DatabaseOID == 0 || c.Source.SystemID == "" || c.Source.Timeline == 0 {
		t.Fatalf("recorded source %+v", *c.Source)
	}

	t.Run("database", func(t *testing.T) {
		db2 := sc.e.name + "_db2"
		sc.e.exec("CREATE DATABASE " + db2)
		t.Cleanup(func() { sc.e.exec("DROP DATABASE IF EXISTS " + db2 + " WITH (FORCE)") })
		u, err := url.Parse(sc.e.conn)
		if err != nil {
			t.Fatal(err)
		}
		u.Path = "/" + db2
		conn2, err := pgx.Connect(context.Background(), u.String())
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn2.Exec(context.Background(), "CREATE TABLE "+sc.table+" (id int PRIMARY KEY, seq bigint NOT NULL, note text)")
		conn2.Close(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		// Another slot too: a slot of the first database would be
		// refused by name before the identity is compared.
		cfg2 := cfg
		cfg2.ConnString, cfg2.Slot = u.String(), db2
		t.Cleanup(func() {
			sc.e.exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", db2)
		})
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		var se *SourceError
		if err := Run(ctx, cfg2, sc.sink()); !errors.As(err, &se) || se.Kind != SourceIdentityMismatch ||
			!strings.Contains(err.Error(), fmt.Sprintf("database %q (oid %d), now %q", c.Source.Database, c.Source.DatabaseOID, db2)) {
			t.Fatalf("Run = %v, want an identity_mismatch *SourceError naming the databases", err)
		}
	})
	t.Run("system", func(t *testing.T) {
		sink := sc.sink()
		forged := c
		forged.Source = new(*c.Source)
		forged.Source.SystemID = "1"
		raw, _ := forged.marshal()
		if err := sink.Write(context.Background(), kafkasink.Batch{Cursor: raw}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		var se *SourceError
		if err := Run(ctx, cfg, sink); !errors.As(err, &se) || se.Kind != SourceIdentityMismatch ||
			!strings.Contains(err.Error(), fmt.Sprintf("system identifier 1, now %s", c.Source.SystemID)) {
			t.Fatalf("Run = %v, want an identity_mismatch *SourceError naming the system identifiers", err)
		}
	})

	sc.checkTopic()
}

// TestOldCheckpointAdopted resumes from a checkpoint an earlier version
// wrote (a snapshot cursor, no identity) on an existing slot: Run goes on
// and records the source and what it confirmed, keeping the snapshot's
// fields.
func TestOldCheckpointAdopted(t *testing.T) {
	t.Parallel()
	sc := newScenario(t)
	sc.e.exec("CREATE PUBLICATION " + sc.e.name + " FOR TABLE " + sc.table)
	sc.e.exec("SELECT pg_create_logical_replication_slot($1, 'pgoutput')", sc.e.name)
	old := sc.sink()
	if err := old.Write(context.Background(), kafkasink.Batch{Cursor: []byte(`{"snapshot":"r","lsn":"0/1","done_tables":["public.x"],"done":true}`)}); err != nil {
		t.Fatal(err)
	}
	old.Close(context.Background())
	sink := sc.stream(sc.config(), func(*run) { sc.insert(true, 1, 2, 3) })
	sc.checkTopic()
	c, err := parseRunCursor(sink.Checkpoint().Cursor)
	if err != nil || c.Source == nil || c.Source.Slot != sc.e.name || c.Confirmed == 0 || c.snapshot == nil || c.snapshot.Snapshot != "r" {
		t.Fatalf("cursor after adoption %s (%v): want the source, the confirmed position and the old snapshot run", sink.Checkpoint().Cursor, err)
	}
}

// invalidateSlot makes the server invalidate the test's slot, and only
// it, on a server other tests share. The slot must be stopped. It moves
// WAL on (a row, pg_switch_wal and a checkpoint, after which active slots
// move on; one segment a round, ten rounds at most) until our slot
// retains two segments more than any other, sets max_slot_wal_keep_size
// between the two, and checkpoints until ours is lost. When another slot
// stays as old as ours (a stopped one), the test is skipped, before any
// WAL is moved when that slot is stopped: it would be invalidated too. The setting is reset at once, and again
// in cleanup.
func (sc *scenario) invalidateSlot(scratch string) {
	t := sc.t
	reset := func() { sc.e.exec("ALTER SYSTEM RESET max_slot_wal_keep_size"); sc.e.exec("SELECT pg_reload_conf()") }
	t.Cleanup(reset)
	const segment = 16 << 20
	// retained returns what our slot retains, and the most any other
	// slot retains (an inactive one among them: oldest).
	retained := func() (mine, others int64, oldest string) {
		sc.e.mu.Lock()
		defer sc.e.mu.Unlock()
		rows, err := sc.e.db.Query(context.Background(), `SELECT slot_name, (pg_current_wal_lsn() - restart_lsn)::bigint
			FROM pg_replication_slots WHERE restart_lsn IS NOT NULL ORDER BY 2`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			var n int64
			if err := rows.Scan(&name, &n); err != nil {
				t.Fatal(err)
			}
			if name == sc.e.name {
				mine = n
			} else {
				others, oldest = n, name
			}
		}
		return mine, others, oldest
	}
	moveWAL := func() {
		sc.e.exec("INSERT INTO " + scratch + " (id, seq) VALUES ((SELECT coalesce(max(id), 0) + 1 FROM " + scratch + "), 0)")
		sc.e.exec("SELECT pg_switch_wal()")
	}
	// A stopped slot older than ours would be invalidated too, and moving
	// WAL on only makes it hold more: give one a moment to start again
	// (another test between two Runs), then leave.
	for wait := 0; ; wait++ {
		var stopped string
		sc.e.mu.Lock()
		err := sc.e.db.QueryRow(context.Background(), `SELECT coalesce(min(o.slot_name), '') FROM pg_replication_slots o, pg_replication_slots m
			WHERE m.slot_name = $1 AND o.slot_name <> $1 AND NOT o.active AND o.restart_lsn <= m.restart_lsn`, sc.e.name).Scan(&stopped)
		sc.e.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if stopped == "" {
			break
		}
		if wait == 30 {
			t.Skipf("slot %q of the shared server is stopped and older than this test's slot: invalidating ours would invalidate it too", stopped)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for round := 0; ; round++ {
		mine, others, oldest := retained()
		limit := (others+segment-1)/segment*16 + 16 // MB: a segment above every other slot
		if mine>>20 > limit+2*16 {
			sc.e.exec(fmt.Sprintf("ALTER SYSTEM SET max_slot_wal_keep_size = '%dMB'", limit))
			sc.e.exec("SELECT pg_reload_conf()")
			break
		}
		if round == 10 {
			t.Skipf("slot %q of the shared server retains %d MB, too close to this test's slot (%d MB) after %d segments of WAL: invalidating ours would invalidate it too", oldest, others>>20, mine>>20, round)
		}
		moveWAL()
		sc.e.exec("CHECKPOINT") // logs running transactions: active slots move on
	}
	defer reset()
	for range 50 {
		sc.e.exec("CHECKPOINT")
		var status *string
		sc.e.mu.Lock()
		err := sc.e.db.QueryRow(context.Background(), "SELECT wal_status FROM pg_replication_slots WHERE slot_name = $1", sc.e.name).Scan(&status)
		sc.e.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if status != nil && *status == "lost" {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the slot's wal_status never became lost")
}

// TestSlotInvalidatedWhileStopped has the server invalidate the slot
// (max_slot_wal_keep_size) while Run is stopped: Run refuses, naming the
// cause, before anything is written; with SlotGapAccept it drops the
// invalidated slot, creates it again and streams on across the recorded
// gap.
func TestSlotInvalidatedWhileStopped(t *testing.T) {
	t.Parallel()
	sc := newScenario(t)
	scratch := sc.e.createTable("_scratch")
	cfg := sc.config()
	sc.stream(cfg, func(*run) { sc.insert(true, 1, 2, 3) })
	sc.insert(false, 4)
	sc.invalidateSlot(scratch)

	err := sc.refused(cfg, SourceSlotInvalidated)
	if !containsAll(err.Error(), sc.e.name, "wal_status = 'lost'", "max_slot_wal_keep_size", "-slot-gap=accept") {
		t.Errorf("refusal %q does not name the slot, the cause and the ways out", err)
	}
	sc.checkTopic()

	cfg.SlotGap = SlotGapAccept
	sc.crossGap(cfg, SourceSlotInvalidated, func(*run) { sc.insert(true, 5) })
}

// TestRetainedWALReported has Run measure the WAL its slot retains and
// report it above Config.RetainedWALWarn.
func TestRetainedWALReported(t *testing.T) {
	t.Parallel()
	sc := newScenario(t)
	cfg := sc.config()
	cfg.HeartbeatInterval = 50 * time.Millisecond
	cfg.RetainedWALWarn = 1
	_, r := start(t, cfg, sc.sink())
	waitFor(t, 20*time.Second, "Run streaming from the slot", r, sc.e.streaming)
	sc.insert(true, 1)
	waitFor(t, 20*time.Second, "a wal_retained event", r, func() bool {
		sc.mu.Lock()
		defer sc.mu.Unlock()
		for _, ev := range sc.events {
			if ev.Kind == SourceWALRetained && ev.Bytes > 0 && ev.From != 0 && ev.To >= ev.From && ev.Bytes == int64(ev.To-ev.From) {
				return true
			}
		}
		return false
	})
}

// TestGapResnapshotResumes interrupts the re-snapshot of a gap and starts
// Run again with the default SlotGap and Snapshot off: the recorded run is
// finished all the same, from the chunk after its cursor.
func TestGapResnapshotResumes(t *testing.T) {
	t.Parallel()
	sc := newScenario(t)
	cfg := sc.config()
	sc.stream(cfg, func(*run) { sc.insert(true, 1, 2, 3) })
	sc.insert(false, ids(4, 60)...)
	sc.dropSlot()

	gapCfg := cfg
	gapCfg.SlotGap = SlotGapResnapshot
	gapCfg.SnapshotChunkRows = 10
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	chunks := 0
	sink := &recSink{Sink: sc.e.newSink(sc.e.name), tr: sc.tr, after: func(_ int, b *kafkasink.Batch) error {
		if len(b.Events) > 0 {
			if chunks++; chunks == 2 {
				cancel()
			}
		}
		return nil
	}}
	if err := Run(ctx, gapCfg, sink); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted re-snapshot: Run = %v, want context.Canceled", err)
	}
	cur, ok := parseCursor(sink.Checkpoint().Cursor)
	if !ok || cur.Done || len(cur.LastKey) != 1 || cur.LastKey[0] != "20" {
		t.Fatalf("checkpoint cursor after the interruption %s, want the re-snapshot at key 20", sink.Checkpoint().Cursor)
	}
	sc.checkGap(sink, SourceSlotMissing, SlotGapResnapshot)

	sc.expectReads()
	cfg.SnapshotChunkRows = 10
	sc.stream(cfg, func(*run) { sc.insert(true, 100) })
	sc.checkTopic()
}

// TestSlotAdvancedResnapshot goes across a slot moved out of band with
// SlotGapResnapshot: the slot exists, so the tables are read as they are
// now, then the stream goes on from the slot.
func TestSlotAdvancedResnapshot(t *testing.T) {
	t.Parallel()
	sc := newScenario(t)
	cfg := sc.config()
	sc.stream(cfg, func(*run) { sc.insert(true, 1, 2, 3) })
	sc.insert(false, 4)
	sc.onInactiveSlot("SELECT pg_replication_slot_advance($1, pg_current_wal_lsn())")
	cfg.SlotGap = SlotGapResnapshot
	sc.expectReads()
	sink, _ := sc.crossGap(cfg, SourceSlotAdvanced, func(*run) { sc.insert(true, 5) })
	if cur, ok := parseCursor(sink.Checkpoint().Cursor); !ok || !cur.Done {
		t.Errorf("checkpoint cursor %s, want a finished snapshot run", sink.Checkpoint().Cursor)
	}
}
