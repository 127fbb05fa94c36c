package pgcdc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/kafkasink/kafkasink"
)

// ErrSlotLost is returned by Run when the replication slot disappeared
// while Run was using it: the changes it held back are gone, so streaming
// on from a new slot would leave a gap. Fatal; test with errors.Is.
var ErrSlotLost = errors.New("pgcdc: replication slot lost")

// Sink is what Run needs of a sink: *kafkasink.Sink is one. A wrapper that
// counts or traces, or a test's recorder, may stand in for it. A Sink
// that also has kafkasink.Sink's Delivers method (a wrapper embedding
// *kafkasink.Sink has it) gets Event.Txn counting only the events it
// delivers (DecoderConfig.Counted); without it every event counts.
type Sink interface {
	// Write delivers a batch; see kafkasink.Sink.Write, whose contract
	// Run relies on: nil means every event is durable and the checkpoint
	// moved with it.
	Write(ctx context.Context, b kafkasink.Batch) error
	// Checkpoint returns the last delivered checkpoint; see
	// kafkasink.Sink.Checkpoint.
	Checkpoint() kafkasink.Checkpoint
}

// Run streams the changes of cfg's publication from cfg's slot into sink
// until ctx ends or a fatal error occurs. It is the whole pipeline: it
// checks the server (wal_level must be logical), creates the publication
// and the slot when allowed, takes or resumes the initial snapshot when
// asked, then streams, batching whole transactions, and confirms an LSN to
// the server only after sink.Write returned nil for everything before it.
//
// Retryable errors (lost connections, a restarted server, a terminated
// walsender, a slot still held by a previous connection) make Run reconnect
// with exponential backoff and resume from the checkpoint; a retryable
// Write error makes it write the same batch again. Run returns the first
// fatal error: a *kafkasink.ConfigError (invalid cfg, wal_level, missing
// slot or publication), a *DecodeError, ErrSlotLost, a *SourceError (a
// checkpoint of another source, or a gap Config.SlotGap refuses: see the
// package documentation), an error of sink.Write
// that kafkasink.IsRetryable rejects (such as ErrFenced or a
// *kafkasink.RejectedError), or an error of the server that no retry can
// cure (such as missing privileges).
//
// When ctx ends, Run returns context.Cause(ctx) (wrapped with the last
// attempt's error when Run was reconnecting) after the Write in progress
// has returned: that Write sees the cancelled ctx, so in ExactlyOnce mode
// its transaction is aborted, or committed if the commit was already under
// way, and never half visible. Run does not close sink.
//
// Run must be the only writer of sink; one Run per slot. Replicas that
// share a slot take turns with AcquireLease (see the package
// documentation, "High availability").
func Run(ctx context.Context, cfg Config, sink Sink) error {
	cfg = cfg.withDefaults()
	err := cfg.validate()
	if sink == nil {
		var ce *kafkasink.ConfigError
		if !errors.As(err, &ce) {
			ce = &kafkasink.ConfigError{}
			err = ce
		}
		ce.Problems = append(ce.Problems, "pgcdc: Run needs a sink: the sink argument is nil")
	}
	if err != nil {
		return err
	}
	r := &runner{cfg: &cfg, sink: sink, log: cfg.Logger.With("slot", cfg.Slot)}
	r.filter, _ = newCaptureFilter(&cfg) // its problems are validate's
	r.ck = checkpointer{cfg: r.cfg, log: r.log, sink: sink, filter: r.filter}
	r.catalog = &catalog{cfg: r.cfg, log: r.log}
	r.bf = &backfiller{r: r, ctrl: cfg.Backfills}
	r.watch = newPublicationWatch()
	defer r.catalog.close()
	defer func() {
		if r.spool != nil {
			if err := r.spool.close(); err != nil {
				r.log.Warn("removing the spool directory", "dir", r.spool.path, "error", err)
			}
		}
	}()

	mctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { r.monitor(mctx) })
	if cfg.FailoverStandby != "" {
		wg.Go(func() { r.watchStandby(mctx) })
	}
	defer func() {
		stop()
		wg.Wait()
	}()

	mon := cfg.Monitor
	defer mon.setState(RunStopped)
	wait := cfg.backoff()
	var failed error // the last attempt's error while Run reconnects
	for {
		r.phase.attemptStarts()
		mon.attempt()
		err := r.attempt(ctx)
		if r.phase == runnerReceived {
			failed = nil
			wait.Reset()
		}
		if ctx.Err() != nil {
			return r.stopped(ctx, failed)
		}
		if !retryable(err) {
			r.log.Error("stopped by a fatal error", "error", err)
			mon.failed(err)
			return err
		}
		failed = err
		mon.failed(err)
		r.log.Warn("replication interrupted; reconnecting", "error", err, "backoff", wait.Delay())
		if !wait.Wait(ctx) {
			return r.stopped(ctx, failed)
		}
	}
}

