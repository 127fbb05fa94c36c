package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafkasink/kafkasink"
)

// request asks ctrl for a backfill, within a bound.
func request(t *testing.T, ctrl *Backfills, table, where string) (BackfillStatus, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return ctrl.Request(ctx, BackfillRequest{Table: table, Where: where})
}

// startBF starts Run as the load's read-only role with a Backfills and
// signals, and waits until it streams.
func (l *bfLoad) startBF(t *testing.T, sink Sink) (*Backfills, *Monitor, *run) {
	t.Helper()
	cfg := l.config()
	ctrl, mon := &Backfills{}, &Monitor{}
	cfg.Backfills, cfg.Monitor, cfg.SignalPrefix = ctrl, mon, "kafkasink.signal"
	_, r := start(t, cfg, sink)
	waitFor(t, time.Minute, "streaming", r, func() bool { return mon.Stats().State == RunStreaming })
	return ctrl, mon, r
}

// Every bad request gets a *BackfillError naming what is wrong, and a
// malformed signal is noted in the Monitor; the stream goes on.
func TestBackfillBadInput(t *testing.T) {
	l := newBFLoad(t, 500, "")
	l.e.exec("CREATE TABLE " + l.table + "_out (id int PRIMARY KEY)")
	l.e.exec("CREATE TABLE " + l.table + "_nokey (id int)")
	l.e.exec("GRANT SELECT ON " + l.table + "_out, " + l.table + "_nokey TO " + l.role)
	l.e.exec("ALTER PUBLICATION " + l.e.name + " ADD TABLE " + l.table + "_nokey")
	gate := &gateSink{Sink: l.e.newSink(l.e.name), open: make(chan struct{})}
	ctrl, mon, r := l.startBF(t, gate)

	for _, c := range []struct {
		table, where, error string
		pg                  bool // the server's error is wrapped
	}{
		{table: "public.nosuch_" + l.e.name, error: "no such table"},
		{table: "a.b.c", error: "the table name does not parse"},
		{table: l.table + "_out", error: "not in publication"},
		{table: l.table + "_nokey", error: "has no primary key and no replica identity index"},
		{table: l.table, where: "nosuch > 1", error: "PostgreSQL refuses the condition", pg: true},
		{table: l.table, where: "seq > 'x'", error: "PostgreSQL refuses the condition", pg: true},
		{table: l.table, where: "true) OR (true", error: "closes a parenthesis"},
		{table: l.table, where: "true; SELECT 1", error: "semicolon"},
	} {
		_, err := request(t, ctrl, c.table, c.where)
		var be *BackfillError
		var pe *pgconn.PgError
		if !errors.As(err, &be) || !strings.Contains(err.Error(), c.error) || c.pg != errors.As(err, &pe) {
			t.Errorf("backfill of %s where %q: %v, want a *BackfillError saying %q (server error wrapped: %v)", c.table, c.where, err, c.error, c.pg)
		}
	}

	// A second backfill of a table while one runs: the first is
	// paused, while its first chunk's Write waits, so that it is still
	// there.
	first, err := request(t, ctrl, l.table, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := ctrl.Pause(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	close(gate.open)
	if _, err := request(t, ctrl, "public."+l.table, "seq > 1"); err == nil || !strings.Contains(err.Error(), "backfill "+first.ID+" of this table is still running") {
		t.Errorf("a second backfill of the table: %v, want it refused naming %s", err, first.ID)
	}
	if err := ctrl.Cancel(ctx, "nosuch"); !errors.Is(err, ErrBackfillNotFound) {
		t.Errorf("cancelling an unknown backfill: %v, want ErrBackfillNotFound", err)
	}
	if got := ctrl.List(); len(got) != 1 || !got[0].Paused || got[0].ID != first.ID {
		t.Errorf("List: %+v, want the paused backfill", got)
	}

	l.e.exec("SELECT pg_logical_emit_message(true, 'kafkasink.signal', '{\"type\":\"execute-snapshot\"')")
	l.e.exec("SELECT pg_logical_emit_message(true, 'kafkasink.signal', '{\"type\":\"execute-snapshot\",\"data\":{\"data-collections\":[\"public.nosuch\"]}}')")
	waitFor(t, 30*time.Second, "the refused signals in the Monitor", r, func() bool {
		return strings.Contains(mon.Stats().LastBackfillError, "no such table")
	})

	// The stream went on, and so does the paused backfill once resumed.
	l.e.exec("INSERT INTO " + l.table + " VALUES (1000, 1000, 'after', NULL)")
	if err := ctrl.Resume(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the backfill's end", r, func() bool { return len(ctrl.List()) == 0 })
	var recs []bfRecord
	waitFor(t, time.Minute, "the row inserted after the bad input", r, func() bool {
		recs = l.read(t)
		return slices.ContainsFunc(recs, func(r bfRecord) bool { return r.id == 1000 })
	})
	c := l.check(t, first.ID)
	if c.backfilled != 501 {
		t.Errorf("the resumed backfill delivered %d rows, want 501", c.backfilled)
	}

	// A role that may not read the table: a request is refused, and a
	// backfill accepted before stops at its next chunk; the stream goes
	// on.
	l.e.txn(func(tx pgx.Tx) {
		for _, sig := range []string{fmt.Sprintf(`{"type":"execute-snapshot","data":{"data-collections":["%s"]}}`, l.table), `{"type":"pause-snapshot"}`} {
			if _, err := tx.Exec(ctx, "SELECT pg_logical_emit_message(true, 'kafkasink.signal', $1)", sig); err != nil {
				t.Fatal(err)
			}
		}
	})
	waitFor(t, 30*time.Second, "the paused backfill", r, func() bool { return len(ctrl.List()) == 1 })
	l.e.exec("REVOKE SELECT ON " + l.table + " FROM " + l.role)
	if _, err := request(t, ctrl, l.table+"_out", ""); err == nil || !strings.Contains(err.Error(), "not in publication") {
		t.Errorf("a table outside the publication, not readable: %v", err)
	}
	l.e.exec("ALTER PUBLICATION " + l.e.name + " ADD TABLE " + l.table + "_out")
	l.e.exec("REVOKE SELECT ON " + l.table + "_out FROM " + l.role)
	if _, err := request(t, ctrl, l.table+"_out", ""); err == nil || !strings.Contains(err.Error(), "may not read the table") {
		t.Errorf("a table the role may not read: %v, want it refused saying so", err)
	}
	if err := ctrl.Resume(ctx, ctrl.List()[0].ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the backfill stopped by the error", r, func() bool {
		return len(ctrl.List()) == 0 && strings.Contains(mon.Stats().LastBackfillError, "permission denied")
	})
	l.e.exec("INSERT INTO " + l.table + " VALUES (1001, 1001, 'after', NULL)")
	waitFor(t, time.Minute, "the row inserted after the failed backfill", r, func() bool {
		return slices.ContainsFunc(l.read(t), func(r bfRecord) bool { return r.id == 1001 })
	})
}

// gateSink holds Writes of read events until open closes.
type gateSink struct {
	*kafkasink.Sink
	open chan struct{}
}

func (s *gateSink) Write(ctx context.Context, b kafkasink.Batch) error {
	if slices.ContainsFunc(b.Events, func(e kafkasink.Event) bool { return e.Op == kafkasink.OpRead }) {
		select {
		case <-s.open:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return s.Sink.Write(ctx, b)
}

// A backfill's condition applies inside the publication's row filter and
// column list: the records hold only published columns of published rows
// that match, and a condition on a column the publication leaves out is
// refused.
func TestBackfillSubset(t *testing.T) {
	requirePG(t, pgColumnLists, pgRowFilters)
	l := newBFLoad(t, 300, " (id, seq, note) WHERE (id % 2 = 0)")
	ctrl, _, r := l.startBF(t, l.e.newSink(l.e.name))
	if _, err := request(t, ctrl, l.table, "big IS NULL"); err == nil || !strings.Contains(err.Error(), `column "big" does not exist`) {
		t.Errorf("a condition on an unpublished column: %v, want it refused", err)
	}
	st, err := request(t, ctrl, l.table, "note LIKE 'n1%'")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the backfill's end", r, func() bool { return len(ctrl.List()) == 0 })
	// ids 1..300 whose note starts with n1 and that are even.
	var want []int64
	for id := int64(1); id <= 300; id++ {
		if id%2 == 0 && strings.HasPrefix(fmt.Sprint(id), "1") {
			want = append(want, id)
		}
	}
	var got []int64
	waitFor(t, time.Minute, "the backfill's records", r, func() bool {
		got = got[:0]
		for _, rec := range l.read(t) {
			if _, ok := rec.after["big"]; ok {
				t.Fatalf("record of id %d holds column big, which the publication leaves out", rec.id)
			}
			if rec.runID == st.ID {
				got = append(got, rec.id)
			}
		}
		return len(got) >= len(want)
	})
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("backfilled ids %v, want %v", got, want)
	}
}

// crashSink stops Run with a fatal error at the n-th chunk Write: before
// it (nothing of it written) or after it (written, Run never told).
type crashSink struct {
	*kafkasink.Sink
	chunk, at int
	after     bool
}

var errCrash = errors.New("test crash")

func (s *crashSink) Write(ctx context.Context, b kafkasink.Batch) error {
	if !slices.ContainsFunc(b.Events, func(e kafkasink.Event) bool { return e.Op == kafkasink.OpRead }) {
		return s.Sink.Write(ctx, b)
	}
	for _, e := range b.Events {
		if e.Op == kafkasink.OpRead && e.Source.Snapshot != kafkasink.SnapshotIncremental {
			return fmt.Errorf("backfill row at %s is marked %d, want SnapshotIncremental", e.Position, e.Source.Snapshot)
		}
	}
	s.chunk++
	if s.chunk == s.at && !s.after {
		return errCrash
	}
	if err := s.Sink.Write(ctx, b); err != nil {
		return err
	}
	if s.chunk == s.at {
		return errCrash
	}
	return nil
}

// A backfill interrupted at random chunks, before a chunk's Write (none
// of it written) and after it (written, Run never told), in turn, while
// the writer runs, resumes at its last chunk in the
// checkpoint: every row has at most one record of it, none is missing,
// no older state follows a newer one. In idempotent mode too: these
// interruptions fall between Writes, where its checkpoint is as exact as
// exactly-once mode's (inside a Write it may repeat a chunk, at least
// once).
func TestBackfillResumesAfterCrash(t *testing.T) {
	for _, mode := range []kafkasink.Mode{kafkasink.ExactlyOnce, kafkasink.Idempotent} {
		t.Run(mode.String(), func(t *testing.T) { resumesAfterCrash(t, mode) })
	}
}

// newModeSink starts a sink of mode on the real brokers, closed at the
// end.
func (l *bfLoad) newModeSink(t *testing.T, mode kafkasink.Mode) *kafkasink.Sink {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := kafkasink.New(ctx, kafkasink.Config{Brokers: l.e.brokers, SinkID: l.e.name, Mode: mode, Topics: kafkasink.Topics{Prefix: "t", Partitions: 3}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func resumesAfterCrash(t *testing.T, mode kafkasink.Mode) {
	const crashes = 10
	l := newBFLoad(t, 6000, "")
	stopW := make(chan struct{})
	waitW := l.writer(t, stopW)
	defer func() {
		select {
		case <-stopW:
		default:
			close(stopW)
			waitW()
		}
	}()
	var (
		id        string
		r         *run
		resumedAt = make([]int64, 0, crashes)
		shown     int64 // the rows List showed when the last run stopped
		chunkRows = int64(l.config().BackfillChunkRows)
	)
	for i := 0; ; i++ {
		s := &crashSink{Sink: l.newModeSink(t, mode), at: 1 + rand.IntN(4), after: i%2 == 1}
		if i == crashes {
			s.at = -1
		}
		// Where this run resumes: the checkpoint the sink read back.
		// List may be a chunk further on, as BackfillStatus says; the
		// check below holds it to that bound.
		ck, err := parseRunCursor(s.Checkpoint().Cursor)
		if err != nil {
			t.Fatal(err)
		}
		var ctrl *Backfills
		ctrl, _, r = l.startBF(t, s)
		if i == 0 {
			st, err := request(t, ctrl, l.table, "")
			if err != nil {
				t.Fatal(err)
			}
			id = st.ID
		} else {
			list := ctrl.List()
			if len(list) != 1 || list[0].ID != id || len(ck.Backfills) != 1 || ck.Backfills[0].ID != id {
				t.Fatalf("after crash %d: backfills %+v, in the checkpoint %+v, want %s resumed", i, list, ck.Backfills, id)
			}
			at := ck.Backfills[0].Rows
			if at > shown || at < shown-chunkRows {
				t.Errorf("after crash %d: resumed at row %d, List showed %d when the run stopped: want at most one chunk (%d rows) before it", i, at, shown, chunkRows)
			}
			resumedAt = append(resumedAt, at)
		}
		if i == crashes {
			waitFor(t, 3*time.Minute, "the backfill's end", r, func() bool { return len(ctrl.List()) == 0 })
			break
		}
		select {
		case <-r.done:
		case <-time.After(time.Minute):
			t.Fatalf("Run did not stop at chunk %d", s.at)
		}
		if !errors.Is(r.err, errCrash) {
			t.Fatalf("Run returned %v, want the crash", r.err)
		}
		if list := ctrl.List(); len(list) == 1 {
			shown = list[0].Rows
		}
	}
	c := l.settle(t, r, stopW, waitW, id)
	if !slices.IsSorted(resumedAt) || resumedAt[len(resumedAt)-1] == 0 {
		t.Errorf("the backfill resumed at rows %v: want them growing", resumedAt)
	}
	t.Logf("%d crashes; resumed at rows %v; %d records, %d rows of backfill %s, %d rows in the table, %d changes held ahead by a chunk, %d writer transactions",
		crashes, resumedAt, c.records, c.backfilled, id, c.rows, c.heldAhead, l.txns.Load())
}

// stopAfterSink stops Run with a fatal error right after the first Write
// whose cursor records a backfill: written, but the slot never told.
type stopAfterSink struct {
	*kafkasink.Sink
	stopped bool
}

func (s *stopAfterSink) Write(ctx context.Context, b kafkasink.Batch) error {
	if err := s.Sink.Write(ctx, b); err != nil || s.stopped {
		return err
	}
	if strings.Contains(string(b.Cursor), `"backfills"`) {
		s.stopped = true
		return errCrash
	}
	return nil
}

// Signals: one in a rolled-back transaction does nothing; a
// non-transactional one takes effect when the stream reaches it; data as
// a JSON string, as Debezium's signal table holds it; stop-snapshot; and
// a signal the server sends again after a restart is not taken twice.
func TestBackfillSignals(t *testing.T) {
	l := newBFLoad(t, 1000, "")
	signal := func(transactional bool, json string) {
		l.e.exec("SELECT pg_logical_emit_message($1, 'kafkasink.signal', $2)", transactional, json)
	}
	execute := fmt.Sprintf(`{"type":"execute-snapshot","data":"{\"data-collections\":[\"%s\"]}"}`, l.table)

	first := &stopAfterSink{Sink: l.e.newSink(l.e.name)}
	ctrl, _, r := l.startBF(t, first)
	l.e.txn(func(tx pgx.Tx) {
		tx.Exec(context.Background(), "SELECT pg_logical_emit_message(true, 'kafkasink.signal', $1)", execute)
		tx.Exec(context.Background(), "ROLLBACK")
	})
	signal(true, execute)
	select {
	case <-r.done:
	case <-time.After(time.Minute):
		t.Fatal("Run did not stop after the Write that recorded the backfill")
	}
	if !errors.Is(r.err, errCrash) {
		t.Fatalf("Run returned %v, want the test's stop", r.err)
	}
	if got := ctrl.List(); len(got) != 1 {
		t.Fatalf("after the signal: backfills %+v, want 1 (the rolled-back one does nothing)", got)
	}
	id := ctrl.List()[0].ID

	// The server sends the signal's transaction again: the checkpoint
	// says it was taken.
	gate := &gateSink{Sink: l.e.newSink(l.e.name), open: make(chan struct{})}
	ctrl, mon, r := l.startBF(t, gate)
	if got := ctrl.List(); len(got) != 1 || got[0].ID != id {
		t.Fatalf("after the restart: backfills %+v, want %s alone", got, id)
	}
	signal(false, `{"type":"pause-snapshot"}`)
	waitFor(t, 30*time.Second, "the non-transactional pause", r, func() bool {
		got := ctrl.List()
		return len(got) == 1 && got[0].Paused
	})
	close(gate.open)
	signal(true, `{"type":"resume-snapshot"}`)
	waitFor(t, time.Minute, "the backfill's end", r, func() bool { return len(ctrl.List()) == 0 })

	// stop-snapshot cancels a backfill of the tables it names. The
	// signals of one transaction take effect in order at its commit,
	// before any chunk: the second backfill is paused before it reads.
	l.e.txn(func(tx pgx.Tx) {
		tx.Exec(context.Background(), "SELECT pg_logical_emit_message(true, 'kafkasink.signal', $1)", execute)
		tx.Exec(context.Background(), `SELECT pg_logical_emit_message(true, 'kafkasink.signal', '{"type":"pause-snapshot"}')`)
	})
	waitFor(t, 30*time.Second, "a second backfill", r, func() bool { return len(ctrl.List()) == 1 })
	signal(true, fmt.Sprintf(`{"type":"stop-snapshot","data":{"data-collections":["%s"],"type":"INCREMENTAL"}}`, l.table))
	waitFor(t, 30*time.Second, "the stop", r, func() bool { return len(ctrl.List()) == 0 })
	// Without data-collections, stop-snapshot cancels every backfill.
	l.e.txn(func(tx pgx.Tx) {
		tx.Exec(context.Background(), "SELECT pg_logical_emit_message(true, 'kafkasink.signal', $1)", execute)
		tx.Exec(context.Background(), `SELECT pg_logical_emit_message(true, 'kafkasink.signal', '{"type":"pause-snapshot"}')`)
	})
	waitFor(t, 30*time.Second, "a third backfill", r, func() bool { return len(ctrl.List()) == 1 })
	signal(true, `{"type":"stop-snapshot"}`)
	waitFor(t, 30*time.Second, "the stop of every backfill", r, func() bool { return len(ctrl.List()) == 0 })

	if e := mon.Stats().LastBackfillError; e != "" {
		t.Errorf("Monitor: %s", e)
	}
	marker := l.nextID.Add(1)
	l.e.exec("INSERT INTO "+l.table+" VALUES ($1, $2, 'marker', NULL)", marker, l.seq.Add(1))
	waitFor(t, time.Minute, "the marker row in Kafka", r, func() bool {
		return slices.ContainsFunc(l.read(t), func(r bfRecord) bool { return r.id == marker })
	})
	c := l.check(t, id)
	if c.backfilled != 1000 || c.reads != 1000 {
		t.Fatalf("%d rows of backfill %s, %d read records in all; want 1000 and 1000", c.backfilled, id, c.reads)
	}
}
