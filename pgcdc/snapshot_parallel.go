package pgcdc

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/pgcdc/pgoutput"
)

// This file is the parallel snapshot (Config.SnapshotWorkers): the run's
// transaction splits each keyed table into ranges of its key
// (snapshot_ranges.go); workers, each on its own connection in the same
// snapshot, read the ranges of one table and of several at once, and
// decode their rows; the run's own goroutine writes the chunks they hand
// it, one Write each, since the sink's Write is not concurrent. Each Write
// carries the cursor with every range's progress up to that chunk, so a
// crash resumes every range after its last delivered key.
//
// Memory: each worker holds the chunk it reads or hands over, the channel
// to the writer one chunk per worker, and the writer the chunk it holds
// back and the one it writes: at most 2*workers+2 chunks at any time.

// tablePlan is one table of a parallel snapshot: its ranges, as the
// cursor records them once a chunk of it is written.
type tablePlan struct {
	ti   *tableInfo
	tmpl rowTemplate // its rows' events
	// ranges are all the table's ranges; the workers read those not
	// done.
	ranges []keyRange
	// resumed is set when an earlier run delivered rows of the table:
	// its first row is not marked SnapshotFirstInTable.
	resumed bool
}

// rangeWork is one range for a worker to read.
type rangeWork struct {
	plan *tablePlan
	idx  int // into plan.ranges
}

// rangeChunk is one chunk a worker read from a range: its rows and the
// range's progress once they are written. idx is -1 for a table with no
// range (no row).
type rangeChunk struct {
	rangeWork
	events []kafkasink.Event
	after  []string // the key of the range's last row read so far
	done   bool     // no row of the range follows
}

// readTables reads the tables of the run: one chunk after another on the
// run's transaction with one worker; with more, the tables without a key
// so first, then the others in parallel.
func (s *snapshotRun) readTables(ctx context.Context, tx pgx.Tx, tables []*tableInfo) error {
	parallel := s.r.cfg.SnapshotWorkers > 1 || len(s.cur.Ranges) > 0
	var exported string
	if parallel {
		var err error
		if exported, err = exportSnapshot(ctx, tx); err != nil {
			return err
		}
		if exported == "" && len(s.cur.Ranges) == 0 {
			// A standby exports no snapshot, and a new run must read
			// every table in one.
			s.r.log.Info("snapshot: the server exports no snapshot (a standby): reading with one worker")
			parallel = false
		}
	}
	serial := len(tables)
	if parallel {
		// Tables without a key are read by pages, on the run's
		// transaction, before the others.
		slices.SortStableFunc(tables, func(a, b *tableInfo) int { return rank(b.byPages) - rank(a.byPages) })
		if serial = slices.IndexFunc(tables, func(t *tableInfo) bool { return !t.byPages }); serial < 0 {
			serial = len(tables)
		}
		s.dropGoneRanges(tables)
	}
	lastWithRows, err := s.lastWithRows(ctx, tx, tables)
	if err != nil {
		return err
	}
	for i, t := range tables[:serial] {
		if err := s.table(ctx, tx, t, i == len(tables)-1, i == lastWithRows); err != nil {
			return err
		}
	}
	if serial == len(tables) {
		return nil
	}
	return s.parallel(ctx, tx, tables[serial:], exported)
}

func rank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// exportSnapshot exports the transaction's snapshot for the workers to
// import, "" on a standby, which cannot.
func exportSnapshot(ctx context.Context, tx pgx.Tx) (string, error) {
	var name string
	if err := tx.QueryRow(ctx, "SELECT CASE WHEN pg_is_in_recovery() THEN '' ELSE pg_export_snapshot() END").Scan(&name); err != nil {
		return "", fmt.Errorf("pgcdc: snapshot: exporting the snapshot to its workers: %w", err)
	}
	return name, nil
}

// dropGoneRanges drops from the cursor the ranges of tables that left
// the publication since the cursor was written.
func (s *snapshotRun) dropGoneRanges(tables []*tableInfo) {
	s.cur.Ranges = slices.DeleteFunc(s.cur.Ranges, func(r keyRange) bool {
		gone := !slices.ContainsFunc(tables, func(t *tableInfo) bool { return t.name() == r.Table })
		if gone {
			s.r.log.Warn("snapshot: a table in progress left the publication; skipping it", "table", r.Table)
		}
		return gone
	})
}

// parallel reads tables, all with a chunk key, with Config.SnapshotWorkers
// workers importing snapshot exported (none: each reads its own, see
// docs/snapshot.md), and writes their chunks.
func (s *snapshotRun) parallel(ctx context.Context, tx pgx.Tx, tables []*tableInfo, exported string) error {
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	workers := s.r.cfg.SnapshotWorkers
	work := make(chan rangeWork)
	out := make(chan rangeChunk, workers)
	start := s.cur
	start.Ranges = slices.Clone(s.cur.Ranges)
	var planner, readers sync.WaitGroup
	planner.Go(func() {
		defer close(work)
		if err := s.dispatch(wctx, tx, start, tables, work, out); err != nil {
			cancel(err)
		}
	})
	for range workers {
		readers.Go(func() {
			if err := s.worker(wctx, exported, work, out); err != nil {
				cancel(err)
			}
		})
	}
	go func() {
		planner.Wait()
		readers.Wait()
		close(out)
	}()
	err := s.writeChunks(ctx, wctx, out)
	if err != nil {
		cancel(err)
	}
	for range out {
		// Let the workers end.
	}
	return err
}

