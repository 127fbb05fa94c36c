package pgcdc

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafkasink/kafkasink"
	"github.com/kafkasink/kafkasink/pgcdc/pgoutput"
)

// backfiller runs the backfills of one Run while it streams. The stream's
// pump owns it during a session (the writer only clears inFlight); the
// runner between sessions.
//
// Chunks run in the pump, between two source transactions, one at a time:
// the stream waits for a chunk's query (so its latency grows by at most
// one chunk) and goes on while the chunk is written; the next chunk runs
// once the writer has written this one.
type backfiller struct {
	r    *runner
	ctrl *Backfills // Config.Backfills, nil when unset

	// live is the backfills as the pump has them: the checkpoint's, with
	// what the pump changed since; changed says the current batch must
	// carry them (batch.backfills).
	live       backfillList
	lastSignal signalPos
	changed    bool
	// pending are the signals of the transaction being decoded, taken
	// at its commit.
	pending []pendingSignal

	conn *pgx.Conn // the backfill's ordinary connection, nil until needed
	win  *window
	// pos is the position of the last event the pump emitted or the
	// checkpoint holds: a chunk's rows follow it.
	pos kafkasink.Position
	// inFlight is set while a chunk is handed to the writer and not yet
	// written; the writer clears it and pokes wake.
	inFlight atomic.Bool
	wake     chan struct{}
	// retryAt is when a chunk that had to wait is read again.
	retryAt time.Time
	timer   *time.Timer
	// rates and estimates are, by backfill id, where the backfill stood
	// when this session began or accepted it, and the table's row
	// estimate as its last chunk read it (Monitor.Stats).
	rates     map[string]rateMark
	estimates map[string]int64
	// known are the publication's tables as the pump last compared
	// them (tableNames), asked the tables whose Relation message asked
	// for a reading since (see backfill_added.go).
	known []string
	asked map[string]bool
}

// rateMark is where a backfill stood at a moment.
type rateMark struct {
	at   time.Time
	rows int64
}

// pendingSignal is a signal of a transaction not yet committed.
type pendingSignal struct {
	xid     uint32
	lsn     kafkasink.LSN // the message's own
	content []byte
}

// backfillRetry is how long a chunk that cannot be read safely yet waits
// before it is read again.
const backfillRetry = 100 * time.Millisecond

// DefaultBackfillChunkRows is Config.BackfillChunkRows's default, as
// Debezium's incremental.snapshot.chunk.size.
const DefaultBackfillChunkRows = 1024

// begin starts a session: the backfills are the checkpoint's, and what
// the previous session changed without writing it is gone with it (a
// Backfills call that returned was written, see Backfills).
func (b *backfiller) begin(s *session) {
	b.live = b.r.ck.cur.Backfills.clone()
	b.lastSignal = b.r.ck.cur.LastSignal
	b.changed = false
	b.pending = nil
	b.win = newWindow()
	for _, c := range b.live {
		b.win.track(c.Table)
		b.r.log.Info("backfill resumed from the checkpoint", "backfill", c.ID, "table", c.Table, "rows", c.Rows, "chunks", c.Chunks, "paused", c.Paused)
	}
	b.pos = b.r.sink.Checkpoint().Position
	b.inFlight.Store(false)
	b.wake = make(chan struct{}, 1)
	b.retryAt = time.Time{}
	b.rates, b.estimates = make(map[string]rateMark), make(map[string]int64)
	if b.r.cfg.BackfillAddedTables {
		b.known = slices.Clone(b.r.ck.cur.Tables)
	}
	b.asked = make(map[string]bool)
	b.publish()
	b.ctrl.attach(b.wake)
	b.r.watch.attach(b.wake)
	// A reading at once: a table that joined while no session streamed
	// is noticed now.
	poke(b.r.watch.ask)
}

// end ends a session.
func (b *backfiller) end() {
	b.ctrl.attach(nil)
	b.r.watch.attach(nil)
	if b.timer != nil {
		b.timer.Stop()
	}
	if b.conn != nil {
		closeConn(b.conn)
		b.conn = nil
	}
}

