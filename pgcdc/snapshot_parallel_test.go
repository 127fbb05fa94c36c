package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafkasink/kafkasink"
)

// snapshotEvents collects the events of a recSink's successful Writes.
type snapshotEvents struct {
	mu     sync.Mutex
	events []kafkasink.Event
	writes int // Writes with snapshot rows
}

func (c *snapshotEvents) after(_ int, b *kafkasink.Batch) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, b.Events...)
	if len(b.Events) > 0 && b.Events[0].Op == kafkasink.OpRead {
		c.writes++
	}
	return nil
}

func (c *snapshotEvents) reads() []kafkasink.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(c.events), func(e kafkasink.Event) bool { return e.Op != kafkasink.OpRead })
}

// checkMarks checks the snapshot marks of a run's rows, in the order they
// were written: SnapshotFirst on the first, SnapshotLast on the last, and
// each table's first and last written row marked in table.
func checkMarks(t *testing.T, reads []kafkasink.Event) {
	t.Helper()
	firsts, lasts := map[string]int{}, map[string]int{}
	for i, ev := range reads {
		name := ev.Schema + "." + ev.Table
		m := ev.Source.Snapshot
		if (m&kafkasink.SnapshotFirst != 0) != (i == 0) || (m&kafkasink.SnapshotLast != 0) != (i == len(reads)-1) {
			t.Errorf("row %d of %d (%s) has marks %v", i, len(reads), name, m)
		}
		if m&kafkasink.SnapshotFirstInTable != 0 {
			if _, dup := firsts[name]; dup {
				t.Errorf("%s has two rows marked first in table", name)
			}
			firsts[name] = i
		}
		if m&kafkasink.SnapshotLastInTable != 0 {
			if _, dup := lasts[name]; dup {
				t.Errorf("%s has two rows marked last in table", name)
			}
			lasts[name] = i
		}
	}
	for i, ev := range reads {
		name := ev.Schema + "." + ev.Table
		f, okF := firsts[name]
		l, okL := lasts[name]
		if !okF || !okL || i < f || i > l {
			t.Fatalf("row %d of %s is outside its table's first (%d, %v) and last (%d, %v) marked rows", i, name, f, okF, l, okL)
		}
		if ev.Position.Index != uint64(i) {
			t.Fatalf("row %d written has Position.Index %d: want the rows numbered in the order written", i, ev.Position.Index)
		}
	}
}

// TestParallelSnapshot reads three tables (one of them empty) with three
// workers in ranges: every row once, in order of position, marked, the
// changes made after the slot's consistent point streamed after them,
// and a finished cursor with no range left.
func TestParallelSnapshot(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	a, b, c := e.createTable("_a"), e.createTable("_b"), e.createTable("_c")
	e.fillTable(a, 1000)
	e.fillTable(b, 333)
	var (
		m  model
		sq seqs
	)
	sq.n.Store(10000)
	for _, ch := range reads(1, 1000) {
		m.add(ch.op, ch.id, ch.seq)
	}
	col := &snapshotEvents{}
	var once sync.Once
	sink := &recSink{Sink: e.newSink(e.name), tr: newTracker(), after: col.after,
		before: func(n int, bt *kafkasink.Batch) error {
			if n == 1 && len(bt.Events) == 0 {
				// The run is recorded, the workers not yet reading:
				// these changes come from the slot, not the snapshot.
				once.Do(func() {
					e.txn(func(tx pgx.Tx) {
						updateRows(tx, t, a, &m, &sq, 5, 500, 1000)
						deleteRows(tx, t, a, &m, 7)
						insertRows(tx, t, a, &m, &sq, 5000)
					})
				})
			}
			return nil
		}}
	cfg := e.config("public."+a, "public."+b, "public."+c)
	cfg.Snapshot = true
	cfg.SnapshotChunkRows = 40
	cfg.SnapshotWorkers = 3
	_, r := start(t, cfg, sink)
	waitFor(t, 30*time.Second, "every row and change", r, func() bool { return sink.tr.delivered() == m.len()+333 })
	checkExactlyOnce(t, e.readTopic(a), m.all())
	checkRunIDs(t, e.readTopic(b))
	reads := col.reads()
	checkMarks(t, reads)
	if n := len(e.readTopic(b)); n != 333 {
		t.Errorf("table b: %d records, want 333", n)
	}
	col.mu.Lock()
	writes := col.writes
	col.mu.Unlock()
	// 1000 rows of 40 in up to 12 ranges: more chunks than 25, each
	// range ending in a partial one.
	if writes < 1000/40+333/40 {
		t.Errorf("%d snapshot chunks, want at least %d", writes, 1000/40+333/40)
	}
	cur, ok := parseCursor(sink.Checkpoint().Cursor)
	if !ok || !cur.Done || len(cur.Ranges) != 0 || len(cur.DoneTables) != 3 {
		t.Errorf("checkpoint cursor %s: want a finished snapshot of 3 tables, no range left", sink.Checkpoint().Cursor)
	}
}