// stopped is what Run returns when ctx ends: its cause, and when Run was
// reconnecting, the error of the last attempt too, so that a database that
// never answered says why (connection refused, a timeout) instead of only
// "context deadline exceeded". errors.Is finds both.
func (r *runner) stopped(ctx context.Context, failed error) error {
	cause := context.Cause(ctx)
	if failed == nil {
		r.log.Info("stopped", "cause", cause)
		return cause
	}
	err := fmt.Errorf("%w while reconnecting; the last attempt failed: %w", cause, failed)
	r.log.Info("stopped", "cause", err)
	return err
}

// runner is the state of one Run across reconnects.
type runner struct {
	cfg  *Config
	sink Sink
	log  *slog.Logger

	// phase is where the Run stands across its attempts; only
	// runnerPhase's methods change it.
	phase    runnerPhase
	version  int // server_version_num
	protocol int
	spool    *spoolDir
	catalog  *catalog
	// ck owns the cursor of the sink's checkpoint as Run keeps it, and
	// makes every Write.
	ck checkpointer
	// columns are the columns each table ("schema.table") is streamed
	// with, as far as this Run knows; see noteColumns.
	columns map[string][]string
	// filter is the capture's include and exclude lists; nil without.
	filter *captureFilter
	// database is the name of the database the source reads, which every
	// event carries (Event.Source.Database).
	database string
	// bf runs the backfills while the stream runs.
	bf *backfiller
	// signal is Config.SignalTable as prepareServer found it.
	signal signalTable
	// watch carries the publication's tables from the monitor to the
	// pump (see backfill_added.go).
	watch *publicationWatch
}

// runnerPhase is where a Run stands across its attempts. It starts
// unprepared; its methods are its only transitions:
//
//	unprepared --prepared--> prepared <--attemptStarts-- received
//	                         prepared --receives------>  received
type runnerPhase uint8

const (
	// runnerUnprepared: the server is not yet checked, nor the
	// publication and the slot known to exist.
	runnerUnprepared runnerPhase = iota
	// runnerPrepared: the server was checked, the publication and the
	// slot exist and the spool is open; from now on a missing slot is
	// ErrSlotLost.
	runnerPrepared
	// runnerReceived: prepared, and the attempt in progress received a
	// message from the server, so the backoff starts over after it.
	runnerReceived
)

// prepared ends the first preparation of the server and the source.
func (p *runnerPhase) prepared() {
	if *p == runnerUnprepared {
		*p = runnerPrepared
	}
}

// attemptStarts forgets what the previous attempt received.
func (p *runnerPhase) attemptStarts() {
	if *p == runnerReceived {
		*p = runnerPrepared
	}
}

// receives notes that the attempt in progress received a message.
func (p *runnerPhase) receives() {
	if *p == runnerPrepared {
		*p = runnerReceived
	}
}

// attempt connects, prepares, snapshots if needed, and streams until an
// error.
func (r *runner) attempt(ctx context.Context) error {
	db, err := r.cfg.connect(ctx, "connecting")
	if err != nil {
		return err
	}
	defer closeConn(db)

	var created *createdSlot
	defer func() {
		if created != nil {
			closeConn(created.conn)
		}
	}()
	if r.phase == runnerUnprepared {
		if err := r.prepareServer(ctx, db); err != nil {
			return err
		}
	}
	if created, err = r.prepareSource(ctx, db); err != nil {
		return err
	}
	if r.phase == runnerUnprepared {
		if err := r.prepareStream(); err != nil {
			return err
		}
		r.phase.prepared()
		r.log.Info("server ready", "server_version_num", r.version, "publication", r.cfg.Publication)
	}

	slot, err := readSlot(ctx, db, r.cfg.Slot, r.version)
	if err != nil {
		return err
	}
	if !slot.exists {
		return fmt.Errorf("pgcdc: replication slot %q vanished right after it was checked; trying again", r.cfg.Slot)
	}
	if err := r.ensureFailoverSlot(ctx, db); err != nil {
		return err
	}
	if err := r.snapshot(ctx, db, slot, created); err != nil {
		return err
	}
	if created != nil {
		// The exported snapshot is no longer needed.
		closeConn(created.conn)
		created = nil
	}
	// The ordinary connection is not needed while streaming.
	closeConn(db)
	return r.stream(ctx, slot)
}