// observe notes an event the pump emits.
func (b *backfiller) observe(e *kafkasink.Event) {
	b.signalRow(e)
	if e.Position.Compare(b.pos) > 0 {
		b.pos = e.Position
	}
	t := e.Schema + "." + e.Table
	for _, c := range b.live {
		if c.Table == t {
			b.win.observe(e, t, c.KeyColumns)
			return
		}
	}
	b.win.txn(e.XID)
}

// connection returns the backfill's connection, opening it when needed.
func (b *backfiller) connection(ctx context.Context) (*pgx.Conn, error) {
	if b.conn == nil {
		conn, err := b.r.cfg.connect(ctx, "backfill connection")
		if err != nil {
			return nil, err
		}
		b.conn = conn
	}
	return b.conn, nil
}

// dropConn forgets a connection that failed.
func (b *backfiller) dropConn() {
	if b.conn != nil {
		closeConn(b.conn)
		b.conn = nil
	}
}

// refused logs a refused request or signal and notes it in the Monitor.
func (b *backfiller) refused(err error, by string) {
	b.r.log.Warn("backfill refused; the stream goes on", "by", by, "error", err)
	b.r.cfg.Monitor.backfillFailed(err)
}

// readOnly runs fn in a REPEATABLE READ, READ ONLY transaction on the
// backfill's connection. A failure of the connection itself drops it, to
// connect again next time.
func (b *backfiller) readOnly(ctx context.Context, fn func(tx pgx.Tx) error) error {
	conn, err := b.connection(ctx)
	if err != nil {
		return err
	}
	err = pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
	if err != nil && conn.IsClosed() {
		b.dropConn()
	}
	return err
}

// accept checks a request and adds it to the live backfills. Every check
// is made before anything is written: the table is in the publication and
// has a key to read it by, no backfill of it runs, and PostgreSQL
// accepts the condition (it plans the chunk query, which runs nothing).
func (b *backfiller) accept(ctx context.Context, req BackfillRequest, by string) (backfillCursor, error) {
	schema, table, err := splitTable(req.Table)
	if err != nil {
		return backfillCursor{}, &BackfillError{Table: req.Table, Problem: "the table name does not parse", Err: err}
	}
	name := schema + "." + table
	if err := b.live.busy(name); err != nil {
		return backfillCursor{}, err
	}
	if err := checkWhere(req.Where); err != nil {
		return backfillCursor{}, &BackfillError{Table: name, Problem: err.Error()}
	}
	c := backfillCursor{ID: rand.Text(), Table: name, Where: req.Where, Requested: time.Now().UTC(), By: by}
	err = b.readOnly(ctx, func(tx pgx.Tx) error {
		ti, err := b.describe(ctx, tx, schema, table)
		if err != nil {
			return err
		}
		c.KeyColumns = columnNames(ti.chunkKey)
		sql, _ := backfillQuery(ti, req.Where, false, 1)
		if _, err := tx.Exec(ctx, "EXPLAIN "+sql); err != nil {
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "42501" { // insufficient_privilege
				return &BackfillError{Table: name, Problem: "Run's role may not read the table: GRANT SELECT on it to the role", Err: err}
			}
			return &BackfillError{Table: name, Problem: fmt.Sprintf("PostgreSQL refuses the condition %q; it may use the table's published columns only", req.Where), Err: err}
		}
		return nil
	})
	if err != nil {
		return backfillCursor{}, err
	}
	b.live = append(b.live, c)
	b.win.track(name)
	b.changed = true
	b.r.log.Info("backfill accepted", "backfill", c.ID, "table", name, "where", req.Where, "by", by)
	return c, nil
}

