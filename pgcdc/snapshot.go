package pgcdc

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/pgcdc/pgoutput"
)

// snapshotCursor is the Batch.Cursor of every snapshot chunk, and so what
// the sink's checkpoint holds while a snapshot runs and after it ends.
type snapshotCursor struct {
	// Snapshot is the run id, Event.BackfillRunID of the run's rows.
	Snapshot string `json:"snapshot"`
	// LSN is the slot's consistent point: the Position.LSN of the rows.
	LSN string `json:"lsn"`
	// Table is the table being read ("schema.table"), LastKey the text
	// form of the key (KeyColumns) of the last row delivered from it;
	// both are empty between tables.
	Table   string   `json:"table,omitempty"`
	LastKey []string `json:"last_key,omitempty"`
	// KeyColumns names the columns of LastKey: the primary key, or the
	// replica identity index of a table without one. Empty in cursors
	// written before it existed, which hold a primary key.
	KeyColumns []string `json:"key_columns,omitempty"`
	// DoneTables are the tables read completely.
	DoneTables []string `json:"done_tables"`
	// Ranges are the key ranges of the tables a parallel snapshot
	// (Config.SnapshotWorkers) is reading, see keyRange.
	Ranges []keyRange `json:"ranges,omitempty"`
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

// snapshotPlan is what a Run does about the initial snapshot.
type snapshotPlan int

const (
	snapshotNone     snapshotPlan = iota // stream only
	snapshotExported                     // a new run, from the snapshot the slot exports as it is created
	snapshotResumed                      // the rest of the run the checkpoint shows unfinished
	snapshotCurrent                      // a new run of the database's current state
)

// planSnapshot decides what to do about the initial snapshot: a new run
// when the slot is being created (from the snapshot it exports) or when
// the sink has delivered nothing yet, else the rest of a run the checkpoint
// shows unfinished, else nothing. A re-snapshot a gap asked for (gap, see
// Config.SlotGap) is taken whatever on says.
func planSnapshot(on bool, ck kafkasink.Checkpoint, slotCreated bool, gap gapSnapshot) snapshotPlan {
	cur, ok := parseCursor(ck.Cursor)
	switch {
	case !on && gap == gapSnapshotNone:
		return snapshotNone
	case slotCreated:
		return snapshotExported
	case gap == gapSnapshotFresh:
		// A gap re-snapshotted on an existing slot: its exported
		// snapshot is long gone.
		return snapshotCurrent
	case ok && !cur.Done:
		return snapshotResumed
	case ck.Position.IsZero() && !ok:
		// The slot exists but nothing was delivered: a crash between
		// creating the slot and the first Write, or a new sink on an
		// old slot. The exported snapshot is gone, so the run reads
		// the current state; the stream from the slot's confirmed
		// position follows, and the topic converges as for a resumed
		// snapshot. (A checkpoint with a cursor but no position
		// records only confirmed positions, no row.)
		return snapshotCurrent
	default:
		return snapshotNone
	}
}

// checkSnapshot refuses, before the slot is created and before any row is
// written, a publication whose tables the planned snapshot cannot read.
func (r *runner) checkSnapshot(ctx context.Context, db *pgx.Conn, slotCreated bool, gap gapSnapshot) error {
	ck := r.sink.Checkpoint()
	plan := planSnapshot(r.cfg.Snapshot, ck, slotCreated, gap)
	if plan == snapshotNone {
		return nil
	}
	tables, err := r.capturedTables(ctx, db)
	if err != nil {
		return err
	}
	described, err := r.describeAll(ctx, db, tables)
	if err != nil {
		return err
	}
	if cur, ok := parseCursor(ck.Cursor); ok && plan == snapshotResumed {
		described = slices.DeleteFunc(described, func(t *tableInfo) bool { return slices.Contains(cur.DoneTables, t.name()) })
	}
	return refuseKeyless(described, plan, r.cfg.Publication)
}

// snapshot takes the initial snapshot as planSnapshot decides.
func (r *runner) snapshot(ctx context.Context, db *pgx.Conn, slot slotState, created *createdSlot) error {
	ck := r.sink.Checkpoint()
	cur, ok := parseCursor(ck.Cursor)
	var exported string
	plan := planSnapshot(r.cfg.Snapshot, ck, created != nil, r.ck.cur.gapSnapshot())
	switch plan {
	case snapshotNone:
		if !r.cfg.Snapshot && ok && !cur.Done {
			r.log.Warn("the checkpoint holds an unfinished snapshot, but Config.Snapshot is off: streaming without it", "snapshot", cur.Snapshot)
		}
		return nil
	case snapshotExported:
		cur = snapshotCursor{Snapshot: rand.Text(), LSN: created.consistent.String(), DoneTables: []string{}}
		exported = created.snapshot
	case snapshotResumed:
		r.log.Info("resuming snapshot", "snapshot", cur.Snapshot, "table", cur.Table, "done_tables", len(cur.DoneTables))
	case snapshotCurrent:
		cur = snapshotCursor{Snapshot: rand.Text(), LSN: slot.confirmed.String(), DoneTables: []string{}}
	}
	r.cfg.Monitor.setState(RunSnapshotting)
	lsn, err := kafkasink.ParseLSN(cur.LSN)
	if err != nil {
		return fmt.Errorf("%w: snapshot cursor: %v", kafkasink.ErrCheckpoint, err)
	}
	s := &snapshotRun{r: r, db: db, cur: cur, lsn: lsn, plan: plan}
	if plan == snapshotResumed {
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
	// values converts the rows and describes the tables as the stream's
	// decoder does, asking the snapshot's transaction about types.
	values *pgoutput.Values
	// xid and started are the snapshot transaction's id and start time.
	xid     uint32
	started time.Time
	plan    snapshotPlan
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
	// The transaction's id and start time are the snapshot's, which its
	// rows carry (Event.Source.SnapshotXID, SnapshotTime); the id is the
	// 32-bit one the stream's transactions carry. A standby cannot assign
	// one: there it is 0, unknown, as Debezium writes it.
	if err := tx.QueryRow(ctx, "SELECT CASE WHEN pg_is_in_recovery() THEN 0 ELSE txid_current() % 4294967296 END::bigint, now()").Scan(&s.xid, &s.started); err != nil {
		return fmt.Errorf("pgcdc: snapshot: reading the snapshot transaction's id and time: %w", err)
	}
	s.values = pgoutput.NewValues(func(oid uint32) (CatalogType, bool, error) { return describeType(ctx, tx, oid) })
	// The publication as of the snapshot is the publication pgoutput
	// applies to the changes right after it.
	published, err := s.r.capturedTables(ctx, tx)
	if err != nil {
		return err
	}
	// The snapshot reads every table published now: none of them is
	// one to backfill when the stream finds it in the publication.
	s.r.bf.knowTables(snapshotNames(published), false)
	tables, err := s.r.describeAll(ctx, tx, s.pending(published))
	if err != nil {
		return err
	}
	if err := refuseKeyless(tables, s.plan, s.r.cfg.Publication); err != nil {
		return err
	}
	if err := s.readTables(ctx, tx, tables); err != nil {
		return err
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

// lastWithRows returns the index of the last of tables that has a row to
// read, -1 when none has: the table whose last row is the run's last
// (SnapshotLast), whatever empty tables follow it. It asks from the end,
// so it usually costs one query.
func (s *snapshotRun) lastWithRows(ctx context.Context, tx pgx.Tx, tables []*tableInfo) (int, error) {
	for i := len(tables) - 1; i >= 0; i-- {
		rr := tx.Conn().PgConn().ExecParams(ctx, tables[i].anyRowQuery(), nil, nil, nil, nil)
		found := rr.NextRow()
		if _, err := rr.Close(); err != nil {
			return 0, fmt.Errorf("pgcdc: snapshot: reading %s: %w", tables[i].name(), err)
		}
		if found {
			return i, nil
		}
	}
	return -1, nil
}

// refuseKeyless refuses a snapshot run of plan that would read one of
// tables, those still to read, without a unique key (Config.KeylessTables)
// from another state than the slot's consistent point: a run that does not
// read the snapshot the slot exports as Run creates it, because it resumes
// an interrupted run or the slot existed before the run. Run asks before
// the slot is created and again before each attempt's snapshot reads a
// row.
//
// A table with a key can be read later than the consistent point: the
// rows changed since are read in their newer state and streamed as well,
// and a consumer converges by key. A table without one cannot: a row
// inserted since would be read and then streamed, two rows where the table
// has one, an updated row read new and then streamed as old-to-new, a
// deleted row streamed as deleted without having been read, and nothing
// tells the copies apart. Nor can such a table go on in its middle, or
// start over, after an interruption: its chunks are ranges of pages, a
// row's page is its place in the table, which a new transaction sees
// elsewhere for every row changed since (or all, after VACUUM FULL or
// CLUSTER), and starting over repeats the rows written. Refusing repeats
// and loses nothing.
func refuseKeyless(tables []*tableInfo, plan snapshotPlan, publication string) error {
	if plan == snapshotExported {
		return nil
	}
	var names []string
	for _, t := range tables {
		if t.byPages {
			names = append(names, t.name())
		}
	}
	if names == nil {
		return nil
	}
	why := "the snapshot run was interrupted, and the transaction that read the database at the slot's consistent point is gone"
	if plan != snapshotResumed {
		why = "the replication slot existed before this snapshot run, so the snapshot it exported when it was created is gone"
	}
	return &kafkasink.ConfigError{Problems: []string{fmt.Sprintf(
		"pgcdc: snapshot: %s: tables %s have no primary key or replica identity index (Config.KeylessTables), so they can only be read "+
			"at the slot's consistent point: read later, the rows changed since would be both read and streamed, or, inside a table, repeated or lost, "+
			"and nothing could tell the copies apart. Ways out: take a new snapshot into a new sink (a new kafkasink.Config.SinkID, -sink-id) "+
			"from a new slot (Config.Slot, -slot), which reads the snapshot the slot exports as Run creates it; give the tables a primary key "+
			"or a replica identity index (ALTER TABLE ... REPLICA IDENTITY USING INDEX ...); or leave them out of publication %q",
		why, strings.Join(names, ", "), publication)}}
}

// pending returns the published tables still to read, the one in progress
// first.
func (s *snapshotRun) pending(published []publishedTable) []publishedTable {
	var out []publishedTable
	for _, p := range published {
		switch name := p.name(); {
		case slices.Contains(s.cur.DoneTables, name):
		case name == s.cur.Table:
			out = slices.Insert(out, 0, p)
		default:
			out = append(out, p)
		}
	}
	if s.cur.Table != "" && (len(out) == 0 || out[0].name() != s.cur.Table) {
		s.r.log.Warn("snapshot: the table in progress left the publication; skipping it", "table", s.cur.Table)
		s.cur.Table, s.cur.LastKey, s.cur.KeyColumns = "", nil, nil
	}
	return out
}

// column is a column as the snapshot reads it.
type column struct {
	name    string
	oid     uint32
	typmod  int32  // atttypmod, for Event.Relation
	notNull bool   // attnotnull, for Event.Relation
	def     string // the DEFAULT expression (pg_get_expr), for Event.Relation
	typ     string // format_type, for casting key parameters
}

// tableInfo is how the snapshot reads one published table: the published
// columns of the published rows, in chunks ordered by a unique key.
type tableInfo struct {
	publishedTable
	cols []column // the published columns, in table order: an event's row
	// chunkKey orders the rows and resumes after the last one read: the
	// primary key, else the replica identity index. It need not be
	// published: it is read after cols and not delivered.
	chunkKey []column
	// byPages is set for a table with no such key (Config.KeylessTables):
	// it is read in ranges of pages (ctid), see readPages.
	byPages bool
	key     []string // Event.Key, as the decoder derives it from the Relation message
	keyless bool     // Event.Keyless: no key at all, under Config.KeylessTables
}

// describeAll describes every table before any is read, so that a table
// the snapshot cannot read is refused before another table's rows are
// written. It returns one *kafkasink.ConfigError naming every such table.
func (r *runner) describeAll(ctx context.Context, q querier, tables []publishedTable) ([]*tableInfo, error) {
	var (
		out      []*tableInfo
		problems []string
	)
	for _, p := range tables {
		ti, problem, err := r.describe(ctx, q, p)
		if err != nil {
			return nil, err
		}
		if problem != "" {
			problems = append(problems, problem)
			continue
		}
		out = append(out, ti)
	}
	if problems != nil {
		return nil, &kafkasink.ConfigError{Problems: problems}
	}
	return out, nil
}

// describe returns how to read table p, or the problem that keeps the
// snapshot from reading it.
func (r *runner) describe(ctx context.Context, q querier, p publishedTable) (*tableInfo, string, error) {
	ti := &tableInfo{publishedTable: p}
	pk, ri, err := ti.readColumns(ctx, q)
	if err != nil {
		return nil, "", err
	}
	switch {
	case pk != nil:
		ti.chunkKey = pk
	case ri != nil:
		ti.chunkKey = ri
	case !r.cfg.KeylessTables:
		return nil, fmt.Sprintf("pgcdc: snapshot: table %s has no primary key and no replica identity index, so the snapshot cannot read it in resumable chunks: "+
			"add a primary key, or make a unique index over NOT NULL columns its replica identity (ALTER TABLE %s REPLICA IDENTITY USING INDEX ...), "+
			"or leave the table out of publication %q, or turn the snapshot off (Config.Snapshot, flag -snapshot); "+
			"or read it as Debezium does, with null keys and a snapshot that cannot resume in its middle (Config.KeylessTables, flag -keyless-tables)",
			p.name(), qualified(p.schema, p.table), r.cfg.Publication), nil
	case p.partitioned:
		// Its partitions' pages are numbered each on its own.
		return nil, fmt.Sprintf("pgcdc: snapshot: partitioned table %s has no primary key and no replica identity index, and publication %q publishes it "+
			"through its root (publish_via_partition_root), so the snapshot has no order to read its rows in: add a primary key, or publish its "+
			"partitions as themselves (ALTER PUBLICATION %s SET (publish_via_partition_root = false)), or turn the snapshot off (Config.Snapshot, flag -snapshot)",
			p.name(), r.cfg.Publication, pgx.Identifier{r.cfg.Publication}.Sanitize()), nil
	default:
		ti.byPages = true
	}
	if problem, err := r.eventKey(ctx, q, ti); problem != "" || err != nil {
		return nil, problem, err
	}
	ti.keyless = r.cfg.KeylessTables && len(ti.key) == 0
	return ti, "", nil
}

// readColumns reads the table's published columns into ti.cols and the
// key pgoutput flags among them into ti.key, and returns the primary key
// and the replica identity index, each in index order (nil when the table
// has none).
func (ti *tableInfo) readColumns(ctx context.Context, q querier) (pk, ri []column, err error) {
	name := qualified(ti.schema, ti.table)
	// The type OID is pg_attribute's, as in pgoutput's Relation message
	// (a result's row description would name a domain's base type
	// instead). The replica identity columns are those pgoutput flags:
	// the primary key's with REPLICA IDENTITY DEFAULT, the index's with
	// USING INDEX; with FULL it flags every column and the decoder takes
	// none, with NOTHING there are none.
	rows, err := q.Query(ctx, `SELECT a.attname, a.atttypid, a.atttypmod, a.attnotnull, `+columnDefault+`, format_type(a.atttypid, a.atttypmod),
			coalesce((SELECT k.ord FROM unnest(pk.indkey::int2[]) WITH ORDINALITY k(attnum, ord) WHERE k.attnum = a.attnum), 0)::int,
			coalesce((SELECT k.ord FROM unnest(ri.indkey::int2[]) WITH ORDINALITY k(attnum, ord) WHERE k.attnum = a.attnum), 0)::int,
			c.relreplident::text
		FROM pg_attribute a
		JOIN pg_class c ON c.oid = a.attrelid
		LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		LEFT JOIN pg_index pk ON pk.indrelid = c.oid AND pk.indisprimary
		LEFT JOIN pg_index ri ON ri.indrelid = c.oid AND ri.indisreplident
		WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped
		ORDER BY a.attnum`, name)
	if err != nil {
		return nil, nil, fmt.Errorf("pgcdc: snapshot: describing %s: %w", name, err)
	}
	var pkOrd, riOrd, keyOrd []int
	for rows.Next() {
		var (
			c            column
			inPK, inRI   int
			replIdentity string
		)
		if err := rows.Scan(&c.name, &c.oid, &c.typmod, &c.notNull, &c.def, &c.typ, &inPK, &inRI, &replIdentity); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("pgcdc: snapshot: describing %s: %w", name, err)
		}
		published := slices.Contains(ti.columns, c.name)
		if published {
			ti.cols = append(ti.cols, c)
		}
		if inPK > 0 {
			pk, pkOrd = append(pk, c), append(pkOrd, inPK)
		}
		if inRI > 0 {
			ri, riOrd = append(ri, c), append(riOrd, inRI)
		}
		// pgoutput flags only the identity columns it sends; the
		// key lists them in the index's order, as the stream does.
		switch {
		case published && replIdentity == "d" && inPK > 0:
			ti.key, keyOrd = append(ti.key, c.name), append(keyOrd, inPK)
		case published && replIdentity == "i" && inRI > 0:
			ti.key, keyOrd = append(ti.key, c.name), append(keyOrd, inRI)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("pgcdc: snapshot: describing %s: %w", name, err)
	}
	sort.Sort(byIndexOrder{ti.key, keyOrd})
	if pk != nil {
		pk = inIndexOrder(pk, pkOrd)
	}
	if ri != nil {
		ri = inIndexOrder(ri, riOrd)
	}
	return pk, ri, nil
}

// eventKey settles ti.key, the Event.Key of the table's rows, as the
// stream does: Config.KeyColumns when it names the table (the problem when it
// names a column the publication leaves out), else the replica identity
// columns readColumns found, else the catalog's primary key.
func (r *runner) eventKey(ctx context.Context, q querier, ti *tableInfo) (problem string, err error) {
	if k, ok := r.cfg.KeyColumns.Columns(ti.schema, ti.table); ok {
		for _, col := range k {
			if !slices.Contains(ti.columns, col) {
				return fmt.Sprintf("pgcdc: Config.KeyColumns names column %q of table %s, which publication %q does not publish: add it to the publication's column list or name another key column",
					col, ti.name(), r.cfg.Publication), nil
			}
		}
		ti.key = k
	}
	if ti.key != nil {
		return "", nil
	}
	// The replica identity does not name the rows (FULL, NOTHING):
	// key them as the stream does.
	name := qualified(ti.schema, ti.table)
	var oid uint32
	if err := q.QueryRow(ctx, "SELECT $1::regclass::oid", name).Scan(&oid); err != nil {
		return "", fmt.Errorf("pgcdc: snapshot: describing %s: %w", name, err)
	}
	ti.key, err = r.catalog.key(ctx, q, oid, ti.schema, ti.table, ti.columns)
	return "", err
}

// byIndexOrder sorts column names by their positions in an index.
type byIndexOrder struct {
	names []string
	ord   []int
}

func (b byIndexOrder) Len() int           { return len(b.names) }
func (b byIndexOrder) Less(i, j int) bool { return b.ord[i] < b.ord[j] }
func (b byIndexOrder) Swap(i, j int) {
	b.names[i], b.names[j] = b.names[j], b.names[i]
	b.ord[i], b.ord[j] = b.ord[j], b.ord[i]
}

// inIndexOrder returns cols sorted by their positions in an index.
func inIndexOrder(cols []column, ord []int) []column {
	out := make([]column, len(cols))
	for i, c := range cols {
		out[ord[i]-1] = c
	}
	return out
}

// table reads one table in chunks, each one Write with its cursor. last
// says the table is the run's last, lastWithRows that no later table has
// a row, so that its last row is the run's last.
func (s *snapshotRun) table(ctx context.Context, tx pgx.Tx, ti *tableInfo, last, lastWithRows bool) error {
	name := ti.name()
	estimate, err := estimateRows(ctx, tx, ti)
	if err != nil {
		return err
	}
	s.r.cfg.Monitor.snapshotTable(name, 0, knownRows(estimate))
	keyNames := columnNames(ti.chunkKey)
	relation, err := s.values.Relation(ti.describeColumns())
	if err != nil {
		return err
	}
	if ti.byPages {
		if err := s.readPages(ctx, tx, ti, relation, last, lastWithRows); err != nil {
			return err
		}
		s.r.noteColumns(ti.schema, ti.table, columnNames(ti.cols), "snapshot")
		return nil
	}
	lastKey, err := s.cur.resumeKey(ti, keyNames)
	if err != nil {
		return err
	}
	// Each query reads one row past the chunk, to know whether the
	// chunk's last row is the table's last (SnapshotLastInTable).
	first, after := ti.chunkQueries(s.r.cfg.SnapshotChunkRows + 1)
	firstChunk := lastKey == nil
	for {
		sql, args := first, [][]byte(nil)
		if lastKey != nil {
			sql = after
			for _, k := range lastKey {
				args = append(args, []byte(k))
			}
		}
		events, key, more, err := s.chunk(ctx, tx, ti, relation, sql, args, s.r.cfg.SnapshotChunkRows)
		if err != nil {
			return err
		}
		s.mark(events, firstChunk, !more, lastWithRows)
		firstChunk = false
		if !more {
			s.cur.Table, s.cur.LastKey, s.cur.KeyColumns = "", nil, nil
			s.cur.DoneTables = append(s.cur.DoneTables, name)
			s.cur.Done = last
		} else {
			s.cur.Table, s.cur.LastKey, s.cur.KeyColumns = name, key, keyNames
		}
		if err := s.r.writeChunk(ctx, events, s.cur); err != nil {
			return err
		}
		s.r.log.Debug("snapshot chunk written", "table", name, "rows", len(events), "last_key", len(key) > 0)
		if s.cur.Table == "" {
			break
		}
		lastKey = key
	}
	s.r.noteColumns(ti.schema, ti.table, columnNames(ti.cols), "snapshot")
	return nil
}

// resumeKey returns the key of the last row the cursor says was read from
// the table, nil to read it from the start. keyNames are the columns of
// ti.chunkKey, which must be the cursor's.
func (c snapshotCursor) resumeKey(ti *tableInfo, keyNames []string) ([]string, error) {
	name := ti.name()
	if c.Table != name {
		return nil, nil
	}
	lastKey := c.LastKey
	// A cursor written before KeyColumns existed holds a primary
	// key.
	if c.KeyColumns != nil && !slices.Equal(c.KeyColumns, keyNames) {
		return nil, fmt.Errorf("%w: the snapshot cursor of %s resumes after a key of columns %v, but the table is now read by %v: "+
			"restore the table's key, or take a new snapshot into a new sink (a new sink id)", kafkasink.ErrCheckpoint, name, c.KeyColumns, keyNames)
	}
	if lastKey != nil && len(lastKey) != len(ti.chunkKey) {
		return nil, fmt.Errorf("%w: snapshot cursor of %s has a key of %d columns, the table's key has %d", kafkasink.ErrCheckpoint, name, len(lastKey), len(ti.chunkKey))
	}
	return lastKey, nil
}

// chunkQueries returns the queries of the table's chunks of rows rows:
// first reads the first chunk, after the chunk after the key its
// parameters hold. Both select the published columns, then the chunk key.
func (ti *tableInfo) chunkQueries(rows int) (first, after string) {
	key, cast := ti.keyList()
	params := cast(1)
	from := ti.selectFrom(append(ti.selectList(), key...))
	where := ti.filter()
	order := " ORDER BY " + strings.Join(key, ", ") + fmt.Sprintf(" LIMIT %d", rows)
	first = from + whereClause(where) + order
	// Keyset pagination: each chunk starts after the last key, so a chunk
	// costs the same wherever it is in the table, and a resumed run needs
	// only the last key.
	after = from + whereClause(append(where, "("+strings.Join(key, ", ")+") > ("+strings.Join(params, ", ")+")")) + order
	return first, after
}

// pagesQuery returns the query of a chunk of a table read by pages: the
// published columns of the rows in pages $1 up to $2 (exclusive), in
// their order in the table. On PostgreSQL 14 and later the ctid range
// reads just those pages (a TID range scan).
func (ti *tableInfo) pagesQuery() string {
	where := append(ti.filter(), "ctid >= format('(%s,0)', $1::bigint)::tid", "ctid < format('(%s,0)', $2::bigint)::tid")
	return ti.selectFrom(ti.selectList()) + whereClause(where) + " ORDER BY ctid"
}

// anyRowQuery returns a query that returns a row when the table has a row
// to read.
func (ti *tableInfo) anyRowQuery() string {
	return ti.selectFrom([]string{"1"}) + whereClause(ti.filter()) + " LIMIT 1"
}

// selectList returns the published columns, quoted.
func (ti *tableInfo) selectList() []string {
	sel := make([]string, 0, len(ti.cols)+len(ti.chunkKey))
	for _, c := range ti.cols {
		sel = append(sel, pgx.Identifier{c.name}.Sanitize())
	}
	return sel
}

// selectFrom returns SELECT sel FROM the table.
func (ti *tableInfo) selectFrom(sel []string) string {
	from := " FROM ONLY "
	if ti.partitioned {
		// Its rows are in its partitions.
		from = " FROM "
	}
	return "SELECT " + strings.Join(sel, ", ") + from + qualified(ti.schema, ti.table)
}

// filter returns the conditions every query of the table applies: the
// publication's row filter, where pgoutput applies it to the stream, so
// the snapshot holds the rows the stream would have delivered.
func (ti *tableInfo) filter() []string {
	if ti.rowFilter == "" {
		return nil
	}
	return []string{"(" + ti.rowFilter + ")"}
}

func whereClause(conds []string) string {
	if len(conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conds, " AND ")
}

// describeColumns returns the published columns for Event.Relation.
func (ti *tableInfo) describeColumns() []pgoutput.Column {
	out := make([]pgoutput.Column, len(ti.cols))
	for i, c := range ti.cols {
		out[i] = pgoutput.Column{Name: c.name, OID: c.oid, Typmod: c.typmod, NotNull: c.notNull, Default: c.def}
	}
	return out
}

func columnNames(cols []column) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.name
	}
	return out
}

// mark sets Event.Source.Snapshot on the rows of one chunk of a table:
// firstChunk when the chunk is the table's first in this run, lastChunk
// when no row follows it, lastTable when no later table has a row.
func (s *snapshotRun) mark(events []kafkasink.Event, firstChunk, lastChunk, lastTable bool) {
	if len(events) == 0 {
		return
	}
	if firstChunk {
		events[0].Source.Snapshot |= kafkasink.SnapshotFirstInTable
		if events[0].Position.Index == 0 {
			events[0].Source.Snapshot |= kafkasink.SnapshotFirst
		}
	}
	if lastChunk {
		events[len(events)-1].Source.Snapshot |= kafkasink.SnapshotLastInTable
		if lastTable {
			events[len(events)-1].Source.Snapshot |= kafkasink.SnapshotLast
		}
	}
}

// chunk reads one chunk of at most limit rows on the run's transaction
// (see readChunk) and numbers its rows on from the run's last.
func (s *snapshotRun) chunk(ctx context.Context, tx pgx.Tx, ti *tableInfo, relation *kafkasink.Relation, sql string, args [][]byte, limit int) ([]kafkasink.Event, []string, bool, error) {
	events, key, more, err := readChunk(ctx, tx.Conn().PgConn(), s.values, s.rowEvent(ti, relation), sql, args, limit)
	s.number(events)
	return events, key, more, err
}

// rowEvent returns the event every row of table ti carries, but for its
// row image and position.
func (s *snapshotRun) rowEvent(ti *tableInfo, relation *kafkasink.Relation) rowTemplate {
	return rowTemplate{ti: ti, event: kafkasink.Event{
		Op:            kafkasink.OpRead,
		Schema:        ti.schema,
		Table:         ti.table,
		Position:      kafkasink.Position{LSN: s.lsn},
		Key:           ti.key,
		Keyless:       ti.keyless,
		Relation:      relation,
		BackfillRunID: s.cur.Snapshot,
		Source:        kafkasink.Source{Database: s.r.database, SnapshotXID: s.xid, SnapshotTime: s.started},
	}}
}

// number gives events the run's next row indexes.
func (s *snapshotRun) number(events []kafkasink.Event) {
	for i := range events {
		events[i].Position = kafkasink.Position{LSN: s.lsn, Index: s.next}
		s.next++
	}
}

// maxPrealloc bounds the events readChunk makes room for at once (5 MB of
// events, a default chunk's 10 000 fit); a larger chunk, and a chunk of
// pages, which has no row limit, grow past it.
const maxPrealloc = 1 << 14

// rowTemplate is a table's snapshot event without its row.
type rowTemplate struct {
	ti    *tableInfo
	event kafkasink.Event
}

// readChunk reads one chunk of at most limit rows in text format on conn,
// converting values by type OID as the decoder converts text-format
// replication values, and returns its events (unnumbered), the text form
// of its last chunk key, and whether the query returned a row past the
// chunk, which is left for the next chunk. The query selects the
// published columns, then the chunk key.
func readChunk(ctx context.Context, conn *pgconn.PgConn, values *pgoutput.Values, tmpl rowTemplate, sql string, args [][]byte, limit int) ([]kafkasink.Event, []string, bool, error) {
	ti := tmpl.ti
	rr := conn.ExecParams(ctx, sql, args, nil, nil, nil)
	var (
		// Sized for a full chunk: growing a slice of events as large
		// as these by appending copied them over and over (a sixth of
		// a snapshot's CPU).
		events = make([]kafkasink.Event, 0, min(limit, maxPrealloc))
		key    []string
		more   bool
	)
	for rr.NextRow() {
		if len(events) == limit {
			more = true
			break
		}
		vals := rr.Values()
		if len(vals) != len(ti.cols)+len(ti.chunkKey) {
			rr.Close()
			return nil, nil, false, fmt.Errorf("pgcdc: snapshot: %s returned %d columns, want %d", ti.name(), len(vals), len(ti.cols)+len(ti.chunkKey))
		}
		row := make(kafkasink.Row, len(ti.cols))
		for i, v := range vals[:len(ti.cols)] {
			row[i].Name = ti.cols[i].name
			if v == nil {
				continue
			}
			val, err := values.Text(ti.cols[i].oid, v)
			if err != nil {
				rr.Close()
				// The same row would fail again: a DecodeError
				// stops Run instead of retrying for ever.
				return nil, nil, false, &DecodeError{LSN: tmpl.event.Position.LSN, Type: "snapshot row", Err: fmt.Errorf("column %q of %s: value of type %s does not parse: %w",
					ti.cols[i].name, ti.name(), ti.cols[i].typ, err)}
			}
			row[i].Value = val
		}
		key = key[:0]
		for _, v := range vals[len(ti.cols):] {
			key = append(key, string(v))
		}
		ev := tmpl.event
		ev.After = row
		events = append(events, ev)
	}
	if _, err := rr.Close(); err != nil {
		return nil, nil, false, fmt.Errorf("pgcdc: snapshot: reading %s: %w", ti.name(), err)
	}
	return events, key, more, nil
}

// writeChunk writes one snapshot chunk with its cursor, retrying retryable
// errors.
func (r *runner) writeChunk(ctx context.Context, events []kafkasink.Event, cur snapshotCursor) error {
	if err := r.writeSnapshotCursor(ctx, events, cur); err != nil {
		return err
	}
	r.cfg.Monitor.snapshotChunk(len(events), cur)
	return nil
}

// writeSnapshotCursor writes events with the snapshot cursor cur,
// retrying retryable errors.
func (r *runner) writeSnapshotCursor(ctx context.Context, events []kafkasink.Event, cur snapshotCursor) error {
	next := r.ck.cur
	next.snapshot = &cur
	return r.writeCursor(ctx, next, events)
}