// TestParallelSnapshotResumesAfterCrash crashes a parallel snapshot after
// some chunks, changes rows already read and rows not, and resumes, with
// two workers or one: every range goes on after its last delivered key
// (no row read twice), in a newer state of the table, and the topic
// converges with the stream.
func TestParallelSnapshotResumesAfterCrash(t *testing.T) {
	t.Parallel()
	for _, workers := range []int{2, 1} {
		t.Run(fmt.Sprintf("%d workers resume", workers), func(t *testing.T) {
			t.Parallel()
			testParallelSnapshotResumes(t, workers)
		})
	}
}

func testParallelSnapshotResumes(t *testing.T, resumeWorkers int) {
	e := newPGEnv(t)
	table := e.createTable("")
	const rows, chunk, crashAfter = 2000, 50, 9
	e.fillTable(table, rows)
	e.exec("ANALYZE " + table)
	tr := newTracker()
	cfg := e.config("public." + table)
	cfg.Snapshot = true
	cfg.SnapshotChunkRows = chunk
	cfg.SnapshotWorkers = 4

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := &snapshotEvents{}
	chunks := 0
	sink1 := &recSink{Sink: e.newSink(e.name), tr: tr, after: func(n int, b *kafkasink.Batch) error {
		first.after(n, b)
		if len(b.Events) > 0 {
			if chunks++; chunks == crashAfter {
				cancel()
			}
		}
		return nil
	}}
	if err := Run(ctx, cfg, sink1); !errors.Is(err, context.Canceled) {
		t.Fatalf("first Run = %v, want context.Canceled", err)
	}
	sink1.Close(context.Background())
	cur, ok := parseCursor(sink1.Checkpoint().Cursor)
	if !ok || cur.Done || len(cur.Ranges) < 2 {
		t.Fatalf("checkpoint cursor after the crash %s: want an unfinished snapshot with its ranges", sink1.Checkpoint().Cursor)
	}
	delivered := map[int64]bool{}
	for _, ev := range first.reads() {
		v, _ := ev.After.Get("id")
		delivered[int64(v.Value.(int32))] = true
	}
	// Rows 10 and 1990 change; unless already read they are read as
	// changed; either way the stream delivers the change after.
	var m model
	var sq seqs
	sq.n.Store(10000)
	e.txn(func(tx pgx.Tx) {
		updateRows(tx, t, table, &m, &sq, 10, 1990)
		insertRows(tx, t, table, &m, &sq, 5000)
	})
	changed := m.all()
	want := reads(1, rows)
	if !delivered[10] {
		want[9].seq = changed[0].seq
	}
	if !delivered[1990] {
		want[1989].seq = changed[1].seq
	}
	// Row 5000 is past every range (the last ends at the table's last
	// key at the snapshot): it comes from the stream only.
	want = append(want, changed...)

	second := &snapshotEvents{}
	sink2 := &recSink{Sink: e.newSink(e.name), tr: tr, after: second.after}
	cfg.SnapshotWorkers = resumeWorkers
	_, r := start(t, cfg, sink2)
	recs := e.checkDelivered(r, tr, table, want)
	checkRunIDs(t, recs)
	reread := 0
	for _, ev := range second.reads() {
		v, _ := ev.After.Get("id")
		if delivered[int64(v.Value.(int32))] {
			reread++
		}
	}
	if len(delivered) == 0 || reread != 0 || len(delivered)+len(second.reads()) != rows {
		t.Errorf("%d rows delivered before the crash, %d after, %d of them again: want every row once", len(delivered), len(second.reads()), reread)
	}
}