// describe returns how to read schema.table for a backfill, or a
// *BackfillError saying why it cannot be read.
func (b *backfiller) describe(ctx context.Context, tx pgx.Tx, schema, table string) (*tableInfo, error) {
	name := schema + "." + table
	if !b.r.filter.table(schema, table) {
		return nil, &BackfillError{Table: name, Problem: "the capture's include and exclude lists (Config.SchemaIncludeList, TableIncludeList, ...) leave the table out, " +
			"so its rows would not be delivered: name a captured table, or change the lists"}
	}
	published, err := publishedTables(ctx, tx, b.r.cfg.Publication)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(published, func(p publishedTable) bool { return p.schema == schema && p.table == table })
	if i < 0 {
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", qualified(schema, table)).Scan(&exists); err != nil {
			return nil, err
		}
		if !exists {
			return nil, &BackfillError{Table: name, Problem: "no such table: name it as schema.table, as the database spells it"}
		}
		return nil, &BackfillError{Table: name, Problem: fmt.Sprintf("the table is not in publication %q, so its rows would not be streamed either: "+
			"add it (ALTER PUBLICATION ... ADD TABLE), or name a published table", b.r.cfg.Publication)}
	}
	ti, problem, err := b.r.describe(ctx, tx, published[i])
	switch {
	case err != nil:
		return nil, err
	case problem != "":
		return nil, &BackfillError{Table: name, Problem: problem}
	case ti.byPages:
		// Config.KeylessTables admits such a table to the initial
		// snapshot, read at the slot's consistent point; a backfill
		// reads while the stream runs, in chunks ordered by key, and
		// drops the rows a streamed change touched by key: without
		// one it can do neither.
		return nil, &BackfillError{Table: name, Problem: "the table has no primary key and no replica identity index, which a backfill needs to read it in chunks " +
			"and to tell its rows from the stream's changes, Config.KeylessTables or not: add a primary key, or make a unique index over NOT NULL columns " +
			"its replica identity (ALTER TABLE ... REPLICA IDENTITY USING INDEX ...)"}
	}
	for _, k := range ti.chunkKey {
		if !slices.Contains(ti.columns, k.name) {
			return nil, &BackfillError{Table: name, Problem: fmt.Sprintf("publication %q leaves out key column %q, which a backfill needs to tell its rows from the stream's changes: "+
				"add the column to the publication's column list", b.r.cfg.Publication, k.name)}
		}
	}
	return ti, nil
}

// backfillQuery returns the query of a chunk of ti of rows rows: the
// published columns, then the chunk key, of the rows the publication
// publishes and where matches, after the key its parameters hold (when
// after). where is applied to a subquery that holds only the published
// columns of the published rows: it cannot see, nor lift, what the
// publication leaves out.
func backfillQuery(ti *tableInfo, where string, after bool, rows int) (string, []string) {
	key := make([]string, len(ti.chunkKey))
	params := make([]string, len(ti.chunkKey))
	for i, c := range ti.chunkKey {
		key[i] = pgx.Identifier{c.name}.Sanitize()
		params[i] = fmt.Sprintf("$%d::%s", i+1, c.typ)
	}
	inner := ti.selectFrom(ti.selectList()) + whereClause(ti.filter())
	var conds []string
	if where != "" {
		conds = append(conds, "("+where+")")
	}
	if after {
		conds = append(conds, "("+strings.Join(key, ", ")+") > ("+strings.Join(params, ", ")+")")
	}
	sql := "SELECT " + strings.Join(append(ti.selectList(), key...), ", ") + " FROM (" + inner + ") AS " + pgx.Identifier{ti.table}.Sanitize() +
		whereClause(conds) + " ORDER BY " + strings.Join(key, ", ") + " LIMIT " + strconv.Itoa(rows)
	return sql, key
}