// dispatch plans the tables one after another, in the run's transaction,
// and hands their ranges to the workers; an empty table goes straight to
// the writer, to be recorded done. start is the cursor the run began
// with.
func (s *snapshotRun) dispatch(ctx context.Context, tx pgx.Tx, start snapshotCursor, tables []*tableInfo, work chan<- rangeWork, out chan<- rangeChunk) error {
	for _, ti := range tables {
		p, err := s.planTable(ctx, tx, start, ti)
		if err != nil {
			return err
		}
		if len(p.ranges) == 0 {
			if err := send(ctx, out, rangeChunk{rangeWork: rangeWork{plan: p, idx: -1}, done: true}); err != nil {
				return err
			}
			continue
		}
		for i, r := range p.ranges {
			if r.Done {
				continue
			}
			if err := send(ctx, work, rangeWork{plan: p, idx: i}); err != nil {
				return err
			}
		}
	}
	return nil
}

func send[T any](ctx context.Context, ch chan<- T, v T) error {
	select {
	case ch <- v:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// planTable returns how to read table ti: the ranges start, the run's
// cursor as it began, left unfinished, else new ranges.
func (s *snapshotRun) planTable(ctx context.Context, tx pgx.Tx, start snapshotCursor, ti *tableInfo) (*tablePlan, error) {
	relation, err := s.values.Relation(ti.describeColumns())
	if err != nil {
		return nil, err
	}
	p := &tablePlan{ti: ti, tmpl: s.rowEvent(ti, relation)}
	name := ti.name()
	estimate, err := estimateRows(ctx, tx, ti)
	if err != nil {
		return nil, err
	}
	switch {
	case slices.ContainsFunc(start.Ranges, func(r keyRange) bool { return r.Table == name }):
		p.ranges = slices.DeleteFunc(slices.Clone(start.Ranges), func(r keyRange) bool { return r.Table != name })
		p.resumed = true
		err = checkRanges(p.ranges, ti)
	case start.Table == name:
		// A cursor of a serial snapshot: the rest of the table is
		// one range.
		names := columnNames(ti.chunkKey)
		var after []string
		after, err = start.resumeKey(ti, names)
		p.ranges = []keyRange{{Table: name, KeyColumns: names, After: after}}
		p.resumed = true
	default:
		p.ranges, err = splitRanges(ctx, tx, ti, s.r.cfg.SnapshotWorkers*rangesPerWorker, s.r.cfg.SnapshotChunkRows, estimate)
	}
	if err != nil {
		return nil, err
	}
	s.r.cfg.Monitor.snapshotTable(name, len(p.ranges), knownRows(estimate))
	s.r.log.Debug("snapshot table planned", "table", name, "ranges", len(p.ranges), "resumed", p.resumed)
	return p, nil
}

// worker reads the ranges it is handed on its own connection, in one
// REPEATABLE READ transaction that imports snapshot exported when set.
func (s *snapshotRun) worker(ctx context.Context, exported string, work <-chan rangeWork, out chan<- rangeChunk) error {
	conn, err := s.r.cfg.connect(ctx, "snapshot worker")
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("pgcdc: snapshot worker: %w", err)
	}
	defer tx.Rollback(context.Background())
	if exported != "" {
		if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT '"+strings.ReplaceAll(exported, "'", "''")+"'"); err != nil {
			return fmt.Errorf("pgcdc: snapshot worker: importing the run's snapshot %q: %w", exported, err)
		}
	}
	// Its own converter: a Values is not safe for concurrent use.
	values := pgoutput.NewValues(func(oid uint32) (CatalogType, bool, error) { return describeType(ctx, tx, oid) })
	described := make(map[*tablePlan]bool)
	for {
		var w rangeWork
		select {
		case <-ctx.Done():
			return nil
		case next, ok := <-work:
			if !ok {
				return nil
			}
			w = next
		}
		if !described[w.plan] {
			if _, err := values.Relation(w.plan.ti.describeColumns()); err != nil {
				return err
			}
			described[w.plan] = true
		}
		if err := s.readRange(ctx, tx.Conn().PgConn(), values, w, out); err != nil {
			return err
		}
	}
}

// readRange reads one range in chunks and hands them to the writer.
func (s *snapshotRun) readRange(ctx context.Context, conn *pgconn.PgConn, values *pgoutput.Values, w rangeWork, out chan<- rangeChunk) error {
	r := w.plan.ranges[w.idx]
	limit := s.r.cfg.SnapshotChunkRows
	for {
		// One row past the chunk tells whether the chunk is the
		// range's last.
		sql, args := w.plan.ti.rangeQuery(r, limit+1)
		events, key, more, err := readChunk(ctx, conn, values, w.plan.tmpl, sql, args, limit)
		if err != nil {
			return err
		}
		if hook := s.r.cfg.snapshotChunkRead; hook != nil {
			hook()
		}
		if len(events) > 0 {
			r.After = key
		}
		if err := send(ctx, out, rangeChunk{rangeWork: w, events: events, after: r.After, done: !more}); err != nil {
			return err
		}
		if !more {
			return nil
		}
	}
}
