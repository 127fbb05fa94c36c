package pgcdc

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/kafkasink/kafkasink"
)

// snapshotCursor is the Batch.Cursor of every snapshot chunk, and so what
// the sink's checkpoint holds while a snapshot runs and after it ends.
type snapshotCursor struct {
	// Snapshot is the run id, Event.BackfillRunID of the run's rows.
	Snapshot string `json:"snapshot"`
	// LSN is the slot's consistent point: the Position.LSN of the rows.
	LSN string `json:"lsn"`
	// Table is the table being read ("schema.table"), LastKey the text
	// form of the primary key of the last row delivered from it; both
	// are empty between tables.
	Table   string   `json:"table,omitempty"`
	LastKey []string `json:"last_key,omitempty"`
	// DoneTables are the tables read completely.
	DoneTables []string `json:"done_tables"`
	// Done is set on the cursor of the run's last chunk.
	Done bool `json:"done,omitempty"`
}

// parseCursor returns the snapshot cursor in a checkpoint cursor, if it is
// one.
func parseCursor(raw json.RawMessage) (snapshotCursor, bool) {
	var c snapshotCursor
	if raw == nil || json.Unmarshal(raw, &c) != nil || c.Snapshot == "" {
		return snapshotCursor{}, false
	}
	return c, true
}

// snapshot takes the initial snapshot when one is due: a new run when the
// slot was just created (from the snapshot it exported) or when the sink
// has delivered nothing yet, else the rest of a run the checkpoint shows
// unfinished.
func (r *runner) snapshot(ctx context.Context, db *pgx.Conn, slot slotState, created *createdSlot) error {
	ck := r.sink.Checkpoint()
	cur, ok := parseCursor(ck.Cursor)
	if !r.cfg.Snapshot {
		if ok && !cur.Done {
			r.log.Warn("the checkpoint holds an unfinished snapshot, but Config.Snapshot is off: streaming without it", "snapshot", cur.Snapshot)
		}
		return nil
	}
	var exported string
	switch {
	case created != nil:
		cur = snapshotCursor{Snapshot: rand.Text(), LSN: created.consistent.String(), DoneTables: []string{}}
		exported = created.snapshot
	case ok && !cur.Done:
		r.log.Info("resuming snapshot", "snapshot", cur.Snapshot, "table", cur.Table, "done_tables", len(cur.DoneTables))
	case ck.IsZero():
		// The slot exists but nothing was delivered: a crash between
		// creating the slot and the first Write, or a new sink on an
		// old slot. The exported snapshot is gone, so read the current
		// state; the stream from the slot's confirmed position
		// follows, and the topic converges as for a resumed snapshot.
		cur = snapshotCursor{Snapshot: rand.Text(), LSN: slot.confirmed.String(), DoneTables: []string{}}
	default:
		return nil
	}
	lsn, err := kafkasink.ParseLSN(cur.LSN)
	if err != nil {
		return fmt.Errorf("%w: snapshot cursor: %v", kafkasink.ErrCheckpoint, err)
	}
	s := &snapshotRun{r: r, db: db, cur: cur, lsn: lsn, conv: newValueConverter()}
	if resuming := created == nil && ok && !cur.Done; resuming {
		// Row indexes run on across chunks and tables; before the
		// first chunk, the checkpoint is still below the run's LSN.
		if ck.Position.LSN == lsn {
			s.next = ck.Position.Index + 1
		}
	} else {
		// Record the run before reading, so that a crash from here on
		// resumes this run instead of forgetting it.
		if err := r.writeChunk(ctx, nil, cur); err != nil {
			return err
		}
		r.log.Info("snapshot started", "snapshot", cur.Snapshot, "lsn", cur.LSN, "exported", exported != "")
	}
	return s.run(ctx, exported)
}

// snapshotRun reads the tables of one snapshot run.
type snapshotRun struct {
	r    *runner
	db   *pgx.Conn
	cur  snapshotCursor
	lsn  kafkasink.LSN
	next uint64 // Position.Index of the next row
	conv *valueConverter
}

func (s *snapshotRun) run(ctx context.Context, exported string) error {
	// One REPEATABLE READ transaction sees one state of the database for
	// the whole run. With the slot's exported snapshot that state is
	// exactly the slot's consistent point; a resumed run reads a later
	// state, and what changed since the consistent point also comes
	// from the slot.
	tx, err := s.db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("pgcdc: snapshot: %w", err)
	}
	defer tx.Rollback(context.Background())
	if exported != "" {
		if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT '"+strings.ReplaceAll(exported, "'", "''")+"'"); err != nil {
			return fmt.Errorf("pgcdc: snapshot: importing the slot's snapshot %q: %w", exported, err)
		}
	}
	tables, err := s.tables(ctx, tx)
	if err != nil {
		return err
	}
	for i, t := range tables {
		if err := s.table(ctx, tx, t, i == len(tables)-1); err != nil {
			return err
		}
	}
	if !s.cur.Done {
		s.cur.Done = true
		if err := s.r.writeChunk(ctx, nil, s.cur); err != nil {
			return err
		}
	}
	s.r.log.Info("snapshot complete", "snapshot", s.cur.Snapshot, "rows", s.next, "tables", len(s.cur.DoneTables))
	return nil
}