// checkWhere refuses a condition that is not one SQL expression: one that
// closes a parenthesis it did not open, ends inside a string, quoted name
// or comment, or holds a semicolon. The chunk query puts it in
// parentheses; without this check, "true) OR (true" would widen them.
func checkWhere(where string) error {
	depth := 0
	for i := 0; i < len(where); i++ {
		switch c := where[i]; {
		case c == '\'' || c == '"':
			end, ok := quotedEnd(where, i, c, c == '\'' && i > 0 && (where[i-1] == 'E' || where[i-1] == 'e'))
			if !ok {
				return fmt.Errorf("the condition %q ends inside a quoted string or name", where)
			}
			i = end
		case c == '$':
			// A dollar-quoted string: $tag$ ... $tag$.
			j := i + 1
			for j < len(where) && (where[j] == '_' || where[j] >= 'a' && where[j] <= 'z' || where[j] >= 'A' && where[j] <= 'Z' || where[j] >= '0' && where[j] <= '9') {
				j++
			}
			if j < len(where) && where[j] == '$' && (j == i+1 || where[i+1] < '0' || where[i+1] > '9') {
				tag := where[i : j+1]
				k := strings.Index(where[j+1:], tag)
				if k < 0 {
					return fmt.Errorf("the condition %q ends inside a dollar-quoted string", where)
				}
				i = j + k + len(tag)
			}
		case c == '-' && i+1 < len(where) && where[i+1] == '-', c == '/' && i+1 < len(where) && where[i+1] == '*':
			return fmt.Errorf("the condition %q holds a comment: leave it out", where)
		case c == ';':
			return fmt.Errorf("the condition %q holds a semicolon: give one boolean expression, such as region = 'eu'", where)
		case c == '(':
			depth++
		case c == ')':
			depth--
			if depth < 0 {
				return fmt.Errorf("the condition %q closes a parenthesis it did not open", where)
			}
		}
	}
	if depth != 0 {
		return fmt.Errorf("the condition %q leaves a parenthesis open", where)
	}
	return nil
}

// quotedEnd returns the index of the quote that closes the string or
// name opening at where[i]: q doubled stands for itself, and in an
// E'...' string a backslash escapes the next byte.
func quotedEnd(where string, i int, q byte, backslash bool) (int, bool) {
	for j := i + 1; j < len(where); j++ {
		switch {
		case backslash && where[j] == '\\':
			j++
		case where[j] == q && j+1 < len(where) && where[j+1] == q:
			j++
		case where[j] == q:
			return j, true
		}
	}
	return 0, false
}

// backfillStep does, between two source transactions, what the backfills ask:
// the calls of Config.Backfills, then one chunk when one is due. The
// pump calls it whenever it is between transactions.
func (s *session) backfillStep() error {
	b := s.bf
	if b == nil || s.dec.InTransaction() {
		return nil
	}
	if list := b.r.watch.take(); list != nil {
		b.tablesRead(s.ctx, list)
	}
	cmds := b.ctrl.take()
	replies := make([]backfillReply, len(cmds))
	for i, c := range cmds {
		replies[i] = b.command(s.ctx, c)
	}
	if b.changed {
		s.carryBackfills()
	}
	// Answered once List shows what they changed.
	for i, c := range cmds {
		c.reply <- replies[i]
	}
	if b.live.running() < 0 || b.inFlight.Load() || time.Now().Before(b.retryAt) {
		return nil
	}
	return s.backfillChunk()
}

// command carries out one call of Config.Backfills and returns its
// answer.
func (b *backfiller) command(ctx context.Context, c *backfillCmd) backfillReply {
	var r backfillReply
	switch c.kind {
	case cmdRequest:
		var bc backfillCursor
		bc, r.err = b.accept(ctx, c.req, "api")
		r.status = bc.status()
	default:
		i := b.live.find(c.id)
		if i < 0 {
			r.err = fmt.Errorf("%w: %q is not an unfinished backfill (Backfills.List names them)", ErrBackfillNotFound, c.id)
			break
		}
		b.change(c.kind, i)
	}
	return r
}

// change pauses, resumes or cancels backfill i of the live ones.
func (b *backfiller) change(kind backfillCmdKind, i int) {
	c := b.live[i]
	switch kind {
	case cmdPause:
		b.live[i].Paused = true
	case cmdResume:
		b.live[i].Paused = false
	case cmdCancel:
		b.live = slices.Delete(b.live, i, i+1)
	}
	b.changed = true
	b.r.log.Info("backfill "+[...]string{cmdPause: "paused", cmdResume: "resumed", cmdCancel: "cancelled"}[kind], "backfill", c.ID, "table", c.Table, "rows", c.Rows)
}

