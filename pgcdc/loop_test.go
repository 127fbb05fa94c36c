package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafkasink/kafkasink"
)

func TestStreamExactlyOnce(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	table := e.createTable("")
	tr := newTracker()
	sink := &recSink{Sink: e.newSink(e.name), tr: tr}
	_, done := start(t, e.config("public."+table), sink)
	slot := e.monitorSlot(done, tr)

	var m model
	var sq seqs
	e.txn(func(tx pgx.Tx) { insertRows(tx, t, table, &m, &sq, ids(1, 30)...) })
	e.txn(func(tx pgx.Tx) { updateRows(tx, t, table, &m, &sq, 3, 4, 5, 3) })
	for _, id := range []int64{7, 8, 9} {
		e.txn(func(tx pgx.Tx) { updateRows(tx, t, table, &m, &sq, id) })
	}
	e.txn(func(tx pgx.Tx) {
		deleteRows(tx, t, table, &m, 10, 11)
		insertRows(tx, t, table, &m, &sq, 10)
	})
	// A key change is a delete of the old key and an insert of the new.
	e.txn(func(tx pgx.Tx) {
		seq := sq.next()
		if _, err := tx.Exec(context.Background(), "UPDATE "+table+" SET id = 100, seq = $1 WHERE id = 12", seq); err != nil {
			t.Fatal(err)
		}
		m.add("delete", 12, -1)
		m.add("insert", 100, seq)
	})
	e.exec("TRUNCATE " + table)
	m.add("truncate", -1, -1)
	e.txn(func(tx pgx.Tx) { insertRows(tx, t, table, &m, &sq, ids(200, 210)...) })

	recs := e.checkDelivered(done, tr, table, m.all())
	waitFor(t, 10*time.Second, "the slot to confirm the last transaction", done, func() bool {
		return e.confirmedFlush() > tr.written().LSN
	})
	slot.check(t, recs)
}

func TestSplitTransaction(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	table := e.createTable("")
	tr := newTracker()
	var (
		mu      sync.Mutex
		sizes   []int
		retried bool
	)
	sink := &recSink{Sink: e.newSink(e.name), tr: tr,
		before: func(n int, b *kafkasink.Batch) error {
			mu.Lock()
			sizes = append(sizes, len(b.Events))
			mu.Unlock()
			// Slow Writes give the monitor time to see a
			// half-written transaction.
			time.Sleep(30 * time.Millisecond)
			return nil
		},
		after: func(n int, b *kafkasink.Batch) error {
			if n == 4 {
				// A Write whose success was lost: the loop writes
				// the same batch again and the sink skips it.
				retried = true
				return fmt.Errorf("injected lost response: %w", kafkasink.ErrTransactionTimeout)
			}
			return nil
		},
	}
	cfg := e.config("public." + table)
	cfg.BatchMaxEvents = 10
	// Heartbeats arrive while the transaction is half written; they must
	// not let the slot confirm past it.
	cfg.HeartbeatInterval = 20 * time.Millisecond
	_, done := start(t, cfg, sink)
	slot := e.monitorSlot(done, tr)

	var m model
	var sq seqs
	e.txn(func(tx pgx.Tx) { insertRows(tx, t, table, &m, &sq, ids(1, 95)...) })
	e.txn(func(tx pgx.Tx) { updateRows(tx, t, table, &m, &sq, ids(1, 5)...) })

	recs := e.checkDelivered(done, tr, table, m.all())
	waitFor(t, 10*time.Second, "the slot to confirm the last transaction", done, func() bool {
		return e.confirmedFlush() > tr.written().LSN
	})
	slot.check(t, recs)

	mu.Lock()
	defer mu.Unlock()
	if !retried {
		t.Fatal("the injected Write error never happened")
	}
	big := 0
	for _, n := range sizes {
		if n > cfg.BatchMaxEvents {
			t.Errorf("a Write of %d events; BatchMaxEvents is %d", n, cfg.BatchMaxEvents)
		}
		if n > 0 {
			big++
		}
	}
	if big < 10 {
		t.Errorf("%d Writes for 100 events in batches of at most 10, want at least 10 (sizes %v)", big, sizes)
	}
}

