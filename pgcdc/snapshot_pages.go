package pgcdc

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/kafkasink/kafkasink"
)

// This file is the snapshot of a table that has no unique key to read it
// in order by (no primary key, no replica identity index), which
// Config.KeylessTables admits: it is read in ranges of pages instead.

// readPages reads table ti, which has no unique key, in ranges of pages by
// ctid, each range a chunk and one Write, within the run's one
// transaction. Its rows are in pages below the table's size as this
// transaction first measures it: a row it sees existed at its snapshot,
// and a row stays where it is while any transaction may still see it.
// The cursor records the next page, for the log: a run interrupted inside
// such a table does not resume there (see refuseKeyless). last and
// lastWithRows are as for table.
//
// A chunk is written once the next chunk with rows is read, or the table
// is done, so that the table's last row is known to be its last
// (SnapshotLastInTable). Chunks aim at SnapshotChunkRows rows: the number
// of pages per chunk starts from the table's statistics and follows the
// rows found per page as the reading goes on.
func (s *snapshotRun) readPages(ctx context.Context, tx pgx.Tx, ti *tableInfo, relation *kafkasink.Relation, last, lastWithRows bool) error {
	name := ti.name()
	var pages int64
	var rowsPerPage float64
	if err := tx.QueryRow(ctx, `SELECT pg_relation_size(c.oid) / current_setting('block_size')::bigint,
			CASE WHEN c.relpages > 0 AND c.reltuples > 0 THEN c.reltuples / c.relpages ELSE 0 END
		FROM pg_class c WHERE c.oid = $1::regclass`, qualified(ti.schema, ti.table)).Scan(&pages, &rowsPerPage); err != nil {
		return fmt.Errorf("pgcdc: snapshot: measuring %s: %w", name, err)
	}
	target := int64(s.r.cfg.SnapshotChunkRows)
	window := int64(1)
	if rowsPerPage > 0 {
		window = max(1, int64(float64(target)/rowsPerPage))
	}
	if s.r.version < 140000 {
		// Without TID range scans (PostgreSQL 14) every range would
		// scan the whole table: read it in one chunk.
		window = max(1, pages)
	}
	sql := ti.pagesQuery()
	var held []kafkasink.Event // the last chunk read that has rows
	first := true
	for from := int64(0); from < pages; {
		to := min(from+window, pages)
		args := [][]byte{strconv.AppendInt(nil, from, 10), strconv.AppendInt(nil, to, 10)}
		events, _, _, err := s.chunk(ctx, tx, ti, relation, sql, args, math.MaxInt)
		if err != nil {
			return err
		}
		if len(events) > 0 {
			if held != nil {
				s.mark(held, first, false, lastWithRows)
				first = false
				s.cur.Table, s.cur.LastKey, s.cur.KeyColumns = name, []string{fmt.Sprintf("(%d,0)", from)}, []string{"ctid"}
				if err := s.r.writeChunk(ctx, held, s.cur); err != nil {
					return err
				}
				s.r.log.Debug("snapshot chunk written", "table", name, "rows", len(held), "next_page", from)
			}
			held = events
		}
		// Aim the next range at SnapshotChunkRows rows by the rows
		// per page just seen, growing at most eightfold at a time.
		n := int64(len(events))
		if n == 0 {
			window = min(2*window, max(1, pages))
		} else {
			window = min(max(1, target*(to-from)/n), 8*window)
		}
		from = to
	}
	s.mark(held, first, true, lastWithRows)
	s.cur.Table, s.cur.LastKey, s.cur.KeyColumns = "", nil, nil
	s.cur.DoneTables = append(s.cur.DoneTables, name)
	s.cur.Done = last
	if err := s.r.writeChunk(ctx, held, s.cur); err != nil {
		return err
	}
	s.r.log.Debug("snapshot chunk written", "table", name, "rows", len(held), "table_done", true)
	return nil
}