// carryBackfills makes the current batch carry the live backfills, so
// that the Write of the batch records them.
func (s *session) carryBackfills() {
	b := s.bf
	s.cur.backfills = &backfillState{list: b.live.clone(), lastSignal: b.lastSignal}
	if b.r.cfg.BackfillAddedTables {
		s.cur.backfills.tables = b.known
	}
	b.changed = false
	b.publish()
	s.arm()
}

// publish shows the live backfills to Backfills.List and Monitor.Stats.
func (b *backfiller) publish() {
	b.ctrl.publish(b.live)
	if b.r.cfg.Monitor == nil {
		return
	}
	var p []BackfillProgress
	now := time.Now()
	for _, c := range b.live {
		mark, ok := b.rates[c.ID]
		if !ok {
			mark = rateMark{at: now, rows: c.Rows}
			b.rates[c.ID] = mark
		}
		bp := BackfillProgress{BackfillStatus: c.status(), RowsLeft: -1}
		if est, ok := b.estimates[c.ID]; ok && est >= 0 {
			bp.RowsLeft = max(est-c.Rows, 0)
		}
		if d := now.Sub(mark.at).Seconds(); d > 0 {
			bp.RowsPerSecond = float64(c.Rows-mark.rows) / d
		}
		p = append(p, bp)
	}
	b.r.cfg.Monitor.backfillProgress(p)
}

// backfillState is what a batch's Write records of the backfills
// (cursor.Backfills and cursor.LastSignal).
type backfillState struct {
	list       backfillList
	lastSignal signalPos
	// tables are the publication's tables the pump knows
	// (cursor.Tables), nil unless Config.BackfillAddedTables.
	tables []string
}

// backfillChunk reads the next chunk of the first running backfill and
// hands it to the writer as a Write of its own, which records the
// backfill's progress with the chunk's rows.
//
// Why a chunk never overwrites a newer change of a key (the DBLog
// watermark method, as Debezium's incremental snapshot uses it, with the
// window between the chunk's snapshot and its emission): the chunk runs
// between two transactions of the stream, in a REPEATABLE READ
// transaction whose snapshot pg_current_snapshot() names. Every
// transaction the stream emitted before the chunk has committed, and the
// snapshot sees it, unless the snapshot lists it as still in progress,
// or, being the newest, has it at or above its xmax, unlisted: a commit
// becomes visible a little after its commit record is written, and the
// stream may decode it in between (a commit waiting for a synchronous
// standby stays invisible that long). The chunk drops every row whose key
// such a transaction touched (the window remembers their keys, see
// window): the stream already delivered the newer state of those rows. A transaction the stream emits after the chunk is newer
// than the chunk's rows, or already in them; either way its change comes
// after the row in Kafka, so the row never follows a newer change of its
// key. A transaction the snapshot lists in progress whose keys the window
// does not know, but which the commit log shows committed, may have been
// emitted before the window remembered it: the chunk is read again a
// little later, when it is visible, rather than guessed at.
func (s *session) backfillChunk() error {
	b := s.bf
	i := b.live.running()
	c := b.live[i]
	var rd chunkRead
	err := b.readOnly(s.ctx, func(tx pgx.Tx) (err error) {
		rd, err = s.readChunk(tx, c)
		return err
	})
	events, key, more, plan, xmin := rd.events, rd.key, rd.more, rd.plan, rd.xmin
	var be *BackfillError
	switch {
	case err != nil && s.ctx.Err() != nil:
		return context.Cause(s.ctx) // the session ends
	case errors.As(err, &be) || err != nil && !retryable(err):
		// The same chunk would fail again: the backfill ends, the
		// stream goes on.
		b.live = slices.Delete(b.live, i, i+1)
		b.changed = true
		b.refused(fmt.Errorf("backfill %s of %s stopped after %d rows: %w", c.ID, c.Table, c.Rows, err), c.By)
		s.carryBackfills()
		return nil
	case err != nil:
		b.r.log.Warn("backfill chunk failed; trying again", "backfill", c.ID, "table", c.Table, "error", err)
		b.later(s.cfg.ReconnectBackoff)
		return nil
	case plan.retry != "":
		b.r.log.Debug("backfill chunk waits", "backfill", c.ID, "table", c.Table, "why", plan.retry)
		b.later(backfillRetry)
		return nil
	}
	b.win.forget(xmin)
	kept := events[:0]
	for _, e := range events {
		if k, ok := keyText(e.After, c.KeyColumns); !plan.all && (!ok || !contains(plan.drop, k)) {
			e.Source.Snapshot = kafkasink.SnapshotIncremental
			kept = append(kept, e)
		}
	}
	if n := len(kept); n > 0 {
		b.pos = kept[n-1].Position
	}
	c.Rows += int64(len(kept))
	c.Chunks++
	c.LastKey = key
	if more {
		b.live[i] = c
	} else {
		b.live = slices.Delete(b.live, i, i+1)
		b.r.log.Info("backfill complete", "backfill", c.ID, "table", c.Table, "rows", c.Rows, "chunks", c.Chunks)
	}
	b.changed = true
	if !s.cur.empty() {
		if err := s.handoff(); err != nil {
			return err
		}
	}
	s.cur.events = append(s.cur.events, kept...)
	s.cur.chunk = true
	s.carryBackfills()
	b.inFlight.Store(true)
	b.r.log.Debug("backfill chunk read", "backfill", c.ID, "table", c.Table, "rows", len(kept), "dropped", len(events)-len(kept))
	return s.handoff()
}