// TestConfirmedNeverPassesWritten runs a steady stream of small
// transactions into a slow sink, with heartbeats, and samples the slot all
// along: its confirmed position never passes an unwritten transaction.
func TestConfirmedNeverPassesWritten(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	table := e.createTable("")
	tr := newTracker()
	sink := &recSink{Sink: e.newSink(e.name), tr: tr,
		before: func(int, *kafkasink.Batch) error { time.Sleep(40 * time.Millisecond); return nil }}
	cfg := e.config("public." + table)
	cfg.HeartbeatInterval = 15 * time.Millisecond
	cfg.BatchMaxEvents = 7
	_, done := start(t, cfg, sink)
	slot := e.monitorSlot(done, tr)

	var m model
	var sq seqs
	for i := int64(1); i <= 60; i++ {
		e.txn(func(tx pgx.Tx) { insertRows(tx, t, table, &m, &sq, i) })
		if i%10 == 0 {
			e.txn(func(tx pgx.Tx) { updateRows(tx, t, table, &m, &sq, ids(i-9, i)...) })
		}
		time.Sleep(5 * time.Millisecond)
	}
	recs := e.checkDelivered(done, tr, table, m.all())
	slot.check(t, recs)
}

func TestReconnectAfterTerminate(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	table := e.createTable("")
	tr := newTracker()
	sink := &recSink{Sink: e.newSink(e.name), tr: tr,
		before: func(int, *kafkasink.Batch) error { time.Sleep(10 * time.Millisecond); return nil }}
	cfg := e.config("public." + table)
	cfg.BatchMaxEvents = 20
	_, done := start(t, cfg, sink)

	activePID := func() int32 {
		e.mu.Lock()
		defer e.mu.Unlock()
		var pid *int32
		if err := e.db.QueryRow(context.Background(), "SELECT active_pid FROM pg_replication_slots WHERE slot_name = $1", e.name).Scan(&pid); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		if pid == nil {
			return 0
		}
		return *pid
	}
	waitFor(t, 20*time.Second, "the walsender", done, func() bool { return activePID() != 0 })

	var m model
	var sq seqs
	e.txn(func(tx pgx.Tx) { insertRows(tx, t, table, &m, &sq, ids(1, 50)...) })
	waitFor(t, 20*time.Second, "the first transaction", done, func() bool { return tr.delivered() == m.len() })

	for round := range 3 {
		pid := activePID()
		// A big transaction is in flight (split into Writes) when the
		// walsender dies, and more commits while it is gone.
		e.txn(func(tx pgx.Tx) { updateRows(tx, t, table, &m, &sq, ids(1, 50)...) })
		time.Sleep(time.Duration(round*30) * time.Millisecond)
		e.exec("SELECT pg_terminate_backend($1)", pid)
		e.txn(func(tx pgx.Tx) { insertRows(tx, t, table, &m, &sq, ids(int64(100+10*round), int64(109+10*round))...) })
		waitFor(t, 20*time.Second, "a new walsender", done, func() bool { p := activePID(); return p != 0 && p != pid })
	}
	e.txn(func(tx pgx.Tx) { deleteRows(tx, t, table, &m, ids(1, 10)...) })

	e.checkDelivered(done, tr, table, m.all())
}

func TestCancelAndRestart(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	table := e.createTable("")
	tr := newTracker()
	cfg := e.config("public." + table)
	cfg.BatchMaxEvents = 8

	var (
		m       model
		sq      seqs
		stopDML = make(chan struct{})
		dmlDone = make(chan struct{})
	)
	stop1, done1 := start(t, cfg, &recSink{Sink: e.newSink(e.name), tr: tr})
	waitFor(t, 20*time.Second, "the slot", done1, func() bool { return e.confirmedFlush() != 0 })
	go func() {
		defer close(dmlDone)
		for i := int64(1); ; i++ {
			select {
			case <-stopDML:
				return
			default:
			}
			e.txn(func(tx pgx.Tx) {
				insertRows(tx, t, table, &m, &sq, 2*i, 2*i+1)
				if i > 3 {
					updateRows(tx, t, table, &m, &sq, 2*i-4)
				}
			})
			time.Sleep(3 * time.Millisecond)
		}
	}()

	time.Sleep(400 * time.Millisecond)
	if err := stop1(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run after cancel = %v, want context.Canceled", err)
	}
	time.Sleep(200 * time.Millisecond)
	_, done2 := start(t, cfg, &recSink{Sink: e.newSink(e.name), tr: tr})
	time.Sleep(400 * time.Millisecond)
	close(stopDML)
	<-dmlDone

	e.checkDelivered(done2, tr, table, m.all())
}