// TestParallelSnapshotResumesSerialCursor resumes with workers a snapshot
// a serial run (an earlier pgcdc, or one worker) left inside a table: the
// rest of that table is one range after the cursor's key.
func TestParallelSnapshotResumesSerialCursor(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	table, other := e.createTable(""), e.createTable("_b")
	const rows, chunk, crashAfter = 300, 25, 4
	e.fillTable(table, rows)
	e.fillTable(other, 100)
	tr := newTracker()
	cfg := e.config("public."+table, "public."+other)
	cfg.Snapshot = true
	cfg.SnapshotChunkRows = chunk
	cfg.SnapshotWorkers = 1
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	chunks := 0
	sink1 := &recSink{Sink: e.newSink(e.name), tr: tr, after: func(n int, b *kafkasink.Batch) error {
		if len(b.Events) > 0 {
			if chunks++; chunks == crashAfter {
				cancel()
			}
		}
		return nil
	}}
	if err := Run(ctx, cfg, sink1); !errors.Is(err, context.Canceled) {
		t.Fatalf("first Run = %v, want context.Canceled", err)
	}
	sink1.Close(context.Background())
	cur, ok := parseCursor(sink1.Checkpoint().Cursor)
	if !ok || cur.Table == "" || len(cur.Ranges) != 0 {
		t.Fatalf("checkpoint cursor after the crash %s: want a serial cursor inside a table", sink1.Checkpoint().Cursor)
	}
	first := cur.Table
	second := &snapshotEvents{}
	sink2 := &recSink{Sink: e.newSink(e.name), tr: tr, after: second.after}
	cfg.SnapshotWorkers = 3
	_, r := start(t, cfg, sink2)
	waitFor(t, 30*time.Second, "every row", r, func() bool { return tr.delivered() == rows+100 })
	for _, tb := range []string{table, other} {
		n := rows
		if tb == other {
			n = 100
		}
		checkExactlyOnce(t, e.readTopic(tb), reads(1, int64(n)))
	}
	lowest := int32(1 << 30)
	for _, ev := range second.reads() {
		if ev.Schema+"."+ev.Table == first {
			v, _ := ev.After.Get("id")
			lowest = min(lowest, v.Value.(int32))
		}
	}
	if want := int32(crashAfter*chunk + 1); lowest != want {
		t.Errorf("the resumed run read %s from id %d, want %d (after the serial cursor's key)", first, lowest, want)
	}
	if c, _ := parseCursor(sink2.Checkpoint().Cursor); !c.Done || c.Table != "" || len(c.Ranges) != 0 {
		t.Errorf("final cursor %s: want a finished snapshot", sink2.Checkpoint().Cursor)
	}
}

// TestParallelSnapshotCompositeKeyAndFilter reads a table with a
// two-column key and a publication row filter in ranges: the ranges cut
// the key as a tuple, and the filter applies to every range.
func TestParallelSnapshotCompositeKeyAndFilter(t *testing.T) {
	requirePG(t, pgRowFilters)
	t.Parallel()
	e := newPGEnv(t)
	table := e.name + "_ck"
	e.exec("CREATE TABLE " + table + " (a int, b text, v int, PRIMARY KEY (a, b))")
	e.exec("INSERT INTO " + table + " SELECT i / 10, 'k' || (i % 10), i FROM generate_series(0, 1999) i")
	e.exec("CREATE PUBLICATION " + e.name + " FOR TABLE " + table + " WHERE (v % 3 <> 0)")
	col := &snapshotEvents{}
	sink := &recSink{Sink: e.newSink(e.name), tr: newTracker(), after: col.after}
	cfg := e.config()
	cfg.CreatePublication = false
	cfg.Snapshot = true
	cfg.SnapshotChunkRows = 30
	cfg.SnapshotWorkers = 3
	_, r := start(t, cfg, sink)
	want := 2000 - 667 // v % 3 = 0 for 667 values of 0..1999
	waitFor(t, 30*time.Second, "every row the filter passes", r, func() bool { return len(col.reads()) >= want })
	time.Sleep(200 * time.Millisecond)
	seen := map[int32]bool{}
	for _, ev := range col.reads() {
		v, _ := ev.After.Get("v")
		n := v.Value.(int32)
		if seen[n] || n%3 == 0 {
			t.Fatalf("row v=%d read twice or past the row filter", n)
		}
		seen[n] = true
	}
	if len(seen) != want {
		t.Errorf("%d rows read, want %d", len(seen), want)
	}
	checkMarks(t, col.reads())
}