// tables returns the published tables still to read, the one in progress
// first.
func (s *snapshotRun) tables(ctx context.Context, tx pgx.Tx) ([]string, error) {
	rows, err := tx.Query(ctx, "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = $1 ORDER BY 1, 2", s.r.cfg.Publication)
	if err != nil {
		return nil, fmt.Errorf("pgcdc: snapshot: listing the tables of publication %q: %w", s.r.cfg.Publication, err)
	}
	var out []string
	for rows.Next() {
		var schema, table string
		if err := rows.Scan(&schema, &table); err != nil {
			return nil, err
		}
		name := schema + "." + table
		switch {
		case slices.Contains(s.cur.DoneTables, name):
		case name == s.cur.Table:
			out = slices.Insert(out, 0, name)
		default:
			out = append(out, name)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgcdc: snapshot: listing the tables of publication %q: %w", s.r.cfg.Publication, err)
	}
	if s.cur.Table != "" && (len(out) == 0 || out[0] != s.cur.Table) {
		s.r.log.Warn("snapshot: the table in progress left the publication; skipping it", "table", s.cur.Table)
		s.cur.Table, s.cur.LastKey = "", nil
	}
	return out, nil
}

// column is a column as the snapshot reads it.
type column struct {
	name    string
	oid     uint32
	typ     string // format_type, for casting key parameters
	primary int    // position in the primary key, from 1; 0 when not in it
}

// tableInfo describes a table for reading it in primary-key order.
type tableInfo struct {
	schema, table string
	cols          []column
	pk            []int // indexes into cols, in primary key order
	key           []string
}

func (s *snapshotRun) describe(ctx context.Context, tx pgx.Tx, name string) (*tableInfo, error) {
	schema, table, _ := strings.Cut(name, ".")
	ti := &tableInfo{schema: schema, table: table}
	reg := qualified(schema, table)
	// Generated columns are left out, as pgoutput leaves them out, so that
	// snapshot rows and streamed rows have the same columns. The type OID
	// is pg_attribute's, as in pgoutput's Relation message (a result's
	// row description would name a domain's base type instead).
	rows, err := tx.Query(ctx, `SELECT a.attname, a.atttypid, format_type(a.atttypid, a.atttypmod),
			coalesce((SELECT k.ord FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, ord) WHERE k.attnum = a.attnum), 0)::int,
			(c.relreplident = 'd' AND a.attnum = ANY (i.indkey::int2[])) OR (c.relreplident = 'i' AND a.attnum = ANY (ri.indkey::int2[]))
		FROM pg_attribute a
		JOIN pg_class c ON c.oid = a.attrelid
		LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary
		LEFT JOIN pg_index ri ON ri.indrelid = a.attrelid AND ri.indisreplident
		WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
		ORDER BY a.attnum`, reg)
	if err != nil {
		return nil, fmt.Errorf("pgcdc: snapshot: describing %s: %w", name, err)
	}
	for rows.Next() {
		var (
			c     column
			ident *bool
		)
		if err := rows.Scan(&c.name, &c.oid, &c.typ, &c.primary, &ident); err != nil {
			return nil, fmt.Errorf("pgcdc: snapshot: describing %s: %w", name, err)
		}
		if ident != nil && *ident {
			ti.key = append(ti.key, c.name)
		}
		ti.cols = append(ti.cols, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgcdc: snapshot: describing %s: %w", name, err)
	}
	for i, c := range ti.cols {
		if c.primary > 0 {
			ti.pk = append(ti.pk, i)
		}
	}
	slices.SortFunc(ti.pk, func(a, b int) int { return ti.cols[a].primary - ti.cols[b].primary })
	if len(ti.pk) == 0 {
		return nil, &kafkasink.ConfigError{Problems: []string{fmt.Sprintf(
			"pgcdc: snapshot: table %s has no primary key, and the snapshot reads tables in primary-key order: add a primary key or leave the table out of publication %q",
			name, s.r.cfg.Publication)}}
	}
	if s.r.cfg.KeyColumns != nil {
		if k := s.r.cfg.KeyColumns(schema, table); k != nil {
			ti.key = k
		}
	}
	return ti, nil
}

// table reads one table in chunks, each one Write with its cursor.
func (s *snapshotRun) table(ctx context.Context, tx pgx.Tx, name string, last bool) error {
	ti, err := s.describe(ctx, tx, name)
	if err != nil {
		return err
	}
	var lastKey []string
	if s.cur.Table == name {
		lastKey = s.cur.LastKey
	}
	if lastKey != nil && len(lastKey) != len(ti.pk) {
		return fmt.Errorf("%w: snapshot cursor of %s has a key of %d columns, the primary key has %d", kafkasink.ErrCheckpoint, name, len(lastKey), len(ti.pk))
	}
	cols := make([]string, len(ti.cols))
	for i, c := range ti.cols {
		cols[i] = pgx.Identifier{c.name}.Sanitize()
	}
	pk := make([]string, len(ti.pk))
	params := make([]string, len(ti.pk))
	for i, ci := range ti.pk {
		pk[i] = cols[ci]
		params[i] = fmt.Sprintf("$%d::%s", i+1, ti.cols[ci].typ)
	}
	from := "SELECT " + strings.Join(cols, ", ") + " FROM " + qualified(ti.schema, ti.table)
	order := " ORDER BY " + strings.Join(pk, ", ") + fmt.Sprintf(" LIMIT %d", s.r.cfg.SnapshotChunkRows)
	first := from + order
	// Keyset pagination: each chunk starts after the last key, so a chunk
	// costs the same wherever it is in the table, and a resumed run needs
	// only the last key.
	after := from + " WHERE (" + strings.Join(pk, ", ") + ") > (" + strings.Join(params, ", ") + ")" + order

	for {
		sql, args := first, [][]byte(nil)
		if lastKey != nil {
			sql = after
			for _, k := range lastKey {
				args = append(args, []byte(k))
			}
		}
		events, key, err := s.chunk(ctx, tx, ti, sql, args)
		if err != nil {
			return err
		}
		if len(events) < s.r.cfg.SnapshotChunkRows {
			s.cur.Table, s.cur.LastKey = "", nil
			s.cur.DoneTables = append(s.cur.DoneTables, name)
			s.cur.Done = last
		} else {
			s.cur.Table, s.cur.LastKey = name, key
		}
		if err := s.r.writeChunk(ctx, events, s.cur); err != nil {
			return err
		}
		s.r.log.Debug("snapshot chunk written", "table", name, "rows", len(events), "last_key", len(key) > 0)
		if s.cur.Table == "" {
			return nil
		}
		lastKey = key
	}
}

// chunk reads one chunk in text format, converting values by type OID as
// the decoder converts text-format replication values, and returns its
// events and the text form of its last primary key.
func (s *snapshotRun) chunk(ctx context.Context, tx pgx.Tx, ti *tableInfo, sql string, args [][]byte) ([]kafkasink.Event, []string, error) {
	rr := tx.Conn().PgConn().ExecParams(ctx, sql, args, nil, nil, nil)
	var (
		events []kafkasink.Event
		key    []string
	)
	for rr.NextRow() {
		vals := rr.Values()
		if len(vals) != len(ti.cols) {
			rr.Close()
			return nil, nil, fmt.Errorf("pgcdc: snapshot: %s.%s returned %d columns, want %d", ti.schema, ti.table, len(vals), len(ti.cols))
		}
		row := make(kafkasink.Row, len(vals))
		for i, v := range vals {
			row[i].Name = ti.cols[i].name
			if v == nil {
				continue
			}
			val, err := s.conv.text(ti.cols[i].oid, v)
			if err != nil {
				rr.Close()
				return nil, nil, fmt.Errorf("pgcdc: snapshot: column %q of %s.%s: value of type %s does not parse: %w",
					ti.cols[i].name, ti.schema, ti.table, ti.cols[i].typ, err)
			}
			row[i].Value = val
		}
		key = key[:0]
		for _, ci := range ti.pk {
			key = append(key, string(vals[ci]))
		}
		events = append(events, kafkasink.Event{
			Op:            kafkasink.OpRead,
			Schema:        ti.schema,
			Table:         ti.table,
			Position:      kafkasink.Position{LSN: s.lsn, Index: s.next},
			Key:           ti.key,
			After:         row,
			BackfillRunID: s.cur.Snapshot,
		})
		s.next++
	}
	if _, err := rr.Close(); err != nil {
		return nil, nil, fmt.Errorf("pgcdc: snapshot: reading %s.%s: %w", ti.schema, ti.table, err)
	}
	return events, key, nil
}

// writeChunk writes one snapshot chunk with its cursor, retrying retryable
// errors.
func (r *runner) writeChunk(ctx context.Context, events []kafkasink.Event, cur snapshotCursor) error {
	raw, err := json.Marshal(cur)
	if err != nil {
		return err
	}
	return writeRetrying(ctx, ctx, r.cfg, r.log, r.sink, kafkasink.Batch{Events: events, Cursor: raw})
}