func TestHeartbeatAdvancesIdleSlot(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	table := e.createTable("")
	other := e.createTable("_other")
	tr := newTracker()
	cfg := e.config("public." + table)
	cfg.HeartbeatInterval = 100 * time.Millisecond
	_, done := start(t, cfg, &recSink{Sink: e.newSink(e.name), tr: tr})
	waitFor(t, 20*time.Second, "the slot", done, func() bool { return e.confirmedFlush() != 0 })

	// Changes to a table outside the publication produce WAL but no
	// events: without heartbeats nothing would confirm past them.
	for i := range 20 {
		e.exec("INSERT INTO "+other+" (id, seq) VALUES ($1, $2)", i, i)
	}
	target := e.queryLSN("SELECT pg_current_wal_lsn()::text")
	waitFor(t, 20*time.Second, fmt.Sprintf("confirmed_flush_lsn to pass %s", target), done, func() bool { return e.confirmedFlush() >= target })
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.writes != 0 {
		t.Fatalf("%d Writes with events for an idle publication", tr.writes)
	}
}

func TestMissingSlotOrPublicationRefused(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	table := e.createTable("")
	for _, tc := range []struct {
		name      string
		createPub bool
		want      string
	}{
		{"publication", false, "publication"},
		{"slot", true, "replication slot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := e.config("public." + table)
			cfg.CreatePublication, cfg.CreateSlot = tc.createPub, false
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := Run(ctx, cfg, e.newSink(e.name))
			var ce *kafkasink.ConfigError
			if !errors.As(err, &ce) || !kafkasink.IsFatal(err) || !containsAll(err.Error(), tc.want, "does not exist") {
				t.Fatalf("Run = %v, want a *kafkasink.ConfigError saying the %s does not exist", err, tc.want)
			}
		})
	}
}

// TestSpoolDirPerInstance plants the spool directories of the same
// source left by a killed process (lock file unlocked) and held by a live
// one (locked), and others': Run removes only the killed process's, spools
// in a locked directory of its own, and removes that when it returns.
func TestSpoolDirPerInstance(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	table := e.createTable("")
	cfg := e.config("public." + table)
	cfg.SpoolDir = t.TempDir()
	var id sourceIdentity
	e.mu.Lock()
	err := e.db.QueryRow(context.Background(), `SELECT system_identifier::text, (SELECT oid FROM pg_database WHERE datname = current_database())
		FROM pg_control_system()`).Scan(&id.SystemID, &id.DatabaseOID)
	e.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	id.Slot = e.name
	prefix := filepath.Join(cfg.SpoolDir, spoolDirPrefix(id))
	// plant makes a spool directory with a lock file and a spool file,
	// locked by the test when live.
	plant := func(dir string, live bool) string {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(filepath.Join(dir, spoolLockName))
		if err != nil {
			t.Fatal(err)
		}
		if live {
			if err := tryLock(f); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
		} else {
			f.Close()
		}
		if err := os.WriteFile(filepath.Join(dir, "kafkasink-pgcdc-xid1234-567890.spool"), []byte("spooled"), 0o600); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	abandoned := plant(prefix+".killed", false)
	kept := []string{
		plant(prefix+".live", true),
		plant(filepath.Join(cfg.SpoolDir, spoolDirPrefix(sourceIdentity{SystemID: id.SystemID, DatabaseOID: id.DatabaseOID + 1, Slot: id.Slot})+".killed"), false),
		plant(filepath.Join(cfg.SpoolDir, "kafkasink-pgcdc-"+e.name), false), // an earlier version's
	}

	stop, r := start(t, cfg, e.newSink(e.name))
	waitFor(t, 20*time.Second, "Run streaming", r, e.streaming)
	if _, err := os.Stat(abandoned); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the spool directory of a killed process is still there: %v", err)
	}
	for _, p := range kept {
		if _, err := os.Stat(filepath.Join(p, "kafkasink-pgcdc-xid1234-567890.spool")); err != nil {
			t.Errorf("%s: %v; only directories of the same source whose owner is gone may be removed", p, err)
		}
	}
	own, _ := filepath.Glob(prefix + ".*")
	own = slices.DeleteFunc(own, func(p string) bool { return p == kept[0] })
	if len(own) != 1 {
		t.Fatalf("spool directories of the source besides the live one: %v, want Run's own", own)
	}
	if f, err := os.OpenFile(filepath.Join(own[0], spoolLockName), os.O_RDWR, 0); err != nil {
		t.Errorf("Run's spool directory has no lock file: %v", err)
	} else {
		if tryLock(f) == nil {
			t.Errorf("Run's spool directory %s is not locked", own[0])
		}
		f.Close()
	}
	stop()
	if _, err := os.Stat(own[0]); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Run left its spool directory %s behind: %v", own[0], err)
	}
}