// chunkRead is what readChunk read of a backfill's next chunk.
type chunkRead struct {
	events []kafkasink.Event
	key    []string // the last row's key: where the next chunk starts
	more   bool     // rows are left after the chunk
	plan   windowPlan
	xmin   uint64 // the chunk's snapshot's xmin: older transactions are forgotten
}

// readChunk reads the next chunk of backfill c in tx: the snapshot and
// the window's plan for it first (no rows when the plan says to wait),
// then the rows after c.LastKey.
func (s *session) readChunk(tx pgx.Tx, c backfillCursor) (chunkRead, error) {
	b := s.bf
	schema, table, _ := splitTable(c.Table) // checked when accepted
	var rd chunkRead
	xmin, xmax, xip, committed, now, err := readSnapshot(s.ctx, tx, s.bf.r.version)
	if err != nil {
		return rd, err
	}
	rd.xmin = xmin
	done := make(map[uint64]bool, len(committed))
	for _, x := range committed {
		done[x] = true
	}
	if rd.plan = b.win.plan(c.Table, xip, xmax, done); rd.plan.retry != "" {
		return rd, nil
	}
	ti, err := b.describe(s.ctx, tx, schema, table)
	if err != nil {
		return rd, err
	}
	var est int64
	if err := tx.QueryRow(s.ctx, "SELECT reltuples::bigint FROM pg_class WHERE oid = $1::regclass", qualified(schema, table)).Scan(&est); err != nil {
		return rd, err
	}
	b.estimates[c.ID] = est
	if keys := columnNames(ti.chunkKey); !slices.Equal(keys, c.KeyColumns) {
		return rd, &BackfillError{Table: c.Table, Problem: fmt.Sprintf("the table's key changed from %v to %v while it was backfilled: request a new backfill", c.KeyColumns, keys)}
	}
	values := pgoutput.NewValues(func(oid uint32) (CatalogType, bool, error) { return describeType(s.ctx, tx, oid) })
	relation, err := values.Relation(ti.describeColumns())
	if err != nil {
		return rd, err
	}
	sql, _ := backfillQuery(ti, c.Where, c.LastKey != nil, s.cfg.BackfillChunkRows+1)
	var args [][]byte
	for _, k := range c.LastKey {
		args = append(args, []byte(k))
	}
	run := &snapshotRun{r: b.r, cur: snapshotCursor{Snapshot: c.ID}, lsn: b.pos.LSN, next: b.pos.Index + 1, values: values, started: now}
	rd.events, rd.key, rd.more, err = run.chunk(s.ctx, tx, ti, relation, sql, args, s.cfg.BackfillChunkRows)
	return rd, err
}