// TestParallelSnapshotMemoryBound blocks the sink's first Write of rows
// and counts the chunks the workers read meanwhile: however large the
// table, at most 2*workers+2 chunks are decoded and not yet written (the
// bound Config.SnapshotWorkers documents).
func TestParallelSnapshotMemoryBound(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	table := e.createTable("")
	e.fillTable(table, 5000)
	const workers, chunk = 3, 20 // 250 chunks
	var (
		mu   sync.Mutex
		read int
	)
	release := make(chan struct{})
	var once sync.Once
	sink := &recSink{Sink: e.newSink(e.name), tr: newTracker(), before: func(_ int, b *kafkasink.Batch) error {
		if len(b.Events) > 0 {
			once.Do(func() { <-release })
		}
		return nil
	}}
	cfg := e.config("public." + table)
	cfg.Snapshot = true
	cfg.SnapshotChunkRows = chunk
	cfg.SnapshotWorkers = workers
	cfg.snapshotChunkRead = func() { mu.Lock(); read++; mu.Unlock() }
	_, r := start(t, cfg, sink)
	count := func() int { mu.Lock(); defer mu.Unlock(); return read }
	// Wait until the workers stop reading: the count holds for a
	// while.
	last, since := -1, time.Now()
	for time.Since(since) < time.Second {
		if n := count(); n != last {
			last, since = n, time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	if bound := 2*workers + 2; last > bound || last < workers+2 {
		t.Errorf("%d chunks read while the first Write blocked: want between %d (every worker and the channel busy) and %d", last, workers+2, bound)
	}
	close(release)
	waitFor(t, 30*time.Second, "every row", r, func() bool { return sink.tr.delivered() == 5000 })
	t.Logf("%d chunks read while the first Write blocked; %d in all", last, count())
}

// TestParallelSnapshotProgress follows a parallel snapshot in Monitor:
// in the middle (a Write held back), each range's rows, the rate, the
// rows left by the table's estimate and the time left; at the end every
// range done and nothing left.
func TestParallelSnapshotProgress(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	table := e.createTable("")
	const rows = 2000
	e.fillTable(table, rows)
	e.exec("ANALYZE " + table)
	release, held := make(chan struct{}), make(chan struct{})
	sink := &recSink{Sink: e.newSink(e.name), tr: newTracker(), before: func(n int, b *kafkasink.Batch) error {
		if n == 6 {
			close(held)
			<-release
		}
		return nil
	}}
	mon := &Monitor{}
	cfg := e.config("public." + table)
	cfg.Snapshot = true
	cfg.SnapshotChunkRows = 50
	cfg.SnapshotWorkers = 2
	cfg.Monitor = mon
	_, r := start(t, cfg, sink)
	<-held
	name := "public." + table
	p := mon.Stats().SnapshotTables[name]
	var sum int64
	for _, rp := range p.Ranges {
		sum += rp.Rows
	}
	if len(p.Ranges) != 2*rangesPerWorker || sum != p.Rows || p.Rows == 0 || p.Done || p.RowsPerSecond <= 0 ||
		p.RowsLeft != rows-p.Rows || p.TimeLeft <= 0 {
		t.Errorf("in the middle: %+v; want %d ranges whose rows add up to Rows, a rate, %d rows left less those written, a time left", p, 2*rangesPerWorker, rows)
	}
	close(release)
	waitFor(t, 30*time.Second, "every row", r, func() bool { return sink.tr.delivered() == rows })
	waitFor(t, 30*time.Second, "the table done", r, func() bool { return mon.Stats().SnapshotTables[name].Done })
	p = mon.Stats().SnapshotTables[name]
	for i, rp := range p.Ranges {
		if !rp.Done || rp.Rows == 0 {
			t.Errorf("range %d at the end: %+v, want done with rows", i, rp)
		}
	}
	if p.Rows != rows || p.RowsLeft != 0 || p.TimeLeft != 0 {
		t.Errorf("at the end: %+v; want %d rows, nothing left", p, rows)
	}
}

// TestParallelSnapshotWithKeylessTable reads a table without a key
// (Config.KeylessTables) and one with, with workers: the keyless one by
// pages on Run's transaction first, the keyed one in ranges; every row
// once, marked.
func TestParallelSnapshotWithKeylessTable(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	keyed, keyless := e.createTable("_a"), e.name+"_b"
	e.fillTable(keyed, 500)
	e.exec("CREATE TABLE " + keyless + " (a int, b text)")
	e.exec("INSERT INTO " + keyless + " SELECT i, 'x' FROM generate_series(1, 120) i")
	col := &snapshotEvents{}
	sink := &recSink{Sink: e.newSink(e.name), tr: newTracker(), after: col.after}
	cfg := e.config("public."+keyed, "public."+keyless)
	cfg.Snapshot = true
	cfg.KeylessTables = true
	cfg.SnapshotChunkRows = 40
	cfg.SnapshotWorkers = 2
	_, r := start(t, cfg, sink)
	waitFor(t, 30*time.Second, "every row", r, func() bool { return len(col.reads()) >= 620 })
	time.Sleep(200 * time.Millisecond)
	reads := col.reads()
	seen := map[string]bool{}
	for _, ev := range reads {
		k := ev.Table + "/"
		for _, c := range ev.After {
			if c.Name == "id" || c.Name == "a" {
				k += fmt.Sprint(c.Value)
			}
		}
		if seen[k] {
			t.Fatalf("row %s read twice", k)
		}
		seen[k] = true
	}
	if len(reads) != 620 || reads[0].Table != keyless {
		t.Errorf("%d rows read, the first of %s: want 620, the keyless table's first", len(reads), reads[0].Table)
	}
	checkMarks(t, reads)
}
