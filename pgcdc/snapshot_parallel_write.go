package pgcdc

import (
	"context"
	"slices"
)

// This file is the writer of a parallel snapshot: the one goroutine that
// numbers the workers' chunks, marks them and writes each with the cursor.

// chunkWriter writes the chunks of a parallel snapshot in the order they
// come. It holds the last chunk with rows back until the next one comes,
// so that the run's last row is known to be its last (SnapshotLast); a
// chunk without rows (a resumed range found empty) goes with the held
// chunk, after it, so that no range is recorded past a row not written.
type chunkWriter struct {
	s        *snapshotRun
	held     *rangeChunk
	attached []rangeChunk
	// started are the tables a row of which this run wrote.
	started map[string]bool
}

// writeChunks writes what the workers hand over out until they are done;
// wctx ends when one of them failed, ctx interrupts a Write.
func (s *snapshotRun) writeChunks(ctx, wctx context.Context, out <-chan rangeChunk) error {
	w := &chunkWriter{s: s, started: make(map[string]bool)}
	for c := range out {
		if wctx.Err() != nil {
			return context.Cause(wctx)
		}
		if err := w.take(ctx, c); err != nil {
			return err
		}
	}
	if wctx.Err() != nil {
		// A worker failed: its ranges are not all read.
		return context.Cause(wctx)
	}
	if w.held == nil {
		return nil
	}
	return w.write(ctx, *w.held, true)
}

func (w *chunkWriter) take(ctx context.Context, c rangeChunk) error {
	switch {
	case len(c.events) == 0 && w.held != nil:
		w.attached = append(w.attached, c)
		return nil
	case len(c.events) == 0:
		return w.write(ctx, c, false)
	case w.held != nil:
		if err := w.write(ctx, *w.held, false); err != nil {
			return err
		}
	}
	w.held = &c
	return nil
}

// write writes chunk c, then the chunks attached to it, with the cursor
// after them; last says c is the run's last chunk.
func (w *chunkWriter) write(ctx context.Context, c rangeChunk, last bool) error {
	s := w.s
	name := c.plan.ti.name()
	var done []*tableInfo // the tables these chunks finish
	attached := w.attached
	for _, a := range append([]rangeChunk{c}, attached...) {
		if s.applyRange(a) {
			done = append(done, a.plan.ti)
		}
	}
	w.held, w.attached = nil, nil
	finished := slices.Contains(done, c.plan.ti)
	s.number(c.events)
	s.mark(c.events, !c.plan.resumed && !w.started[name], finished, last)
	if len(c.events) > 0 {
		w.started[name] = true
	}
	s.cur.Done = last
	cur := s.cur
	// The checkpoint keeps the cursor; the next chunks change the
	// ranges in place.
	cur.Ranges = slices.Clone(cur.Ranges)
	if err := s.r.writeSnapshotCursor(ctx, c.events, cur); err != nil {
		return err
	}
	for _, a := range append([]rangeChunk{c}, attached...) {
		s.r.cfg.Monitor.snapshotRange(a.plan.ti.name(), a.idx, len(a.events), a.done, slices.Contains(done, a.plan.ti))
	}
	for _, ti := range done {
		s.r.noteColumns(ti.schema, ti.table, columnNames(ti.cols), "snapshot")
	}
	s.r.log.Debug("snapshot chunk written", "table", name, "rows", len(c.events), "tables_done", len(done))
	return nil
}

// applyRange records in the cursor the progress chunk c brings: the first
// chunk of a table records all its ranges; a table whose ranges are all
// done leaves them for DoneTables, and applyRange returns true.
func (s *snapshotRun) applyRange(c rangeChunk) bool {
	name := c.plan.ti.name()
	at := slices.IndexFunc(s.cur.Ranges, func(r keyRange) bool { return r.Table == name })
	if at < 0 {
		at = len(s.cur.Ranges)
		s.cur.Ranges = append(s.cur.Ranges, c.plan.ranges...)
		if s.cur.Table == name {
			// The serial cursor's table, now its one range.
			s.cur.Table, s.cur.LastKey, s.cur.KeyColumns = "", nil, nil
		}
	}
	n := len(c.plan.ranges)
	if c.idx >= 0 {
		r := &s.cur.Ranges[at+c.idx]
		r.After, r.Done = c.after, c.done
	}
	if slices.ContainsFunc(s.cur.Ranges[at:at+n], func(r keyRange) bool { return !r.Done }) {
		return false
	}
	s.cur.Ranges = slices.Delete(s.cur.Ranges, at, at+n)
	s.cur.DoneTables = append(s.cur.DoneTables, name)
	return true
}