func contains(m map[string]struct{}, k string) bool {
	_, ok := m[k]
	return ok
}

// later makes the next chunk wait d, waking the pump then.
func (b *backfiller) later(d time.Duration) {
	b.retryAt = time.Now().Add(d)
	if b.timer != nil {
		b.timer.Stop()
	}
	wake := b.wake
	b.timer = time.AfterFunc(d, func() { poke(wake) })
}

// written is the writer's: a chunk's Write returned nil.
func (b *backfiller) written() {
	b.inFlight.Store(false)
	poke(b.wake)
}

// readSnapshot reads the snapshot of tx, which must not have run a
// statement yet, so that its first statement takes it: the oldest
// transaction it sees in progress (xmin), the first it does not see yet
// (xmax), those below it that it sees in progress (xip), those of them
// the commit log shows committed, and the time.
// pg_current_snapshot and pg_xact_status came with PostgreSQL 13; before,
// their txid_ forms say the same.
func readSnapshot(ctx context.Context, tx pgx.Tx, version int) (xmin, xmax uint64, xip, committed []uint64, now time.Time, err error) {
	snap, xminFn, xmaxFn, xipFn, status := "pg_current_snapshot()", "pg_snapshot_xmin", "pg_snapshot_xmax", "pg_snapshot_xip", "pg_xact_status"
	if version < 130000 {
		snap, xminFn, xmaxFn, xipFn, status = "txid_current_snapshot()", "txid_snapshot_xmin", "txid_snapshot_xmax", "txid_snapshot_xip", "txid_status"
	}
	var xminText, xmaxText string
	var xipText, committedText []string
	err = tx.QueryRow(ctx, `SELECT `+xminFn+`(s)::text, `+xmaxFn+`(s)::text,
			ARRAY(SELECT x::text FROM `+xipFn+`(s) x),
			ARRAY(SELECT x::text FROM `+xipFn+`(s) x WHERE `+status+`(x) = 'committed'),
			now()
		FROM `+snap+` s`).Scan(&xminText, &xmaxText, &xipText, &committedText, &now)
	if err != nil {
		return 0, 0, nil, nil, now, fmt.Errorf("pgcdc: backfill: reading the chunk's snapshot: %w", err)
	}
	parse := func(ts []string) ([]uint64, error) {
		out := make([]uint64, len(ts))
		for i, t := range ts {
			if out[i], err = strconv.ParseUint(t, 10, 64); err != nil {
				return nil, fmt.Errorf("pgcdc: backfill: transaction id %q: %w", t, err)
			}
		}
		return out, nil
	}
	if xmin, err = strconv.ParseUint(xminText, 10, 64); err != nil {
		return 0, 0, nil, nil, now, fmt.Errorf("pgcdc: backfill: snapshot xmin %q: %w", xminText, err)
	}
	if xmax, err = strconv.ParseUint(xmaxText, 10, 64); err != nil {
		return 0, 0, nil, nil, now, fmt.Errorf("pgcdc: backfill: snapshot xmax %q: %w", xmaxText, err)
	}
	if xip, err = parse(xipText); err != nil {
		return 0, 0, nil, nil, now, err
	}
	committed, err = parse(committedText)
	return xmin, xmax, xip, committed, now, err
}

// backfillWake returns the channel that wakes the pump for the backfills:
// a Backfills call, a chunk written, a chunk's wait over. nil outside Run.
func (s *session) backfillWake() <-chan struct{} {
	if s.bf == nil {
		return nil
	}
	return s.bf.wake
}