// A transaction the server streams (beyond logical_decoding_work_mem, set
// to its 64kB minimum for this test's connections) that needs more spool
// than SpoolMaxBytes stops Run with a *kafkasink.ConfigError naming it,
// before Run writes any of it.
func TestSpoolMaxBytesStopsRun(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	table := e.createTable("")
	cfg := e.config("public." + table)
	cfg.ConnString = streamingConnString(t, e)
	cfg.SpoolMaxBytes = 256 << 10
	tr := newTracker()
	sink := &recSink{Sink: e.newSink(e.name), tr: tr}
	_, done := start(t, cfg, sink)
	waitFor(t, 20*time.Second, "streaming", done, e.streaming)
	e.exec("INSERT INTO " + table + " (id, seq, note) SELECT g, g, repeat('x', 1000) FROM generate_series(1, 2000) g")
	select {
	case <-done.done:
		var ce *kafkasink.ConfigError
		if !errors.As(done.err, &ce) || !containsAll(done.err.Error(), "needs more spool than SpoolMaxBytes allows (262144 bytes") {
			t.Fatalf("Run = %v, want a *kafkasink.ConfigError saying the transaction passed SpoolMaxBytes", done.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not stop within 30s of a transaction larger than SpoolMaxBytes")
	}
	if w := tr.written(); !w.IsZero() {
		t.Errorf("Run wrote up to %s, want nothing of the transaction", w)
	}
}

// streamingConnString is the test's connection string with
// logical_decoding_work_mem at its 64kB minimum, so that the server streams
// every transaction larger than that while it is in progress.
func streamingConnString(t *testing.T, e *pgEnv) string {
	t.Helper()
	u, err := url.Parse(e.conn)
	if err != nil {
		t.Fatalf("KAFKASINK_TEST_PG must be a postgres:// URL here: %v", err)
	}
	// pgx reads "+" in a URL as itself, not as a space.
	u.RawQuery = strings.TrimPrefix(u.RawQuery+"&options=-c%20logical_decoding_work_mem%3D64kB", "&")
	return u.String()
}

// Monitor.Stats' SpoolBytes is what a transaction still in progress holds
// in the spool, and nothing once it committed.
func TestMonitorSpoolBytes(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	table := e.createTable("")
	cfg := e.config("public." + table)
	cfg.ConnString = streamingConnString(t, e)
	mon := &Monitor{}
	cfg.Monitor = mon
	_, done := start(t, cfg, e.newSink(e.name))
	waitFor(t, 20*time.Second, "streaming", done, e.streaming)

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, e.conn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "INSERT INTO "+table+" (id, seq, note) SELECT g, g, repeat('x', 1000) FROM generate_series(1, 1000) g"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the open transaction spooled", done, func() bool { return mon.Stats().SpoolBytes > 0 })
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the committed transaction written and its spool removed", done, func() bool {
		st := mon.Stats()
		return st.Events == 1000 && st.SpoolBytes == 0
	})
}