// prepareServer is the first attempt's check of the server and the
// checkpoint: wal_level, the publication (created when allowed), the
// tables whose updates can leave values out, and the cursor the sink's
// checkpoint holds.
func (r *runner) prepareServer(ctx context.Context, db *pgx.Conn) error {
	var err error
	if r.version, err = checkServer(ctx, db); err != nil {
		return err
	}
	role, err := checkServerRole(ctx, db, r.version)
	if err != nil {
		return err
	}
	r.logStandby(role)
	if err := r.checkFailoverSettings(ctx, db, role); err != nil {
		return err
	}
	if err := ensurePublication(ctx, db, r.cfg); err != nil {
		return err
	}
	if err := warnPartialRows(ctx, db, r.cfg.Publication, r.log); err != nil {
		return err
	}
	if r.signal, err = checkSignalTable(ctx, db, r.cfg); err != nil {
		return err
	}
	if err := r.ck.load(); err != nil {
		return err
	}
	published, err := listPublication(ctx, db, r.cfg.Publication)
	if err != nil {
		return err
	}
	r.bf.knowTables(tableNames(published), true)
	// Backfills.List shows the checkpoint's unfinished backfills from
	// now on, before the stream resumes them.
	r.cfg.Backfills.publish(r.ck.cur.Backfills)
	return nil
}

// prepareSource checks that the slot continues the sink's checkpoint, from
// the same source, and handles a gap as Config.SlotGap says: it drops an
// invalidated slot, creates a missing one, and records the gap and the
// source's identity in Run's cursor. It returns the slot it created, if any.
//
// Every check comes before anything is written, and a refused gap
// creates no slot: the error names the current WAL position, where a new
// slot would begin at the earliest. Only a slot Run created and then
// finds unusable (it begins at or before the checkpoint) is dropped again.
func (r *runner) prepareSource(ctx context.Context, db *pgx.Conn) (*createdSlot, error) {
	id, err := identify(ctx, r.cfg, db)
	if err != nil {
		return nil, err
	}
	r.database = id.Database
	slot, err := readSlot(ctx, db, r.cfg.Slot, r.version)
	if err != nil {
		return nil, err
	}
	f := sourceFacts{cfg: r.cfg, streamed: r.phase != runnerUnprepared, ck: r.sink.Checkpoint(), cur: r.ck.cur, id: id, slot: slot}
	if f.history, err = r.timelineHistory(ctx, f); err != nil {
		return nil, err
	}
	p := planSource(f)
	if p.timeline != nil && !p.timeline.Diverged {
		r.report(SourceEvent{Kind: SourceTimelineChanged, Slot: r.cfg.Slot, Timeline: p.timeline, Detail: timelineDetail(p.timeline)})
	}
	if p.refuse != nil {
		r.reportRefusal(p)
		return nil, p.refuse
	}
	if r.phase == runnerUnprepared {
		// A table the snapshot cannot read is refused before the slot
		// exists: a slot left behind would hold WAL.
		gap := r.ck.cur.gapSnapshot()
		if p.gap != nil && p.gap.Action == SlotGapResnapshot {
			gap = gapSnapshotFresh
		}
		if err := r.checkSnapshot(ctx, db, p.create, gap); err != nil {
			return nil, err
		}
	}
	if p.adopt {
		r.log.Info("the checkpoint has no source identity (an earlier version wrote it): recording this source's from now on", "source", id.String())
	}
	if p.drop {
		if err := dropReplicationSlot(ctx, db, r.cfg.Slot); err != nil {
			return nil, err
		}
		r.log.Warn("dropped the replication slot, to create it again", "cause", p.gap.Kind.String())
	}
	var created *createdSlot
	if p.create {
		if created, err = r.createPlannedSlot(ctx, db, f, p.gap); err != nil {
			return nil, err
		}
	}
	return created, r.recordSource(ctx, id, slot, created, p.gap)
}

// reportRefusal reports why planSource refused the slot or the checkpoint:
// the gap it refuses, or the mismatch a *SourceError names.
func (r *runner) reportRefusal(p sourcePlan) {
	var se *SourceError
	switch {
	case p.gap != nil:
		r.report(*p.gap)
	case errors.As(p.refuse, &se):
		r.report(SourceEvent{Kind: se.Kind, Slot: se.Slot, From: se.From, To: se.To, Bytes: se.Bytes, Err: p.refuse})
	}
}

