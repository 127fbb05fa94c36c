package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafkasink/kafkasink"
)

func reads(from, to int64) []change {
	var out []change
	for i := from; i <= to; i++ {
		out = append(out, change{"read", i, i})
	}
	return out
}

// checkRunIDs checks that every snapshot row carries the same non-empty
// run id, and returns it.
func checkRunIDs(t *testing.T, recs []record) string {
	t.Helper()
	id := ""
	for _, r := range recs {
		if r.Op != "read" {
			continue
		}
		if r.RunID == "" || id != "" && r.RunID != id {
			t.Fatalf("snapshot row %s has run id %q, others %q", r.ID, r.RunID, id)
		}
		id = r.RunID
	}
	return id
}

func TestSnapshotThenStream(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	table := e.createTable("")
	e.fillTable(table, 250)

	var (
		m  model
		sq seqs
	)
	sq.n.Store(10000)
	for _, c := range reads(1, 250) {
		m.add(c.op, c.id, c.seq)
	}
	tr := newTracker()
	var once sync.Once
	sink := &recSink{Sink: e.newSink(e.name), tr: tr,
		before: func(n int, b *kafkasink.Batch) error {
			if n == 1 && len(b.Events) == 0 && b.Cursor != nil {
				// The first Write records the snapshot run, after
				// the slot exists and before any row is read.
				// Changes committed now are not in the snapshot
				// (it is the slot's, taken at its creation): they
				// come from the slot, after it.
				once.Do(func() {
					e.txn(func(tx pgx.Tx) {
						updateRows(tx, t, table, &m, &sq, 200)
						deleteRows(tx, t, table, &m, 210)
						insertRows(tx, t, table, &m, &sq, 1000)
					})
				})
			}
			return nil
		}}
	cfg := e.config("public." + table)
	cfg.Snapshot = true
	cfg.SnapshotChunkRows = 40
	_, r := start(t, cfg, sink)
	waitFor(t, 30*time.Second, "the snapshot and the first changes", r, func() bool { return tr.delivered() == m.len() })

	e.txn(func(tx pgx.Tx) { updateRows(tx, t, table, &m, &sq, 1, 2, 250) })
	recs := e.checkDelivered(r, tr, table, m.all())
	runID := checkRunIDs(t, recs)
	tr.mu.Lock()
	chunks := tr.readWrites
	tr.mu.Unlock()
	if chunks != 7 {
		t.Errorf("%d snapshot chunks for 250 rows of 40, want 7", chunks)
	}
	cur, ok := parseCursor(sink.Checkpoint().Cursor)
	if !ok || !cur.Done || cur.Snapshot != runID || len(cur.DoneTables) != 1 || cur.DoneTables[0] != "public."+table {
		t.Errorf("checkpoint cursor %s, want a finished snapshot %q of public.%s", sink.Checkpoint().Cursor, runID, table)
	}
}

func TestSnapshotResumesAfterCrash(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	table := e.createTable("")
	const rows, chunk, crashAfter = 300, 25, 4
	e.fillTable(table, rows)

	tr := newTracker()
	cfg := e.config("public." + table)
	cfg.Snapshot = true
	cfg.SnapshotChunkRows = chunk

	// The first run "crashes" after its crashAfter-th chunk: its context
	// is cancelled as soon as that Write returned.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	chunks := 0
	sink1 := &recSink{Sink: e.newSink(e.name), tr: tr,
		after: func(n int, b *kafkasink.Batch) error {
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
	if chunks != crashAfter {
		t.Fatalf("first run wrote %d chunks, want %d", chunks, crashAfter)
	}
	cur, ok := parseCursor(sink1.Checkpoint().Cursor)
	if !ok || cur.Done || cur.Table != "public."+table || len(cur.LastKey) != 1 || cur.LastKey[0] != fmt.Sprint(crashAfter*chunk) {
		t.Fatalf("checkpoint cursor after the crash %s, want table public.%s at key %d", sink1.Checkpoint().Cursor, table, crashAfter*chunk)
	}

	// While nothing runs, a row already read and a row not yet read
	// change, and a row is added. The resumed snapshot reads the newer
	// state of what it has not read yet; the slot then delivers every
	// change since the consistent point, so the topic converges.
	var m model
	var sq seqs
	sq.n.Store(10000)
	e.txn(func(tx pgx.Tx) {
		updateRows(tx, t, table, &m, &sq, 10, 290)
		insertRows(tx, t, table, &m, &sq, 500)
	})
	changed := m.all()
	want := reads(1, rows)
	want[289].seq = changed[1].seq                           // row 290 is read as updated
	want = append(want, change{"read", 500, changed[2].seq}) // and row 500 is read too
	want = append(want, changed...)

	var (
		mu       sync.Mutex
		firstKey int64 = -1
		reread   int
	)
	sink2 := &recSink{Sink: e.newSink(e.name), tr: tr,
		before: func(n int, b *kafkasink.Batch) error {
			if len(b.Events) > 0 && b.Events[0].Op == kafkasink.OpRead {
				mu.Lock()
				defer mu.Unlock()
				reread++
				if firstKey < 0 {
					v, _ := b.Events[0].After.Get("id")
					firstKey = int64(v.Value.(int32))
				}
			}
			return nil
		}}
	_, r := start(t, cfg, sink2)
	recs := e.checkDelivered(r, tr, table, want)
	checkRunIDs(t, recs)
	mu.Lock()
	defer mu.Unlock()
	if firstKey != crashAfter*chunk+1 {
		t.Errorf("the resumed snapshot began at row %d, want %d (the row after the checkpointed cursor)", firstKey, crashAfter*chunk+1)
	}
	// Rows crashAfter*chunk+1..rows and row 500: 201 rows in chunks of 25.
	if wantChunks := (rows - crashAfter*chunk + 1 + chunk - 1) / chunk; reread != wantChunks {
		t.Errorf("the resumed snapshot read %d chunks, want %d: only the chunks after the cursor", reread, wantChunks)
	}
}