// createPlannedSlot creates the slot planSource asked for, exporting its
// snapshot when a snapshot follows. For a gap (nil when none) it checks
// that the new slot begins after the checkpoint, dropping it again when
// it does not, and completes the gap with where the slot begins.
func (r *runner) createPlannedSlot(ctx context.Context, db *pgx.Conn, f sourceFacts, gap *SourceEvent) (*createdSlot, error) {
	resnapshot := gap != nil && gap.Action == SlotGapResnapshot
	created, err := createSlot(ctx, r.cfg, r.cfg.Snapshot || resnapshot)
	if err != nil {
		return nil, err
	}
	if created == nil {
		// Someone else created it meanwhile: the next attempt
		// checks it as any existing slot.
		return nil, fmt.Errorf("pgcdc: replication slot %q was created by someone else meanwhile; checking it again", r.cfg.Slot)
	}
	if gap == nil {
		return created, nil
	}
	if err := checkCreated(f, created.consistent); err != nil {
		closeConn(created.conn)
		if derr := dropReplicationSlot(ctx, db, r.cfg.Slot); derr != nil {
			err = fmt.Errorf("%w (and dropping the slot again failed: %v)", err, derr)
		}
		r.report(SourceEvent{Kind: SourceSlotMissing, Slot: r.cfg.Slot, From: f.ck.Position.LSN, To: created.consistent, Err: err})
		return nil, err
	}
	gap.To = created.consistent
	gap.Bytes = max(int64(created.consistent)-int64(gap.From), 0)
	return created, nil
}

// recordSource records in Run's cursor the source's identity, the
// position the slot begins at (created, when Run created it, else slot)
// and the gap, if any, which it reports; an accepted gap is written at
// once.
func (r *runner) recordSource(ctx context.Context, id sourceIdentity, slot slotState, created *createdSlot, gap *SourceEvent) error {
	begins := lsnText(slot.confirmed)
	if created != nil {
		begins = lsnText(created.consistent)
	}
	var rec *gapRecord
	if gap != nil {
		rec = &gapRecord{Cause: gap.Kind.String(), Action: gap.Action.String(),
			From: lsnText(gap.From), To: lsnText(gap.To), Bytes: gap.Bytes, At: time.Now().UTC(), Timeline: gap.Timeline.record()}
	}
	r.ck.recordSource(id, begins, created != nil, rec)
	if gap == nil {
		return nil
	}
	r.report(*gap)
	if gap.Action == SlotGapAccept {
		// Record the gap before anything after it is written; a
		// re-snapshot records it with its first Write.
		return r.writeCursor(ctx, r.ck.cur, nil)
	}
	return nil
}

// prepareStream creates what every session of the Run shares, once the
// source is known: the spool directory and the protocol version.
func (r *runner) prepareStream() error {
	spool, removed, err := openSpoolDir(r.cfg.SpoolDir, *r.ck.cur.Source)
	if removed > 0 {
		r.log.Info("removed spool directories of processes that are gone", "dir", r.cfg.SpoolDir, "removed", removed)
	}
	if err != nil {
		return err
	}
	r.spool = spool
	r.protocol = 2
	if r.version < 140000 {
		// Streaming of in-progress transactions and logical decoding
		// messages came with PostgreSQL 14.
		r.protocol = 1
	}
	return nil
}

// retryable reports whether Run should reconnect after err rather than
// return it.
func retryable(err error) bool {
	if err == nil {
		return true
	}
	var de *DecodeError
	var se *sinkError
	var src *SourceError
	var ere *EventRouterError
	if errors.As(err, &de) || errors.As(err, &se) || errors.As(err, &src) || errors.As(err, &ere) || errors.Is(err, ErrSlotLost) || kafkasink.IsFatal(err) {
		return false
	}
	if _, ok := kafkasink.IsRejected(err); ok {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			strings.HasPrefix(pe.Code, "53"), // insufficient resources, such as too many connections
			strings.HasPrefix(pe.Code, "40"), // serialization failure, deadlock
			pe.Code == "57P01",               // admin_shutdown: pg_terminate_backend, a fast shutdown
			pe.Code == "57P02",               // crash_shutdown
			pe.Code == "57P03",               // cannot_connect_now: starting up or in recovery
			pe.Code == "57014",               // query_canceled: pg_cancel_backend, statement_timeout
			pe.Code == "55006":               // object_in_use: the slot is still active for a previous walsender
			return true
		}
		return false
	}
	// Everything else is the network or the connection: refused, reset,
	// closed, timed out.
	return true
}

// retainedLogInterval is how often the monitor logs the WAL the slot
// retains.
const retainedLogInterval = time.Minute

// monitor does, on its own connection until ctx ends, what Run does at
// the heartbeat's pace (Config.tick): it emits a heartbeat, a logical
// decoding message, when heartbeats are enabled, and measures the WAL the
// slot retains, logging it once per retainedLogInterval and reporting
// SourceWALRetained above Config.RetainedWALWarn. While a session
// streams it also reads the publication's tables for the pump, every
// StandbyInterval and when the pump asks (see backfill_added.go).
// Failures are logged and retried at the next tick: none is a reason to
// stop.
func (r *runner) monitor(ctx context.Context) {
	t := time.NewTicker(r.cfg.tick())
	defer t.Stop()
	pt := time.NewTicker(r.cfg.StandbyInterval)
	defer pt.Stop()
	var (
		conn    *pgx.Conn
		version int // the server's, read on connecting
		logged  time.Time
		lastErr string
	)
	defer func() {
		if conn != nil {
			closeConn(conn)
		}
	}()
	for {
		tick := false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			tick = true
		case <-pt.C:
		case <-r.watch.ask:
		}
		read := !tick && r.watch.streaming()
		if !tick && !read {
			continue
		}
		if conn == nil {
			var err error
			if conn, err = r.cfg.connect(ctx, "monitor connection"); err == nil {
				err = conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&version)
			}
			if err != nil {
				r.log.Debug("monitor connection failed", "error", err)
				if conn != nil {
					closeConn(conn)
				}
				conn = nil
				continue
			}
		}
		var err error
		if tick {
			err = r.measureRetained(ctx, conn, version, &logged)
			if err == nil && r.cfg.HeartbeatInterval > 0 {
				if _, err = conn.Exec(ctx, "SELECT pg_logical_emit_message(false, '"+heartbeatPrefix+"', '') WHERE NOT pg_is_in_recovery()"); err != nil {
					err = fmt.Errorf("heartbeat: %w", err)
				}
			}
		}
		if err == nil && read {
			var list []publishedName
			if list, err = listPublication(ctx, conn, r.cfg.Publication); err == nil {
				r.watch.put(list)
			}
		}
		if err != nil {
			if ctx.Err() == nil && err.Error() != lastErr {
				r.log.Warn("heartbeat, slot measurement or reading the publication failed; trying again at the next tick", "error", err)
			}
			lastErr = err.Error()
			closeConn(conn)
			conn = nil
			continue
		}
		lastErr = ""
	}
}

// measureRetained reads the WAL the slot retains, logs it when
// retainedLogInterval has passed since *logged, and reports it above
// Config.RetainedWALWarn.
func (r *runner) measureRetained(ctx context.Context, conn *pgx.Conn, version int, logged *time.Time) error {
	st, err := readSlot(ctx, conn, r.cfg.Slot, version)
	if err != nil || !st.exists {
		return err
	}
	bytes := st.retained()
	over := r.cfg.RetainedWALWarn > 0 && bytes > r.cfg.RetainedWALWarn
	if over {
		// Logged below, at most once per retainedLogInterval.
		r.notify(SourceEvent{Kind: SourceWALRetained, Slot: r.cfg.Slot, From: st.restart, To: st.current, Bytes: bytes})
	}
	if time.Since(*logged) < retainedLogInterval {
		return nil
	}
	*logged = time.Now()
	attrs := []any{"retained_bytes", bytes, "restart_lsn", st.restart.String(), "current_lsn", st.current.String(), "wal_status", st.walStatus}
	if over {
		r.log.Warn("the slot retains more WAL than Config.RetainedWALWarn: is the sink keeping up? Past the server's max_slot_wal_keep_size the slot is invalidated",
			append(attrs, "warn_bytes", r.cfg.RetainedWALWarn)...)
	} else {
		r.log.Info("WAL retained by the slot", attrs...)
	}
	return nil
}

// closeTimeout bounds how long closing a connection may take: Close says
// goodbye to the server, which a dead network would make wait for ever.
const closeTimeout = 5 * time.Second

// closeConn closes a connection (a *pgx.Conn or a *pgconn.PgConn) within
// closeTimeout. The error is dropped: the connection is gone either way,
// and the server ends the session when the socket closes.
func closeConn(c interface{ Close(context.Context) error }) {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	c.Close(ctx)
}
